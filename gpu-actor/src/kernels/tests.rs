//! The sampling kernels' host side without a GPU: Philox against Random123's known answers,
//! the layout against the shader text, and the iterative tree builder against Stan's
//! recursive one (sampler's `nuts.rs`, copied below with the directions made injectable).

use std::sync::Arc;

use sampler::nuts::{Point, leapfrog};
use sampler::{CheckedModel, Dist, Evaluator, Limits, LogDensity, Metric, ModelBuilder};

use super::layout::{NS_O_COUNT, wgsl_constants};
use super::philox::{ChainStream, Purpose, philox4x32_10, uniform24, uniform53};
use super::tree::{Leaf, Tree};

/// Asserts that the shader `file`'s `source` holds every one of `lines`.
fn assert_lines<S: AsRef<str>>(source: &str, file: &str, lines: impl IntoIterator<Item = S>) {
    for line in lines {
        let line = line.as_ref();
        assert!(source.contains(line), "{file} lacks `{line}`");
    }
}

#[test]
fn philox_matches_random123_known_answers() {
    // Random123's kat_vectors for philox4x32_10.
    assert_eq!(
        philox4x32_10([0, 0, 0, 0], [0, 0]),
        [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
    );
    assert_eq!(
        philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
        [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
    );
    assert_eq!(
        philox4x32_10(
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0]
        ),
        [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
    );
}

#[test]
fn uniforms_stay_in_the_unit_interval() {
    assert_eq!(uniform53(0, 0), 0.0);
    assert!(uniform53(u32::MAX, u32::MAX) < 1.0);
    assert_eq!(uniform24(0), 0.0);
    assert!(uniform24(u32::MAX) < 1.0);
}

#[test]
fn layout_constants_match_the_shader() {
    let source = crate::wgsl::library::nuts_state_source();
    assert_lines(
        source,
        "nuts_state.wgsl",
        wgsl_constants()
            .into_iter()
            .map(|(name, value)| format!("const {name}: u32 = {value}u;")),
    );
    // The moments kernel's copies of the state's constants, and its chunk.
    let moments = crate::wgsl::library::nuts_moments_library();
    let copies: Vec<&str> = moments
        .lines()
        .filter(|line| line.starts_with("const NS_"))
        .collect();
    assert!(copies.len() >= 6, "nuts_moments.wgsl: {copies:?}");
    assert_lines(source, "nuts_state.wgsl", copies);
    let chunk = format!("const NM_CHUNK: u32 = {}u;", super::layout::NM_CHUNK);
    assert!(
        moments.contains(&chunk),
        "nuts_moments.wgsl lacks `{chunk}`"
    );
}

#[test]
fn role_blocks_are_dim_major_for_one_lane_and_chain_major_for_split_chains() {
    let source = crate::wgsl::library::nuts_state_source();
    assert_lines(
        source,
        "nuts_state.wgsl",
        [
            "return block + g_chain * G_DIM + j;",
            "return block + j * ns_n + g_chain;",
        ],
    );
    let (n, dim) = (3, 4);
    let values: Vec<f64> = (0..n * dim).map(|i| i as f64).collect();
    for chain_major in [false, true] {
        let sizes = super::layout::NsSizes {
            n,
            dim,
            max_depth: 10,
            capacity: 1,
            with_grad: false,
            grad_capacity: 1,
            chain_major,
        };
        let block = sizes.role_block(&values);
        for c in 0..n {
            for j in 0..dim {
                let at = if chain_major { c * dim + j } else { j * n + c };
                assert_eq!(block[at], values[c * dim + j], "chain {c}, coordinate {j}");
                assert_eq!(sizes.vec_at(2, j, c), 2 * dim * n + at);
            }
        }
        assert_eq!(sizes.chains_of_block(&block), values);
    }
}

/// Where `NsSizes` puts value or statistic `k` of a slot and chain.
type Place = fn(&super::layout::NsSizes, usize, usize, usize) -> usize;

#[test]
fn output_slots_are_value_major_for_one_lane_and_chain_major_for_split_chains() {
    let source = crate::wgsl::library::nuts_state_source();
    assert_lines(
        source,
        "nuts_state.wgsl",
        [
            "return (slot * ns_n + g_chain) * width + k;",
            "return (slot * width + k) * ns_n + g_chain;",
            "return (slot * ns_n + g_chain) * NS_O_COUNT + k;",
            "return (slot * NS_O_COUNT + k) * ns_n + g_chain;",
        ],
    );
    let moments = crate::wgsl::nuts_moments_source(crate::wgsl::Precision::F32);
    assert_lines(
        &moments,
        "nuts_moments.wgsl",
        [
            "x = nm_out[(slot * n + c) * nm.width + k];",
            "x = nm_out[(slot * nm.width + k) * n + c];",
        ],
    );
    for chain_major in [false, true] {
        for with_grad in [false, true] {
            let sizes = super::layout::NsSizes {
                n: 5,
                dim: 3,
                max_depth: 10,
                capacity: 4,
                with_grad,
                grad_capacity: 4,
                chain_major,
            };
            // Every value and statistic of every slot and chain has its own place, and a
            // row's neighbouring chains are `out_chain_stride` apart.
            let mut seen = vec![false; sizes.out()];
            for slot in 0..sizes.capacity {
                for c in 0..sizes.n {
                    let mut mark = |at: usize| {
                        assert!(!seen[at], "{at} twice ({chain_major}, {with_grad})");
                        seen[at] = true;
                    };
                    let places: [(bool, usize, Place); 2] = [
                        (false, sizes.width(), super::layout::NsSizes::out_at),
                        (true, NS_O_COUNT, super::layout::NsSizes::out_stat_at),
                    ];
                    for (statistic, count, at) in places {
                        for k in 0..count {
                            mark(at(&sizes, slot, k, c));
                            assert_eq!(
                                at(&sizes, slot, k, c),
                                at(&sizes, slot, 0, c) + k * sizes.out_value_stride()
                            );
                            assert_eq!(
                                at(&sizes, slot, k, c),
                                at(&sizes, slot, k, 0) + c * sizes.out_chain_stride(statistic)
                            );
                            if statistic {
                                assert!(
                                    at(&sizes, slot, k, c)
                                        >= sizes.capacity * sizes.width() * sizes.n
                                );
                            }
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&seen| seen), "{chain_major}, {with_grad}");
        }
    }
}

fn model(name: &str) -> CheckedModel {
    let mut m = ModelBuilder::new(name);
    match name {
        // Correlated: long trajectories, U-turns at every depth.
        "correlated" => {
            let x1 = m.param("x1");
            let x2 = m.param("x2");
            let x3 = m.param("x3");
            m.sample(&x1, Dist::normal(0.0, 1.0));
            m.sample(&x2, Dist::normal(0.95 * &x1, 0.3));
            m.sample(&x3, Dist::normal(&x2 * 0.5, 2.0));
        }
        // Funnel: divergences.
        _ => {
            let y = m.param("y");
            let x = m.vector_param("x", 4);
            m.sample(&y, Dist::normal(0.0, 3.0));
            m.sample(&x, Dist::normal(0.0, (&y * 0.5).exp()));
        }
    }
    CheckedModel::new(m.build(), &Limits::default()).expect("the test model checks")
}

/// What a transition's termination decided: leapfrog steps, depth, divergence, and the
/// acceptance sums (exactly the same numbers in the same order in both builders).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Outcome {
    n_leapfrog: u32,
    depth: u32,
    divergent: bool,
    accept_stat: f64,
    accept_stat_sym: f64,
}

fn hamiltonian(metric: &Metric, point: &Point) -> f64 {
    let h = -point.logp + metric.kinetic_energy(&point.p);
    if h.is_nan() { f64::INFINITY } else { h }
}

fn criterion(p_sharp_minus: &[f64], p_sharp_plus: &[f64], rho: &[f64]) -> bool {
    let dot = |a: &[f64]| a.iter().zip(rho).map(|(a, r)| a * r).sum::<f64>();
    dot(p_sharp_plus) > 0.0 && dot(p_sharp_minus) > 0.0
}

fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| a + b).collect()
}

/// Stan's recursive builder (sampler's `nuts.rs`, `base_nuts.hpp`) without the multinomial
/// choice, which the termination does not depend on.
struct StanReference<'a> {
    density: &'a mut Evaluator,
    metric: Metric,
    eps: f64,
    h0: f64,
    max_energy_error: f64,
    n_leapfrog: u32,
    sum_metro: f64,
    sum_sym: f64,
    divergent: bool,
}

