data {
  vector<lower=0>[4] alpha;
}
parameters {
  simplex[4] theta;
  simplex[4] phi;
}
model {
  theta ~ dirichlet(alpha);
  target += dirichlet_lpdf(phi | alpha + 1);
}
