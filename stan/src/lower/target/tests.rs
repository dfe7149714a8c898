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
fn target_is_refused_in_parameter_bounds() {
    let source = r#"
parameters {
  real<lower=target()> mu;
}
model {
  mu ~ normal(0, 1);
}
"#;
    let err = try_lower(source, "{}").expect_err("refused");
    assert!(
        err.contains("`target()` is only available in `transformed parameters` and `model`"),
        "{err}"
    );
}

/// In `transformed parameters` nothing has been added yet but the log-Jacobians.
#[test]
fn target_in_transformed_parameters_is_the_log_jacobians() {
    let source = r#"
parameters {
  real<lower=0> sigma;
  real mu;
}
transformed parameters {
  real t = target();
}
model {
  target += -0.5 * (sigma^2 + mu^2) - 0.01 * t^2;
}
"#;
    let model = lower(source, "{}");
    check_points(&model, &points(), 1e-9, |theta| {
        let (u, mu) = (theta[0], theta[1]);
        let sigma = u.exp();
        u - 0.5 * (sigma * sigma + mu * mu) - 0.01 * u * u
    });
}

#[test]
fn target_writes_out_weibull_chi_square_and_count_densities() {
    let source = r#"
data {
  array[2] int k;
  array[2] int n;
  vector[2] w;
}
parameters {
  real a;
  real b;
}
model {
  w ~ weibull(exp(a), exp(b));
  w ~ chi_square(exp(a));
  k ~ binomial(n, inv_logit(b));
  k ~ binomial_logit(n, a);
  k ~ neg_binomial_2(exp(a), exp(b));
  k ~ neg_binomial_2_log(a, exp(b));
  real t = target();
  target += -0.01 * t^2;
  a ~ normal(0, 1);
  b ~ normal(0, 1);
}
"#;
    let data = r#"{"k": [2, 5], "n": [4, 7], "w": [0.7, 1.9]}"#;
    let model = lower(source, data);
    let lgamma = crate::host::math_lgamma;
    let (k, n, w) = ([2.0, 5.0], [4.0, 7.0], [0.7, 1.9]);
    check_points(&model, &points(), 1e-9, |theta| {
        let (a, b) = (theta[0], theta[1]);
        let (ea, eb) = (a.exp(), b.exp());
        let softplus = |x: f64| x.exp().ln_1p();
        let mut t = 0.0;
        for y in w {
            t += ea.ln() - eb.ln() + (ea - 1.0) * (y / eb).ln() - (y / eb).powf(ea);
            t += (ea / 2.0 - 1.0) * y.ln()
                - y / 2.0
                - ea / 2.0 * std::f64::consts::LN_2
                - lgamma(ea / 2.0);
        }
        for (y, trials) in k.into_iter().zip(n) {
            let choose = lgamma(trials + 1.0) - lgamma(y + 1.0) - lgamma(trials - y + 1.0);
            let theta = 1.0 / (1.0 + (-b).exp());
            t += choose + y * theta.ln() + (trials - y) * (1.0 - theta).ln();
            t += choose + y * a - trials * softplus(a);
            let nb = |mu: f64, phi: f64| {
                lgamma(y + phi) - lgamma(y + 1.0) - lgamma(phi)
                    + phi * (phi / (mu + phi)).ln()
                    + y * (mu / (mu + phi)).ln()
            };
            t += nb(ea, eb) + nb(a.exp(), eb);
        }
        t - 0.01 * t * t + normal_lpdf(a, 0.0, 1.0) + normal_lpdf(b, 0.0, 1.0)
    });
}

/// Stan adds the log-Jacobians of the parameters' transforms before `model` runs, so
/// `target()` includes them; `theta` here is the unconstrained vector.
#[test]
fn target_includes_the_log_jacobians_of_the_transforms() {
    let source = r#"
data {
  real lo;
}
parameters {
  real<lower=0> sigma;
  real<lower=-1, upper=2> r;
  vector<offset=1, multiplier=3>[2] z;
  ordered[3] o;
  positive_ordered[2] p;
  real<lower=lo + 0 * sigma> b;
}
model {
  target += -0.5 * (sigma^2 + r^2 + dot_self(z) + dot_self(o) + dot_self(p) + b^2);
  real t = target();
  target += -0.01 * t^2;
}
"#;
    let model = lower(source, r#"{"lo": 0.5}"#);
    let logistic = |v: f64| 1.0 / (1.0 + (-v).exp());
    let by_hand = |theta: &[f64]| {
        let sigma = theta[0].exp();
        let s = logistic(theta[1]);
        let r = -1.0 + 3.0 * s;
        let z = [1.0 + 3.0 * theta[2], 1.0 + 3.0 * theta[3]];
        let o1 = theta[4];
        let o2 = o1 + theta[5].exp();
        let o3 = o2 + theta[6].exp();
        let p1 = theta[7].exp();
        let p2 = p1 + theta[8].exp();
        let b = 0.5 + theta[9].exp();
        let jacobian = theta[0]
            + 3.0f64.ln()
            + s.ln()
            + (1.0 - s).ln()
            + 2.0 * 3.0f64.ln()
            + theta[5]
            + theta[6]
            + theta[7]
            + theta[8]
            + theta[9];
        let t = jacobian
            - 0.5
                * (sigma * sigma
                    + r * r
                    + z[0] * z[0]
                    + z[1] * z[1]
                    + o1 * o1
                    + o2 * o2
                    + o3 * o3
                    + p1 * p1
                    + p2 * p2
                    + b * b);
        t - 0.01 * t * t
    };
    let points = vec![
        vec![0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, -0.8, 0.9, -0.1],
        vec![-0.4, -1.0, 0.6, -0.2, -1.5, 0.3, -0.2, 0.4, -0.5, 0.8],
    ];
    check_points(&model, &points, 1e-9, by_hand);
}

#[test]
fn target_is_refused_with_a_transform_it_cannot_write_out() {
    let source = r#"
parameters {
  simplex[3] s;
}
model {
  target += target();
}
"#;
    let err = try_lower(source, "{}").expect_err("refused");
    assert!(
        err.contains("`target()` with the `simplex` parameter `s`"),
        "{err}"
    );
}
