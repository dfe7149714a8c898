data {
  real<lower=2> nu;
  cov_matrix[3] S;
}
parameters {
  cov_matrix[3] Sigma;
}
model {
  Sigma ~ wishart(nu, S);
}
