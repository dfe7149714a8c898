use std::collections::BTreeMap;

use super::GeneratedQuantities;
use crate::host::density;
use crate::value::{Elem, Typed};

fn prepare(source: &str, data: &str) -> GeneratedQuantities {
    let program = crate::parse(source).unwrap_or_else(|e| panic!("{}", e.render("t.stan", source)));
    let data = crate::read_data(&program, data).unwrap();
    GeneratedQuantities::new(&program, &data)
        .unwrap_or_else(|e| panic!("{}", e.render("t.stan", source)))
}

/// Values of every output, by column label.
fn outputs(
    gq: &GeneratedQuantities,
    inputs: &BTreeMap<String, Vec<f64>>,
    draw: u64,
) -> BTreeMap<String, f64> {
    let values = gq.run_draw(inputs, 7, 0, draw).unwrap();
    gq.columns()
        .iter()
        .map(|c| c.to_string())
        .zip(values)
        .collect()
}

const N: usize = 20_000;

/// Mean, variance and fourth central moment.
fn moments(x: &[f64]) -> (f64, f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let m4 = x.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / n;
    (mean, var, m4)
}

/// The sample mean and variance agree with the truth within 5 Monte Carlo standard errors.
fn check_moments(name: &str, x: &[f64], mean: f64, var: f64) {
    let (m, v, m4) = moments(x);
    let n = x.len() as f64;
    let mean_tol = 5.0 * (var / n).sqrt();
    let var_tol = 5.0 * ((m4 - v * v).max(0.0) / n).sqrt();
    assert!(
        (m - mean).abs() < mean_tol,
        "{name}: mean {m}, expected {mean} +- {mean_tol}"
    );
    assert!(
        (v - var).abs() < var_tol,
        "{name}: variance {v}, expected {var} +- {var_tol}"
    );
}

fn gamma_fn(x: f64) -> f64 {
    crate::host::math_lgamma(x).exp()
}

