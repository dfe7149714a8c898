data {
  vector[3] m;
}
parameters {
  unit_vector[3] u;
}
model {
  u ~ normal(m, 1);
}
