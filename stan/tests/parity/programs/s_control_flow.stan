data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real a;
  real b;
  real<lower=0> s;
}
model {
  vector[N] mu;
  int k = 0;
  for (n in 1:N) {
    if (x[n] > 0) {
      mu[n] = a + b * x[n];
    } else {
      mu[n] = a - b * x[n] / 2;
    }
  }
  while (k < 3) {
    target += normal_lpdf(a | k, 10);
    k += 1;
  }
  a ~ normal(0, 5);
  b ~ normal(0, 5);
  s ~ exponential(1);
  if (!prior_only) {
    y ~ normal(mu, s);
  }
}
