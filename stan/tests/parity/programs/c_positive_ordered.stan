parameters {
  positive_ordered[3] p;
}
model {
  p ~ normal(1, 2);
}
