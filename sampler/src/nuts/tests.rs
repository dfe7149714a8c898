//! Leapfrog invariants, transition bookkeeping, and step-for-step agreement of [`transition`]
//! with a plain transcription of Stan's `base_nuts.hpp`.

use super::*;
use crate::builder::ModelBuilder;
use crate::ir::Dist;
use crate::limits::Limits;
use crate::rng::{ChainId, Seed};
use crate::validate::CheckedModel;

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

/// A plain transcription of Stan's `base_nuts::transition` and `build_tree`, written for clarity
/// rather than speed: subtrees are returned by value and vectors cloned freely. It draws from the
/// random stream in the same order as [`transition`] (momentum, then per doubling the direction,
/// the uniform-progressive merges inside the new subtree and the biased-progressive merge at the
/// top), so from the same stream the two must select the same point bit for bit.
struct Reference<'a, D> {
    density: &'a mut D,
    metric: &'a Metric,
    rng: &'a mut ChainRng,
    step_size: f64,
    max_energy_error: f64,
    h0: f64,
    z: Point,
    n_leapfrog: u32,
    sum_metro_prob: f64,
    divergent: bool,
}

/// A subtree that neither diverged nor U-turned, in Stan's names: `beg` is its end nearest the
/// point the extension started from, `end` the far one, `p_sharp` the velocity `M⁻¹ p`.
struct Subtree {
    z_propose: Point,
    p_sharp_beg: Vec<f64>,
    p_sharp_end: Vec<f64>,
    p_beg: Vec<f64>,
    p_end: Vec<f64>,
    rho: Vec<f64>,
    log_sum_weight: f64,
}

fn plus(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| a + b).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// Stan's `compute_criterion`: the trajectory with momentum sum `rho` has not U-turned.
fn compute_criterion(p_sharp_minus: &[f64], p_sharp_plus: &[f64], rho: &[f64]) -> bool {
    dot(p_sharp_plus, rho) > 0.0 && dot(p_sharp_minus, rho) > 0.0
}

impl<D: LogDensity> Reference<'_, D> {
    fn velocity(&self, p: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; p.len()];
        self.metric.velocity(p, &mut out);
        out
    }

    /// Stan's `build_tree`; `None` when the subtree diverged or U-turned.
    fn build_tree(&mut self, depth: u32, sign: f64) -> Option<Subtree> {
        if depth == 0 {
            let mut velocity = vec![0.0; self.z.q.len()];
            leapfrog(
                self.density,
                self.metric,
                &mut self.z,
                sign * self.step_size,
                &mut velocity,
            );
            self.n_leapfrog += 1;
            let h = hamiltonian(self.metric, &self.z);
            if h - self.h0 > self.max_energy_error {
                self.divergent = true;
            }
            let delta = self.h0 - h;
            self.sum_metro_prob += if delta > 0.0 { 1.0 } else { delta.exp() };
            if self.divergent {
                return None;
            }
            let p_sharp = self.velocity(&self.z.p);
            return Some(Subtree {
                z_propose: self.z.clone(),
                p_sharp_beg: p_sharp.clone(),
                p_sharp_end: p_sharp,
                p_beg: self.z.p.clone(),
                p_end: self.z.p.clone(),
                rho: self.z.p.clone(),
                log_sum_weight: delta,
            });
        }

        let init = self.build_tree(depth - 1, sign)?;
        let fin = self.build_tree(depth - 1, sign)?;

        // Uniform-progressive multinomial sample from the merged subtree.
        let log_sum_weight = log_sum_exp(init.log_sum_weight, fin.log_sum_weight);
        let take_final = fin.log_sum_weight > log_sum_weight
            || self.rng.uniform() < (fin.log_sum_weight - log_sum_weight).exp();
        let z_propose = if take_final {
            fin.z_propose
        } else {
            init.z_propose
        };

        let rho = plus(&init.rho, &fin.rho);
        let persist = compute_criterion(&init.p_sharp_beg, &fin.p_sharp_end, &rho)
            && compute_criterion(
                &init.p_sharp_beg,
                &fin.p_sharp_beg,
                &plus(&init.rho, &fin.p_beg),
            )
            && compute_criterion(
                &init.p_sharp_end,
                &fin.p_sharp_end,
                &plus(&fin.rho, &init.p_end),
            );
        persist.then_some(Subtree {
            z_propose,
            p_sharp_beg: init.p_sharp_beg,
            p_sharp_end: fin.p_sharp_end,
            p_beg: init.p_beg,
            p_end: fin.p_end,
            rho,
            log_sum_weight,
        })
    }
}

