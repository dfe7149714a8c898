data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  vector[N] y;
}
parameters {
  real alpha;
  vector[K] beta;
  real<lower=0> sigma;
}
model {
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2);
  sigma ~ normal(0, 2);
  y ~ normal_id_glm(X, alpha, beta, sigma);
  target += normal_id_glm_lpdf(y | X, alpha, beta, sigma + 1);
}
