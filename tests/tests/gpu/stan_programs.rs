//! Every vendored posteriordb program that lowers (`stan/tests/posteriordb/`) is uploaded to
//! the device and its log density and gradient at random unconstrained points are compared
//! with the CPU evaluator's, in f32 and, where the adapter has it, f64. Errors are relative to
//! the rounding scale of the model's terms (`sampler::reference`), as the device's own
//! first-point check measures them; the tolerances are that check's, so a program this test
//! passes is one the device will not refuse for its arithmetic.
//!
//! A program the adapter cannot run (over a software device's loop limit, or past the compile
//! budget) is skipped with its reason. An f32 disagreement is rounding, not a defect, when the
//! same program in f64 agrees (long recursions such as the hidden Markov models' forward
//! algorithm); the device refuses such a program in f32 and it must stay rare. Every other
//! outcome is a failure.

use std::path::{Path, PathBuf};

use gpu_actor::{DeviceOptions, GpuDevice, GpuError, LogpGradRequest, Precision};
use sampler::reference::{Reference as Expected, compare, reference};
use sampler::{ChainId, ChainRng, CheckedModel, Seed};
use stan::posteriordb::{self, Reference};

/// Chains per batch: a full workgroup of 64 and part of another.
const N_CHAINS: usize = 70;
/// Points are uniform in `(-RADIUS, RADIUS)` per unconstrained coordinate: where warmup
/// starts chains (Stan's default), and a little past it.
const RADIUS: f64 = 2.0;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stan/tests/posteriordb")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Every reference posterior's name and checked model, for those the front end lowers.
fn lowered_programs() -> Vec<(String, CheckedModel)> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(fixtures().join("reference"))
        .expect("the vendored posteriordb references")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for path in names {
        let reference = Reference::from_json(&read(&path))
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let source = read(&fixtures().join(format!("models/{}.stan", reference.model)));
        let data = read(&fixtures().join(format!("data/{}.json", reference.data)));
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if let Ok(model) = posteriordb::load(&source, &data, &name) {
            out.push((name, model));
        }
    }
    out
}

fn device() -> Option<GpuDevice> {
    match GpuDevice::open(&DeviceOptions::default()) {
        Ok(device) => Some(device),
        Err(err @ GpuError::NoAdapter)
            if std::env::var("REQUIRE_GPU").is_ok_and(|value| value == "1") =>
        {
            panic!("REQUIRE_GPU=1 but {err}")
        }
        Err(err @ GpuError::NoAdapter) => {
            eprintln!("skipping GPU test: {err} (set REQUIRE_GPU=1 to make this a failure)");
            None
        }
        Err(err) => panic!("cannot open a GPU device: {err}"),
    }
}

/// Programs whose arithmetic amplifies rounding past the rounding scale of their terms, with
/// why: their f64 comparison allows `ILL_CONDITIONED_F64` instead.
const ILL_CONDITIONED: &[(&str, &str)] = &[(
    "gp_pois_regr-gp_pois_regr",
    "the Cholesky factor of a kernel matrix with 1e-10 jitter (condition number up to 1e10)",
)];
const ILL_CONDITIONED_F64: f64 = 1e-7;

/// The device's first-point tolerance (`gpu_actor::sampling::check`), relative to the
/// rounding scale; looser in f64 for the programs of `ILL_CONDITIONED`.
fn tolerance(precision: Precision, name: &str) -> f64 {
    match precision {
        Precision::F32 => 1e-3,
        Precision::F64 if ILL_CONDITIONED.iter().any(|(n, _)| *n == name) => ILL_CONDITIONED_F64,
        Precision::F64 => 1e-9,
    }
}

/// Whether a term of the log density or gradient at this point is past f32's range.
fn overflows_f32(expected: &Expected) -> bool {
    let limit = f64::from(f32::MAX);
    expected.lp_scale > limit || expected.grad_scale.iter().any(|&scale| scale > limit)
}

enum Outcome {
    Matched {
        lp: f64,
        grad: f64,
    },
    Skipped(String),
    /// f32 disagreed past the tolerance where f64 on the same kernel code agrees: rounding,
    /// not a defect. The device's first-point check refuses such a program in f32.
    Rounding(String),
}

