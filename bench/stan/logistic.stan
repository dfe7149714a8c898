// logistic: logistic regression, 500 x 20 design (shared/bench-models.md).
// Parameter order = models/logistic.json.
data {
  int<lower=0> N;
  int<lower=0> P;
  matrix[N, P] X;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real alpha;
  vector[P] beta;
}
model {
  alpha ~ normal(0, 10);
  beta ~ normal(0, 10);
  y ~ bernoulli_logit(alpha + X * beta);
}