/// A built subtree: validity, momentum sum, first and last momenta and velocities.
struct Subtree {
    valid: bool,
    rho: Vec<f64>,
    p_beg: Vec<f64>,
    p_end: Vec<f64>,
}

impl StanReference<'_> {
    fn sharp(&self, p: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; p.len()];
        self.metric.velocity(p, &mut out);
        out
    }

    fn build(&mut self, depth: u32, z: &mut Point, sign: f64) -> Subtree {
        if depth == 0 {
            let mut velocity = vec![0.0; z.q.len()];
            leapfrog(
                self.density,
                &self.metric,
                z,
                sign * self.eps,
                &mut velocity,
            );
            self.n_leapfrog += 1;
            let h = hamiltonian(&self.metric, z);
            if h - self.h0 > self.max_energy_error {
                self.divergent = true;
            }
            let delta = self.h0 - h;
            self.sum_metro += if delta > 0.0 { 1.0 } else { delta.exp() };
            if !self.divergent {
                self.sum_sym += 2.0 / (1.0 + delta.abs().exp());
            }
            return Subtree {
                valid: !self.divergent,
                rho: z.p.clone(),
                p_beg: z.p.clone(),
                p_end: z.p.clone(),
            };
        }
        let init = self.build(depth - 1, z, sign);
        if !init.valid {
            return init;
        }
        let last = self.build(depth - 1, z, sign);
        if !last.valid {
            return last;
        }
        let rho = add(&init.rho, &last.rho);
        let valid = criterion(&self.sharp(&init.p_beg), &self.sharp(&last.p_end), &rho)
            && criterion(
                &self.sharp(&init.p_beg),
                &self.sharp(&last.p_beg),
                &add(&init.rho, &last.p_beg),
            )
            && criterion(
                &self.sharp(&init.p_end),
                &self.sharp(&last.p_end),
                &add(&last.rho, &init.p_end),
            );
        Subtree {
            valid,
            rho,
            p_beg: init.p_beg,
            p_end: last.p_end,
        }
    }
}

