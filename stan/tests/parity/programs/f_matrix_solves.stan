data {
  vector[3] b;
  matrix[3, 3] S;
}
parameters {
  cov_matrix[3] Sigma;
  vector[3] mu;
  cholesky_factor_cov[3] L;
  real<lower=0> s;
}
model {
  matrix[3, 3] LS = cholesky_decompose(Sigma);
  Sigma ~ wishart(6, S);
  mu ~ normal(0, 1);
  to_vector(L) ~ normal(0, 1);
  s ~ lognormal(0, 0.5);
  b ~ multi_normal(mu, add_diag(tcrossprod(L), s));
  b ~ multi_normal_cholesky(mu, LS);
  target += -0.5 * dot_self(mdivide_right_tri_low(b', LS));
  target += -0.1 * trace(multiply_lower_tri_self_transpose(L));
  target += -0.05 * quad_form(crossprod(L), mu);
}
