//! Command-line arguments and the dispatch to each subcommand.

mod bench;
mod bench_cluster;
mod bench_compile;
mod bench_gpu;
mod bench_gpus;
mod cluster;
mod debug;
mod devices;
mod join;
mod limits;
mod node;
mod posteriordb;
mod sample;
mod sample_remote;
mod status;
mod tls;

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use sampler::{AdaptationKind, CheckedModel, DataValue, Limits, MetricKind, SamplerSettings};

/// An Erlang-style actor cluster runtime for Bayesian inference.
#[derive(Debug, Parser)]
#[command(name = "cluster-cli", version, about)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sample a model (JSON IR file) and print its summary.
    Sample(sample::SampleArgs),
    /// Measure the sampler on the benchmark models and print a table.
    Bench(bench::BenchArgs),
    /// List the GPU adapters (Vulkan): backend, type, memory, features; exit code 1 if none.
    Devices(devices::DevicesArgs),
    /// Run a cluster node until SIGINT or SIGTERM.
    Node(node::NodeArgs),
    /// Connect to a node and list its cluster; with --node, make a running node join PEER.
    Join(join::JoinArgs),
    /// List the nodes of a cluster: state, CPU slots, GPUs, running jobs.
    Status(status::StatusArgs),
    /// Measure a cluster: remote-call overhead, and ESS/s scaling over node processes.
    BenchCluster(bench_cluster::BenchClusterArgs),
    /// Measure GPU shader size and compile time against model size and print a table.
    BenchCompile(bench_compile::BenchCompileArgs),
    /// Measure one job on 1, 2, 4, ... of this machine's GPUs together and print a table.
    BenchGpus(bench_gpus::BenchGpusArgs),
    /// Run posteriordb's reference posteriors and check them: a table of |z| and ESS/s.
    Posteriordb(posteriordb::PosteriordbArgs),
    /// TLS for a cluster: `tls init DIR` makes a private CA and node and client certificates.
    Tls(tls::TlsArgs),
    /// Test tools: raw requests, fault injection (hidden).
    #[command(hide = true)]
    Debug(debug::DebugArgs),
}

/// Errors in the user's input files: reported with exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum BadInput {
    /// In one line, after the file's path.
    #[error("{path}: {message}")]
    File { path: String, message: String },
    /// A Stan error rendered with its file, line and column, the source line and a caret.
    #[error("{0}")]
    Rendered(String),
}

/// The largest Stan program read (a program, not data: data come with `--data`).
const MAX_STAN_SOURCE_BYTES: u64 = 16 << 20;

/// Warmup iterations and draws per chain unless given.
const DEFAULT_ITERATIONS: u64 = 1000;