/// Stan's `base_nuts::transition` from `current` (position, gradient and log density set).
fn reference_transition<D: LogDensity>(
    density: &mut D,
    metric: &Metric,
    step_size: f64,
    options: &NutsOptions,
    rng: &mut ChainRng,
    current: &Point,
) -> (Point, TransitionInfo) {
    let mut z = current.clone();
    z.index = 0;
    metric.sample_momentum(rng, &mut z.p);
    let h0 = hamiltonian(metric, &z);
    let mut nuts = Reference {
        density,
        metric,
        rng,
        step_size,
        max_energy_error: options.max_energy_error,
        h0,
        z: z.clone(),
        n_leapfrog: 0,
        sum_metro_prob: 0.0,
        divergent: false,
    };

    // Stan's names: `fwd_fwd` is the forward end of the trajectory, `bck_bck` the backward
    // end; `fwd_bck` and `bck_fwd` are the inner ends of the forward and backward parts of the
    // current doubling (the old trajectory and the new subtree), one leapfrog step apart.
    let (mut z_fwd, mut z_bck, mut z_sample) = (z.clone(), z.clone(), z.clone());
    let (mut p_fwd_fwd, mut p_bck_bck) = (z.p.clone(), z.p.clone());
    let mut p_sharp_fwd_fwd = nuts.velocity(&z.p);
    let mut p_sharp_bck_bck = p_sharp_fwd_fwd.clone();
    let mut rho = z.p.clone();
    let mut log_sum_weight = 0.0;
    let mut depth = 0;

    while depth < options.max_depth {
        let (rho_fwd, rho_bck, p_fwd_bck, p_sharp_fwd_bck, p_bck_fwd, p_sharp_bck_fwd, subtree);
        if nuts.rng.uniform() > 0.5 {
            // Extend forward: the old trajectory is the backward part, its forward end that
            // part's inner end.
            nuts.z = z_fwd.clone();
            let Some(new) = nuts.build_tree(depth, 1.0) else {
                break;
            };
            z_fwd = nuts.z.clone();
            rho_bck = rho.clone();
            p_bck_fwd = p_fwd_fwd.clone();
            p_sharp_bck_fwd = p_sharp_fwd_fwd.clone();
            rho_fwd = new.rho.clone();
            p_fwd_bck = new.p_beg.clone();
            p_sharp_fwd_bck = new.p_sharp_beg.clone();
            p_fwd_fwd = new.p_end.clone();
            p_sharp_fwd_fwd = new.p_sharp_end.clone();
            subtree = new;
        } else {
            // Extend backward: the old trajectory is the forward part, its backward end that
            // part's inner end.
            nuts.z = z_bck.clone();
            let Some(new) = nuts.build_tree(depth, -1.0) else {
                break;
            };
            z_bck = nuts.z.clone();
            rho_fwd = rho.clone();
            p_fwd_bck = p_bck_bck.clone();
            p_sharp_fwd_bck = p_sharp_bck_bck.clone();
            rho_bck = new.rho.clone();
            p_bck_fwd = new.p_beg.clone();
            p_sharp_bck_fwd = new.p_sharp_beg.clone();
            p_bck_bck = new.p_end.clone();
            p_sharp_bck_bck = new.p_sharp_end.clone();
            subtree = new;
        }
        depth += 1;

        // Biased progressive sampling.
        if subtree.log_sum_weight > log_sum_weight
            || nuts.rng.uniform() < (subtree.log_sum_weight - log_sum_weight).exp()
        {
            z_sample = subtree.z_propose.clone();
        }
        log_sum_weight = log_sum_exp(log_sum_weight, subtree.log_sum_weight);

        rho = plus(&rho_bck, &rho_fwd);
        let persist = compute_criterion(&p_sharp_bck_bck, &p_sharp_fwd_fwd, &rho)
            && compute_criterion(
                &p_sharp_bck_bck,
                &p_sharp_fwd_bck,
                &plus(&rho_bck, &p_fwd_bck),
            )
            && compute_criterion(
                &p_sharp_bck_fwd,
                &p_sharp_fwd_fwd,
                &plus(&rho_fwd, &p_bck_fwd),
            );
        if !persist {
            break;
        }
    }

    let n_leapfrog = nuts.n_leapfrog;
    let info = TransitionInfo {
        accept_stat: nuts.sum_metro_prob / f64::from(n_leapfrog.max(1)),
        accept_stat_sym: f64::NAN, // not Stan's; not compared
        n_leapfrog,
        depth,
        divergent: nuts.divergent,
        energy: hamiltonian(metric, &z_sample),
        index_in_trajectory: z_sample.index,
    };
    (z_sample, info)
}

