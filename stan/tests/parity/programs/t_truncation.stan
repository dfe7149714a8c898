data {
  int N;
  vector[N] y;
  array[N] int n;
  array[N] int k;
}
parameters {
  real mu;
  real<lower=0> sigma;
  real<lower=0> lambda;
  real<lower=0> rate;
  real<lower=0, upper=1> theta;
}
model {
  mu ~ normal(0, 2);
  sigma ~ lognormal(0, 1);
  lambda ~ gamma(2, 1);
  rate ~ gamma(2, 2);
  for (i in 1:N) {
    y[i] ~ normal(mu, sigma) T[0, 3];
    y[i] ~ normal(mu, sigma) T[0.1, ];
    y[i] ~ normal(mu, sigma) T[, mu + 4];
    y[i] ~ exponential(rate) T[0.1, ];
    y[i] ~ exponential(rate) T[0.05, 3];
    y[i] ~ lognormal(mu, sigma) T[0.05, 4];
    y[i] ~ logistic(mu, sigma) T[-1, 3.5];
    y[i] ~ uniform(mu - 5, 5) T[0, 3];
    n[i] ~ poisson(lambda) T[, 10];
    n[i] ~ poisson(lambda) T[0, 8];
    k[i] ~ binomial(6, theta) T[0, 5];
  }
}
