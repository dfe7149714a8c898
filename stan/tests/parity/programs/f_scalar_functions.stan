data {
  real y;
}
parameters {
  real a;
  real<lower=0> b;
  real<lower=0, upper=1> p;
}
model {
  a ~ normal(0, 1);
  b ~ normal(1, 1);
  target += log(inv_logit(a)) + log1m(p) + lgamma(b + 1);
  target += log1p(b) + expm1(a / 4) + sqrt(b) + square(a) / 8;
  target += -abs(a - y) + abs(b - 1) * 0.1 + exp(-b) + pow(b, 1.5) / 10;
  target += log1m_exp(-b - 0.1) + log1p_exp(a) * 0.1 + log_inv_logit(a) + log1m_inv_logit(a);
  target += fmin(a, b) + fmax(a, -b) + inv(b + 1) + inv_sqrt(b + 1) + logit(p) / 10;
  target += tanh(a) + atan(b) + sin(a) * cos(b) + Phi(a / 2) + erf(a / 3) + b ^ 2 / 20;
}
