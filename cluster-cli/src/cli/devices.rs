//! `cluster-cli devices`: the Vulkan adapters of this machine (backend, type, memory,
//! features, limits); with `--check` a GPU-against-CPU check of each one (log densities and
//! gradients of the models at random points, in f32 and f64); with `--f64-builtins` a
//! measurement of the driver's own f64 `exp` and `log`, which our kernels avoid.
//!
//! With `--cluster HOST:PORT`, the GPUs of the node at that address instead, as it uses them
//! now: each adapter, whether its GPU supervisor runs a worker on it, and the chains it runs.
//!
//! Exit codes: 0 when at least one adapter is listed (and, with `--check`, every check
//! passed); 1 with the one line "no GPU adapter: ..." when Vulkan lists none, or when a check
//! fails. Scripts can therefore test `cluster-cli devices` for a usable GPU.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use gpu_actor::{
    AdapterChoice, AdapterReport, DeviceOptions, GpuDevice, LogpGradRequest, Precision,
    enumerate_adapters,
};
use sampler::{ChainId, ChainRng, CheckedModel, LogDensity, Seed};

use runtime::{ClientSettings, ClusterClient, MemberState};

use super::cluster::{TlsOptions, block_on, resolve};
use super::{default_models_dir, load_model};
use crate::cookie::{CookieArgs, Missing};

/// Arguments of `devices`.
#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// Also check each adapter: GPU log densities and gradients against the CPU at random
    /// points, in f32 and (where supported) f64, and the driver's f64 exp/log.
    #[arg(long)]
    check: bool,
    /// Model files for --check; default: every `*.json` in models/.
    models: Vec<PathBuf>,
    /// Chains (random points) per model for --check.
    #[arg(long, default_value_t = 256)]
    chains: usize,
    /// Measure each adapter's own f64 exp and log against the CPU. Some drivers lose the
    /// device over them (NVIDIA 580), so this runs last, on a device of its own.
    #[arg(long)]
    f64_builtins: bool,
    /// List the GPUs of the node at this address (HOST:PORT) and the chains each runs now,
    /// instead of this machine's adapters.
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["check", "f64_builtins"])]
    cluster: Option<String>,
    #[command(flatten)]
    cookie: CookieArgs,
    #[command(flatten)]
    tls: TlsOptions,
}

/// Relative tolerances of `--check`: errors are relative to `max(1, |log density|)` and, for
/// the gradient, to `max(1, largest |gradient coordinate|)`.
fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F32 => 1e-4,
        Precision::F64 => 1e-10,
    }
}

/// Runs the command.
pub fn run(args: DevicesArgs) -> anyhow::Result<()> {
    if let Some(cluster) = &args.cluster {
        return node_gpus(cluster, &args);
    }
    let adapters = enumerate_adapters()?;
    let noun = if adapters.len() == 1 {
        "adapter"
    } else {
        "adapters"
    };
    outln!("{} GPU {noun} (Vulkan), best first:", adapters.len());
    for adapter in &adapters {
        outln!("{adapter}");
        if adapter.is_software() {
            outln!("    note:     a software device: correct but slow, never for timings");
            outln!(
                "              `node` runs no GPU pool on it unless started with --software-gpu"
            );
        }
    }
    let mut failures = Vec::new();
    if args.check {
        let models = models(&args)?;
        for adapter in &adapters {
            failures.extend(check(adapter, &models, args.chains)?);
        }
    }
    if args.f64_builtins {
        for adapter in adapters.iter().filter(|a| a.features.shader_f64) {
            f64_builtins(adapter)?;
        }
    }
    if !failures.is_empty() {
        bail!("GPU and CPU disagree:\n{}", failures.join("\n"));
    }
    if args.check {
        outln!("every check passed");
    }
    Ok(())
}

/// `devices --cluster`: the GPUs of the node at `cluster` and their load, as it reports them.
fn node_gpus(cluster: &str, args: &DevicesArgs) -> anyhow::Result<()> {
    crate::logging::init(crate::logging::CLIENT_DEFAULT);
    let address = resolve(cluster)?;
    let mut settings = ClientSettings::new(args.cookie.resolve(Missing::Fail)?);
    settings.tls = args.tls.identity()?;
    let members = block_on(async move {
        let mut client = ClusterClient::connect(address, settings).await?;
        let members = client.members().await;
        client.close().await;
        Ok::<_, anyhow::Error>(members?)
    })??;
    let Some(node) = members.iter().find(|m| m.state == MemberState::Local) else {
        bail!("the node at {cluster} did not describe itself");
    };
    let gpus = node
        .resources
        .as_ref()
        .map(|r| r.gpus.as_slice())
        .unwrap_or_default();
    if gpus.is_empty() {
        bail!("no GPU adapter: node {} has none", node.name);
    }
    outln!("node {}: {} GPU adapter(s)", node.name, gpus.len());
    for (index, gpu) in gpus.iter().enumerate() {
        let load = match (gpu.in_use, gpu.chains) {
            (false, _) => "not used".to_owned(),
            (true, 0) => "idle".to_owned(),
            (true, chains) => format!("running {chains} chains"),
        };
        let kind = if gpu.software { ", software" } else { "" };
        outln!("[{index}] {} ({}{kind}): {load}", gpu.adapter, gpu.backend);
    }
    Ok(())
}

