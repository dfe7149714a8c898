//! Inlined user functions, truncation and transformed-parameter bounds: lowered log densities
//! against closed forms (differences between points, since `~` drops constants), gradients
//! against finite differences, and the errors for what is refused.

use sampler::CheckedModel;

use super::super::test_support::{check_points, lower, try_lower};

/// The lowered log density minus `by_hand` is one constant at every point, and the gradient
/// matches central finite differences.
fn check(model: &CheckedModel, points: &[Vec<f64>], by_hand: impl Fn(&[f64]) -> f64) {
    check_points(model, points, 1e-9, by_hand);
}

fn error(source: &str, data: &str) -> String {
    match try_lower(source, data) {
        Ok(model) => panic!("lowered, but should not have: {model:?}"),
        Err(e) => e,
    }
}

fn normal_lpdf(y: f64, mu: f64, sigma: f64) -> f64 {
    let z = (y - mu) / sigma;
    -0.5 * z * z - sigma.ln()
}

#[test]
fn lower_inlines_user_functions_with_loops_returns_and_densities() {
    let source = r#"
functions {
  real weighted(vector v, data vector w) {
    real total = 0;
    for (i in 1:rows(v)) {
      if (w[i] == 0) {
        continue;
      }
      total += w[i] * v[i];
    }
    return total;
  }
  int count_positive(array[] real x) {
    int n = 0;
    for (i in 1:size(x)) {
      if (x[i] <= 0) {
        return n;
      }
      n += 1;
    }
    return n;
  }
  real shifted_lpdf(real y, real mu) {
    real z = y - mu - 1;
    return -0.5 * square(z);
  }
  void nothing(real x) {
    return;
  }
}
data {
  vector[3] w;
  array[3] real xs;
}
transformed data {
  int k = count_positive(xs);
}
parameters {
  vector[3] v;
  real mu;
}
model {
  nothing(mu);
  v ~ normal(0, 1);
  mu ~ shifted(v[1]);
  target += shifted_lpdf(v[2] | mu);
  target += k * weighted(v, w);
}
"#;
    let data = r#"{"w": [0.5, 0, -2], "xs": [1.5, 2, -1]}"#;
    let model = lower(source, data);
    let points = vec![
        vec![0.3, -0.7, 1.1, 0.4],
        vec![-1.2, 0.5, 0.9, -0.6],
        vec![1.7, 1.1, -0.3, 2.0],
    ];
    check(&model, &points, |t| {
        let (v, mu) = (&t[..3], t[3]);
        let shifted = |y: f64, m: f64| -0.5 * (y - m - 1.0).powi(2);
        v.iter().map(|&x| normal_lpdf(x, 0.0, 1.0)).sum::<f64>()
            + shifted(mu, v[0])
            + shifted(v[1], mu)
            + 2.0 * (0.5 * v[0] - 2.0 * v[2])
    });
}

