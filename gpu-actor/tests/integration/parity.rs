//! GPU against the f64 CPU evaluator at fresh random points: every model, both precisions,
//! every tape placement, many chains per batch.
//!
//! Errors are measured relative to `max(1, scale)`, where `scale` is the sum of the magnitudes
//! of the log density's terms (support.rs): the error of a floating-point sum is proportional
//! to that, whatever the total. Tolerances: 1e-4 in f32, 1e-10 in f64.

use gpu_actor::wgsl::{GENERATED_STORAGE_MAX_INSTS, PRIVATE_TAPE_LEN_THRESHOLD};
use gpu_actor::{GpuDevice, LogpGradRequest, Precision, TapePlacement};

use crate::models::{self, TestModel};
use crate::support::{self, Errors, compare, reference, tolerance};

/// 70 chains: one full workgroup of 64 and a partial one.
const N_CHAINS: usize = 70;
const RADIUS: f64 = 2.0;

/// Runs one model at random points; returns its worst scaled errors or the failures.
fn check_model(
    device: &GpuDevice,
    model: &TestModel,
    precision: Precision,
    placement: TapePlacement,
    lanes: u32,
    seed: u64,
) -> Result<Errors, String> {
    let program = model.model.program();
    let key = device
        .upload_model(&model.model, precision)
        .wait()
        .map_err(|err| format!("upload: {err}"))?;
    let points = support::random_points(seed, N_CHAINS, program.dim, RADIUS);
    let batch = device
        .logp_grad(LogpGradRequest {
            model: key,
            points: points.clone(),
            placement: Some(placement),
            lanes: Some(lanes),
        })
        .wait()
        .map_err(|err| format!("logp_grad: {err}"))?;
    let dim = program.dim;
    let mut worst = Errors::default();
    for c in 0..N_CHAINS {
        let theta = &points[c * dim..(c + 1) * dim];
        let expected = reference(program, theta);
        let errors = compare(
            batch.logp[c],
            &batch.grad[c * dim..(c + 1) * dim],
            &expected,
            tolerance(precision),
        )
        .map_err(|what| format!("chain {c}: {what}"))?;
        worst.lp = worst.lp.max(errors.lp);
        worst.grad = worst.grad.max(errors.grad);
    }
    Ok(worst)
}

/// Tape placements and invocations per chain to test: every placement with one invocation
/// per chain (the storage tape interpreted, and with generated code), except those a program
/// is too long for by default (lavapipe compiles dynamically indexed private arrays of a
/// thousand values for minutes, and generated code over a storage tape past
/// `GENERATED_STORAGE_MAX_INSTS` instructions for longer than the compile budget); and chains
/// split across 2 and across `max_lanes` invocations (the adapter's subgroup) wherever the
/// model splits a vector that way.
fn configs(model: &TestModel, max_lanes: u32) -> Vec<(TapePlacement, u32)> {
    let program = model.model.program();
    let mut out = vec![(TapePlacement::Interpreted, 1)];
    if program.insts.len() <= GENERATED_STORAGE_MAX_INSTS {
        out.insert(0, (TapePlacement::Storage, 1));
    }
    if program.tape_len <= PRIVATE_TAPE_LEN_THRESHOLD {
        out.insert(0, (TapePlacement::Private, 1));
    }
    let mut lanes = vec![2, max_lanes];
    lanes.dedup();
    for lanes in lanes {
        if lanes >= 2 && gpu_actor::wgsl::longest_split(program, lanes).is_ok_and(|len| len > 0) {
            out.push((TapePlacement::Private, lanes));
        }
    }
    out
}

/// `models` at random points in every configuration; with `all`, the models must cover split
/// chains both fused and not.
fn check_all(precision: Precision, models: Vec<TestModel>, all: bool) {
    let Some(device) = support::shared_device() else {
        return;
    };
    if !support::supports(&device, precision) {
        return;
    }
    let report_ = device.report();
    let max_lanes = if report_.features.subgroup {
        report_.subgroup_sizes.0.min(gpu_actor::wgsl::MAX_LANES)
    } else {
        1
    };
    let mut failures = Vec::new();
    let mut report = Vec::new();
    // Whether each split config ran unfused: both kinds of split code must be covered.
    let mut split_kinds = Vec::new();
    for (k, model) in models.iter().enumerate() {
        if !model.precisions.contains(&precision) {
            continue;
        }
        for (placement, lanes) in configs(model, max_lanes) {
            let seed = 1000 + k as u64;
            let fused = if gpu_actor::wgsl::fuses_split(model.model.program(), lanes) {
                " fused"
            } else {
                ""
            };
            if lanes > 1 {
                split_kinds.push(fused.is_empty());
            }
            let label = format!(
                "{} {precision} {placement} {lanes} lanes{fused}",
                model.name
            );
            let started = std::time::Instant::now();
            match check_model(&device, model, precision, placement, lanes, seed) {
                Ok(errors) => report.push(format!(
                    "{label:<42} max scaled error: log density {:.1e}, gradient {:.1e} ({:.2} s with compilation)",
                    errors.lp,
                    errors.grad,
                    started.elapsed().as_secs_f64()
                )),
                Err(what) => failures.push(format!("{label} (seed {seed}): {what}")),
            }
        }
    }
    eprintln!(
        "{precision} parity on {} ({} chains per model):\n{}",
        device.report().name,
        N_CHAINS,
        report.join("\n")
    );
    assert!(
        failures.is_empty(),
        "GPU and CPU disagree:\n{}",
        failures.join("\n")
    );
    if max_lanes > 1 && all {
        assert!(
            split_kinds.contains(&true) && split_kinds.contains(&false),
            "the models cover split chains both fused and not"
        );
    }
}

#[test]
fn parity_f32_matches_the_cpu_on_every_model() {
    check_all(Precision::F32, models::all(), true);
}

#[test]
fn parity_f64_matches_the_cpu_on_every_model() {
    check_all(Precision::F64, models::all(), true);
}

/// What Stan programs added, alone (also part of every model above).
#[test]
fn parity_f32_matches_the_cpu_on_the_stan_additions() {
    check_all(Precision::F32, models::stan_models(), false);
}

#[test]
fn parity_f64_matches_the_cpu_on_the_stan_additions() {
    check_all(Precision::F64, models::stan_models(), false);
}

/// Outside the support the GPU gives a non-finite log density where the CPU does.
#[test]
fn parity_outside_the_support_is_not_finite() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let mut builder = sampler::ModelBuilder::new("support");
    let x = builder.param("x");
    builder.sample(&x, sampler::Dist::half_normal(1.0));
    let model = sampler::CheckedModel::new(builder.build(), &sampler::Limits::default())
        .expect("the support model checks");
    for precision in [Precision::F32, Precision::F64] {
        if !support::supports(&device, precision) {
            continue;
        }
        let key = device
            .upload_model(&model, precision)
            .wait()
            .expect("upload");
        let batch = device
            .logp_grad(LogpGradRequest {
                model: key,
                points: vec![-0.5, 0.5, -1.5, 1.5],
                placement: None,
                lanes: None,
            })
            .wait()
            .expect("logp_grad");
        let finite: Vec<bool> = batch.logp.iter().map(|lp| lp.is_finite()).collect();
        assert_eq!(
            finite,
            vec![false, true, false, true],
            "{precision}: {:?}",
            batch.logp
        );
        assert!(
            batch.logp[0] < 0.0 && batch.logp[2] < 0.0,
            "{precision}: outside the support is -inf, got {:?}",
            batch.logp
        );
    }
}
