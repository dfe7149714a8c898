//! An evaluation of the log density and a NUTS transition allocate nothing: their buffers are
//! allocated once per chain (counted by the test binary's global allocator, per thread).

use sampler::nuts::{self, NutsOptions, Point, Workspace};
use sampler::{ChainId, ChainRng, LogDensity, Metric, Seed};

use crate::allocations_on_this_thread;
use crate::common::{BENCH_MODELS, bench_model};

#[test]
fn log_density_and_transitions_do_not_allocate() {
    // The counter sees allocations at all.
    let before = allocations_on_this_thread();
    std::hint::black_box(vec![1u8; 16]);
    assert!(
        allocations_on_this_thread() > before,
        "the counting allocator is not installed"
    );

    for name in BENCH_MODELS {
        let model = bench_model(name);
        let dim = model.dim();
        let mut density = model.evaluator();
        let theta: Vec<f64> = (0..dim).map(|i| 0.1 * (i as f64 % 7.0) - 0.3).collect();
        let mut grad = vec![0.0; dim];
        density.logp_grad(&theta, &mut grad);
        let before = allocations_on_this_thread();
        for _ in 0..100 {
            density.logp_grad(&theta, &mut grad);
        }
        assert_eq!(
            allocations_on_this_thread() - before,
            0,
            "{name}: logp_grad allocated"
        );

        let metric = Metric::unit(dim);
        let options = NutsOptions {
            max_depth: 10,
            max_energy_error: 1000.0,
        };
        let mut rng = ChainRng::new(Seed(5), ChainId(0));
        let mut workspace = Workspace::new(dim, 10);
        let mut current = Point::new(dim);
        current.q.copy_from_slice(&theta);
        nuts::evaluate(&mut density, &mut current);
        let before = allocations_on_this_thread();
        for _ in 0..20 {
            nuts::transition(
                &mut density,
                &metric,
                0.05,
                &options,
                &mut rng,
                &mut current,
                &mut workspace,
            );
        }
        assert_eq!(
            allocations_on_this_thread() - before,
            0,
            "{name}: a NUTS transition allocated"
        );
    }
}

/// The IR v2 instructions and lowered transforms (concat, log_sum_exp, lgamma, max/min,
/// elem/slice, simplex, ordered, expression bounds) evaluate without allocating too.
#[test]
fn v2_log_density_does_not_allocate() {
    use sampler::{CheckedModel, Constraint, Dist, Expr, Limits, ModelBuilder};

    let mut m = ModelBuilder::new("v2");
    let s = m.param_with("s", Some(4), Constraint::Simplex);
    let o = m.param_with("o", Some(3), Constraint::Ordered);
    let a = m.param_constrained("a", Constraint::Positive);
    let b = m.param_bounded("b", Some(2), Some(-&a), Some(a.exp()));
    let t = m.transformed(
        "t",
        Expr::concat([s.slice(1, 2), o.elem(0), b.clone()]).log_sum_exp(),
    );
    m.sample(&o, Dist::normal(0.0, 1.0));
    m.factor(t + a.lgamma() + b.max(0.2).sum() + b.min(&a).sum());
    let model = CheckedModel::new(m.build(), &Limits::default()).expect("valid");
    let dim = model.dim();
    let mut density = model.evaluator();
    let theta: Vec<f64> = (0..dim).map(|i| 0.1 * (i as f64 % 7.0) - 0.3).collect();
    let mut grad = vec![0.0; dim];
    let lp = density.logp_grad(&theta, &mut grad);
    assert!(lp.is_finite());
    let mut out = vec![0.0; density.n_outputs()];
    density.write_outputs(&theta, &mut out);
    let before = allocations_on_this_thread();
    for _ in 0..100 {
        density.logp_grad(&theta, &mut grad);
        density.write_outputs(&theta, &mut out);
    }
    assert_eq!(
        allocations_on_this_thread() - before,
        0,
        "v2: logp_grad allocated"
    );
}