#[test]
fn lower_truncates_a_normal_and_a_poisson() {
    let source = r#"
data {
  real y;
  int n;
}
parameters {
  real mu;
  real<lower=0> lambda;
}
model {
  y ~ normal(mu, 1.5) T[0, 3];
  n ~ poisson(lambda) T[1, 6];
}
"#;
    let model = lower(source, r#"{"y": 1.2, "n": 2}"#);
    let phi = |x: f64| 0.5 * crate::host::math_erfc(-x / std::f64::consts::SQRT_2);
    let points = vec![vec![0.2, -0.4], vec![-1.0, 0.8], vec![2.5, 1.5]];
    check(&model, &points, |t| {
        let (mu, u) = (t[0], t[1]);
        let lambda = u.exp();
        let mass = phi((3.0 - mu) / 1.5) - phi((0.0 - mu) / 1.5);
        let pmf = |k: f64| (k * lambda.ln() - lambda - crate::host::math_lgamma(k + 1.0)).exp();
        let poisson_mass: f64 = (1..=6).map(|k| pmf(k as f64)).sum();
        normal_lpdf(1.2, mu, 1.5) - mass.ln() + 2.0 * lambda.ln() - lambda - poisson_mass.ln() + u
    });
}

#[test]
fn lower_truncates_families_without_a_log_cdf_when_the_mass_is_constant() {
    let source = r#"
parameters {
  real<lower=0> sigma;
  real x;
  real<lower=0> nu;
  real z;
}
model {
  sigma ~ cauchy(0, 2.5) T[0, ];
  x ~ student_t(3, 1, 2) T[-1, 4];
  nu ~ gamma(2, 0.5) T[1, ];
  z ~ cauchy(0, 1) T[, 2];
}
"#;
    let model = lower(source, "{}");
    // Unconstrained sigma and nu, with their log-Jacobians; the truncated masses are constants.
    let by_hand = |t: &[f64]| {
        let (u, x, w, z) = (t[0], t[1], t[2], t[3]);
        let (sigma, nu) = (u.exp(), w.exp());
        let zt = (x - 1.0) / 2.0;
        -(sigma / 2.5).powi(2).ln_1p() + u - 2.0 * (zt * zt / 3.0).ln_1p() + nu.ln() - 0.5 * nu + w
            - (z * z).ln_1p()
    };
    let points = vec![
        vec![0.3, 0.5, 0.2, -1.0],
        vec![-1.2, 3.5, 1.5, 1.9],
        vec![2.0, -0.9, 0.01, -4.0],
    ];
    check(&model, &points, by_hand);
    // Outside a bound, the draw is rejected.
    let mut eval = model.evaluator();
    for outside in [
        vec![0.3, 4.5, 0.2, 0.0],
        vec![0.3, -1.5, 0.2, 0.0],
        vec![0.3, 0.5, -0.2, 0.0],
        vec![0.3, 0.5, 0.2, 2.5],
    ] {
        assert_eq!(eval.logp(&outside), f64::NEG_INFINITY, "at {outside:?}");
    }
}

#[test]
fn lower_truncates_weibull_with_parameter_arguments() {
    let source = r#"
data {
  real y;
  real w;
}
parameters {
  real log_alpha;
  real log_sigma;
}
model {
  y ~ weibull(exp(log_alpha), exp(log_sigma)) T[0.5, 3];
  w ~ weibull(exp(log_alpha), exp(log_sigma)) T[, 4];
  target += weibull_lcdf(1.5 | exp(log_alpha), exp(log_sigma));
  target += 2 * weibull_lccdf(0.8 | exp(log_alpha), exp(log_sigma));
  log_alpha ~ normal(0, 1);
  log_sigma ~ normal(0, 1);
}
"#;
    let model = lower(source, r#"{"y": 1.2, "w": 2.5}"#);
    let points = vec![vec![0.2, -0.4], vec![-0.5, 0.8], vec![0.9, 0.3]];
    check(&model, &points, |t| {
        let (alpha, sigma) = (t[0].exp(), t[1].exp());
        let ccdf = |x: f64| (-(x / sigma).powf(alpha)).exp();
        let lpdf = |x: f64| {
            alpha.ln() - sigma.ln() + (alpha - 1.0) * (x / sigma).ln() - (x / sigma).powf(alpha)
        };
        lpdf(1.2) - (ccdf(0.5) - ccdf(3.0)).ln() + lpdf(2.5) - (1.0 - ccdf(4.0)).ln()
            + (1.0 - ccdf(1.5)).ln()
            + 2.0 * ccdf(0.8).ln()
            - 0.5 * t[0] * t[0]
            - 0.5 * t[1] * t[1]
    });
}

#[test]
fn lower_rejects_transformed_parameters_out_of_bounds() {
    let source = r#"
parameters {
  real mu;
}
transformed parameters {
  real<lower=0> s = mu;
  vector<upper=1>[2] v = [mu, 2 * mu]';
}
model {
  mu ~ normal(0, 1);
}
"#;
    let model = lower(source, "{}");
    let mut eval = model.evaluator();
    assert!(eval.logp(&[0.3]).is_finite());
    assert_eq!(
        eval.logp(&[-0.1]),
        f64::NEG_INFINITY,
        "below the lower bound"
    );
    assert_eq!(
        eval.logp(&[0.7]),
        f64::NEG_INFINITY,
        "2 mu above the upper bound"
    );
}

#[test]
fn lower_refuses_recursion_and_misused_functions() {
    let cases = [
        (
            "functions {\n  real f(real x) {\n    return f(x - 1);\n  }\n}\nparameters {\n  real a;\n}\nmodel {\n  a ~ normal(f(1), 1);\n}\n",
            "test.stan:2:8: error: the function `f` calls itself: recursion is not supported\n",
        ),
        (
            "functions {\n  real g(real x);\n  real f(real x) {\n    return g(x);\n  }\n  real g(real x) {\n    return f(x);\n  }\n}\nparameters {\n  real a;\n}\nmodel {\n  a ~ normal(0, 1);\n}\n",
            "error: the function `f` calls itself through f -> g -> f: recursion is not supported",
        ),
        (
            "functions {\n  real f(data real x) {\n    return x;\n  }\n}\nparameters {\n  real a;\n}\nmodel {\n  a ~ normal(f(a), 1);\n}\n",
            "test.stan:10:16: error: argument `x` of `f` is declared `data` but depends on parameters",
        ),
        (
            "functions {\n  real f(real x) {\n    if (x > 0) {\n      return x;\n    }\n  }\n}\nparameters {\n  real a;\n}\nmodel {\n  a ~ normal(f(-1), 1);\n}\n",
            "error: the function `f` ended without returning a value",
        ),
        (
            "parameters {\n  real a;\n  real b;\n}\nmodel {\n  a ~ student_t(3, b, 1) T[0, ];\n}\n",
            "test.stan:6:26: error: truncation of `student_t` with arguments or bounds that depend on parameters (its CDF needs the incomplete beta function, which the IR lacks) is not supported yet",
        ),
        (
            "data {\n  real y;\n}\nparameters {\n  real a;\n}\nmodel {\n  y ~ normal(a, 1) T[0, 1];\n}\n",
            "every draw would be rejected",
        ),
    ];
    for (source, expected) in cases {
        let data = if source.contains("real y;") {
            r#"{"y": 2}"#
        } else {
            "{}"
        };
        let message = error(source, data);
        assert!(
            message.contains(expected),
            "expected {expected:?} in:\n{message}"
        );
        assert!(message.contains('^'), "no caret in:\n{message}");
    }
}
