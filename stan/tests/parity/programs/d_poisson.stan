data {
  int<lower=0> N;
  array[N] int<lower=0> y;
  vector[N] x;
}
parameters {
  real<lower=0> lambda;
  real alpha;
  real beta;
}
model {
  lambda ~ gamma(2, 0.5);
  alpha ~ normal(0, 2);
  beta ~ normal(0, 1);
  y ~ poisson(lambda);
  y ~ poisson_log(alpha + beta * x);
  target += poisson_lpmf(y | lambda);
  target += poisson_log_lpmf(y | alpha);
}
