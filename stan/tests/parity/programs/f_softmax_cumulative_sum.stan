data {
  vector[4] w;
  vector[4] x;
}
parameters {
  vector[4] beta;
  vector<lower=0>[4] d;
}
model {
  vector[4] p = softmax(beta);
  vector[4] c = cumulative_sum(d);
  beta ~ normal(0, 1);
  d ~ normal(1, 1);
  target += dot_product(w, log(p));
  c ~ normal(x, 2);
  target += dot_product(beta, d);
}
