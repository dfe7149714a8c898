data {
  int<lower=0> N;
  int<lower=2> K;
  array[N] int<lower=1, upper=K> y;
  vector[N] x;
}
parameters {
  real beta;
  ordered[K - 1] c;
}
model {
  beta ~ normal(0, 2);
  c ~ normal(0, 3);
  y ~ ordered_logistic(beta * x, c);
  for (n in 1:N) {
    target += ordered_logistic_lpmf(y[n] | beta * x[n], c);
  }
}
