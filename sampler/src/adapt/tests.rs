//! Stan's window schedule and the adaptation estimators.

use super::windowed::{Welford, Windows};
use super::*;

/// Ends of the slow windows for a given warmup length.
fn window_ends(num_warmup: u64) -> Vec<u64> {
    let mut windows = Windows::new(num_warmup, WindowOptions::default());
    let mut ends = Vec::new();
    for iteration in 0..num_warmup {
        if windows.at_window_end() {
            ends.push(iteration);
        }
        windows.advance_for_test();
    }
    ends
}

#[test]
fn stan_windows_for_1000_warmup_iterations() {
    // Stan: 75 step-size iterations, windows of 25, 50, 100, 200 and a stretched last one of
    // 500 ending at iteration 949, then a 50-iteration terminal buffer.
    assert_eq!(window_ends(1000), vec![99, 149, 249, 449, 949]);
}

#[test]
fn short_warmup_uses_proportional_buffers() {
    // 100 iterations: 15 / 75 / 10, a single slow window ending at 89.
    assert_eq!(window_ends(100), vec![89]);
    assert_eq!(window_ends(19), Vec::<u64>::new());
}

#[test]
fn welford_matches_two_pass_covariance() {
    let xs = [
        [1.0, 2.0],
        [0.5, -1.0],
        [2.5, 0.0],
        [-1.0, 1.5],
        [0.0, 0.25],
    ];
    let mut dense = Welford::new(2, true);
    let mut diag = Welford::new(2, false);
    for x in &xs {
        dense.add(x);
        diag.add(x);
    }
    let n = xs.len() as f64;
    let mean = [
        xs.iter().map(|x| x[0]).sum::<f64>() / n,
        xs.iter().map(|x| x[1]).sum::<f64>() / n,
    ];
    for i in 0..2 {
        for j in 0..2 {
            let two_pass: f64 = xs.iter().map(|x| (x[i] - mean[i]) * (x[j] - mean[j])).sum();
            assert!((dense.sum_squares()[i * 2 + j] - two_pass).abs() < 1e-12);
            if i == j {
                assert!((diag.sum_squares()[i] - two_pass).abs() < 1e-12);
            }
        }
    }
}

#[test]
fn dual_averaging_moves_towards_the_target() {
    let mut dual = DualAverage::new(DualAverageOptions::default(), 1.0, f64::INFINITY);
    // Acceptance always too low: the step size must shrink.
    let mut step = 1.0;
    for _ in 0..50 {
        step = dual.update(0.2);
    }
    assert!(step < 0.1, "step {step}");
    // nutpie's cap.
    let mut capped = DualAverage::new(DualAverageOptions::default(), 1.0, std::f64::consts::PI);
    for _ in 0..50 {
        capped.update(1.0);
    }
    assert!(capped.current() <= std::f64::consts::PI + 1e-12);
}

