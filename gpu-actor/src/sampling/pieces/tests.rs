//! The piece size: the bisection over chain counts and the split into equal pieces (no
//! device); then runs in pieces on the device under a lowered storage limit
//! (`KernelOverrides::storage_limit`): the traces in the request's order, each with its
//! draws, every draw seen by the observer, the posterior within 4 MCSE of the truth; and a
//! chain too large for the limit refused with `GpuError::TooLarge`.

use std::sync::Mutex;

use sampler::diagnostics::known::{self, Known};
use sampler::diagnostics::truth::{compare, disagreements};
use sampler::{
    ChainId, ChainSpec, CheckedModel, DrawEvent, NoObserver, Observer, SamplerSettings, Seed,
};

use super::{join, most_chains, session_fits, split};
use crate::device::{GpuDevice, KernelOverrides};
use crate::error::GpuError;
use crate::sampling::tests::device;
use crate::sampling::{
    GpuKernel, GpuRun, GpuSampleRequest, PrecisionChoice, PrecisionMode, sample_on_device_with,
};
use crate::wgsl::Precision;

/// A session of `n` chains of `per_chain` bytes each (and `per_chunk` per started chunk of
/// 256 chains, as the warmup moments), against `limit` bytes.
fn fits(per_chain: u64, per_chunk: u64, limit: u64) -> impl Fn(usize) -> Result<(), GpuError> {
    move |n| {
        let needed = per_chain * n as u64 + per_chunk * (n as u64).div_ceil(256);
        if needed > limit {
            Err(GpuError::TooLarge {
                what: "the test's buffer",
                needed,
                limit,
            })
        } else {
            Ok(())
        }
    }
}

#[test]
fn most_chains_is_the_largest_count_that_fits() {
    // sv's U-turn checkpoints in f32: 3,529,506,816 bytes for 262,144 chains, against a
    // 2 GiB binding. 159,498 chains fit; the run goes in two pieces of 131,072.
    let sv = fits(3_529_506_816 / 262_144, 0, (2 << 30) - 1);
    let most = most_chains(262_144, &sv).expect("one chain fits");
    assert_eq!(most, 159_498);
    assert!(sv(most).is_ok() && sv(most + 1).is_err());
    assert_eq!(split(262_144, most), [0..131_072, 131_072..262_144]);
    // Everything fits: one piece.
    assert_eq!(most_chains(8192, &sv).expect("fits"), 8192);
    // A term per chunk of chains: still the largest count.
    let chunked = fits(100, 10_000, 100_000);
    let most = most_chains(5000, &chunked).expect("one chain fits");
    assert!(
        chunked(most).is_ok() && chunked(most + 1).is_err(),
        "{most}"
    );
    // Not even one chain: its error.
    assert!(matches!(
        most_chains(64, fits(1000, 0, 999)),
        Err(GpuError::TooLarge { needed: 1000, .. })
    ));
}

#[test]
fn split_gives_the_fewest_equal_pieces() {
    assert_eq!(split(64, 16), [0..16, 16..32, 32..48, 48..64]);
    assert_eq!(split(64, 17), [0..16, 16..32, 32..48, 48..64]);
    assert_eq!(split(10, 4), [0..4, 4..7, 7..10]);
    assert_eq!(split(5, 100), vec![(0..5)]);
    assert_eq!(split(3, 1), [0..1, 1..2, 2..3]);
}

const NUM_DRAWS: u64 = 200;

fn request(model: &CheckedModel, n_chains: u32, kernel: GpuKernel) -> GpuSampleRequest {
    GpuSampleRequest {
        model: model.clone(),
        settings: SamplerSettings {
            num_warmup: 200,
            num_draws: NUM_DRAWS,
            ..SamplerSettings::default()
        },
        seed: Seed(24),
        chains: (0..n_chains).map(|c| ChainSpec::new(ChainId(c))).collect(),
        kernel,
        precision: PrecisionMode::F32,
    }
}

fn capped(storage_limit: u64) -> KernelOverrides {
    KernelOverrides {
        storage_limit: Some(storage_limit),
        ..KernelOverrides::default()
    }
}

/// Counts each chain's sampling draws.
struct Counting(Mutex<Vec<u64>>);

impl Observer for Counting {
    fn on_draw(&self, event: &DrawEvent) {
        if !event.warmup {
            let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
            counts[event.chain.0 as usize] += 1;
        }
    }
}

#[test]
fn pieces_run_in_chain_order_and_find_the_posterior() {
    let Some(device) = device() else {
        return;
    };
    for kernel in [
        GpuKernel::default(),
        GpuKernel::Fused {
            steps_per_dispatch: 16,
        },
    ] {
        check_pieces(&device, kernel);
    }
}

