data {
  int<lower=0> N;
  array[N] int<lower=0> n;
  array[N] int<lower=0> k;
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
  k ~ binomial(n, p);
  k ~ binomial_logit(n, alpha + beta * x);
  target += binomial_lpmf(k | n, p);
  target += binomial_logit_lpmf(k | n, alpha);
}