#[test]
fn welford_merge_equals_adding_one_by_one() {
    let rows: Vec<[f64; 2]> = (0..23)
        .map(|k| {
            let x = f64::from(k);
            [(1.7 * x).sin() * 3.0 + 10.0, x * x - 4.0]
        })
        .collect();
    for dense in [false, true] {
        let welford = |rows: &[[f64; 2]]| {
            let mut w = Welford::new(2, dense);
            for row in rows {
                w.add(row);
            }
            w
        };
        let all = welford(&rows);
        for split in [0, 1, 9, 22, 23] {
            let mut merged = welford(&rows[..split]);
            // The second part as moments computed elsewhere (two-pass), for the diagonal.
            let rest = &rows[split..];
            let part = if dense || rest.is_empty() {
                welford(rest)
            } else {
                let n = rest.len() as f64;
                let mean: Vec<f64> = (0..2)
                    .map(|j| rest.iter().map(|r| r[j]).sum::<f64>() / n)
                    .collect();
                let m2 = (0..2)
                    .map(|j| rest.iter().map(|r| (r[j] - mean[j]).powi(2)).sum())
                    .collect();
                Welford::from_moments(rest.len() as u64, mean, m2)
            };
            if !dense {
                // Merging the moments themselves is the same arithmetic, bit for bit.
                let mut direct = welford(&rows[..split]);
                let moments = part.mean().iter().copied().zip(part.sum_squares().to_vec());
                direct.merge_moments(part.count(), moments);
                let mut reference = welford(&rows[..split]);
                reference.merge(&part);
                assert_eq!(direct.count(), reference.count());
                assert_eq!(direct.mean(), reference.mean(), "split {split}");
                assert_eq!(
                    direct.sum_squares(),
                    reference.sum_squares(),
                    "split {split}"
                );
            }
            merged.merge(&part);
            assert_eq!(merged.count(), all.count());
            for (got, want) in merged.sum_squares().iter().zip(all.sum_squares()) {
                assert!(
                    (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "dense {dense}, split {split}: {got} against {want}"
                );
            }
        }
    }
}

/// A Gaussian with independent coordinates of standard deviations `sd`.
struct Gaussian {
    sd: Vec<f64>,
}

impl LogDensity for Gaussian {
    fn dim(&self) -> usize {
        self.sd.len()
    }

    fn logp_grad(&mut self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let mut logp = 0.0;
        for ((g, &x), &sd) in grad.iter_mut().zip(theta).zip(&self.sd) {
            *g = -x / (sd * sd);
            logp -= 0.5 * (x / sd) * (x / sd);
        }
        logp
    }
}

/// A chain's state over `density` at the origin, as a chain would start it, with no chain.
fn core_at_origin(density: Gaussian) -> ChainCore<Gaussian> {
    use crate::nuts::{NutsOptions, Point, Workspace};
    use crate::rng::{ChainId, ChainRng, Seed};
    let dim = density.dim();
    let mut core = ChainCore {
        chain: ChainId(0),
        target_accept: 0.8,
        initial_step_size: 1.0,
        nuts: NutsOptions {
            max_depth: 10,
            max_energy_error: 1000.0,
        },
        density,
        metric: Metric::unit(dim),
        step_size: 1.0,
        jitter: 0.0,
        rng: ChainRng::new(Seed(7), ChainId(0)),
        current: Point::new(dim),
        workspace: Workspace::new(dim, 10),
        workspace_velocity: vec![0.0; dim],
        n_grad_evals: 0,
    };
    core.current.q.fill(0.1);
    core.current.logp = core
        .density
        .logp_grad(&core.current.q, &mut core.current.grad);
    core
}

/// Feeds an adapter of `kind` exact, independent draws of the core's Gaussian as its warmup
/// transitions; the metric it leaves.
fn adapt_on_exact_draws(kind: AdaptationKind, sd: &[f64], num_warmup: u64) -> Vec<f64> {
    let mut core = core_at_origin(Gaussian { sd: sd.to_vec() });
    let mut adapter = Adapter::start(kind, MetricKind::Diag, num_warmup, &mut core).unwrap();
    let mut draws = crate::rng::ChainRng::new(crate::rng::Seed(11), crate::rng::ChainId(3));
    for draw in 0..num_warmup {
        for (q, &sd) in core.current.q.iter_mut().zip(sd) {
            *q = sd * draws.normal();
        }
        core.current.logp = core
            .density
            .logp_grad(&core.current.q, &mut core.current.grad);
        let info = TransitionInfo {
            accept_stat: 0.8,
            accept_stat_sym: 0.8,
            n_leapfrog: 7,
            depth: 3,
            divergent: false,
            energy: 0.0,
            index_in_trajectory: 3,
        };
        adapter.learn(draw, &info, &mut core).unwrap();
    }
    adapter.finish(&mut core);
    assert!(
        core.step_size.is_finite() && core.step_size > 0.0,
        "{}",
        core.step_size
    );
    core.metric.values().to_vec()
}

#[test]
fn adaptation_learns_the_variances_of_the_draws_without_a_chain() {
    // Both estimators converge to the variances for a Gaussian: Stan's is the window's
    // sample variance (regularised towards 1e-3 by 5 / (n + 5)), nutpie's
    // sqrt(Var x / Var grad) = sqrt(sd^2 / sd^-2). Stan's last window holds 500 draws, whose
    // variance has a relative standard error of sqrt(2 / 499) = 0.063; nutpie's last
    // estimate pools at least as many. Five standard errors, and the scales span 100x.
    let sd = [0.5, 2.0, 5.0];
    for kind in [AdaptationKind::Stan, AdaptationKind::Nutpie] {
        let metric = adapt_on_exact_draws(kind, &sd, 1000);
        for (m, s) in metric.iter().zip(sd) {
            let ratio = m / (s * s);
            assert!(
                (ratio - 1.0).abs() < 5.0 * (2.0f64 / 499.0).sqrt(),
                "{kind:?}: metric {metric:?} against variances {:?}",
                sd.map(|s| s * s)
            );
        }
    }
}
