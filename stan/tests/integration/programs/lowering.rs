//! Lowering posteriordb programs with their data, checked against the same models written by
//! hand with `sampler::ModelBuilder`, against finite differences, and (one) against
//! posteriordb's reference posterior; `by_hand` checks more programs against log densities
//! written out in Rust.

mod by_hand;

use std::path::Path;

use sampler::{
    CheckedModel, Constraint, Dist, Expr, Limits, LogDensity, ModelBuilder, NoObserver,
    SamplerSettings, Seed,
};

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Parses `source` (named `name` in errors), reads `data` and lowers; the rendered error when
/// one step fails.
fn try_lower_source(name: &str, source: &str, data: &str) -> Result<sampler::Model, String> {
    let file = format!("{name}.stan");
    let program = stan::parse(source).map_err(|err| err.render(&file, source))?;
    let data = stan::read_data(&program, data).map_err(|err| format!("{name}: {err}"))?;
    stan::lower(&program, &data, name).map_err(|err| err.render(&file, source))
}

/// [`try_lower_source`], checked by the IR; panics with the rendered error.
fn lower_source(name: &str, source: &str, data: &str) -> CheckedModel {
    let model = try_lower_source(name, source, data).unwrap_or_else(|err| panic!("{err}"));
    CheckedModel::new(model, &Limits::default())
        .unwrap_or_else(|err| panic!("{name}: the IR refuses the lowered model: {err}"))
}

/// Lowers `tests/programs/{program_name}.stan` with `tests/data/{data_name}.json`.
fn lower(program_name: &str, data_name: &str) -> CheckedModel {
    let source = read(&format!("programs/{program_name}.stan"));
    lower_source(
        program_name,
        &source,
        &read(&format!("data/{data_name}.json")),
    )
}

fn json(data_name: &str) -> serde_json::Value {
    serde_json::from_str(&read(&format!("data/{data_name}.json"))).unwrap()
}

