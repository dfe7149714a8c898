data {
  int<lower=0> N;
  vector<lower=0>[N] y;
}
parameters {
  real<lower=0> alpha;
  real<lower=0> beta;
  vector<lower=0>[2] s;
}
model {
  alpha ~ gamma(2, 1);
  beta ~ inv_gamma(3, 2);
  s ~ inv_gamma(alpha, beta);
  y ~ gamma(alpha, beta);
  y ~ inv_gamma(alpha, 1);
  target += gamma_lpdf(y | 2, beta);
  target += inv_gamma_lpdf(s | 2, beta);
}
