parameters {
  real mu;
  real<lower=mu> a;
  real<upper=mu> b;
  real<lower=0> s;
  real<lower=-s, upper=s> c;
  real<lower=0, upper=1> alpha1;
  real<lower=0, upper=(1 - alpha1)> beta1;
  vector<lower=mu + 1>[2] v;
}
model {
  mu ~ normal(0, 1);
  a ~ normal(mu + 1, 2);
  b ~ normal(mu - 1, 2);
  s ~ normal(1, 1);
  c ~ normal(0, 1);
  beta1 ~ normal(0.3, 0.2);
  v ~ normal(mu + 2, 1);
}