fn vector(data: &serde_json::Value, key: &str) -> Vec<f64> {
    data[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// `beta[k]` (1-based) written independently of the lowering: a dot product with a one-hot
/// data vector.
fn element(m: &mut ModelBuilder, beta: &Expr, k: usize, n: usize) -> Expr {
    let mut one_hot = vec![0.0; n];
    one_hot[k - 1] = 1.0;
    let e = m.data_vector(&format!("e{k}"), one_hot);
    beta.dot(e)
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

/// At `count` points: the log density is finite and passes `compare(theta, logp)`, and the
/// gradient equals central finite differences.
fn check_points(lowered: &CheckedModel, count: usize, mut compare: impl FnMut(&[f64], f64)) {
    let name = lowered.name();
    let mut eval = lowered.evaluator();
    for theta in points(lowered.dim(), count) {
        let mut grad = vec![0.0; theta.len()];
        let lp = eval.logp_grad(&theta, &mut grad);
        assert!(lp.is_finite(), "{name}: logp {lp} at {theta:?}");
        compare(&theta, lp);
        for i in 0..theta.len() {
            let h = 1e-6 * theta[i].abs().max(1.0);
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (eval.logp(&up) - eval.logp(&down)) / (2.0 * h);
            assert!(
                // Rounding in `logp` (relative 1e-15 or so) is amplified by 1 / h in the difference.
                (grad[i] - fd).abs() <= 1e-5 * fd.abs().max(1.0) + 1e-12 * lp.abs() / h,
                "{name}: d/dtheta[{i}] {} vs finite difference {fd} at {theta:?}",
                grad[i]
            );
        }
    }
}

/// The lowered model's log density equals the hand-written one at random points, and its
/// gradient equals central finite differences.
fn check(lowered: &CheckedModel, by_hand: ModelBuilder) {
    let by_hand = CheckedModel::new(by_hand.build(), &Limits::default()).unwrap();
    assert_eq!(lowered.dim(), by_hand.dim());
    let mut b = by_hand.evaluator();
    check_points(lowered, 4, |theta, lp| {
        let expected = b.logp(theta);
        assert!(
            (lp - expected).abs() <= 1e-9 * expected.abs().max(1.0),
            "{}: logp {lp} vs by hand {expected}",
            lowered.name()
        );
    });
}

/// The lowered log density minus `by_hand` is the same constant at every point (`~` drops
/// constants), and the gradient matches central finite differences.
fn check_up_to_constant(model: &CheckedModel, dim: usize, by_hand: impl Fn(&[f64]) -> f64) {
    assert_eq!(model.dim(), dim, "unconstrained dimension");
    let mut offset = None;
    check_points(model, 5, |theta, lp| {
        let expected = by_hand(theta);
        let diff = lp - expected;
        let first = *offset.get_or_insert(diff);
        assert!(
            (diff - first).abs() <= 1e-8 * expected.abs().max(1.0),
            "logp {lp} vs by hand {expected} (constant {first}, here {diff}) at {theta:?}"
        );
    });
}

#[test]
fn lowering_kidscore_momiq() {
    let data = json("kidiq");
    let mut m = ModelBuilder::new("by_hand");
    let kid_score = m.data_vector("kid_score", vector(&data, "kid_score"));
    let mom_iq = m.data_vector("mom_iq", vector(&data, "mom_iq"));
    let beta = m.vector_param("beta", 2);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    m.sample(&sigma, Dist::cauchy(0.0, 2.5));
    let mu = element(&mut m, &beta, 1, 2) + element(&mut m, &beta, 2, 2) * &mom_iq;
    m.sample(&kid_score, Dist::normal(mu, &sigma));
    check(&lower("kidscore_momiq", "kidiq"), m);
}

#[test]
fn lowering_earn_height() {
    let data = json("earnings");
    let mut m = ModelBuilder::new("by_hand");
    let earn = m.data_vector("earn", vector(&data, "earn"));
    let height = m.data_vector("height", vector(&data, "height"));
    let beta = m.vector_param("beta", 2);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let mu = element(&mut m, &beta, 1, 2) + element(&mut m, &beta, 2, 2) * &height;
    m.sample(&earn, Dist::normal(mu, &sigma));
    check(&lower("earn_height", "earnings"), m);
}

#[test]
fn lowering_logearn_interaction_runs_transformed_data_on_the_host() {
    let data = json("earnings");
    let mut m = ModelBuilder::new("by_hand");
    let earn = vector(&data, "earn");
    let (height, male) = (vector(&data, "height"), vector(&data, "male"));
    let log_earn = m.data_vector("log_earn", earn.iter().map(|x| x.ln()).collect());
    let inter = m.data_vector(
        "inter",
        height.iter().zip(&male).map(|(h, s)| h * s).collect(),
    );
    let height = m.data_vector("height", height);
    let male = m.data_vector("male", male);
    let beta = m.vector_param("beta", 4);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let mu = element(&mut m, &beta, 1, 4)
        + element(&mut m, &beta, 2, 4) * &height
        + element(&mut m, &beta, 3, 4) * &male
        + element(&mut m, &beta, 4, 4) * &inter;
    m.sample(&log_earn, Dist::normal(mu, &sigma));
    check(&lower("logearn_interaction", "earnings"), m);
}

#[test]
fn lowering_mesquite() {
    let data = json("mesquite");
    let mut m = ModelBuilder::new("by_hand");
    let weight = m.data_vector("weight", vector(&data, "weight"));
    let beta = m.vector_param("beta", 7);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    let mut mu = element(&mut m, &beta, 1, 7);
    for (k, key) in [
        "diam1",
        "diam2",
        "canopy_height",
        "total_height",
        "density",
        "group",
    ]
    .into_iter()
    .enumerate()
    {
        let x = m.data_vector(key, vector(&data, key));
        mu = mu + element(&mut m, &beta, k + 2, 7) * x;
    }
    m.sample(&weight, Dist::normal(mu, &sigma));
    check(&lower("mesquite", "mesquite"), m);
}

#[test]
fn lowering_kilpisjarvi() {
    let data = json("kilpisjarvi_mod");
    let scalar = |key: &str| data[key].as_f64().unwrap();
    let mut m = ModelBuilder::new("by_hand");
    let x = m.data_vector("x", vector(&data, "x"));
    let y = m.data_vector("y", vector(&data, "y"));
    let alpha = m.param("alpha");
    let beta = m.param("beta");
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    m.sample(&alpha, Dist::normal(scalar("pmualpha"), scalar("psalpha")));
    m.sample(&beta, Dist::normal(scalar("pmubeta"), scalar("psbeta")));
    m.sample(&y, Dist::normal(&alpha + &beta * &x, &sigma));
    check(&lower("kilpisjarvi", "kilpisjarvi_mod"), m);
}

#[test]
fn lowering_eight_schools_noncentered_reports_theta() {
    let data = json("eight_schools");
    let mut m = ModelBuilder::new("by_hand");
    let y = m.data_vector("y", vector(&data, "y"));
    let sigma = m.data_vector("sigma", vector(&data, "sigma"));
    let theta_trans = m.vector_param("theta_trans", 8);
    let mu = m.param("mu");
    let tau = m.param_constrained("tau", Constraint::Positive);
    let theta = m.transformed("theta", &theta_trans * &tau + &mu);
    m.sample(&theta_trans, Dist::normal(0.0, 1.0));
    m.sample(&y, Dist::normal(&theta, &sigma));
    m.sample(&mu, Dist::normal(0.0, 5.0));
    m.sample(&tau, Dist::cauchy(0.0, 5.0));
    let lowered = lower("eight_schools_noncentered", "eight_schools");
    let names: Vec<String> = lowered.columns().into_iter().map(|c| c.name).collect();
    assert_eq!(
        names.iter().filter(|n| *n == "theta").count(),
        8,
        "{names:?}"
    );
    check(&lowered, m);
}

#[test]
fn lowering_blr_uses_the_data_matrix() {
    let data = json("sblri");
    let rows: Vec<Vec<f64>> = data["X"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect();
    let d = rows[0].len();
    let mut m = ModelBuilder::new("by_hand");
    let x = m.data_matrix("X", rows);
    let y = m.data_vector("y", vector(&data, "y"));
    let beta = m.vector_param("beta", d);
    let sigma = m.param_constrained("sigma", Constraint::Positive);
    m.sample(&beta, Dist::normal(0.0, 10.0));
    m.sample(&sigma, Dist::normal(0.0, 10.0));
    m.sample(&y, Dist::normal(x.matvec(&beta), &sigma));
    check(&lower("blr", "sblri"), m);
}

#[test]
fn lowering_refuses_what_is_not_supported_with_a_location() {
    let source = "parameters {\n  real x;\n}\nmodel {\n  while (x > 0) x ~ normal(0, 1);\n}\n";
    let program = stan::parse(source).unwrap();
    let err = stan::lower(&program, &stan::Data::default(), "loop").unwrap_err();
    let rendered = err.render("loop.stan", source);
    assert!(
        rendered.starts_with("loop.stan:5:10: error: a condition must not depend on parameters"),
        "{rendered}"
    );
}

/// NUTS on the lowered kidscore_momiq against posteriordb's reference mean, within 4 combined
/// MCSE (ours from the draws' own ESS, `sampler::diagnostics::mcse_mean`).
#[test]
fn lowering_kidscore_momiq_matches_the_reference_posterior() {
    let model = lower("kidscore_momiq", "kidiq");
    let summary: serde_json::Value =
        serde_json::from_str(&read("data/kidiq-kidscore_momiq.summary.json")).unwrap();
    let settings = SamplerSettings {
        num_warmup: 500,
        num_draws: 500,
        ..SamplerSettings::default()
    };
    let traces = sampler::sample(&model, &settings, Seed(23), 4, &NoObserver).unwrap();
    let n_columns = traces[0].n_columns;
    for (j, name) in ["beta[1]", "beta[2]", "sigma"].iter().enumerate() {
        let chains: Vec<Vec<f64>> = traces
            .iter()
            .map(|t| t.draws.chunks(n_columns).map(|row| row[j]).collect())
            .collect();
        let slices: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
        let n = chains.iter().map(Vec::len).sum::<usize>() as f64;
        let mean = chains.iter().flatten().sum::<f64>() / n;
        let reference = summary["mean"][j].as_f64().unwrap();
        let mcse_ref = summary["mcse_mean"][j].as_f64().unwrap();
        let mcse_ours = sampler::diagnostics::mcse_mean(&slices);
        let z = (mean - reference) / (mcse_ours.powi(2) + mcse_ref.powi(2)).sqrt();
        assert!(
            z.abs() < 4.0,
            "{name}: mean {mean} vs reference {reference} (z = {z})"
        );
    }
}
