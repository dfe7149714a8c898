//! The plain parts of the precision check: the gradient error, the CPU path's budget and the
//! watch of an f32 run (the device parts are in `tests/integration/precision.rs`).

use sampler::{ChainId, ChainTrace, DrawStats, Tuning};

use super::*;

#[test]
fn relative_error_is_scaled_by_the_metric() {
    assert_eq!(relative_error(&[1.0, 2.0], &[1.0, 2.0], &[1.0, 1.0]), 0.0);
    assert_eq!(relative_error(&[0.0], &[0.0], &[1.0]), 0.0);
    // An error of 1 in a coordinate of length 10: 10%, unless the metric shrinks it.
    let error = relative_error(&[11.0, 0.0], &[10.0, 0.0], &[1.0, 1.0]);
    assert!((error - 0.1).abs() < 1e-12, "{error}");
    let error = relative_error(&[10.0, 1.0], &[10.0, 0.0], &[1.0, 0.01]);
    assert!((error - 0.001).abs() < 1e-12, "{error}");
}

#[test]
fn the_cpu_path_shrinks_with_the_program() {
    let program = |size: usize| sampler::Program {
        tape_len: size,
        ..sampler::Program::default()
    };
    assert_eq!(path_budget(&program(100), 10), (PATH_WARMUP, 8));
    let (warmup, depth) = path_budget(&program(100_000), 10);
    assert_eq!(depth, 3);
    assert!(warmup * (1 << depth) * 100_000 * PATH_CHAINS as u64 <= PATH_WORK as u64);
    // The largest programs keep a few transitions.
    assert_eq!(path_budget(&program(1 << 30), 10), (20, 3));
    // A run's own depth is never exceeded.
    assert_eq!(path_budget(&program(100), 5).1, 5);
}

fn trace(step_size: f64, depths: &[u32]) -> ChainTrace {
    ChainTrace {
        chain: ChainId(0),
        n_columns: 1,
        warmup_draws: Vec::new(),
        warmup_stats: Vec::new(),
        draws: vec![0.0; depths.len()],
        stats: depths
            .iter()
            .map(|&tree_depth| DrawStats {
                tree_depth,
                ..DrawStats::default()
            })
            .collect(),
        tuning: Tuning {
            step_size,
            inv_metric: vec![1.0],
            dense: false,
        },
        init: vec![0.0],
        final_position: vec![0.0],
        grad_evals_warmup: 0,
        grad_evals_sampling: 0,
        warmup_seconds: 0.0,
        sampling_seconds: 0.0,
    }
}

#[test]
fn an_f32_run_whose_step_size_collapsed_says_so() {
    let choice = || PrecisionChoice {
        precision: Precision::F32,
        reason: "auto: f32 agrees".to_owned(),
    };
    let collapsed = [trace(1e-4, &[10, 10, 3]), trace(2e-4, &[10, 9, 10])];
    let mut watched = choice();
    watched.watch(&collapsed, Some(0.1), 10);
    assert!(
        watched.reason.contains("warning") && watched.reason.contains("4 of 6 transitions"),
        "{watched}"
    );
    // Nothing to say: a step size near the CPU's, no CPU path, or an f64 run.
    let mut fine = choice();
    fine.watch(&[trace(0.05, &[10])], Some(0.1), 10);
    assert_eq!(fine, choice());
    fine.watch(&collapsed, None, 10);
    assert_eq!(fine, choice());
    let mut f64_run = PrecisionChoice {
        precision: Precision::F64,
        ..choice()
    };
    f64_run.watch(&collapsed, Some(0.1), 10);
    assert!(!f64_run.reason.contains("warning"));
}
