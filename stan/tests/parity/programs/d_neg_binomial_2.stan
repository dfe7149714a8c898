data {
  int<lower=0> N;
  array[N] int<lower=0> y;
  vector[N] x;
}
parameters {
  real<lower=0> mu;
  real<lower=0> phi;
  real alpha;
  real beta;
}
model {
  mu ~ normal(3, 2);
  phi ~ normal(0, 5);
  alpha ~ normal(0, 2);
  beta ~ normal(0, 1);
  y ~ neg_binomial_2(mu, phi);
  y ~ neg_binomial_2_log(alpha + beta * x, phi);
  target += neg_binomial_2_lpmf(y | mu, phi);
  target += neg_binomial_2_log_lpmf(y | alpha, phi);
}