/// One transition of Stan's recursive NUTS from `start` with momentum `p0`, with the
/// direction of doubling `k` given by `forward(k)`.
fn stan_transition(
    density: &mut Evaluator,
    metric: &Metric,
    start: &Point,
    eps: f64,
    max_depth: u32,
    forward: impl Fn(u32) -> bool,
) -> Outcome {
    let mut reference = StanReference {
        density,
        metric: metric.clone(),
        eps,
        h0: hamiltonian(metric, start),
        max_energy_error: 1000.0,
        n_leapfrog: 0,
        sum_metro: 0.0,
        sum_sym: 0.0,
        divergent: false,
    };
    let p0 = start.p.clone();
    let (mut z_fwd, mut z_bck) = (start.clone(), start.clone());
    let mut rho = p0.clone();
    // The junction momenta (p_fwd_bck, p_bck_fwd) are set anew at every doubling.
    let (mut p_fwd_fwd, mut p_bck_bck) = (p0.clone(), p0.clone());
    let mut depth = 0;
    while depth < max_depth {
        let (rho_bck, rho_fwd, valid, p_fwd_bck, p_bck_fwd);
        if forward(depth) {
            rho_bck = rho.clone();
            p_bck_fwd = p_fwd_fwd.clone();
            let sub = reference.build(depth, &mut z_fwd, 1.0);
            valid = sub.valid;
            rho_fwd = sub.rho;
            p_fwd_bck = sub.p_beg;
            p_fwd_fwd = sub.p_end;
        } else {
            rho_fwd = rho.clone();
            p_fwd_bck = p_bck_bck.clone();
            let sub = reference.build(depth, &mut z_bck, -1.0);
            valid = sub.valid;
            rho_bck = sub.rho;
            p_bck_fwd = sub.p_beg;
            p_bck_bck = sub.p_end;
        }
        if !valid {
            break;
        }
        depth += 1;
        let sharp = |p: &[f64]| reference.sharp(p);
        let persist = criterion(
            &sharp(&p_bck_bck),
            &sharp(&p_fwd_fwd),
            &add(&rho_bck, &rho_fwd),
        ) && criterion(
            &sharp(&p_bck_bck),
            &sharp(&p_fwd_bck),
            &add(&rho_bck, &p_fwd_bck),
        ) && criterion(
            &sharp(&p_bck_fwd),
            &sharp(&p_fwd_fwd),
            &add(&rho_fwd, &p_bck_fwd),
        );
        rho = add(&rho_bck, &rho_fwd);
        if !persist {
            break;
        }
    }
    let n = f64::from(reference.n_leapfrog.max(1));
    Outcome {
        n_leapfrog: reference.n_leapfrog,
        depth,
        divergent: reference.divergent,
        accept_stat: reference.sum_metro / n,
        accept_stat_sym: reference.sum_sym / n,
    }
}

