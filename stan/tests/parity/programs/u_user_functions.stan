functions {
  real scaled_sum(vector v, real s) {
    real total = 0;
    for (i in 1:rows(v)) {
      if (i > 4) {
        break;
      }
      total += v[i];
    }
    return s * total;
  }
  real my_normal_lpdf(real y, real mu, real sigma) {
    return -0.5 * square((y - mu) / sigma) - log(sigma);
  }
  real vec_lpdf(vector y, real mu) {
    return normal_lpdf(y | mu, 1);
  }
  int first_positive(array[] real x) {
    for (i in 1:size(x)) {
      if (x[i] > 0) {
        return i;
      }
    }
    return 0;
  }
  vector affine(vector x, data real a, real b) {
    return a * x + b;
  }
  void check_finite(real x) {
    if (is_inf(x)) {
      reject("not finite: ", x);
    }
    return;
  }
  real spd(array[] vector x, real sdgp, vector lscale) {
    int NB = dims(x)[1];
    int D = dims(x)[2];
    real out = 0;
    for (m in 1:NB) {
      out += sdgp * exp(-0.5 * square(lscale[1]) * dot_self(x[m]));
    }
    return out + prod(lscale) * sqrt(2 * pi()) ^ D + sum(square(lscale));
  }
  real column_sum(array[] vector x, int d) {
    return sum(x[:, d]);
  }
}
data {
  int N;
  vector[N] y;
  array[N] real xs;
  array[3] vector[2] pts;
}
transformed data {
  int k = first_positive(xs);
  real c = scaled_sum(y, 2) + column_sum(pts, 2);
}
parameters {
  real mu;
  real<lower=0> sigma;
  vector<lower=0>[1] ls;
}
transformed parameters {
  vector[N] m = affine(y, 0.5, mu);
}
model {
  check_finite(c);
  mu ~ my_normal(0, 2);
  target += my_normal_lpdf(sigma | 1, 1);
  y ~ vec(mu);
  target += -0.1 * scaled_sum(m, sigma);
  target += -0.01 * spd(pts, sigma, ls);
  ls ~ normal(0, 1);
  target += 0.01 * k * c * mu;
}
