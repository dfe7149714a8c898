data {
  int<lower=0> N;
  vector<lower=0, upper=1>[N] y;
  vector[N] u;
}
parameters {
  real<lower=0> a;
  real<lower=0> b;
  real<lower=0, upper=1> p;
  real<lower=max(abs(u))> w;
}
model {
  a ~ normal(2, 1);
  b ~ normal(2, 1);
  p ~ beta(a, b);
  y ~ beta(a, b);
  target += beta_lpdf(y | 2, b);
  p ~ uniform(0, 1);
  u ~ uniform(-w, w);
  target += uniform_lpdf(u | -w, w);
}
