data {
  matrix[3, 2] X;
  vector[2] v;
}
parameters {
  matrix[2, 2] A;
  vector<lower=0>[2] s;
  cholesky_factor_corr[2] Lc;
}
model {
  matrix[2, 2] C = crossprod(X * A);
  matrix[2, 2] D = diag_pre_multiply(s, Lc);
  to_vector(A) ~ normal(0, 1);
  s ~ normal(1, 1);
  Lc ~ lkj_corr_cholesky(2);
  target += -0.01 * quad_form(C, v);
  target += sum(columns_dot_product(D, A));
  target += -0.1 * dot_self(X * A * v);
  target += sum(diag_post_multiply(A, s));
}
