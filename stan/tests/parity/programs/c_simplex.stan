parameters {
  simplex[4] s;
}
model {
  s ~ normal(0.25, 0.2);
}
