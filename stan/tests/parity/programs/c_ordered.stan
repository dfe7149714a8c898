parameters {
  ordered[3] o;
}
model {
  o ~ normal(0, 2);
}