/// One transition of the iterative builder fed by a CPU leapfrog.
fn tree_transition(
    density: &mut Evaluator,
    minv: &[f64],
    start: &Point,
    stream: &ChainStream,
    iteration: u32,
    eps: f64,
    max_depth: u32,
) -> (Outcome, Vec<f64>) {
    let dim = start.q.len();
    let metric = Metric::Diag(minv.to_vec());
    let mut tree = Tree::new(dim, max_depth, 1000.0);
    tree.set_point(&start.q, &start.grad, start.logp);
    tree.begin(stream, iteration, eps, minv);
    let mut velocity = vec![0.0; dim];
    loop {
        let (_, q, p, g, signed) = tree.growing_end();
        let mut point = Point {
            q: q.to_vec(),
            p: p.to_vec(),
            grad: g.to_vec(),
            logp: 0.0,
            index: 0,
        };
        leapfrog(density, &metric, &mut point, signed, &mut velocity);
        let leaf = Leaf {
            q: &point.q,
            p: &point.p,
            g: &point.grad,
            logp: point.logp,
        };
        if let Some(info) = tree.push_leaf(leaf, stream, minv) {
            let outcome = Outcome {
                n_leapfrog: info.n_leapfrog,
                depth: info.depth,
                divergent: info.divergent,
                accept_stat: info.accept_stat,
                accept_stat_sym: info.accept_stat_sym,
            };
            return (outcome, tree.point().0.to_vec());
        }
    }
}

/// The momentum `Tree::begin` draws.
fn momentum(stream: &ChainStream, iteration: u32, minv: &[f64]) -> Vec<f64> {
    let mut p = vec![0.0; minv.len()];
    for block in 0..minv.len().div_ceil(2) {
        let (a, b) = stream.momentum_pair(iteration, block as u32);
        p[2 * block] = a / minv[2 * block].sqrt();
        if 2 * block + 1 < minv.len() {
            p[2 * block + 1] = b / minv[2 * block + 1].sqrt();
        }
    }
    p
}

/// The iterative builder makes exactly Stan's termination decisions: for the same start,
/// momentum and directions, the same leapfrog count, depth and divergence, and the same
/// acceptance statistics, over random starts, step sizes from tiny to divergent, and depths
/// up to 8, on a correlated normal (many U-turns) and a funnel (divergences).
#[test]
fn tree_terminates_exactly_as_stans_recursion() {
    let mut checked = 0;
    let mut depths = [0u32; 9];
    let mut divergent = 0;
    for name in ["correlated", "funnel"] {
        let model = model(name);
        let program = model.program().clone();
        let dim = program.dim;
        let mut density = Evaluator::new(Arc::new((*program).clone()));
        let minv: Vec<f64> = (0..dim).map(|j| 0.5 + 0.25 * j as f64).collect();
        let metric = Metric::Diag(minv.clone());
        for case in 0..400u32 {
            let stream = ChainStream::new(0x5eed + u64::from(case), case % 7);
            let mut start = Point::new(dim);
            for (j, q) in start.q.iter_mut().enumerate() {
                *q = 2.0 * (stream.uniform(case, Purpose::Jitter, j as u32 + 1) - 0.5);
            }
            start.logp = density.logp_grad(&start.q, &mut start.grad);
            start.p = momentum(&stream, case, &minv);
            let eps = [0.02, 0.1, 0.3, 0.8, 1.5, 4.0][case as usize % 6];
            let max_depth = 8;
            let forward = |k: u32| stream.uniform(case, Purpose::Direction, k) > 0.5;
            let stan = stan_transition(&mut density, &metric, &start, eps, max_depth, forward);
            let (tree, _) =
                tree_transition(&mut density, &minv, &start, &stream, case, eps, max_depth);
            assert_eq!(
                (stan.n_leapfrog, stan.depth, stan.divergent),
                (tree.n_leapfrog, tree.depth, tree.divergent),
                "{name} case {case}, eps {eps}"
            );
            assert!(
                (stan.accept_stat - tree.accept_stat).abs() < 1e-12,
                "{name} case {case}"
            );
            assert!(
                (stan.accept_stat_sym - tree.accept_stat_sym).abs() < 1e-12,
                "{name} case {case}"
            );
            depths[tree.depth as usize] += 1;
            divergent += usize::from(tree.divergent);
            checked += 1;
        }
    }
    // The cases cover shallow and deep trees and divergences.
    assert!(
        depths[1] > 0 && depths[4..].iter().sum::<u32>() > 20,
        "depths {depths:?}"
    );
    assert!(divergent > 5, "{divergent} divergent cases of {checked}");
}

