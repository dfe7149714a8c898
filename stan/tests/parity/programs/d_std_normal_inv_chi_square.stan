data {
  int<lower=0> N;
  vector<lower=0>[N] y;
}
parameters {
  vector[3] z;
  real w;
  real<lower=0> nu;
  real<lower=0> s;
}
model {
  z ~ std_normal();
  target += std_normal_lpdf(w);
  target += std_normal_lupdf(z[1] + w);
  nu ~ inv_chi_square(3);
  s ~ inv_chi_square(nu);
  y ~ inv_chi_square(nu);
  target += inv_chi_square_lpdf(y | nu + 1);
}
