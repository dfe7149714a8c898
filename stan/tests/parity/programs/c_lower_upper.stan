data {
  real lo;
  real hi;
}
parameters {
  real<lower=0, upper=1> p;
  real<lower=lo, upper=hi> q;
  vector<lower=-1, upper=2>[3] v;
}
model {
  p ~ normal(0.3, 0.5);
  q ~ normal(0, 1);
  v ~ normal(0.5, 1);
}
