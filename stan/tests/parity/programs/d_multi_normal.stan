data {
  int<lower=0> N;
  array[N] vector[3] y;
  matrix[3, 3] Sigma;
}
transformed data {
  matrix[3, 3] L = cholesky_decompose(Sigma);
}
parameters {
  vector[3] mu;
  real<lower=0> tau;
}
model {
  mu ~ normal(0, 5);
  tau ~ normal(1, 1);
  y ~ multi_normal(mu, Sigma);
  y ~ multi_normal_cholesky(mu, tau * L);
  target += multi_normal_lpdf(y[1] | mu, tau * Sigma);
  target += multi_normal_cholesky_lpdf(y[2] | mu, L);
}
