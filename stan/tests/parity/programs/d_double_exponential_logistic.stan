data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> b;
  real<lower=0> s;
}
model {
  mu ~ logistic(0, 2);
  b ~ double_exponential(1, 1);
  y ~ double_exponential(mu, b);
  y ~ logistic(mu, s);
  target += double_exponential_lpdf(y | mu, s);
  target += logistic_lpdf(y | mu, b);
}
