//! Log density and gradient of every benchmark model against Stan's, at 20 random
//! unconstrained points per model (fixtures written by `scripts/stan_parity_fixtures.py` with
//! PyStan 3.10 / Stan 2.35). Log densities may differ by one constant per model: Stan's `~`
//! and ours drop different constant terms; Jacobians must agree exactly.

use sampler::LogDensity;
use serde::Deserialize;

use crate::common::{BENCH_MODELS, bench_model, repo_root};

#[derive(Deserialize)]
struct Fixture {
    dim: usize,
    points: Vec<Vec<f64>>,
    log_density: Vec<f64>,
    gradient: Vec<Vec<f64>>,
}

fn check(name: &str) {
    let path = repo_root().join(format!("sampler/tests/fixtures/stan_parity/{name}.json"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let fixture: Fixture = serde_json::from_str(&text).unwrap();
    let model = bench_model(name);
    assert_eq!(model.dim(), fixture.dim, "{name}: dimension");
    assert_eq!(fixture.points.len(), 20);
    let mut evaluator = model.evaluator();
    let mut grad = vec![0.0; fixture.dim];
    let mut offset = None;
    for (k, point) in fixture.points.iter().enumerate() {
        let lp = evaluator.logp_grad(point, &mut grad);
        let stan_lp = fixture.log_density[k];
        let difference = lp - stan_lp;
        let offset = *offset.get_or_insert(difference);
        assert!(
            (difference - offset).abs() <= 1e-9 * (1.0 + stan_lp.abs()),
            "{name}, point {k}: log density {lp} vs Stan {stan_lp}: differs by {difference}, other points by {offset}"
        );
        for (i, (&ours, &stan)) in grad.iter().zip(&fixture.gradient[k]).enumerate() {
            assert!(
                (ours - stan).abs() <= 1e-9 * stan.abs().max(1.0),
                "{name}, point {k}: d/dtheta[{i}] is {ours}, Stan says {stan}"
            );
        }
    }
}

#[test]
fn every_benchmark_model_matches_stan() {
    for name in BENCH_MODELS {
        check(name);
    }
}
