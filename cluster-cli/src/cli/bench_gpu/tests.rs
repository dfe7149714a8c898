//! Unit tests of the GPU benchmark's arithmetic: medians over seeds, the check and the
//! per-parameter diagnostics.

use sampler::{ChainId, ChainTrace, Tuning};

use super::metrics::{ColumnStats, MeanCheck, column_stats, min_of};
use super::{Row, Timing, median_row, rate};

fn stats(mean: f64, mcse: f64) -> ColumnStats {
    ColumnStats {
        mean,
        mcse,
        ess_bulk: 100.0,
        ess_tail: 80.0,
    }
}

#[test]
fn the_check_is_the_largest_mean_difference_in_combined_standard_errors() {
    let cpu = [stats(0.0, 0.3), stats(1.0, 0.1), stats(5.0, 0.0)];
    let gpu = [stats(0.4, 0.4), stats(1.1, 0.1), stats(5.0, 0.0)];
    let check = MeanCheck::new(&gpu, &cpu);
    // Column 0: 0.4 / 0.5 = 0.8; column 1: 0.1 / sqrt(0.02) = 0.707; column 2: equal.
    assert!((check.max_z - 0.8).abs() < 1e-12, "{check:?}");
    assert_eq!(check.worst, 0);
    assert!(check.passed());
    let far = MeanCheck::new(&[stats(2.0, 0.1)], &[stats(0.0, 0.1)]);
    assert!(!far.passed(), "{far:?}");
    // A NaN MCSE cannot pass.
    let nan = MeanCheck::new(&[stats(1.0, f64::NAN)], &[stats(0.0, 0.1)]);
    assert!(!nan.passed());
}

#[test]
fn the_minimum_ess_is_nan_when_any_parameter_has_none() {
    let all = [stats(0.0, 1.0), stats(0.0, 1.0)];
    assert_eq!(min_of(&all, |s| s.ess_tail), 80.0);
    let mut one_nan = all;
    one_nan[1].ess_bulk = f64::NAN;
    assert!(min_of(&one_nan, |s| s.ess_bulk).is_nan());
    assert!(min_of(&[], |s| s.ess_bulk).is_nan());
}

fn row(wall: f64, grads: u64, bulk: f64, divergent: usize) -> Row {
    Row {
        wall,
        first_round: wall,
        useful_grads: grads,
        bulk,
        tail: bulk / 2.0,
        lockstep: 0.5,
        dispatch_lockstep: 0.25,
        divergent,
        check: None,
        diagnostics_seconds: 0.1,
        timing: Timing::default(),
    }
}

#[test]
fn rows_over_seeds_take_the_median_rate_and_the_most_divergences() {
    let rows = [
        row(1.0, 1000, 100.0, 0),
        row(2.0, 1000, 100.0, 3),
        row(4.0, 1000, 100.0, 1),
    ];
    let median = median_row(&rows);
    assert_eq!(median.wall, 2.0);
    // Rates 1000, 500, 250 a second: the median is 500, whatever the wall times.
    assert!((median.grads_per_second() - 500.0).abs() < 1e-9);
    assert!((median.bulk_per_second() - 50.0).abs() < 1e-9);
    assert!((median.tail_per_second() - 25.0).abs() < 1e-9);
    assert_eq!(median.divergent, 3);
}

#[test]
fn rates_switch_to_scientific_notation_when_large() {
    assert_eq!(rate(1234.4), "1234");
    assert_eq!(rate(3.8e5), "3.800e5");
    assert_eq!(rate(f64::NAN), "NaN");
}

fn trace(values: Vec<f64>) -> ChainTrace {
    ChainTrace {
        chain: ChainId(0),
        n_columns: 2,
        warmup_draws: Vec::new(),
        warmup_stats: Vec::new(),
        draws: values,
        stats: Vec::new(),
        tuning: Tuning {
            step_size: 0.1,
            inv_metric: vec![1.0, 1.0],
            dense: false,
        },
        init: vec![0.0, 0.0],
        final_position: vec![0.0, 0.0],
        grad_evals_warmup: 0,
        grad_evals_sampling: 0,
        warmup_seconds: 0.0,
        sampling_seconds: 0.0,
    }
}

/// Columns come back in order whatever thread summarised them, and agree with the
/// single-threaded diagnostics.
#[test]
fn column_stats_on_several_threads_equal_one_thread() {
    // Two columns, three chains of 50 draws: deterministic, irregular values.
    let traces: Vec<ChainTrace> = (0..3)
        .map(|c| {
            trace(
                (0..100)
                    .map(|i| {
                        ((i * 7 + c * 13) as f64 * 0.37).sin() + if i % 2 == 0 { 0.0 } else { 5.0 }
                    })
                    .collect(),
            )
        })
        .collect();
    let one = column_stats(&traces, 2, 1).expect("summarised");
    let many = column_stats(&traces, 2, 8).expect("summarised");
    assert_eq!(one, many);
    assert_eq!(one.len(), 2);
    // Odd positions are column 1, shifted by 5.
    assert!(one[1].mean - one[0].mean > 4.0, "{one:?}");
    assert!(one.iter().all(|s| s.ess_bulk > 0.0 && s.mcse > 0.0));
}
