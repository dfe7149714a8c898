//! Lowering of programs with loops, locals, constrained parameters and densities used as
//! values, checked against log densities computed by hand here (differences between points,
//! since `~` drops constants) and gradients against finite differences.

use sampler::{CheckedModel, Limits, LogDensity};

const ARK: &str = include_str!("../../tests/programs/arK.stan");
const ARMA11: &str = include_str!("../../tests/programs/arma11.stan");
const GARCH11: &str = include_str!("../../tests/programs/garch11.stan");
const GAUSS_MIX: &str = include_str!("../../tests/programs/low_dim_gauss_mix.stan");
const HMM: &str = include_str!("../../tests/programs/hmm_example.stan");
const HMM_DRIVE_0: &str = include_str!("../../tests/programs/hmm_drive_0.stan");
const HMM_DRIVE_1: &str = include_str!("../../tests/programs/hmm_drive_1.stan");
const EIGHT_SCHOOLS_CENTERED: &str =
    include_str!("../../tests/programs/eight_schools_centered.stan");

fn try_lower(source: &str, data: &str) -> Result<sampler::Model, String> {
    let program = crate::parse(source).map_err(|e| e.render("test.stan", source))?;
    let data = crate::read_data(&program, data).map_err(|e| e.to_string())?;
    super::lower(&program, &data, "test").map_err(|e| e.render("test.stan", source))
}

fn lower(source: &str, data: &str) -> CheckedModel {
    let model = try_lower(source, data).unwrap_or_else(|e| panic!("{e}"));
    CheckedModel::new(model, &Limits::default())
        .unwrap_or_else(|e| panic!("the IR refuses the lowered model: {e}"))
}

/// The rendered error of lowering `source`; panics when it lowers.
fn lower_error(source: &str, data: &str) -> String {
    match try_lower(source, data) {
        Ok(model) => panic!("lowered, but should not have: {model:?}"),
        Err(e) => e,
    }
}

/// Deterministic points in the unconstrained space, uniform on (-2, 2) as Stan initialises.
fn points(dim: usize, count: usize) -> Vec<Vec<f64>> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
    };
    (0..count)
        .map(|_| (0..dim).map(|_| next()).collect())
        .collect()
}

/// The lowered log density minus `by_hand` is the same constant at every point, and the
/// gradient matches central finite differences.
fn check(model: &CheckedModel, dim: usize, by_hand: impl Fn(&[f64]) -> f64) {
    assert_eq!(model.dim(), dim, "unconstrained dimension");
    let mut eval = model.evaluator();
    let mut offset = None;
    for theta in points(dim, 5) {
        let mut grad = vec![0.0; dim];
        let lp = eval.logp_grad(&theta, &mut grad);
        let expected = by_hand(&theta);
        assert!(lp.is_finite(), "logp {lp} at {theta:?}");
        let diff = lp - expected;
        let first = *offset.get_or_insert(diff);
        assert!(
            (diff - first).abs() <= 1e-8 * expected.abs().max(1.0),
            "logp {lp} vs by hand {expected} (constant {first}, here {diff}) at {theta:?}"
        );
        for i in 0..dim {
            let h = 1e-6 * theta[i].abs().max(1.0);
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (eval.logp(&up) - eval.logp(&down)) / (2.0 * h);
            assert!(
                (grad[i] - fd).abs() <= 1e-5 * fd.abs().max(1.0) + 1e-11 * lp.abs() / h,
                "d/dtheta[{i}] {} vs finite difference {fd}",
                grad[i]
            );
        }
    }
}

fn normal(y: f64, mu: f64, sigma: f64) -> f64 {
    let z = (y - mu) / sigma;
    -0.5 * z * z - sigma.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
}

fn cauchy(y: f64, mu: f64, sigma: f64) -> f64 {
    let z = (y - mu) / sigma;
    -(std::f64::consts::PI).ln() - sigma.ln() - (z * z).ln_1p()
}

fn exponential(y: f64, rate: f64) -> f64 {
    rate.ln() - rate * y
}

fn logistic(u: f64) -> f64 {
    1.0 / (1.0 + (-u).exp())
}

