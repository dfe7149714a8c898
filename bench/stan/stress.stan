// stress: three groups, each with its own mean and noise scale (shared/bench-models.md).
// Parameter order = models/stress.json (scalars, as there).
data {
  int<lower=0> N_1;
  vector[N_1] y_1;
  int<lower=0> N_2;
  vector[N_2] y_2;
  int<lower=0> N_3;
  vector[N_3] y_3;
}
parameters {
  real mu_pop;
  real<lower=0> sigma_pop;
  real group_1;
  real group_2;
  real group_3;
  real<lower=0> noise_1;
  real<lower=0> noise_2;
  real<lower=0> noise_3;
}
model {
  mu_pop ~ normal(0, 10);
  sigma_pop ~ exponential(0.5);
  group_1 ~ normal(mu_pop, sigma_pop);
  group_2 ~ normal(mu_pop, sigma_pop);
  group_3 ~ normal(mu_pop, sigma_pop);
  noise_1 ~ exponential(1);
  noise_2 ~ exponential(1);
  noise_3 ~ exponential(1);
  y_1 ~ normal(group_1, noise_1);
  y_2 ~ normal(group_2, noise_2);
  y_3 ~ normal(group_3, noise_3);
}
