data {
  int<lower=1> N;
  array[N] real x;
  vector[N] y;
}
parameters {
  real<lower=0> rho;
  real<lower=0> alpha;
  real<lower=0> sigma;
}
model {
  matrix[N, N] K = gp_exp_quad_cov(x, alpha, rho);
  matrix[N, N] L;
  for (n in 1:N) {
    K[n, n] = K[n, n] + square(sigma);
  }
  L = cholesky_decompose(K);
  rho ~ gamma(5, 5);
  alpha ~ normal(0, 1);
  sigma ~ normal(0, 1);
  y ~ multi_normal_cholesky(rep_vector(0, N), L);
  target += -0.5 * dot_self(mdivide_left_tri_low(L, y));
}
