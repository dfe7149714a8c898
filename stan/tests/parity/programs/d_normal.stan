data {
  int<lower=0> N;
  vector[N] y;
  real z;
}
parameters {
  real mu;
  real<lower=0> sigma;
  vector[N] m;
}
model {
  mu ~ normal(0, 10);
  sigma ~ normal(0, 2);
  m ~ normal(mu, 1);
  y ~ normal(m, sigma);
  target += normal_lpdf(z | mu, sigma);
}
