data {
  int<lower=0> N;
  int<lower=1> K;
  array[N] int<lower=1, upper=K> y;
}
parameters {
  simplex[K] theta;
  vector[K] beta;
}
model {
  beta ~ normal(0, 1);
  y ~ categorical(theta);
  y ~ categorical_logit(beta);
  target += categorical_lpmf(y | theta);
  target += categorical_logit_lpmf(y | beta);
}