/// The iterative builder samples the posterior: a 3-d correlated normal's means and variances
/// from 20,000 transitions with a fixed step size, within 5 standard errors.
#[test]
fn tree_samples_a_correlated_normal() {
    let model = model("correlated");
    let program = model.program().clone();
    let dim = program.dim;
    let mut density = Evaluator::new(Arc::new((*program).clone()));
    let minv = vec![1.0; dim];
    let stream = ChainStream::new(42, 0);
    let mut point = Point::new(dim);
    point.logp = density.logp_grad(&point.q, &mut point.grad);
    let n = 20_000;
    let mut draws = Vec::with_capacity(n);
    for iteration in 0..n as u32 {
        let (_, q) = tree_transition(&mut density, &minv, &point, &stream, iteration, 0.25, 10);
        point.q.copy_from_slice(&q);
        point.logp = density.logp_grad(&point.q, &mut point.grad);
        draws.push(q);
    }
    // x1 ~ N(0, 1), x2 | x1 ~ N(0.95 x1, 0.3), x3 | x2 ~ N(0.5 x2, 2).
    let var_x2 = 0.95f64.powi(2) + 0.09;
    let truth = [(0.0, 1.0), (0.0, var_x2), (0.0, 0.25 * var_x2 + 4.0)];
    for (j, (mean, variance)) in truth.iter().enumerate() {
        let column: Vec<f64> = draws.iter().map(|d| d[j]).collect();
        let chains = [column.as_slice()];
        let mcse = sampler::diagnostics::mcse_mean(&chains);
        let m = column.iter().sum::<f64>() / n as f64;
        let v = column.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
        let sd_mcse = sampler::diagnostics::mcse_sd(&chains);
        assert!(
            (m - mean).abs() < 5.0 * mcse,
            "x{j}: mean {m} (mcse {mcse})"
        );
        let sd = v.sqrt();
        assert!(
            (sd - variance.sqrt()).abs() < 5.0 * sd_mcse,
            "x{j}: sd {sd} vs {} (mcse {sd_mcse})",
            variance.sqrt()
        );
    }
}

/// A session whose warmup records gradients in fewer slots than sampling fills holds the
/// larger of the two dispatches' output slots and moments, not both at their largest.
#[test]
fn a_session_holds_its_largest_dispatch_with_gradients_or_without() {
    let sizes = |capacity, with_grad, grad_capacity| super::layout::NsSizes {
        n: 1000,
        dim: 100,
        max_depth: 10,
        capacity,
        with_grad,
        grad_capacity,
        chain_major: false,
    };
    let session = sizes(26, true, 16);
    let sampling = sizes(26, false, 26);
    let warmup = sizes(16, true, 16);
    assert_eq!(
        session.out_room(),
        sampling.out().max(warmup.out()),
        "16 x (2 x 100 + stats) against 26 x (100 + stats)"
    );
    assert!(session.out_room() < sizes(26, true, 26).out());
    assert_eq!(
        session.moments_room(),
        sampling.moments().max(warmup.moments())
    );
    // Without gradients the slots are the sampling dispatches'.
    assert_eq!(sampling.out_room(), sampling.out());
}