#[test]
fn gq_rng_moments_match_the_distributions() {
    let source = "
      data { int N; }
      generated quantities {
        array[N] real normal = normal_rng(rep_vector(1, N), 2);
        array[N] real student = student_t_rng(5, rep_vector(1, N), 2);
        array[N] real cauchy = cauchy_rng(rep_vector(1, N), 2);
        array[N] real dexp = double_exponential_rng(rep_vector(1, N), 2);
        array[N] real logis = logistic_rng(rep_vector(1, N), 2);
        array[N] real lognorm = lognormal_rng(rep_vector(0.5, N), 0.4);
        array[N] real chisq = chi_square_rng(rep_vector(3, N));
        array[N] real gam = gamma_rng(rep_vector(2.5, N), 1.5);
        array[N] real gam_small = gamma_rng(rep_vector(0.5, N), 2);
        array[N] real invgam = inv_gamma_rng(rep_vector(5, N), 2);
        array[N] real weib = weibull_rng(rep_vector(1.5, N), 2);
        array[N] real expo = exponential_rng(rep_vector(2, N));
        array[N] real bet = beta_rng(rep_vector(2, N), 3);
        array[N] real unif = uniform_rng(rep_vector(-1, N), 3);
        array[N] int bern = bernoulli_rng(rep_vector(0.3, N));
        array[N] int bern_logit = bernoulli_logit_rng(rep_vector(logit(0.3), N));
        array[N] int binom = binomial_rng(rep_array(10, N), 0.3);
        array[N] int binom_big = binomial_rng(rep_array(200, N), 0.3);
        array[N] int binom_logit = binomial_logit_rng(rep_array(10, N), logit(0.3));
        array[N] int pois = poisson_rng(rep_vector(3.5, N));
        array[N] int pois_big = poisson_rng(rep_vector(50, N));
        array[N] int pois_log = poisson_log_rng(rep_vector(log(3.5), N));
        array[N] int nb = neg_binomial_2_rng(rep_vector(4, N), 2.5);
        array[N] int nb_log = neg_binomial_2_log_rng(rep_vector(log(4), N), 2.5);
        array[N] int cat;
        array[N] int cat_logit;
        array[N] int ord;
        array[N] real mn1;
        array[N] real mn_sum;
        array[N] real mnc_sum;
        array[N] real dir1;
        {
          matrix[2, 2] S = [[2, 0.5], [0.5, 1]];
          matrix[2, 2] L = cholesky_decompose(S);
          for (i in 1:N) {
            vector[2] x = multi_normal_rng([1, 2]', S);
            vector[2] z = multi_normal_cholesky_rng([1, 2]', L);
            cat[i] = categorical_rng([0.2, 0.5, 0.3]');
            cat_logit[i] = categorical_logit_rng(log([0.2, 0.5, 0.3]'));
            ord[i] = ordered_logistic_rng(0.5, [-1, 1]');
            mn1[i] = x[1];
            mn_sum[i] = x[1] + x[2];
            mnc_sum[i] = z[1] + z[2];
            dir1[i] = dirichlet_rng([2, 3, 5]')[1];
          }
        }
      }
    ";
    let gq = prepare(source, &format!("{{\"N\": {N}}}"));
    let values = gq.run_draw(&BTreeMap::new(), 11, 0, 0).unwrap();
    let columns = gq.columns();
    let draws = |name: &str| -> Vec<f64> {
        columns
            .iter()
            .zip(&values)
            .filter(|(c, _)| c.name == name)
            .map(|(_, v)| *v)
            .collect()
    };
    let pi2 = std::f64::consts::PI.powi(2);
    let g1 = gamma_fn(1.0 + 1.0 / 1.5);
    let g2 = gamma_fn(1.0 + 2.0 / 1.5);
    let ord_p1 = 1.0 - 1.0 / (1.0 + (-1.5f64).exp());
    let ord_p3 = 1.0 / (1.0 + (0.5f64).exp());
    let ord_p2 = 1.0 - ord_p1 - ord_p3;
    let ord_mean = ord_p1 + 2.0 * ord_p2 + 3.0 * ord_p3;
    let ord_var = ord_p1 + 4.0 * ord_p2 + 9.0 * ord_p3 - ord_mean * ord_mean;
    let cases: &[(&str, f64, f64)] = &[
        ("normal", 1.0, 4.0),
        ("student", 1.0, 4.0 * 5.0 / 3.0),
        ("dexp", 1.0, 8.0),
        ("logis", 1.0, 4.0 * pi2 / 3.0),
        (
            "lognorm",
            (0.5f64 + 0.08).exp(),
            ((0.16f64).exp() - 1.0) * (1.16f64).exp(),
        ),
        ("chisq", 3.0, 6.0),
        ("gam", 2.5 / 1.5, 2.5 / 2.25),
        ("gam_small", 0.25, 0.125),
        ("invgam", 0.5, 1.0 / 12.0),
        ("weib", 2.0 * g1, 4.0 * (g2 - g1 * g1)),
        ("expo", 0.5, 0.25),
        ("bet", 0.4, 0.04),
        ("unif", 1.0, 16.0 / 12.0),
        ("bern", 0.3, 0.21),
        ("bern_logit", 0.3, 0.21),
        ("binom", 3.0, 2.1),
        ("binom_big", 60.0, 42.0),
        ("binom_logit", 3.0, 2.1),
        ("pois", 3.5, 3.5),
        ("pois_big", 50.0, 50.0),
        ("pois_log", 3.5, 3.5),
        ("nb", 4.0, 4.0 + 16.0 / 2.5),
        ("nb_log", 4.0, 4.0 + 16.0 / 2.5),
        ("cat", 2.1, 0.49),
        ("cat_logit", 2.1, 0.49),
        ("ord", ord_mean, ord_var),
        ("mn1", 1.0, 2.0),
        ("mn_sum", 3.0, 4.0),
        ("mnc_sum", 3.0, 4.0),
        ("dir1", 0.2, 16.0 / 1100.0),
    ];
    for &(name, mean, var) in cases {
        let x = draws(name);
        assert_eq!(x.len(), N, "{name}");
        check_moments(name, &x, mean, var);
    }
    // Cauchy has no moments: check its quartiles instead (binomial standard errors).
    let x = draws("cauchy");
    for (q, p) in [(1.0, 0.5), (3.0, 0.75), (-1.0, 0.25)] {
        let frac = x.iter().filter(|&&v| v < q).count() as f64 / N as f64;
        assert!(
            (frac - p).abs() < 5.0 * (p * (1.0 - p) / N as f64).sqrt(),
            "cauchy P(x < {q}) = {frac}"
        );
    }
}

fn real(x: f64) -> Typed {
    Typed::real(x)
}

fn int(x: i64) -> Typed {
    Typed::int(x)
}

fn vector(v: &[f64]) -> Typed {
    Typed::vector(v.to_vec(), Elem::Vector)
}

/// Trapezoid integral of `f` over `[a, b]`.
fn integrate(f: impl Fn(f64) -> f64, a: f64, b: f64, n: usize) -> f64 {
    let h = (b - a) / n as f64;
    let mut sum = 0.5 * (f(a) + f(b));
    for i in 1..n {
        sum += f(a + i as f64 * h);
    }
    sum * h
}

#[test]
fn gq_continuous_densities_integrate_to_one_with_the_right_mean() {
    let pi2 = std::f64::consts::PI.powi(2);
    let g1 = gamma_fn(1.0 + 1.0 / 1.5);
    // (family, parameters, support, mean)
    type Case = (&'static str, Vec<f64>, (f64, f64), f64);
    let cases: &[Case] = &[
        ("normal", vec![1.0, 2.0], (-30.0, 30.0), 1.0),
        ("student_t", vec![5.0, 1.0, 2.0], (-400.0, 400.0), 1.0),
        ("double_exponential", vec![1.0, 2.0], (-60.0, 60.0), 1.0),
        ("logistic", vec![1.0, 2.0], (-80.0, 80.0), 1.0),
        ("lognormal", vec![0.5, 0.4], (1e-9, 30.0), (0.58f64).exp()),
        ("chi_square", vec![3.0], (0.0, 80.0), 3.0),
        ("gamma", vec![2.5, 1.5], (0.0, 60.0), 2.5 / 1.5),
        ("inv_gamma", vec![5.0, 2.0], (1e-9, 200.0), 0.5),
        ("weibull", vec![1.5, 2.0], (0.0, 40.0), 2.0 * g1),
        ("exponential", vec![2.0], (0.0, 40.0), 0.5),
        ("beta", vec![2.0, 3.0], (0.0, 1.0), 0.4),
        ("uniform", vec![-1.0, 3.0], (-1.0, 3.0), 1.0),
    ];
    let _ = pi2;
    for (family, params, (a, b), mean) in cases {
        let name = format!("{family}_lpdf");
        let pdf = |y: f64| {
            let mut args = vec![real(y)];
            args.extend(params.iter().map(|&p| real(p)));
            density(&name, &args).unwrap().exp()
        };
        let n = 400_000;
        let total = integrate(pdf, *a, *b, n);
        assert!((total - 1.0).abs() < 2e-4, "{name}: integral {total}");
        let m = integrate(|y| y * pdf(y), *a, *b, n);
        assert!(
            (m - mean).abs() < 2e-3 * (1.0 + mean.abs()),
            "{name}: mean {m}, expected {mean}"
        );
    }
}

#[test]
fn gq_mass_functions_sum_to_one_with_the_right_mean() {
    let logit = |p: f64| (p / (1.0 - p)).ln();
    // (family, parameters (ints first as declared), mean)
    let cases: Vec<(&str, Vec<Typed>, f64)> = vec![
        ("bernoulli", vec![real(0.3)], 0.3),
        ("bernoulli_logit", vec![real(logit(0.3))], 0.3),
        ("binomial", vec![int(10), real(0.3)], 3.0),
        ("binomial_logit", vec![int(10), real(logit(0.3))], 3.0),
        ("poisson", vec![real(3.5)], 3.5),
        ("poisson_log", vec![real(3.5f64.ln())], 3.5),
        ("neg_binomial_2", vec![real(4.0), real(2.5)], 4.0),
        ("neg_binomial_2_log", vec![real(4f64.ln()), real(2.5)], 4.0),
        ("categorical", vec![vector(&[0.2, 0.5, 0.3])], 2.1),
        (
            "categorical_logit",
            vec![vector(&[0.2f64.ln(), 0.5f64.ln(), 0.3f64.ln()])],
            2.1,
        ),
        ("ordered_logistic", vec![real(0.5), vector(&[-1.0, 1.0])], {
            let p1 = 1.0 - 1.0 / (1.0 + (-1.5f64).exp());
            let p3 = 1.0 / (1.0 + 0.5f64.exp());
            p1 + 2.0 * (1.0 - p1 - p3) + 3.0 * p3
        }),
    ];
    for (family, params, mean) in cases {
        let name = format!("{family}_lpmf");
        let (lo, hi) = match family {
            "bernoulli" | "bernoulli_logit" => (0, 1),
            "binomial" | "binomial_logit" => (0, 10),
            "categorical" | "categorical_logit" | "ordered_logistic" => (1, 3),
            _ => (0, 400),
        };
        let mut total = 0.0;
        let mut m = 0.0;
        for k in lo..=hi {
            let mut args = vec![int(k)];
            args.extend(params.iter().cloned());
            let p = density(&name, &args).unwrap().exp();
            total += p;
            m += k as f64 * p;
        }
        assert!((total - 1.0).abs() < 1e-12, "{name}: total {total}");
        assert!(
            (m - mean).abs() < 1e-10,
            "{name}: mean {m}, expected {mean}"
        );
    }
}

#[test]
fn gq_densities_match_known_values() {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12 * (1.0 + b.abs());
    let d = |name: &str, args: &[Typed]| density(name, args).unwrap();
    assert!(close(
        d("normal_lpdf", &[real(0.0), real(0.0), real(1.0)]),
        -0.918_938_533_204_672_8
    ));
    assert!(close(
        d(
            "student_t_lpdf",
            &[real(0.0), real(1.0), real(0.0), real(1.0)]
        ),
        -std::f64::consts::PI.ln()
    ));
    assert!(close(
        d("cauchy_lpdf", &[real(3.0), real(1.0), real(2.0)]),
        -(2.0 * std::f64::consts::PI).ln() - 2f64.ln()
    ));
    assert!(close(
        d("poisson_lpmf", &[int(2), real(3.0)]),
        2.0 * 3f64.ln() - 3.0 - 2f64.ln()
    ));
    let binom = 120f64.ln() + 3.0 * 0.3f64.ln() + 7.0 * 0.7f64.ln();
    assert!(close(
        d("binomial_lpmf", &[int(3), int(10), real(0.3)]),
        binom
    ));
    // Vectorised: the sum over elements.
    let v = d("normal_lpdf", &[vector(&[0.0, 1.0]), real(0.0), real(1.0)]);
    assert!(close(v, -2.0 * 0.918_938_533_204_672_8 - 0.5));
    assert!(close(
        d(
            "dirichlet_lpdf",
            &[vector(&[0.2, 0.3, 0.5]), vector(&[1.0, 1.0, 1.0])]
        ),
        2f64.ln()
    ));
    // multi_normal against its formula for a 2x2 covariance.
    let s = Typed::matrix(2, 2, vec![2.0, 0.5, 0.5, 1.0]);
    let (y, mu) = (vector(&[0.3, 2.5]), vector(&[1.0, 2.0]));
    let det: f64 = 2.0 * 1.0 - 0.25;
    let (d0, d1) = (0.3 - 1.0, 2.5 - 2.0);
    let quad = (1.0 * d0 * d0 - 2.0 * 0.5 * d0 * d1 + 2.0 * d1 * d1) / det;
    let expected = -(2.0 * std::f64::consts::PI).ln() - 0.5 * det.ln() - 0.5 * quad;
    assert!(close(
        d("multi_normal_lpdf", &[y.clone(), mu.clone(), s]),
        expected
    ));
    let l = Typed::matrix(
        2,
        2,
        vec![2f64.sqrt(), 0.0, 0.5 / 2f64.sqrt(), (1.0 - 0.125f64).sqrt()],
    );
    assert!(close(
        d("multi_normal_cholesky_lpdf", &[y, mu, l]),
        expected
    ));
    // CDFs.
    assert!(close(
        d(
            "normal_lcdf",
            &[real(1.959_963_984_540_054), real(0.0), real(1.0)]
        ),
        0.975f64.ln()
    ));
    assert!(close(
        d(
            "student_t_lccdf",
            &[real(0.0), real(3.0), real(0.0), real(10.0)]
        ),
        0.5f64.ln()
    ));
    assert!(close(
        d(
            "student_t_cdf",
            &[real(1.0), real(1.0), real(0.0), real(1.0)]
        ),
        0.75
    ));
    // Invalid parameters are errors that name the parameter.
    let e = density("normal_lpdf", &[real(0.0), real(0.0), real(-1.0)]).unwrap_err();
    assert!(e.message.contains("scale is -1"), "{}", e.message);
}

#[test]
fn gq_block_with_loops_log_lik_and_host_transformed_parameters() {
    let source = "
      data { int N; vector[N] y; }
      transformed data { real y_mean = mean(y); }
      parameters { real mu; real<lower=0> sigma; }
      transformed parameters { real<lower=0> var_y = square(sigma); }
      model { y ~ normal(mu, sigma); }
      generated quantities {
        vector[N] log_lik;
        array[N] real y_rep;
        matrix[2, 2] m = [[mu, sigma], [var_y, y_mean]];
        int n_above = 0;
        real best = negative_infinity();
        for (n in 1:N) {
          log_lik[n] = normal_lpdf(y[n] | mu, sigma);
          y_rep[n] = normal_rng(mu, sigma);
          if (y[n] > mu) n_above += 1;
          if (log_lik[n] > best) best = log_lik[n];
        }
      }
    ";
    let gq = prepare(source, r#"{"N": 3, "y": [0.5, -1.0, 2.0]}"#);
    let labels: Vec<String> = gq.columns().iter().map(|c| c.to_string()).collect();
    assert_eq!(
        labels,
        [
            "log_lik[1]",
            "log_lik[2]",
            "log_lik[3]",
            "y_rep[1]",
            "y_rep[2]",
            "y_rep[3]",
            "m[1,1]",
            "m[1,2]",
            "m[2,1]",
            "m[2,2]",
            "n_above",
            "best"
        ]
    );
    let mut inputs = BTreeMap::new();
    inputs.insert("mu".to_owned(), vec![0.25]);
    inputs.insert("sigma".to_owned(), vec![1.5]);
    // `var_y` is not given: the transformed parameters run on the host.
    let out = outputs(&gq, &inputs, 0);
    let y = [0.5, -1.0, 2.0];
    for (n, yn) in y.iter().enumerate() {
        let z: f64 = (yn - 0.25) / 1.5;
        let lp = -0.5 * z * z - 1.5f64.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln();
        assert!((out[&format!("log_lik[{}]", n + 1)] - lp).abs() < 1e-12);
    }
    assert_eq!(out["m[2,1]"], 2.25);
    assert!((out["m[2,2]"] - 0.5).abs() < 1e-15);
    assert_eq!(out["n_above"], 2.0);
    let best = (1..=3)
        .map(|n| out[&format!("log_lik[{n}]")])
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(out["best"], best);
    // Reproducible per draw, different across draws.
    assert_eq!(outputs(&gq, &inputs, 0)["y_rep[1]"], out["y_rep[1]"]);
    assert_ne!(outputs(&gq, &inputs, 1)["y_rep[1]"], out["y_rep[1]"]);
    // A given transformed parameter is used as is.
    inputs.insert("var_y".to_owned(), vec![9.0]);
    assert_eq!(outputs(&gq, &inputs, 0)["m[2,1]"], 9.0);
    // A constraint violated at the end of the block is an error.
    inputs.insert("var_y".to_owned(), vec![-1.0]);
    let gq_bad = prepare(
        &source.replace(
            "int n_above = 0;",
            "int n_above = 0; real<upper=0> bad = 1;",
        ),
        r#"{"N": 3, "y": [0.5, -1.0, 2.0]}"#,
    );
    let err = gq_bad.run_draw(&inputs, 7, 0, 0).unwrap_err();
    assert!(
        err.message.contains("`bad` is 1, but must be at most 0"),
        "{}",
        err.message
    );
}

#[test]
fn gq_hmm_typo_runs_because_locals_start_as_nan() {
    // posteriordb's hmm_example gq compares with `best_logp[1, K]` before it is set.
    let source = "
      generated quantities {
        real best;
        array[2, 2] real best_logp;
        best_logp[1, 1] = 0;
        best = best_logp[1, 2] > -1 ? 1 : 0;
      }
    ";
    let gq = prepare(source, "{}");
    assert_eq!(gq.run_draw(&BTreeMap::new(), 1, 0, 0).unwrap()[0], 0.0);
}
