parameters {
  real x;
  real<lower=0> s;
}
model {
  x ~ normal(0, 1);
  s ~ lognormal(0, 1);
  target += normal_lcdf(x | 0.5, s) + normal_lccdf(x | -0.3, s);
  target += std_normal_lcdf(x) + std_normal_lccdf(0.5 * x);
  target += lognormal_lcdf(s | 0.2, 1.5) + lognormal_lccdf(s | x, 2);
  target += 0.1 * erf(x) + 0.2 * erfc(x / s) + 0.3 * Phi_approx(x) + 0.4 * Phi(x * s);
  target += log(Phi(x - 1)) + 0.5 * Phi(0.3 * x);
  target += logistic_lcdf(x | 0.1, s) + exponential_lccdf(s | 2);
}
