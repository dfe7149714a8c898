// medium: two groups sharing a hierarchical prior (shared/bench-models.md).
// Parameter order = models/medium.json.
data {
  int<lower=0> N_a;
  vector[N_a] y_a;
  int<lower=0> N_b;
  vector[N_b] y_b;
}
parameters {
  real mu_g;
  real<lower=0> sigma_g;
  real alpha;
  real beta;
  real<lower=0> sigma_obs;
}
model {
  mu_g ~ normal(0, 10);
  sigma_g ~ exponential(1);
  alpha ~ normal(mu_g, sigma_g);
  beta ~ normal(mu_g, sigma_g);
  sigma_obs ~ exponential(2);
  y_a ~ normal(alpha, sigma_obs);
  y_b ~ normal(beta, sigma_obs);
}
