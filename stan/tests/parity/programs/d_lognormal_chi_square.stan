data {
  int<lower=0> N;
  vector<lower=0>[N] y;
}
parameters {
  real mu;
  real<lower=0> sigma;
  real<lower=0> nu;
}
model {
  mu ~ normal(0, 2);
  sigma ~ lognormal(0, 1);
  nu ~ chi_square(3);
  y ~ lognormal(mu, sigma);
  y ~ chi_square(nu);
  target += lognormal_lpdf(y | mu, 1);
  target += chi_square_lpdf(y | nu + 1);
}
