//! `target()` against the same sum written by hand (normalising constants included), used
//! nonlinearly so that a wrong or missing term changes the log density's shape.

use std::f64::consts::PI;

use super::super::test_support::{check_points, lower, try_lower};

fn normal_lpdf(y: f64, mu: f64, sigma: f64) -> f64 {
    let z = (y - mu) / sigma;
    -0.5 * z * z - sigma.ln() - 0.5 * (2.0 * PI).ln()
}

const Y: [f64; 3] = [0.5, 1.5, 2.5];

fn points() -> Vec<Vec<f64>> {
    vec![
        vec![0.3, -0.2],
        vec![1.1, 0.4],
        vec![-0.7, 0.1],
        vec![2.0, -0.5],
    ]
}

#[test]
fn target_sums_vector_scalar_and_factor_terms_so_far() {
    let source = r#"
data {
  vector[3] y;
}
parameters {
  real mu;
  real log_sigma;
}
model {
  real sigma = exp(log_sigma);
  y ~ normal(mu, sigma);
  for (n in 1:3) {
    y[n] ~ cauchy(mu, 2 * sigma);
  }
  target += -0.25 * mu^2;
  y ~ uniform(mu - 10 - sigma, mu + 10 + sigma);
  real t = target();
  target += -0.01 * t^2;
  log_sigma ~ normal(0, 1);
}
"#;
    let model = lower(source, r#"{"y": [0.5, 1.5, 2.5]}"#);
    check_points(&model, &points(), 1e-9, |theta| {
        let (mu, ls) = (theta[0], theta[1]);
        let sigma = ls.exp();
        let mut t = 0.0;
        for y in Y {
            t += normal_lpdf(y, mu, sigma);
            let z = (y - mu) / (2.0 * sigma);
            t += -PI.ln() - (2.0 * sigma).ln() - (z * z).ln_1p();
            t += -(20.0 + 2.0 * sigma).ln();
        }
        t += -0.25 * mu * mu;
        t - 0.01 * t * t + normal_lpdf(ls, 0.0, 1.0)
    });
}

#[test]
fn target_is_zero_before_anything_is_added() {
    let source = r#"
parameters {
  real mu;
  real log_sigma;
}
model {
  real t = target();
  target += t - 0.5 * mu^2 - 0.5 * log_sigma^2;
}
"#;
    let model = lower(source, "{}");
    check_points(&model, &points(), 1e-9, |theta| {
        -0.5 * theta[0] * theta[0] - 0.5 * theta[1] * theta[1]
    });
}

#[test]
fn target_is_refused_where_it_cannot_be_written() {
    let tp = r#"
parameters {
  real mu;
}
transformed parameters {
  real t = target();
}
model {
  mu ~ normal(0, 1);
}
"#;
    let err = try_lower(tp, "{}").expect_err("refused");
    assert!(err.contains("`target()` outside `model`"), "{err}");
    let weibull = r#"
parameters {
  real<lower=0> x;
}
model {
  x ~ weibull(2, 1);
  target += target();
}
"#;
    let err = try_lower(weibull, "{}").expect_err("refused");
    assert!(
        err.contains("`target()` after a `weibull` statement is not supported yet"),
        "{err}"
    );
}
