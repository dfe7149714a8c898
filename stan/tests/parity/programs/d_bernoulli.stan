data {
  int<lower=0> N;
  array[N] int<lower=0, upper=1> y;
  vector[N] x;
}
parameters {
  real<lower=0, upper=1> p;
  real alpha;
  real beta;
}
model {
  alpha ~ normal(0, 2);
  beta ~ normal(0, 2);
  y ~ bernoulli(p);
  y ~ bernoulli_logit(alpha + beta * x);
  target += bernoulli_lpmf(y | p);
  target += bernoulli_logit_lpmf(y | alpha);
}
