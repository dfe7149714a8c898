data {
  int<lower=1> K;
  vector[K] lb;
  vector[K] ub;
}
parameters {
  vector<lower=lb>[K] a;
  vector<lower=lb, upper=ub>[K] b;
  vector<upper=ub>[K] c;
}
model {
  a ~ normal(0, 3);
  b ~ normal(0, 3);
  c ~ normal(0, 3);
}
