data {
  vector[3] b;
  matrix[3, 3] S;
}
parameters {
  vector<lower=0>[3] d;
  real<lower=0> c;
}
model {
  matrix[3, 3] L = cholesky_decompose(S);
  matrix[3, 3] M = diag_pre_multiply(d, L);
  vector[3] z = mdivide_left_tri_low(M, b);
  d ~ lognormal(0, 0.5);
  c ~ normal(1, 1);
  target += -0.5 * dot_self(z) - sum(log(d));
  target += -0.5 * c * quad_form(S, z);
}