/// What a run against the reference went through, so a test can insist it reached the paths it
/// is meant to cover.
#[derive(Debug, Default)]
struct Coverage {
    n_transitions: usize,
    n_divergent: usize,
    n_max_depth: usize,
    deepest: u32,
}

/// Runs `n_transitions` consecutive transitions of [`transition`] and of the reference, each
/// chain fed its own output, from clones of one random stream, and demands identical results.
fn check_against_reference<D: LogDensity>(
    density: &mut D,
    metric: &Metric,
    step_size: f64,
    options: &NutsOptions,
    start: &[f64],
    n_transitions: usize,
) -> Coverage {
    let dim = start.len();
    let mut rng = ChainRng::new(Seed(20_240_611), ChainId(3));
    let mut reference_rng = rng.clone();
    let mut workspace = Workspace::new(dim, options.max_depth);
    let mut current = Point::new(dim);
    current.q.copy_from_slice(start);
    evaluate(density, &mut current);
    let mut reference_current = current.clone();
    let mut coverage = Coverage::default();
    for i in 0..n_transitions {
        let info = transition(
            density,
            metric,
            step_size,
            options,
            &mut rng,
            &mut current,
            &mut workspace,
        );
        let (reference_point, expected) = reference_transition(
            density,
            metric,
            step_size,
            options,
            &mut reference_rng,
            &reference_current,
        );
        reference_current = reference_point;
        let context = format!("transition {i}: got {info:?}, Stan's algorithm gives {expected:?}");
        assert_eq!(info.n_leapfrog, expected.n_leapfrog, "{context}");
        assert_eq!(info.depth, expected.depth, "{context}");
        assert_eq!(info.divergent, expected.divergent, "{context}");
        assert_eq!(
            info.index_in_trajectory, expected.index_in_trajectory,
            "{context}"
        );
        assert_eq!(info.accept_stat, expected.accept_stat, "{context}");
        assert_eq!(info.energy, expected.energy, "{context}");
        assert_eq!(current.q, reference_current.q, "{context}");
        assert_eq!(current.p, reference_current.p, "{context}");
        assert_eq!(current.logp, reference_current.logp, "{context}");
        assert_eq!(
            rng.clone().uniform(),
            reference_rng.clone().uniform(),
            "{context}: the two consumed different amounts of the random stream"
        );
        coverage.n_transitions += 1;
        coverage.n_divergent += usize::from(info.divergent);
        coverage.n_max_depth += usize::from(info.depth == options.max_depth);
        coverage.deepest = coverage.deepest.max(info.depth);
    }
    coverage
}

const STAN_OPTIONS: NutsOptions = NutsOptions {
    max_depth: 10,
    max_energy_error: 1000.0,
};

fn sv() -> crate::eval::Evaluator {
    CheckedModel::from_json(include_str!("../../../models/sv.json"), &Limits::default())
        .unwrap()
        .evaluator()
}

/// The sv benchmark under a non-unit diagonal metric of the size Stan adapts to, from a plausible
/// point: long trajectories, where the cross-subtree checks decide the length.
fn sv_metric_and_start() -> (Metric, Vec<f64>) {
    let n_s = 100;
    let mut variances = vec![0.06, 0.37];
    variances.extend((0..n_s).map(|i| 0.01 + 0.06 * ((i * 37) % n_s) as f64 / (n_s - 1) as f64));
    let mut start = vec![(0.15f64).ln(), (8.0f64).ln()];
    start.extend((0..n_s).map(|i| 1.0 + 0.3 * (0.2 * i as f64).sin()));
    (Metric::Diag(variances), start)
}

