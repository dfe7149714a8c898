// sv: stochastic volatility, Student-t returns (shared/bench-models.md).
// Parameter order = models/sv.json. The random walk starts at s[1] ~ normal(0, sigma).
data {
  int<lower=1> T;
  vector[T] returns;
}
parameters {
  real<lower=0> sigma;
  real<lower=0> nu;
  vector[T] s;
}
model {
  sigma ~ exponential(50);
  nu ~ exponential(0.1);
  s[1] ~ normal(0, sigma);
  s[2:T] ~ normal(s[1:(T - 1)], sigma);
  returns ~ student_t(nu, 0, exp(s));
}
