// A linear regression with flat priors, for the ill-conditioned data sets
// regression_scale.data.json and regression_ridge.data.json (see README.md).
data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
}
parameters {
  real alpha;
  real beta;
  real<lower=0> sigma;
}
model {
  y ~ normal(alpha + beta * x, sigma);
}