fn open(adapter: &AdapterReport) -> anyhow::Result<GpuDevice> {
    Ok(GpuDevice::open(&DeviceOptions {
        adapter: AdapterChoice::Index(adapter.index),
        allow_software: true,
        poll_timeout: Duration::from_secs(300),
        ..DeviceOptions::default()
    })?)
}

/// Prints the largest relative errors of the adapter's own f64 exp and log, or why it could
/// not run them.
fn f64_builtins(adapter: &AdapterReport) -> anyhow::Result<()> {
    let device = open(adapter)?;
    match device.check_f64_builtins().wait() {
        Ok(check) => {
            outln!(
                "[{}] built-in f64 exp/log over [-20, 20]: max relative error {:.1e} / {:.1e} ({})",
                adapter.index,
                check.exp,
                check.log,
                if check.exp.max(check.log) < 1e-14 {
                    "usable"
                } else {
                    "wrong"
                }
            );
            device.shutdown()?;
        }
        Err(err) => {
            outln!(
                "[{}] built-in f64 exp/log: the driver cannot run them: {err}",
                adapter.index
            );
            // Tearing down a device lost this way crashed the process on NVIDIA: leave it to
            // the process's exit.
            std::mem::forget(device);
        }
    }
    Ok(())
}

fn models(args: &DevicesArgs) -> anyhow::Result<Vec<CheckedModel>> {
    let paths = if args.models.is_empty() {
        let dir = default_models_dir();
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        paths
    } else {
        args.models.clone()
    };
    paths.iter().map(|path| load_model(path)).collect()
}

/// Checks one adapter; returns the failures.
fn check(
    adapter: &AdapterReport,
    models: &[CheckedModel],
    chains: usize,
) -> anyhow::Result<Vec<String>> {
    outln!("\ncheck of [{}] {}:", adapter.index, adapter.name);
    let device = open(adapter)?;
    let mut failures = Vec::new();
    outln!(
        "  {:<28} {:>5} {:>13} {:>13} {:>12}",
        "model",
        "prec",
        "lp error",
        "grad error",
        "batch"
    );
    for precision in [Precision::F32, Precision::F64] {
        if !device.supports(precision) {
            outln!("  ({precision}: not supported by this adapter)");
            continue;
        }
        for (k, model) in models.iter().enumerate() {
            let result = check_model(&device, model, precision, chains, k as u64)?;
            outln!(
                "  {:<28} {:>5} {:>13.2e} {:>13.2e} {:>9.3} ms",
                model.name(),
                precision.to_string(),
                result.lp,
                result.grad,
                result.batch.as_secs_f64() * 1e3
            );
            if result.lp > tolerance(precision) || result.grad > tolerance(precision) {
                failures.push(format!(
                    "{} {precision} on {}: errors {:.2e} (log density), {:.2e} (gradient) over {:.0e}",
                    model.name(),
                    adapter.name,
                    result.lp,
                    result.grad,
                    tolerance(precision)
                ));
            }
        }
    }
    device.shutdown()?;
    Ok(failures)
}

struct ModelCheck {
    lp: f64,
    grad: f64,
    /// Submission to readback of the second (warm) batch.
    batch: Duration,
}

fn check_model(
    device: &GpuDevice,
    model: &CheckedModel,
    precision: Precision,
    chains: usize,
    seed: u64,
) -> anyhow::Result<ModelCheck> {
    let dim = model.dim();
    let mut rng = ChainRng::new(Seed(seed), ChainId(0));
    let points: Vec<f64> = (0..chains * dim)
        .map(|_| rng.uniform_in(-2.0, 2.0))
        .collect();
    let key = device.upload_model(model, precision).wait()?;
    let request = LogpGradRequest {
        model: key,
        points: points.clone(),
        placement: None,
        lanes: None,
    };
    // The first batch compiles the pipeline; the second is timed.
    device.logp_grad(request.clone()).wait()?;
    let batch = device.logp_grad(request).wait()?;
    let mut evaluator = model.evaluator();
    let mut grad = vec![0.0; dim];
    let (mut lp_error, mut grad_error) = (0.0f64, 0.0f64);
    for c in 0..chains {
        let lp = evaluator.logp_grad(&points[c * dim..(c + 1) * dim], &mut grad);
        let gpu_grad = &batch.grad[c * dim..(c + 1) * dim];
        if !lp.is_finite() {
            if batch.logp[c].is_finite() {
                lp_error = f64::INFINITY;
            }
            continue;
        }
        let error = (batch.logp[c] - lp).abs() / lp.abs().max(1.0);
        lp_error = lp_error.max(if error.is_nan() { f64::INFINITY } else { error });
        let scale = grad.iter().fold(1.0f64, |m, g| m.max(g.abs()));
        for (g, c) in gpu_grad.iter().zip(&grad) {
            let error = (g - c).abs() / scale;
            grad_error = grad_error.max(if error.is_nan() { f64::INFINITY } else { error });
        }
    }
    Ok(ModelCheck {
        lp: lp_error,
        grad: grad_error,
        batch: batch.elapsed,
    })
}