/// Sampler settings shared by `sample` and `bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct SamplerArgs {
    /// Warmup iterations per chain [default: 1000; `bench --device gpu`: 400, as the NumPyro
    /// anchor].
    #[arg(long)]
    warmup: Option<u64>,
    /// Draws kept per chain [default: 1000; `bench --device gpu`: 400, as the NumPyro anchor].
    #[arg(long)]
    draws: Option<u64>,
    /// Warmup procedure.
    #[arg(long, value_enum, default_value_t = Adaptation::Nutpie)]
    adaptation: Adaptation,
    /// Metric (inverse mass matrix) form; dense needs --adaptation stan.
    #[arg(long, value_enum, default_value_t = MetricArg::Diag)]
    metric: MetricArg,
    /// Target acceptance statistic of the step-size adaptation.
    #[arg(long, default_value_t = 0.8)]
    target_accept: f64,
    /// Maximum tree depth.
    #[arg(long, default_value_t = 10)]
    max_depth: u32,
    /// Step-size jitter J in [0, 1): each transition draws its step size uniformly from
    /// step size x (1 - J, 1 + J) [default: 0, no jitter, as Stan; nutpie uses 0.1].
    #[arg(long, value_name = "J")]
    stepsize_jitter: Option<f64>,
    /// Keep warmup draws in the output files.
    #[arg(long)]
    save_warmup: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Adaptation {
    /// Stan's windowed adaptation (75 / 25·2^k / 50).
    Stan,
    /// nutpie's gradient-based diagonal adaptation.
    Nutpie,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MetricArg {
    Diag,
    Dense,
}

impl SamplerArgs {
    fn settings(&self, threads: usize) -> SamplerSettings {
        SamplerSettings {
            num_warmup: self.warmup.unwrap_or(DEFAULT_ITERATIONS),
            num_draws: self.draws.unwrap_or(DEFAULT_ITERATIONS),
            adaptation: match self.adaptation {
                Adaptation::Stan => AdaptationKind::Stan,
                Adaptation::Nutpie => AdaptationKind::Nutpie,
            },
            metric: match self.metric {
                MetricArg::Diag => MetricKind::Diag,
                MetricArg::Dense => MetricKind::Dense,
            },
            target_accept: self.target_accept,
            max_depth: self.max_depth,
            step_size_jitter: self.stepsize_jitter,
            save_warmup: self.save_warmup,
            threads,
            ..SamplerSettings::default()
        }
    }
}

/// Reads and checks a model file; any problem is a [`BadInput`].
pub fn load_model(path: &Path) -> anyhow::Result<CheckedModel> {
    load_model_with_data(path, None)
}

/// Reads a file of at most `max` bytes (checked before reading).
fn read_bounded(path: &Path, max: u64, what: &str) -> Result<String, BadInput> {
    let bad = |message: String| BadInput::File {
        path: path.display().to_string(),
        message,
    };
    let len = std::fs::metadata(path)
        .map_err(|err| bad(format!("cannot read the {what}: {err}")))?
        .len();
    if len > max {
        return Err(bad(format!(
            "the {what} is {len} bytes, over the limit of {max}"
        )));
    }
    std::fs::read_to_string(path).map_err(|err| bad(format!("cannot read the {what}: {err}")))
}

/// A model ready to sample and, for a Stan program with a `generated quantities` block, the
/// block, which runs on this machine after sampling.
pub struct LoadedModel {
    pub model: CheckedModel,
    pub generated: Option<Generated>,
}

/// A Stan program's generated quantities, with the source for error messages.
pub struct Generated {
    pub quantities: stan::GeneratedQuantities,
    pub file_name: String,
    pub source: String,
}

/// Reads and checks a model: a JSON IR file, or a Stan program (`.stan`) with its data file
/// (Stan's JSON data format), parsed and lowered to the IR here; any problem is a
/// [`BadInput`]. Either way only the IR, data included, goes on to samplers and nodes.
pub fn load_model_with_data(path: &Path, data: Option<&Path>) -> anyhow::Result<CheckedModel> {
    Ok(load_model_for_sampling(path, data)?.model)
}

/// [`load_model_with_data`], keeping a Stan program's generated quantities.
pub fn load_model_for_sampling(path: &Path, data: Option<&Path>) -> anyhow::Result<LoadedModel> {
    if path.extension().is_some_and(|ext| ext == "stan") {
        return load_stan(path, data);
    }
    let bad = |message: String| BadInput::File {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|err| bad(format!("cannot read the model file: {err}")))?;
    let model = match data {
        None => CheckedModel::from_json(&text, &Limits::default())
            .map_err(|err| bad(err.to_string()))?,
        Some(data_path) => {
            let mut model = sampler::Model::from_json(&text).map_err(|err| bad(err.to_string()))?;
            let values = read_ir_data(data_path)?;
            for (name, value) in values {
                if model.data.contains_key(&name) {
                    return Err(bad(format!(
                        "data `{name}` is in the model file and in {}; give it once",
                        data_path.display()
                    ))
                    .into());
                }
                model.data.insert(name, value);
            }
            CheckedModel::new(model, &Limits::default()).map_err(|err| bad(err.to_string()))?
        }
    };
    for warning in model.warnings() {
        errln!("warning: {}: {warning}", path.display());
    }
    Ok(LoadedModel {
        model,
        generated: None,
    })
}

/// Data for a JSON IR model in Stan's JSON data format: numbers are `int` (written without
/// `.` or exponent) or `real` scalars, flat lists vectors (`int` when every element is),
/// lists of equal-length lists matrices.
fn read_ir_data(path: &Path) -> anyhow::Result<std::collections::BTreeMap<String, DataValue>> {
    let bad = |message: String| BadInput::File {
        path: path.display().to_string(),
        message,
    };
    let text = read_bounded(path, stan::MAX_JSON_BYTES as u64, "data file")?;
    let root: serde_json::Value =
        serde_json::from_str(&text).map_err(|err| bad(format!("invalid JSON data: {err}")))?;
    let serde_json::Value::Object(object) = root else {
        return Err(bad("JSON data must be one object of named values".into()).into());
    };
    let real = |v: &serde_json::Value| -> Option<f64> {
        match v {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => match s.as_str() {
                "Inf" | "+Inf" | "Infinity" | "+Infinity" | "inf" => Some(f64::INFINITY),
                "-Inf" | "-Infinity" | "-inf" => Some(f64::NEG_INFINITY),
                "NaN" | "nan" => Some(f64::NAN),
                _ => None,
            },
            _ => None,
        }
    };
    let mut out = std::collections::BTreeMap::new();
    for (name, value) in object {
        let unsupported = || {
            bad(format!(
                "data `{name}`: an IR model takes numbers, lists of numbers and lists of equal-length lists (matrices)"
            ))
        };
        let converted = match &value {
            serde_json::Value::Array(items)
                if items.iter().all(|i| i.is_array()) && !items.is_empty() =>
            {
                let rows: Option<Vec<Vec<f64>>> = items
                    .iter()
                    .map(|row| row.as_array().and_then(|r| r.iter().map(real).collect()))
                    .collect();
                let rows = rows.ok_or_else(unsupported)?;
                if rows.iter().any(|r| r.len() != rows[0].len()) {
                    return Err(bad(format!("data `{name}`: rows of different lengths")).into());
                }
                DataValue::Matrix(rows)
            }
            serde_json::Value::Array(items) => {
                match items
                    .iter()
                    .map(serde_json::Value::as_i64)
                    .collect::<Option<Vec<i64>>>()
                {
                    Some(ints) if !ints.is_empty() => DataValue::IntVector(ints),
                    _ => DataValue::Vector(
                        items
                            .iter()
                            .map(real)
                            .collect::<Option<Vec<f64>>>()
                            .ok_or_else(unsupported)?,
                    ),
                }
            }
            other => match other.as_i64() {
                Some(i) => DataValue::Int(i),
                None => DataValue::Real(real(other).ok_or_else(unsupported)?),
            },
        };
        out.insert(name, converted);
    }
    Ok(out)
}

/// A Stan program and its data, lowered to a checked IR model named after the file.
fn load_stan(path: &Path, data: Option<&Path>) -> anyhow::Result<LoadedModel> {
    let name = path.display().to_string();
    let bad = |message: String| BadInput::File {
        path: name.clone(),
        message,
    };
    let source = read_bounded(path, MAX_STAN_SOURCE_BYTES, "Stan program")?;
    let program =
        stan::parse(&source).map_err(|err| BadInput::Rendered(err.render(&name, &source)))?;
    let declares_data = program
        .data
        .as_ref()
        .is_some_and(|block| !block.stmts.is_empty());
    let values = match data {
        Some(data_path) => {
            let text = read_bounded(data_path, stan::MAX_JSON_BYTES as u64, "data file")?;
            stan::read_data(&program, &text).map_err(|err| BadInput::File {
                path: data_path.display().to_string(),
                message: err.to_string(),
            })?
        }
        None if declares_data => {
            return Err(bad(
                "the program declares data: give its data file with --data FILE".into(),
            )
            .into());
        }
        None => stan::Data::default(),
    };
    let model_name = path.file_stem().map_or_else(
        || "model".to_owned(),
        |stem| stem.to_string_lossy().into_owned(),
    );
    let model = stan::lower(&program, &values, &model_name)
        .map_err(|err| BadInput::Rendered(err.render(&name, &source)))?;
    let model = CheckedModel::new(model, &Limits::default()).map_err(|err| bad(err.to_string()))?;
    for warning in model.warnings() {
        errln!("warning: {name}: {warning}");
    }
    let generated = match &program.generated_quantities {
        Some(_) => {
            let quantities = stan::GeneratedQuantities::new(&program, &values)
                .map_err(|err| BadInput::Rendered(err.render(&name, &source)))?;
            (!quantities.is_empty()).then_some(Generated {
                quantities,
                file_name: name,
                source,
            })
        }
        None => None,
    };
    Ok(LoadedModel { model, generated })
}

/// Runs the parsed command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Sample(args) => sample::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Devices(args) => devices::run(args),
        Command::Node(args) => node::run(args),
        Command::Join(args) => join::run(args),
        Command::Status(args) => status::run(args),
        Command::BenchCluster(args) => bench_cluster::run(args),
        Command::BenchCompile(args) => bench_compile::run(args),
        Command::BenchGpus(args) => bench_gpus::run(args),
        Command::Posteriordb(args) => posteriordb::run(args),
        Command::Tls(args) => tls::run(args),
        Command::Debug(args) => debug::run(args),
    }
}

/// Creates the parent directory of an output file.
fn ensure_parent(path: &Path) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    Ok(())
}

fn default_models_dir() -> PathBuf {
    PathBuf::from("models")
}
