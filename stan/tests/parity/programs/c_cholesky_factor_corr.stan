data {
  real<lower=0> eta;
}
parameters {
  cholesky_factor_corr[3] L;
}
model {
  L ~ lkj_corr_cholesky(eta);
}