fn log_sum_exp(xs: &[f64]) -> f64 {
    let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    m + xs.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// `x > 0` from `u`: the value and the log-Jacobian.
fn positive(u: f64) -> (f64, f64) {
    (u.exp(), u)
}

/// Stan's ordered transform (log-Jacobian sum of `u[2..]`).
fn ordered(u: &[f64]) -> (Vec<f64>, f64) {
    let mut x = vec![u[0]];
    for k in 1..u.len() {
        x.push(x[k - 1] + u[k].exp());
    }
    (x, u[1..].iter().sum())
}

fn positive_ordered(u: &[f64]) -> (Vec<f64>, f64) {
    let mut x = Vec::new();
    let mut last = 0.0;
    for &v in u {
        last += v.exp();
        x.push(last);
    }
    (x, u.iter().sum())
}

/// Stan's stick-breaking simplex transform (reference manual, "Unit simplex", Stan <= 2.35):
/// `K - 1` coordinates to `K` values.
fn simplex(u: &[f64]) -> (Vec<f64>, f64) {
    let k_total = u.len() + 1;
    let mut x = Vec::with_capacity(k_total);
    let mut stick = 1.0;
    let mut log_j = 0.0;
    for (k, &y) in u.iter().enumerate() {
        let z = logistic(y - ((k_total - k - 1) as f64).ln());
        x.push(stick * z);
        log_j += z.ln() + (1.0 - z).ln() + stick.ln();
        stick -= stick * z;
    }
    x.push(stick);
    (x, log_j)
}

fn data_json(pairs: &[(&str, String)]) -> String {
    let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
    format!("{{{}}}", body.join(", "))
}

fn list(xs: &[f64]) -> String {
    format!(
        "[{}]",
        xs.iter()
            .map(|x| format!("{x}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

const SERIES: [f64; 8] = [0.3, -0.4, 1.1, 0.9, -0.2, 0.5, 1.4, -0.7];

#[test]
fn lower_ark_unrolls_the_nested_loop() {
    let (k, t) = (2usize, SERIES.len());
    let data = data_json(&[
        ("K", k.to_string()),
        ("T", t.to_string()),
        ("y", list(&SERIES)),
    ]);
    let model = lower(ARK, &data);
    check(&model, 2 + k, |u| {
        let (alpha, beta) = (u[0], &u[1..1 + k]);
        let (sigma, j) = positive(u[1 + k]);
        let mut lp = j + normal(alpha, 0.0, 10.0) + cauchy(sigma, 0.0, 2.5);
        lp += beta.iter().map(|b| normal(*b, 0.0, 10.0)).sum::<f64>();
        for s in k..t {
            let mut mu = alpha;
            for (i, b) in beta.iter().enumerate() {
                mu += b * SERIES[s - i - 1];
            }
            lp += normal(SERIES[s], mu, sigma);
        }
        lp
    });
}

#[test]
fn lower_arma11_assigns_elements_of_local_vectors() {
    let t = SERIES.len();
    let data = data_json(&[("T", t.to_string()), ("y", list(&SERIES))]);
    let model = lower(ARMA11, &data);
    check(&model, 4, |u| {
        let (mu, phi, theta) = (u[0], u[1], u[2]);
        let (sigma, j) = positive(u[3]);
        let mut lp = j
            + normal(mu, 0.0, 10.0)
            + normal(phi, 0.0, 2.0)
            + normal(theta, 0.0, 2.0)
            + cauchy(sigma, 0.0, 2.5);
        let mut nu = vec![mu + phi * mu];
        let mut err = vec![SERIES[0] - nu[0]];
        for s in 1..t {
            nu.push(mu + phi * SERIES[s - 1] + theta * err[s - 1]);
            err.push(SERIES[s] - nu[s]);
        }
        lp += err.iter().map(|e| normal(*e, 0.0, sigma)).sum::<f64>();
        lp
    });
}

#[test]
fn lower_garch11_bounds_a_parameter_by_an_earlier_one() {
    let t = SERIES.len();
    let sigma1 = 0.8;
    let data = data_json(&[
        ("T", t.to_string()),
        ("y", list(&SERIES)),
        ("sigma1", sigma1.to_string()),
    ]);
    let model = lower(GARCH11, &data);
    check(&model, 4, |u| {
        let mu = u[0];
        let (alpha0, j0) = positive(u[1]);
        let alpha1 = logistic(u[2]);
        let j1 = alpha1.ln() + (1.0 - alpha1).ln();
        let ub = 1.0 - alpha1;
        let z = logistic(u[3]);
        let beta1 = ub * z;
        let j2 = ub.ln() + z.ln() + (1.0 - z).ln();
        let mut sigma = vec![sigma1];
        for s in 1..t {
            let prev = sigma[s - 1];
            sigma.push(
                (alpha0 + alpha1 * (SERIES[s - 1] - mu).powi(2) + beta1 * prev * prev).sqrt(),
            );
        }
        j0 + j1 + j2 + (0..t).map(|s| normal(SERIES[s], mu, sigma[s])).sum::<f64>()
    });
}

#[test]
fn lower_low_dim_gauss_mix_uses_ordered_and_log_mix() {
    let y = [-1.2, 0.4, 2.5, 3.1, -0.3];
    let data = data_json(&[("N", y.len().to_string()), ("y", list(&y))]);
    let model = lower(GAUSS_MIX, &data);
    check(&model, 5, |u| {
        let (mu, jm) = ordered(&u[0..2]);
        let (s1, j1) = positive(u[2]);
        let (s2, j2) = positive(u[3]);
        let theta = logistic(u[4]);
        let jt = theta.ln() + (1.0 - theta).ln();
        let mut lp = jm + j1 + j2 + jt;
        lp += normal(s1, 0.0, 2.0) + normal(s2, 0.0, 2.0);
        lp += normal(mu[0], 0.0, 2.0) + normal(mu[1], 0.0, 2.0);
        lp += 4.0 * theta.ln() + 4.0 * (1.0 - theta).ln();
        for &v in &y {
            lp += log_sum_exp(&[
                theta.ln() + normal(v, mu[0], s1),
                (1.0 - theta).ln() + normal(v, mu[1], s2),
            ]);
        }
        lp
    });
}

/// The forward algorithm of the hmm programs, by hand: `emit(t, k)` is the log density of
/// observation `t` in state `k`.
fn forward(n: usize, theta: &[Vec<f64>], emit: impl Fn(usize, usize) -> f64) -> f64 {
    let k_total = theta.len();
    let mut gamma: Vec<f64> = (0..k_total).map(|k| emit(0, k)).collect();
    for t in 1..n {
        let next = (0..k_total)
            .map(|k| {
                let acc: Vec<f64> = (0..k_total)
                    .map(|j| gamma[j] + theta[j][k].ln() + emit(t, k))
                    .collect();
                log_sum_exp(&acc)
            })
            .collect();
        gamma = next;
    }
    log_sum_exp(&gamma)
}

#[test]
fn lower_hmm_example_runs_the_forward_algorithm() {
    let y = [2.9, 3.5, 9.7, 10.4, 2.2];
    let data = data_json(&[
        ("N", y.len().to_string()),
        ("K", "2".into()),
        ("y", list(&y)),
    ]);
    let model = lower(HMM, &data);
    let names: Vec<String> = model.columns().into_iter().map(|c| c.name).collect();
    assert_eq!(
        names.iter().filter(|n| *n == "theta").count(),
        4,
        "{names:?}"
    );
    check(&model, 4, |u| {
        let (theta1, j1) = simplex(&u[0..1]);
        let (theta2, j2) = simplex(&u[1..2]);
        let (mu, jm) = positive_ordered(&u[2..4]);
        let mut lp = j1 + j2 + jm + normal(mu[0], 3.0, 1.0) + normal(mu[1], 10.0, 1.0);
        lp += forward(y.len(), &[theta1, theta2], |t, k| normal(y[t], mu[k], 1.0));
        lp
    });
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos (g = 7, n = 9), enough for the constants of a Dirichlet density.
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

fn dirichlet(theta: &[f64], alpha: &[f64]) -> f64 {
    ln_gamma(alpha.iter().sum()) - alpha.iter().map(|a| ln_gamma(*a)).sum::<f64>()
        + theta
            .iter()
            .zip(alpha)
            .map(|(t, a)| (a - 1.0) * t.ln())
            .sum::<f64>()
}

const U: [f64; 4] = [0.7, 0.2, 1.5, 0.4];
const V: [f64; 4] = [2.0, 0.5, 3.5, 1.0];
const ALPHA: [[f64; 2]; 2] = [[4.0, 2.0], [1.5, 3.0]];

fn drive_data(extra: &[(&str, String)]) -> String {
    let mut pairs = vec![
        ("K", "2".to_string()),
        ("N", U.len().to_string()),
        ("u", list(&U)),
        ("v", list(&V)),
        (
            "alpha",
            format!("[{}, {}]", list(&ALPHA[0]), list(&ALPHA[1])),
        ),
    ];
    pairs.extend(extra.iter().cloned());
    data_json(&pairs)
}

#[test]
fn lower_hmm_drive_0_uses_dirichlet_rows_and_exponential_emissions() {
    let model = lower(HMM_DRIVE_0, &drive_data(&[]));
    check(&model, 6, |u| {
        let (theta1, j1) = simplex(&u[0..1]);
        let (theta2, j2) = simplex(&u[1..2]);
        let (phi, jp) = positive_ordered(&u[2..4]);
        let (lambda, jl) = positive_ordered(&u[4..6]);
        let mut lp = j1 + j2 + jp + jl;
        lp += dirichlet(&theta1, &ALPHA[0]) + dirichlet(&theta2, &ALPHA[1]);
        lp += normal(phi[0], 0.0, 1.0) + normal(phi[1], 3.0, 1.0);
        lp += normal(lambda[0], 0.0, 1.0) + normal(lambda[1], 3.0, 1.0);
        lp += forward(U.len(), &[theta1, theta2], |t, k| {
            exponential(U[t], phi[k]) + exponential(V[t], lambda[k])
        });
        lp
    });
}

#[test]
fn lower_hmm_drive_1_uses_ordered_emission_means() {
    let (tau, rho) = (0.6, 1.3);
    let model = lower(
        HMM_DRIVE_1,
        &drive_data(&[("tau", tau.to_string()), ("rho", rho.to_string())]),
    );
    check(&model, 6, |u| {
        let (theta1, j1) = simplex(&u[0..1]);
        let (theta2, j2) = simplex(&u[1..2]);
        let (phi, jp) = ordered(&u[2..4]);
        let (lambda, jl) = ordered(&u[4..6]);
        let mut lp = j1 + j2 + jp + jl;
        lp += dirichlet(&theta1, &ALPHA[0]) + dirichlet(&theta2, &ALPHA[1]);
        lp += normal(phi[0], 0.0, 1.0) + normal(phi[1], 3.0, 1.0);
        lp += normal(lambda[0], 0.0, 1.0) + normal(lambda[1], 3.0, 1.0);
        lp += forward(U.len(), &[theta1, theta2], |t, k| {
            normal(U[t], phi[k], tau) + normal(V[t], lambda[k], rho)
        });
        lp
    });
}

#[test]
fn lower_eight_schools_centered_samples_a_vector_of_parameters() {
    let y = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0];
    let sigma = [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0];
    let data = data_json(&[("J", "8".into()), ("y", list(&y)), ("sigma", list(&sigma))]);
    let model = lower(EIGHT_SCHOOLS_CENTERED, &data);
    check(&model, 10, |u| {
        let theta = &u[0..8];
        let mu = u[8];
        let (tau, j) = positive(u[9]);
        let mut lp = j + normal(mu, 0.0, 5.0) + cauchy(tau, 0.0, 5.0);
        for i in 0..8 {
            lp += normal(theta[i], mu, tau) + normal(y[i], theta[i], sigma[i]);
        }
        lp
    });
}

/// Lowering `model` (with parameter `mu`, vector `beta[2]`, data `y[3]`) fails at `line:column`
/// with a message containing `message`.
fn check_error(model: &str, at: &str, message: &str) {
    let source = format!(
        "data {{\n  vector[3] y;\n}}\nparameters {{\n  real mu;\n  vector[2] beta;\n}}\nmodel {{\n{model}\n}}\n"
    );
    let rendered = lower_error(&source, r#"{"y": [1, 2, 3]}"#);
    let first = rendered.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("test.stan:{at}: error: ")) && first.contains(message),
        "wanted {at}: ...{message}..., got:\n{rendered}"
    );
}

#[test]
fn lower_errors_name_the_construct_and_its_place() {
    check_error(
        "  if (mu > 0) mu ~ normal(0, 1);",
        "9:7",
        "an `if` whose condition depends on parameters is not supported yet",
    );
    check_error("  y ~ normal(nu, 1);", "9:14", "unknown name `nu`");
    check_error(
        "  vector[3] v = rep_vector(0, 2);",
        "9:17",
        "declared as a vector of 3 but initialised with a vector of 2",
    );
    check_error("  real mu = 1;", "9:8", "`mu` is already declared");
    check_error("  y[1] = mu;", "9:3", "cannot assign to `y`");
    check_error(
        "  vector[3] v;\n  v[1] = mu;\n  target += sum(v);",
        "11:17",
        "`v[2]` is used before it is assigned",
    );
    check_error(
        "  target += foo(mu);",
        "9:13",
        "the function `foo` with 1 argument(s) on values that depend on parameters is not supported yet",
    );
    check_error(
        "  mu ~ student_t(3, 0, 1) T[0, ];",
        "9:27",
        "truncation of `student_t` (its CDF has no IR form yet) is not supported yet",
    );
    check_error(
        "  mu ~ normal(beta[3], 1);",
        "9:20",
        "index 3 out of range 1..=2",
    );
    check_error("  y ~ normal(beta, 1);", "9:14", "does not match");
    check_error(
        "  mu ~ wobbly(0, 1);",
        "9:8",
        "the distribution `wobbly` is not supported yet",
    );
    check_error(
        "  for (i in 1:2) {\n    real mu2 = beta[i];\n    real mu2 = 1;\n  }",
        "11:10",
        "`mu2` is already declared",
    );
}

#[test]
fn lower_runs_control_flow_on_data() {
    // while, break, continue, if/else on data, compound and slice assignment, foreach.
    let source = "data {\n  int N;\n  vector[N] y;\n}\nparameters {\n  real mu;\n}\nmodel {\n  vector[N] m = rep_vector(0, N);\n  int i = 0;\n  while (1) {\n    i += 1;\n    if (i > N) break;\n    if (i == 2) continue;\n    m[i] = mu * i;\n  }\n  m[2] = mu;\n  m[1:2] += 1;\n  for (v in y) target += -0.5 * square(v - mu);\n  if (N > 100) reject(\"big\"); else y ~ normal(m, 1);\n}\n";
    let y = [0.5, -1.0, 2.0];
    let data = data_json(&[("N", "3".into()), ("y", list(&y))]);
    let model = lower(source, &data);
    check(&model, 1, |u| {
        let mu = u[0];
        let m = [mu + 1.0, mu + 1.0, 3.0 * mu];
        let mut lp = 0.0;
        for &v in &y {
            lp += -0.5 * (v - mu).powi(2);
        }
        for k in 0..3 {
            lp += normal(y[k], m[k], 1.0);
        }
        lp
    });
}

#[test]
fn lower_bounds_and_affine_transforms() {
    // A data-vector lower bound, a parameter-dependent upper bound, offset/multiplier, and an
    // array of vectors with `dims`.
    let source = "data {\n  vector[2] lb;\n}\nparameters {\n  vector<lower=lb>[2] a;\n  real<upper=a[1]> b;\n  real<offset=1, multiplier=3> c;\n  array[2] vector[2] d;\n}\nmodel {\n  a ~ normal(0, 1);\n  b ~ normal(0, 1);\n  c ~ normal(1, 3);\n  for (k in 1:2) d[k] ~ normal(k, 1);\n}\n";
    let lb = [-1.0, 0.5];
    let model = lower(source, &data_json(&[("lb", list(&lb))]));
    let names: Vec<String> = model.columns().into_iter().map(|c| c.name).collect();
    assert_eq!(names.iter().filter(|n| *n == "d").count(), 4, "{names:?}");
    check(&model, 8, |u| {
        let a = [lb[0] + u[0].exp(), lb[1] + u[1].exp()];
        let b = a[0] - u[2].exp();
        let c = 1.0 + 3.0 * u[3];
        let jac = u[0] + u[1] + u[2] + 3f64.ln();
        let mut lp = jac + normal(a[0], 0.0, 1.0) + normal(a[1], 0.0, 1.0);
        lp += normal(b, 0.0, 1.0) + normal(c, 1.0, 3.0);
        for k in 0..2 {
            for i in 0..2 {
                lp += normal(u[4 + 2 * k + i], (k + 1) as f64, 1.0);
            }
        }
        lp
    });
}

#[test]
fn lower_glm_and_constant_lccdf() {
    // diamonds' model block, on a small design matrix.
    let source = "data {\n  int<lower=1> N;\n  vector[N] Y;\n  int<lower=1> K;\n  matrix[N, K] Xc;\n  int prior_only;\n}\nparameters {\n  vector[K] b;\n  real Intercept;\n  real<lower=0> sigma;\n}\nmodel {\n  target += normal_lpdf(b | 0, 1);\n  target += student_t_lpdf(Intercept | 3, 8, 10);\n  target += student_t_lpdf(sigma | 3, 0, 10)\n            - 1 * student_t_lccdf(0 | 3, 0, 10);\n  if (!prior_only) {\n    target += normal_id_glm_lpdf(Y | Xc, Intercept, b, sigma);\n  }\n}\n";
    let x = [[0.5, -1.0], [1.5, 0.2], [-0.7, 0.9]];
    let y = [1.0, 2.5, -0.5];
    let data = data_json(&[
        ("N", "3".into()),
        ("Y", list(&y)),
        ("K", "2".into()),
        (
            "Xc",
            format!("[{}, {}, {}]", list(&x[0]), list(&x[1]), list(&x[2])),
        ),
        ("prior_only", "0".into()),
    ]);
    let model = lower(source, &data);
    let student_t = |v: f64, nu: f64, mu: f64, s: f64| {
        let z = (v - mu) / s;
        -s.ln() - (nu + 1.0) / 2.0 * (z * z / nu).ln_1p()
    };
    check(&model, 4, |u| {
        let b = [u[0], u[1]];
        let intercept = u[2];
        let (sigma, j) = positive(u[3]);
        let mut lp = j + normal(b[0], 0.0, 1.0) + normal(b[1], 0.0, 1.0);
        lp += student_t(intercept, 3.0, 8.0, 10.0) + student_t(sigma, 3.0, 0.0, 10.0);
        for n in 0..3 {
            let mu = intercept + x[n][0] * b[0] + x[n][1] * b[1];
            lp += normal(y[n], mu, sigma);
        }
        lp
    });
}

#[test]
fn lower_functions_and_densities_as_values() {
    let source = "data {\n  vector[3] x;\n  matrix[2, 3] M;\n  int n;\n  array[2] int k01;\n}\nparameters {\n  real a;\n  real<lower=0> b;\n  vector[3] v;\n}\nmodel {\n  target += exp(a) * 0.01 + log1p(b) + expm1(a / 4) + inv_logit(a) + log_inv_logit(a)\n            + log1m(inv_logit(a)) + log1m_inv_logit(a) + log1p_exp(a);\n  target += square(a) * -0.1 + sqrt(b) + inv(1 + b) + fabs(a) + pow(b, 1.5) + b ^ 0.5\n            + lgamma(b + 1);\n  target += fmax(a, b) + fmin(a, b) + log_sum_exp(a, b) + log_sum_exp(v)\n            + log_mix(inv_logit(a), a, b);\n  target += sum(softmax(v) .* x) + mean(v) + dot_product(v, x) + dot_self(v) * -0.5\n            + sum(rep_vector(a, 3)) + sum(to_vector(x) * b);\n  target += sum(cumulative_sum(v) .* x) + sum(M * v);\n  target += 0.5 * (normal_lpdf(a | 0, b) + lognormal_lpdf(b | a, 2) + cauchy_lpdf(a | 1, b)\n            + student_t_lpdf(a | 3, 0, b) + exponential_lpdf(b | 2) + gamma_lpdf(b | 2, 3)\n            + beta_lpdf(inv_logit(a) | 2, 3) + poisson_log_lpmf(n | a)\n            + bernoulli_logit_lpmf(k01 | v[1:2]) + inv_gamma_lpdf(b | 2, 1)\n            + double_exponential_lpdf(a | 0, b) + logistic_lpdf(a | 0, b));\n  target += normal_lpdf(a | 0, b) + lognormal_lpdf(b | a, 2) + cauchy_lpdf(a | 1, b)\n            + student_t_lpdf(a | 3, 0, b) + exponential_lpdf(b | 2) + gamma_lpdf(b | 2, 3)\n            + beta_lpdf(inv_logit(a) | 2, 3) + poisson_log_lpmf(n | a)\n            + bernoulli_logit_lpmf(k01 | v[1:2]) + inv_gamma_lpdf(b | 2, 1)\n            + double_exponential_lpdf(a | 0, b) + logistic_lpdf(a | 0, b);\n}\n";
    let x = [0.4, -1.1, 2.0];
    let m = [[1.0, 0.5, -0.3], [0.2, -0.8, 1.5]];
    let (n, k01) = (3.0, [1.0, 0.0]);
    let data = data_json(&[
        ("x", list(&x)),
        ("M", format!("[{}, {}]", list(&m[0]), list(&m[1]))),
        ("n", "3".into()),
        ("k01", "[1, 0]".into()),
    ]);
    let model = lower(source, &data);
    check(&model, 5, |u| {
        let a = u[0];
        let (b, j) = positive(u[1]);
        let v = &u[2..5];
        let p = logistic(a);
        let mut lp = j;
        lp += a.exp() * 0.01 + b.ln_1p() + (a / 4.0).exp_m1() + p + p.ln() + (1.0 - p).ln();
        lp += (1.0 - p).ln() + a.exp().ln_1p();
        lp += -0.1 * a * a + b.sqrt() + 1.0 / (1.0 + b) + a.abs() + b.powf(1.5) + b.sqrt();
        lp += ln_gamma(b + 1.0);
        lp += a.max(b) + a.min(b) + log_sum_exp(&[a, b]) + log_sum_exp(v);
        lp += (p * a.exp() + (1.0 - p) * b.exp()).ln();
        let total: f64 = v.iter().map(|e| e.exp()).sum();
        let dot: f64 = v.iter().zip(&x).map(|(p, q)| p * q).sum();
        lp += v
            .iter()
            .zip(&x)
            .map(|(e, w)| e.exp() / total * w)
            .sum::<f64>();
        lp += v.iter().sum::<f64>() / 3.0 + dot - 0.5 * v.iter().map(|e| e * e).sum::<f64>();
        lp += 3.0 * a + b * x.iter().sum::<f64>();
        let mut running = 0.0;
        for i in 0..3 {
            running += v[i];
            lp += running * x[i];
        }
        lp += m
            .iter()
            .flat_map(|row| row.iter().zip(v).map(|(p, q)| p * q))
            .sum::<f64>();
        let z = a / b;
        let densities = normal(a, 0.0, b) + normal(b.ln(), a, 2.0) - b.ln()
            + cauchy(a, 1.0, b)
            + (ln_gamma(2.0)
                - ln_gamma(1.5)
                - 0.5 * (3.0 * std::f64::consts::PI).ln()
                - b.ln()
                - 2.0 * (z * z / 3.0).ln_1p())
            + exponential(b, 2.0)
            + (2.0 * 3f64.ln() - ln_gamma(2.0) + b.ln() - 3.0 * b)
            + (ln_gamma(5.0) - ln_gamma(2.0) - ln_gamma(3.0) + p.ln() + 2.0 * (1.0 - p).ln())
            + (n * a - a.exp() - ln_gamma(n + 1.0))
            + (0..2)
                .map(|i| k01[i] * v[i] - v[i].exp().ln_1p())
                .sum::<f64>()
            + (-ln_gamma(2.0) - 3.0 * b.ln() - 1.0 / b)
            + (-std::f64::consts::LN_2 - b.ln() - a.abs() / b)
            + (-z - b.ln() - 2.0 * (-z).exp().ln_1p());
        lp + 1.5 * densities
    });
}

#[test]
fn lower_repeated_terms_count_once_per_iteration() {
    let source = "parameters {\n  real mu;\n}\nmodel {\n  for (i in 1:3) {\n    target += -0.5 * square(mu);\n    mu ~ normal(1, 2);\n  }\n}\n";
    let model = lower(source, "{}");
    check(&model, 1, |u| {
        3.0 * (-0.5 * u[0] * u[0] + normal(u[0], 1.0, 2.0))
    });
}

#[test]
fn lower_vectorises_a_loop_that_fills_a_vector() {
    let source = "data {\n  int N;\n  vector[N] x;\n  vector[N] y;\n}\nparameters {\n  real a;\n  real b;\n  real<lower=0> s;\n}\ntransformed parameters {\n  vector[N] mu;\n  for (n in 1:N) mu[n] = a + b * x[n];\n}\nmodel {\n  y ~ normal(mu, s);\n}\n";
    let (x, y) = ([0.5, 1.5, -2.0, 3.0], [1.0, 2.0, -1.0, 4.5]);
    let data = data_json(&[("N", "4".into()), ("x", list(&x)), ("y", list(&y))]);
    let ir = try_lower(source, &data).unwrap();
    let mu = &ir
        .transformed
        .iter()
        .find(|t| t.name == "mu")
        .unwrap()
        .value;
    assert!(
        !matches!(mu, sampler::Expr::Concat(_)),
        "mu is not vectorised: {mu:?}"
    );
    let model = lower(source, &data);
    check(&model, 3, |u| {
        let (a, b) = (u[0], u[1]);
        let (s, j) = positive(u[2]);
        j + (0..4).map(|n| normal(y[n], a + b * x[n], s)).sum::<f64>()
    });
}

#[test]
fn lower_refuses_multivariate_cases_it_cannot_write_out() {
    check_error(
        "  mu ~ categorical(beta);",
        "9:3",
        "a `categorical` outcome that depends on parameters is not supported yet",
    );
    let source = "data {\n  array[2] vector[2] y;\n  matrix[2, 2] S;\n}\nparameters {\n  real<lower=0> tau;\n  vector[2] mu;\n}\nmodel {\n  y ~ multi_normal(mu, S * tau * tau);\n}\n";
    let data = r#"{"y": [[1, 2], [0, 1]], "S": [[2, 0.5], [0.5, 1]]}"#;
    let rendered = lower_error(source, data);
    assert!(
        rendered.starts_with("test.stan:10:24: error: ")
            && rendered.contains("a `multi_normal` covariance that depends on parameters"),
        "{rendered}"
    );
}

#[test]
fn lower_categorical_and_ordered_logistic_pick_terms_by_data() {
    let source = "data {\n  array[5] int y;\n  vector[5] x;\n}\nparameters {\n  vector[3] beta;\n  real b;\n  ordered[2] c;\n}\nmodel {\n  y ~ categorical_logit(beta);\n  y ~ ordered_logistic(b * x, c);\n}\n";
    let (y, x) = ([1usize, 3, 2, 2, 3], [0.5, -1.0, 2.0, 0.1, 1.5]);
    let data = data_json(&[("y", "[1, 3, 2, 2, 3]".into()), ("x", list(&x))]);
    let model = lower(source, &data);
    check(&model, 6, |u| {
        let beta = &u[0..3];
        let b = u[3];
        let (c, j) = ordered(&u[4..6]);
        let lse = log_sum_exp(beta);
        let mut lp = j;
        for n in 0..5 {
            lp += beta[y[n] - 1] - lse;
            let eta = b * x[n];
            let p = match y[n] {
                1 => 1.0 - logistic(eta - c[0]),
                2 => logistic(eta - c[0]) - logistic(eta - c[1]),
                _ => logistic(eta - c[1]),
            };
            lp += p.ln();
        }
        lp
    });
}

#[test]
fn lower_refuses_a_local_whose_element_count_overflows() {
    let source = "parameters {\n  real x;\n}\nmodel {\n  array[100000, 100000] real big;\n  x ~ normal(0, 1);\n}\n";
    let program = crate::parse(source).expect("parses");
    let data = crate::read_data(&program, "{}").expect("no data");
    let err = crate::lower(&program, &data, "big").expect_err("too large");
    assert!(err.message.contains("more than"), "{err}");
    assert_eq!(crate::line_column(source, err.span.start).0, 5, "{err}");
}
