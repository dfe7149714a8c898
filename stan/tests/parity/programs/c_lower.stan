data {
  real lb;
}
parameters {
  real<lower=0> a;
  real<lower=lb> b;
  vector<lower=1>[3] v;
}
model {
  a ~ normal(1, 2);
  b ~ normal(0, 1);
  v ~ normal(2, 1);
}
