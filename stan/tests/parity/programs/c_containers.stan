parameters {
  array[3] real<lower=0> s;
  array[2] vector[3] z;
  row_vector[2] r;
  matrix[2, 3] M;
  array[2, 2] real w;
}
model {
  s ~ normal(1, 1);
  for (i in 1:2) {
    z[i] ~ normal(i, 1);
  }
  r ~ normal(-1, 2);
  to_vector(M) ~ normal(0.5, 1.5);
  for (i in 1:2) {
    w[i] ~ normal(0, i);
  }
}
