// funnel: Neal's funnel in 10 dimensions (shared/bench-models.md). No data.
// Parameter order = models/funnel.json.
parameters {
  real y;
  vector[9] x;
}
model {
  y ~ normal(0, 3);
  x ~ normal(0, exp(y / 2));
}
