//! The benchmark's parity gate, without Python: every peer framework's log density and gradient
//! (saved by `bench/run.py` in `bench/fixtures/parity/<framework>/<model>.json`, at the 20
//! points of `sampler/tests/fixtures/stan_parity/<model>.json`) must equal our evaluator's up to
//! one constant per model, or the benchmark compares different models.

use sampler::LogDensity;
use serde::Deserialize;

use crate::common::{BENCH_MODELS, bench_model, repo_root};

/// The frameworks the benchmark compares us with (`bench/common.py`, `PEERS`).
const PEERS: [&str; 4] = ["stan", "nutpie", "pymc", "numpyro"];

/// Relative tolerance on (theirs - ours) - constant, as `bench/parity.py`'s `LP_TOL`.
const LP_TOL: f64 = 1e-8;
/// Tolerance on |theirs - ours| / max(1, |ours|) per gradient component (`GRAD_TOL`).
const GRAD_TOL: f64 = 1e-7;

#[derive(Deserialize)]
struct Points {
    dim: usize,
    points: Vec<Vec<f64>>,
}

#[derive(Deserialize)]
struct FrameworkValues {
    framework: String,
    model: String,
    points_file: String,
    log_density: Vec<f64>,
    gradient: Option<Vec<Vec<f64>>>,
}

fn read_json<T: for<'de> Deserialize<'de>>(relative: &str) -> T {
    let path = repo_root().join(relative);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Checks one framework's saved values for one model against our evaluator.
fn check(framework: &str, name: &str) {
    let values: FrameworkValues =
        read_json(&format!("bench/fixtures/parity/{framework}/{name}.json"));
    assert_eq!(
        (values.framework.as_str(), values.model.as_str()),
        (framework, name)
    );
    let points: Points = read_json(&values.points_file);
    let model = bench_model(name);
    assert_eq!(model.dim(), points.dim, "{framework}/{name}: dimension");
    assert_eq!(points.points.len(), 20, "{framework}/{name}: points");
    assert_eq!(
        values.log_density.len(),
        points.points.len(),
        "{framework}/{name}: values"
    );

    let mut evaluator = model.evaluator();
    let mut grad = vec![0.0; points.dim];
    let mut offset = None;
    for (k, point) in points.points.iter().enumerate() {
        let ours = evaluator.logp_grad(point, &mut grad);
        let theirs = values.log_density[k];
        let difference = theirs - ours;
        let offset = *offset.get_or_insert(difference);
        assert!(
            (difference - offset).abs() <= LP_TOL * (1.0 + ours.abs()),
            "{framework}/{name}, point {k}: log density {theirs} vs ours {ours}: differs by \
             {difference}, at point 0 by {offset}"
        );
        if let Some(gradients) = &values.gradient {
            for (i, (&g_ours, &g_theirs)) in grad.iter().zip(&gradients[k]).enumerate() {
                assert!(
                    (g_ours - g_theirs).abs() <= GRAD_TOL * g_ours.abs().max(1.0),
                    "{framework}/{name}, point {k}: d/dtheta[{i}] is {g_theirs}, ours {g_ours}"
                );
            }
        }
    }
}

#[test]
fn stan_samples_our_benchmark_densities() {
    for name in BENCH_MODELS {
        check("stan", name);
    }
}

#[test]
fn nutpie_samples_our_benchmark_densities() {
    for name in BENCH_MODELS {
        check("nutpie", name);
    }
}

#[test]
fn pymc_samples_our_benchmark_densities() {
    for name in BENCH_MODELS {
        check("pymc", name);
    }
}

#[test]
fn numpyro_samples_our_benchmark_densities() {
    for name in BENCH_MODELS {
        check("numpyro", name);
    }
}

#[test]
fn every_peer_has_a_fixture_per_model() {
    let missing: Vec<String> = PEERS
        .iter()
        .flat_map(|framework| {
            BENCH_MODELS
                .iter()
                .map(move |name| format!("{framework}/{name}"))
        })
        .filter(|pair| {
            !repo_root()
                .join(format!("bench/fixtures/parity/{pair}.json"))
                .exists()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "no parity fixture for {missing:?}: run `.venv-bench/bin/python bench/run.py --parity-only`"
    );
}
