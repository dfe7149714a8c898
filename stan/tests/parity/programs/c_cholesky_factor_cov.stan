parameters {
  cholesky_factor_cov[3] L;
}
model {
  to_vector(L) ~ normal(0, 2);
}
