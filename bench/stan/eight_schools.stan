// eight_schools, centered parameterisation (shared/bench-models.md).
// Parameter order = models/eight_schools.json. tau ~ normal(0, 5) on tau > 0 is HalfNormal(5).
data {
  int<lower=0> J;
  vector[J] y;
  vector<lower=0>[J] sigma;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] theta;
}
model {
  mu ~ normal(0, 5);
  tau ~ normal(0, 5);
  theta ~ normal(mu, tau);
  y ~ normal(theta, sigma);
}
