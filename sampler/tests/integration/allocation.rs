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
