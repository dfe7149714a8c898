data {
  int<lower=0> N;
  vector<lower=0>[N] y;
}
parameters {
  real<lower=0> alpha;
  real<lower=0> sigma;
  real<lower=0> lambda;
}
model {
  alpha ~ exponential(1);
  sigma ~ weibull(2, 1);
  lambda ~ exponential(0.5);
  y ~ weibull(alpha, sigma);
  y ~ exponential(lambda);
  target += weibull_lpdf(y | alpha, 2);
  target += exponential_lpdf(y | lambda + 1);
}
