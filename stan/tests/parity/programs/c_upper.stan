data {
  real ub;
}
parameters {
  real<upper=0> a;
  real<upper=ub> b;
  vector<upper=3>[2] v;
}
model {
  a ~ normal(-1, 2);
  b ~ normal(0, 1);
  v ~ normal(1, 2);
}
