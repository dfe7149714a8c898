//! Leapfrog invariants and transition bookkeeping on a known Gaussian.

use super::*;
use crate::builder::ModelBuilder;
use crate::ir::Dist;
use crate::rng::{ChainId, Seed};
use crate::validate::{CheckedModel, Limits};

fn gaussian(dim: usize) -> crate::eval::Evaluator {
    let mut m = ModelBuilder::new("gaussian");
    let x = m.vector_param("x", dim);
    let scales: Vec<f64> = (0..dim).map(|i| 0.5 + i as f64).collect();
    let s = m.data_vector("s", scales);
    m.sample(&x, Dist::normal(0.0, &s));
    CheckedModel::new(m.build(), &Limits::default())
        .unwrap()
        .evaluator()
}

#[test]
fn leapfrog_is_reversible_and_nearly_conserves_energy() {
    let mut density = gaussian(4);
    let metric = Metric::Diag(vec![0.3, 1.0, 2.0, 5.0]);
    let mut point = Point::new(4);
    point.q.copy_from_slice(&[0.4, -1.0, 2.0, 0.1]);
    point.p.copy_from_slice(&[1.0, 0.5, -0.3, 0.2]);
    evaluate(&mut density, &mut point);
    let start = point.clone();
    let h0 = hamiltonian(&metric, &point);
    let mut velocity = vec![0.0; 4];
    for _ in 0..20 {
        leapfrog(&mut density, &metric, &mut point, 0.1, &mut velocity);
    }
    assert!((hamiltonian(&metric, &point) - h0).abs() < 1e-2);
    // Reverse the momentum, integrate back, reverse again: the starting point.
    point.p.iter_mut().for_each(|p| *p = -*p);
    for _ in 0..20 {
        leapfrog(&mut density, &metric, &mut point, 0.1, &mut velocity);
    }
    for (a, b) in point.q.iter().zip(&start.q) {
        assert!((a - b).abs() < 1e-12);
    }
    for (a, b) in point.p.iter().zip(&start.p) {
        assert!((a + b).abs() < 1e-12);
    }
}

#[test]
fn transitions_are_deterministic_and_count_their_steps() {
    let run = || {
        let mut density = gaussian(5);
        let metric = Metric::unit(5);
        let options = NutsOptions {
            max_depth: 10,
            max_energy_error: 1000.0,
        };
        let mut rng = ChainRng::new(Seed(9), ChainId(2));
        let mut workspace = Workspace::new(5, 10);
        let mut current = Point::new(5);
        evaluate(&mut density, &mut current);
        let mut infos = Vec::new();
        for _ in 0..50 {
            infos.push(transition(
                &mut density,
                &metric,
                0.3,
                &options,
                &mut rng,
                &mut current,
                &mut workspace,
            ));
        }
        (infos, current.q)
    };
    let (infos, last) = run();
    assert_eq!(run(), (infos.clone(), last));
    for info in &infos {
        // A trajectory of depth k has 2^k leapfrog steps unless it stopped inside a subtree.
        assert!(info.n_leapfrog >= 1 && info.n_leapfrog < 1 << (info.depth + 1));
        assert!((0.0..=1.0).contains(&info.accept_stat));
        assert!(!info.divergent);
    }
}

#[test]
fn a_huge_step_diverges() {
    let mut density = gaussian(3);
    let options = NutsOptions {
        max_depth: 10,
        max_energy_error: 1000.0,
    };
    let mut rng = ChainRng::new(Seed(1), ChainId(0));
    let mut workspace = Workspace::new(3, 10);
    let mut current = Point::new(3);
    current.q.copy_from_slice(&[0.1, 0.2, 0.3]);
    evaluate(&mut density, &mut current);
    let before = current.q.clone();
    let info = transition(
        &mut density,
        &Metric::unit(3),
        1e3,
        &options,
        &mut rng,
        &mut current,
        &mut workspace,
    );
    assert!(info.divergent);
    assert_eq!(info.depth, 0);
    assert_eq!(info.index_in_trajectory, 0);
    assert_eq!(
        current.q, before,
        "a divergent first step must leave the chain where it was"
    );
}