#[test]
fn transition_matches_stan_on_sv() {
    let mut density = sv();
    let (metric, start) = sv_metric_and_start();
    let coverage = check_against_reference(&mut density, &metric, 0.1, &STAN_OPTIONS, &start, 300);
    assert!(coverage.deepest >= 6, "{coverage:?}");
}

/// `x ~ N(0, P⁻¹)` for the precision matrix `P`.
fn normal_with_precision(precision: Vec<Vec<f64>>) -> crate::eval::Evaluator {
    let mut m = ModelBuilder::new("normal_with_precision");
    let x = m.vector_param("x", precision.len());
    let p = m.data_matrix("precision", precision);
    m.factor(-0.5 * x.dot(p.matvec(&x)));
    CheckedModel::new(m.build(), &Limits::default())
        .unwrap()
        .evaluator()
}

/// Unit variances, correlation 0.95, under a diagonal metric that fits neither scale.
fn correlated_2d() -> (crate::eval::Evaluator, Metric) {
    let (rho, det) = (0.95, 1.0 - 0.95 * 0.95);
    let density = normal_with_precision(vec![
        vec![1.0 / det, -rho / det],
        vec![-rho / det, 1.0 / det],
    ]);
    (density, Metric::Diag(vec![0.3, 2.5]))
}

/// Scales `0.5 + 0.3 i` with AR(1) correlation 0.8 (tridiagonal precision), under a dense
/// metric built with correlation 0.5 instead.
fn ar1_10d() -> (crate::eval::Evaluator, Metric) {
    let dim: usize = 10;
    let scale = |i: usize| 0.5 + 0.3 * i as f64;
    let rho: f64 = 0.8;
    let precision = (0..dim)
        .map(|i| {
            (0..dim)
                .map(|j| {
                    let t = if i == j {
                        if i == 0 || i == dim - 1 {
                            1.0
                        } else {
                            1.0 + rho * rho
                        }
                    } else if i.abs_diff(j) == 1 {
                        -rho
                    } else {
                        0.0
                    };
                    t / ((1.0 - rho * rho) * scale(i) * scale(j))
                })
                .collect()
        })
        .collect();
    let inv_metric = (0..dim * dim)
        .map(|k| {
            let (i, j) = (k / dim, k % dim);
            scale(i) * scale(j) * 0.5f64.powi(i.abs_diff(j) as i32)
        })
        .collect();
    (
        normal_with_precision(precision),
        Metric::dense(inv_metric, dim).unwrap(),
    )
}

#[test]
fn transition_matches_stan_on_a_correlated_normal() {
    let (mut density, metric) = correlated_2d();
    let coverage =
        check_against_reference(&mut density, &metric, 0.2, &STAN_OPTIONS, &[0.5, -0.3], 500);
    assert!(coverage.deepest >= 4, "{coverage:?}");
}

#[test]
fn transition_matches_stan_with_a_dense_metric() {
    let (mut density, metric) = ar1_10d();
    let start: Vec<f64> = (0..10).map(|i| 0.3 * (i as f64).cos()).collect();
    let coverage = check_against_reference(&mut density, &metric, 0.3, &STAN_OPTIONS, &start, 500);
    assert!(coverage.deepest >= 4, "{coverage:?}");
}

#[test]
fn transition_matches_stan_when_depth_runs_out() {
    let (mut density, metric) = ar1_10d();
    let start: Vec<f64> = (0..10).map(|i| 0.3 * (i as f64).cos()).collect();
    let shallow = NutsOptions {
        max_depth: 3,
        ..STAN_OPTIONS
    };
    let coverage = check_against_reference(&mut density, &metric, 0.1, &shallow, &start, 300);
    assert!(coverage.n_max_depth > 0, "{coverage:?}");
}

#[test]
fn transition_matches_stan_through_divergences() {
    // Near the leapfrog's stability limit for the narrow direction: some trajectories diverge,
    // others do not.
    let (mut density, metric) = correlated_2d();
    let coverage =
        check_against_reference(&mut density, &metric, 0.5, &STAN_OPTIONS, &[0.5, -0.3], 300);
    assert!(
        coverage.n_divergent > 0 && coverage.n_divergent < coverage.n_transitions,
        "{coverage:?}"
    );
    assert!(coverage.deepest >= 2, "{coverage:?}");
}
