data {
  int<lower=1> N;
  int<lower=1> K;
  array[N] real y;
}
parameters {
  array[K] simplex[K] theta;
  positive_ordered[K] mu;
}
model {
  array[K] real acc;
  array[N, K] real gamma;
  for (k in 1:K) {
    gamma[1, k] = normal_lpdf(y[1] | mu[k], 1);
  }
  for (t in 2:N) {
    for (k in 1:K) {
      for (j in 1:K) {
        acc[j] = gamma[t - 1, j] + log(theta[j, k]) + normal_lpdf(y[t] | mu[k], 1);
      }
      gamma[t, k] = log_sum_exp(acc);
    }
  }
  mu ~ normal(3, 1);
  target += log_sum_exp(gamma[N]);
}
