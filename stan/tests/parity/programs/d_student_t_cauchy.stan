data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  real<lower=1> nu;
  real mu;
  real<lower=0> sigma;
  real<lower=0> tau;
}
model {
  nu ~ gamma(2, 0.1);
  mu ~ cauchy(0, 2.5);
  tau ~ cauchy(0, 1);
  sigma ~ student_t(3, 0, 2);
  y ~ student_t(nu, mu, sigma);
  target += cauchy_lpdf(y | mu, tau);
  target += student_t_lpdf(y | nu, mu, tau);
}