fn check(
    device: &GpuDevice,
    name: &str,
    model: &CheckedModel,
    precision: Precision,
    seed: u64,
) -> Result<Outcome, String> {
    let program = model.program();
    let dim = program.dim;
    let key = match device.upload_model(model, precision).wait() {
        Ok(key) => key,
        Err(err) if err.model_unsupported() => return Ok(Outcome::Skipped(err.to_string())),
        Err(err) => return Err(format!("upload: {err}")),
    };
    let mut rng = ChainRng::new(Seed(seed), ChainId(0));
    let points: Vec<f64> = (0..N_CHAINS * dim)
        .map(|_| rng.uniform_in(-RADIUS, RADIUS))
        .collect();
    let batch = device
        .logp_grad(LogpGradRequest {
            model: key,
            points: points.clone(),
            placement: None,
            lanes: None,
        })
        .wait();
    let _ = device.unload_model(key).wait();
    let batch = match batch {
        Ok(batch) => batch,
        Err(err) if err.model_unsupported() => return Ok(Outcome::Skipped(err.to_string())),
        Err(err) => return Err(format!("logp_grad: {err}")),
    };
    let (mut worst_lp, mut worst_grad) = (0.0_f64, 0.0_f64);
    for c in 0..N_CHAINS {
        let theta = &points[c * dim..(c + 1) * dim];
        let expected = reference(program, theta);
        if precision == Precision::F32 && overflows_f32(&expected) {
            // Values past f32's range: the device's infinity is the right answer there.
            continue;
        }
        let errors = compare(
            batch.logp[c],
            &batch.grad[c * dim..(c + 1) * dim],
            &expected,
            tolerance(precision, name),
        )
        .map_err(|what| format!("chain {c}: {what}"));
        let errors = match errors {
            Ok(errors) => errors,
            Err(what) if precision == Precision::F32 && device.supports(Precision::F64) => {
                return match check(device, name, model, Precision::F64, seed)? {
                    Outcome::Matched { .. } => Ok(Outcome::Rounding(what)),
                    _ => Err(format!("{what}, and f64 did not run")),
                };
            }
            Err(what) => return Err(what),
        };
        worst_lp = worst_lp.max(errors.lp);
        worst_grad = worst_grad.max(errors.grad);
    }
    Ok(Outcome::Matched {
        lp: worst_lp,
        grad: worst_grad,
    })
}

fn check_all(precision: Precision) {
    let Some(device) = device() else {
        return;
    };
    if !device.supports(precision) {
        eprintln!(
            "skipping {precision}: adapter {} lacks it",
            device.report().name
        );
        return;
    }
    let programs = lowered_programs();
    assert!(
        programs.len() >= 40,
        "only {} posteriordb programs lower",
        programs.len()
    );
    let (mut report, mut failures, mut matched, mut rounding) = (Vec::new(), Vec::new(), 0, 0);
    for (k, (name, model)) in programs.iter().enumerate() {
        let started = std::time::Instant::now();
        match check(&device, name, model, precision, 7000 + k as u64) {
            Ok(Outcome::Matched { lp, grad }) => {
                matched += 1;
                report.push(format!(
                    "{name:<52} scaled error: log density {lp:.1e}, gradient {grad:.1e} ({:.1} s)",
                    started.elapsed().as_secs_f64()
                ));
            }
            Ok(Outcome::Skipped(why)) => report.push(format!("{name:<52} skipped: {why}")),
            Ok(Outcome::Rounding(what)) => {
                rounding += 1;
                report.push(format!("{name:<52} f32 rounding, f64 matches: {what}"));
            }
            Err(what) => failures.push(format!("{name} {precision}: {what}")),
        }
    }
    eprintln!(
        "{precision} on {}:\n{}",
        device.report().name,
        report.join("\n")
    );
    // Waits for kernels still compiling: a process that exits mid-compile can crash.
    device.shutdown().expect("the device shuts down");
    assert!(
        failures.is_empty(),
        "GPU and CPU disagree:\n{}",
        failures.join("\n")
    );
    // Skips are for size alone and rounding for long recursions: most programs must match.
    assert!(
        rounding * 10 <= programs.len(),
        "f32 rounding past the tolerance on {rounding} of {} programs",
        programs.len()
    );
    assert!(
        matched * 4 >= programs.len() * 3,
        "only {matched} of {} programs ran on the device",
        programs.len()
    );
}

#[test]
fn posteriordb_programs_f32_match_the_cpu() {
    check_all(Precision::F32);
}

#[test]
fn posteriordb_programs_f64_match_the_cpu() {
    check_all(Precision::F64);
}
