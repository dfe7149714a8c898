//! The plain parts of the precision check: the gradient error, the CPU path's budget and the
//! collapse of an f32 warmup (the device parts are in `tests/integration/precision.rs`).

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
    assert_eq!(path_budget(&program(100), 10, 0.0), (PATH_WARMUP, 8));
    let (warmup, depth) = path_budget(&program(100_000), 10, 0.0);
    assert_eq!(depth, 3);
    assert!(warmup * (1 << depth) * 100_000 * PATH_CHAINS as u64 <= PATH_WORK as u64);
    // The largest programs keep a few transitions.
    assert_eq!(path_budget(&program(1 << 30), 10, 0.0), (20, 3));
    // A run's own depth is never exceeded.
    assert_eq!(path_budget(&program(100), 5, 0.0).1, 5);
}

#[test]
fn the_cpu_path_shrinks_with_the_gradient_s_time() {
    let small = sampler::Program {
        tape_len: 100,
        ..sampler::Program::default()
    };
    // A cheap gradient: the work bound alone.
    assert_eq!(path_budget(&small, 10, 1e-7), (PATH_WARMUP, 8));
    // 1 ms per gradient: 1000 within PATH_SECONDS, 512 once rounded, 64 transitions of 8
    // steps; 32 at 2 ms.
    assert_eq!(PATH_SECONDS, 1.0);
    assert_eq!(path_budget(&small, 10, 1e-3), (64, 3));
    assert_eq!(path_budget(&small, 10, 2e-3), (32, 3));
    // Timing noise within the rounding changes nothing.
    assert_eq!(path_budget(&small, 10, 1.5e-3), (64, 3));
}

#[test]
fn a_collapsed_or_runaway_f32_warmup_says_so() {
    let chain = |step_size: f64, saturated: u64| watch::ChainWarmup {
        step_size,
        late: 10,
        saturated,
    };
    let found =
        watch::collapse(&[chain(1e-4, 0), chain(0.1, 0), chain(0.1, 0)], 0.1).expect("collapsed");
    assert!(
        found.contains("in 1 of 3 chains") && found.contains("1 below 1/30"),
        "{found}"
    );
    // lavapipe's f32 on regression_scale: one chain collapsed, three ran away at depth 10.
    let found = watch::collapse(
        &[
            chain(2.9e-5, 0),
            chain(3.0, 10),
            chain(3.0, 9),
            chain(3.0, 10),
        ],
        1.56e-3,
    )
    .expect("ran away");
    assert!(
        found.contains("in 4 of 4 chains") && found.contains("3 above 30 times it"),
        "{found}"
    );
    // A NaN step size is a failure too.
    assert!(watch::collapse(&[chain(f64::NAN, 0)], 0.1).is_some());
    // Nothing to say: step sizes near the CPU's, far above it with short trees (a short
    // CPU path), one odd chain of five, or no chains.
    assert_eq!(
        watch::collapse(&[chain(0.05, 10), chain(0.2, 0)], 0.1),
        None
    );
    assert_eq!(watch::collapse(&[chain(5.0, 2), chain(5.0, 0)], 0.1), None);
    let mut five = vec![chain(0.1, 0); 4];
    five.push(chain(1e-5, 0));
    assert_eq!(watch::collapse(&five, 0.1), None);
    assert_eq!(watch::collapse(&[], 0.1), None);
}