/// 64 chains of a conjugate normal model with `kernel`, in 4 pieces.
fn check_pieces(device: &GpuDevice, kernel: GpuKernel) {
    let Known { model, truths } = known::conjugate_normal();
    let request = request(&model, 64, kernel);
    // The lowest limit that holds 16 chains' buffers: 64 chains then need 4 pieces.
    let fits = |limit, n| session_fits(device, &request, Precision::F32, &capped(limit), n);
    let (mut low, mut high) = (0u64, 1 << 30);
    assert!(fits(high, 64).is_ok());
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if fits(middle, 16).is_ok() {
            high = middle;
        } else {
            low = middle;
        }
    }
    let overrides = capped(high);
    let pieces =
        super::plan(device, &request, Precision::F32, &overrides, 0..64).expect("a chain fits");
    assert_eq!(pieces, [0..16, 16..32, 32..48, 48..64]);

    let observer = Counting(Mutex::new(vec![0; 64]));
    let run =
        sample_on_device_with(device, &request, &overrides, &observer).expect("the run in pieces");
    assert_eq!(run.traces.len(), 64);
    for (c, trace) in run.traces.iter().enumerate() {
        assert_eq!(trace.chain, ChainId(c as u32), "traces out of order");
        assert_eq!(trace.stats.len() as u64, NUM_DRAWS, "chain {c}'s draws");
        assert_eq!(trace.draws.len() as u64, NUM_DRAWS * trace.n_columns as u64);
    }
    let counts = observer.0.into_inner().unwrap_or_else(|p| p.into_inner());
    assert!(counts.iter().all(|&n| n == NUM_DRAWS), "{counts:?}");
    let comparisons: Vec<_> = truths.iter().map(|t| compare(&run.traces, t)).collect();
    let failures = disagreements(&comparisons, &truths, 4.0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The same request on the device's own limits: one session, as many traces.
    let whole = sample_on_device_with(device, &request, &KernelOverrides::default(), &NoObserver)
        .expect("the run in one piece");
    assert_eq!(whole.traces.len(), run.traces.len());
    println!(
        "{kernel:?}, 4 pieces: {} dispatches; one session: {}",
        run.dispatches.len(),
        whole.dispatches.len()
    );
    assert!(whole.dispatches.len() < run.dispatches.len());
}

#[test]
fn pieces_refuse_a_chain_too_large_for_the_device() {
    let Some(device) = device() else {
        return;
    };
    let Known { model, .. } = known::conjugate_normal();
    let request = request(&model, 4, GpuKernel::default());
    let err = sample_on_device_with(&device, &request, &capped(64), &NoObserver)
        .expect_err("a chain needs more than 64 bytes");
    assert!(matches!(err, GpuError::TooLarge { limit: 64, .. }), "{err}");
}

/// A run of `n` empty traces in `precision`, for `join`.
fn run_of(n: u32, precision: Precision, reason: &str) -> GpuRun {
    let trace = |chain| sampler::ChainTrace {
        chain: ChainId(chain),
        n_columns: 0,
        warmup_draws: Vec::new(),
        warmup_stats: Vec::new(),
        draws: Vec::new(),
        stats: Vec::new(),
        tuning: sampler::Tuning {
            step_size: 0.1,
            inv_metric: Vec::new(),
            dense: false,
        },
        init: Vec::new(),
        final_position: Vec::new(),
        grad_evals_warmup: 0,
        grad_evals_sampling: 0,
        warmup_seconds: 0.0,
        sampling_seconds: 0.0,
    };
    GpuRun {
        traces: (0..n).map(trace).collect(),
        dispatches: Vec::new(),
        warmup_time: std::time::Duration::ZERO,
        init_time: std::time::Duration::ZERO,
        search_time: std::time::Duration::ZERO,
        sampling_time: std::time::Duration::ZERO,
        queued_warmup_dispatches: 0,
        precision: PrecisionChoice {
            precision,
            reason: reason.to_owned(),
            f32_chains: 0,
        },
        restarted: Vec::new(),
    }
}

/// Pieces that ran in f32 before auto went on in f64 are named in the run's precision, and
/// so in the first line of its summary; pieces of one precision are not.
#[test]
fn a_run_whose_first_pieces_ran_in_f32_says_so() {
    let f32_reason = "auto: f32 agrees";
    let f64_reason = "auto: f32 agrees; then the step size collapsed: restarted in f64";
    let run = join(
        join(
            run_of(3, Precision::F32, f32_reason),
            run_of(2, Precision::F64, f64_reason),
        ),
        run_of(2, Precision::F64, f64_reason),
    );
    assert_eq!(run.traces.len(), 7);
    assert_eq!(run.precision.precision, Precision::F64);
    assert_eq!(run.precision.f32_chains, 3);
    assert_eq!(
        run.precision.to_string(),
        format!("f32 for the first 3 chains, f64 for the rest ({f64_reason})")
    );
    let same = join(
        run_of(3, Precision::F32, f32_reason),
        run_of(3, Precision::F32, f32_reason),
    );
    assert_eq!(same.precision.f32_chains, 0);
    assert_eq!(same.precision.to_string(), format!("f32 ({f32_reason})"));
}
