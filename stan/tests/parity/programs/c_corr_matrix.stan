data {
  real<lower=0> eta;
}
parameters {
  corr_matrix[3] Omega;
}
model {
  Omega ~ lkj_corr(eta);
}
