// eight_schools, non-centered parameterisation (shared/bench-models.md).
// Parameter order = models/eight_schools_noncentered.json. tau ~ normal(0, 5) on tau > 0 is HalfNormal(5).
data {
  int<lower=0> J;
  vector[J] y;
  vector<lower=0>[J] sigma;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] z;
}
transformed parameters {
  vector[J] theta = mu + tau * z;
}
model {
  mu ~ normal(0, 5);
  tau ~ normal(0, 5);
  z ~ std_normal();
  y ~ normal(theta, sigma);
}
