//! posteriordb's reference posteriors as a test set: the reference summaries that
//! `bench/posteriordb/make_fixtures.py` writes (`stan/tests/posteriordb/reference/*.json`),
//! loading a posterior's program and data, and the check of a run against its reference.
//!
//! The check: for every column of the reference (`theta[1]`, ...), the run must have a
//! column of that name, and both its mean and its sd must be within [`Z_MAX`] combined Monte
//! Carlo standard errors of the reference's:
//! z = |ours − ref| / sqrt(mcse_ours² + mcse_ref²). Both sides estimate the MCSE alike
//! (`sampler::diagnostics`, ArviZ's `_mcse_mean` and `_mcse_sd`; Vehtari et al. 2021,
//! doi:10.1214/20-BA1221).
//!
//! No files are read here: callers hand over the texts.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sampler::summary::Row;
use sampler::{
    ChainTrace, CheckedModel, DrawEvent, Limits, Observer, RunSummary, SampleError,
    SamplerSettings, Seed,
};
use serde_json::Value as Json;

/// The largest |z| of a passing column, for its mean and for its sd.
pub const Z_MAX: f64 = 4.0;

/// A reference posterior: which program and data, how Stan sampled it, and a summary of
/// each column of its reference draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// posteriordb's name, `<data>-<model>`.
    pub posterior: String,
    /// The program: `models/<model>.stan`.
    pub model: String,
    /// The data: `data/<data>.json`.
    pub data: String,
    /// Reference draws over all chains.
    pub n_draws: u64,
    /// Chains of the reference.
    pub n_chains: u64,
    /// Stan's `adapt_delta` for the reference (0.8 unless posteriordb gives one).
    pub adapt_delta: f64,
    /// Stan's `max_treedepth` for the reference (10 unless posteriordb gives one).
    pub max_treedepth: u32,
    /// One entry per reference column, in posteriordb's order.
    pub columns: Vec<ReferenceColumn>,
}

/// The reference's statistics of one column.
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceColumn {
    /// Stan's bracket form, `theta[1]`.
    pub name: String,
    pub mean: f64,
    pub sd: f64,
    pub mcse_mean: f64,
    pub mcse_sd: f64,
}

/// A reference summary that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("reference summary: {0}")]
pub struct ReferenceError(String);

impl Reference {
    /// Reads the JSON written by `bench/posteriordb/make_fixtures.py`.
    pub fn from_json(text: &str) -> Result<Reference, ReferenceError> {
        let json: Json =
            serde_json::from_str(text).map_err(|err| ReferenceError(err.to_string()))?;
        let string = |key: &str| {
            json[key]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| ReferenceError(format!("`{key}` must be a string")))
        };
        let count = |key: &str| {
            json[key]
                .as_u64()
                .ok_or_else(|| ReferenceError(format!("`{key}` must be a count")))
        };
        let control = &json["control"];
        let adapt_delta = control["adapt_delta"]
            .as_f64()
            .ok_or_else(|| ReferenceError("`control.adapt_delta` must be a number".into()))?;
        let max_treedepth = control["max_treedepth"]
            .as_u64()
            .and_then(|depth| u32::try_from(depth).ok())
            .ok_or_else(|| ReferenceError("`control.max_treedepth` must be a count".into()))?;
        let params = json["params"]
            .as_array()
            .ok_or_else(|| ReferenceError("`params` must be an array".into()))?;
        let columns = params
            .iter()
            .map(|param| {
                let name = param["name"]
                    .as_str()
                    .ok_or_else(|| ReferenceError("a column without a `name`".into()))?;
                let number = |key: &str| {
                    param[key].as_f64().ok_or_else(|| {
                        ReferenceError(format!("column {name}: `{key}` must be a number"))
                    })
                };
                Ok(ReferenceColumn {
                    name: name.to_owned(),
                    mean: number("mean")?,
                    sd: number("sd")?,
                    mcse_mean: number("mcse_mean")?,
                    mcse_sd: number("mcse_sd")?,
                })
            })
            .collect::<Result<Vec<_>, ReferenceError>>()?;
        Ok(Reference {
            posterior: string("posterior")?,
            model: string("model")?,
            data: string("data")?,
            n_draws: count("ndraws")?,
            n_chains: count("nchains")?,
            adapt_delta,
            max_treedepth,
            columns,
        })
    }

    /// `base` with the reference's adapt_delta and max_treedepth.
    pub fn settings(&self, base: &SamplerSettings) -> SamplerSettings {
        SamplerSettings {
            target_accept: self.adapt_delta,
            max_depth: self.max_treedepth,
            ..base.clone()
        }
    }
}

/// Where a program stopped on its way to a checked model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Parse,
    Data,
    Lower,
    /// The IR's own check (`CheckedModel::new`).
    Check,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::Data => "data",
            Stage::Lower => "lower",
            Stage::Check => "check",
        }
    }
}

/// A program that does not reach a checked model, with the first line of the error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported: {}: {message}", stage.as_str())]
pub struct Unsupported {
    pub stage: Stage,
    pub message: String,
}

impl Unsupported {
    fn new(stage: Stage, error: impl ToString) -> Unsupported {
        let text = error.to_string();
        Unsupported {
            stage,
            message: text.lines().next().unwrap_or_default().to_owned(),
        }
    }
}

/// Parses `source`, reads `data_json` against it and lowers both to a checked model named
/// `name`, as `cluster-cli sample model.stan --data data.json` does.
pub fn load(source: &str, data_json: &str, name: &str) -> Result<CheckedModel, Unsupported> {
    let program = crate::parse(source).map_err(|err| Unsupported::new(Stage::Parse, err))?;
    let data =
        crate::read_data(&program, data_json).map_err(|err| Unsupported::new(Stage::Data, err))?;
    let model =
        crate::lower(&program, &data, name).map_err(|err| Unsupported::new(Stage::Lower, err))?;
    CheckedModel::new(model, &Limits::default()).map_err(|err| Unsupported::new(Stage::Check, err))
}

/// One reference column against the run's column of the same name.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnCheck {
    pub name: String,
    /// Ours and the reference's mean.
    pub mean: (f64, f64),
    /// Ours and the reference's sd.
    pub sd: (f64, f64),
    pub z_mean: f64,
    pub z_sd: f64,
}

impl ColumnCheck {
    /// Both |z| at most [`Z_MAX`] (a NaN fails).
    pub fn passed(&self) -> bool {
        self.z_mean <= Z_MAX && self.z_sd <= Z_MAX
    }
}

/// A run's summary against a reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// The reference columns the run has, in the reference's order.
    pub columns: Vec<ColumnCheck>,
    /// Reference columns the run lacks.
    pub missing: Vec<String>,
}

/// |ours − ref| / sqrt(mcse_ours² + mcse_ref²).
pub fn z_score(ours: f64, reference: f64, mcse_ours: f64, mcse_reference: f64) -> f64 {
    (ours - reference).abs() / mcse_ours.hypot(mcse_reference)
}

/// Checks every reference column against the summary's row of the same name.
pub fn compare(reference: &Reference, summary: &RunSummary) -> Comparison {
    let row = |name: &str| summary.rows.iter().find(|row: &&Row| row.name == name);
    let mut comparison = Comparison {
        columns: Vec::with_capacity(reference.columns.len()),
        missing: Vec::new(),
    };
    for column in &reference.columns {
        let Some(row) = row(&column.name) else {
            comparison.missing.push(column.name.clone());
            continue;
        };
        let ours = &row.stats;
        comparison.columns.push(ColumnCheck {
            name: column.name.clone(),
            mean: (ours.mean, column.mean),
            sd: (ours.sd, column.sd),
            z_mean: z_score(ours.mean, column.mean, ours.mcse_mean, column.mcse_mean),
            z_sd: z_score(ours.sd, column.sd, ours.mcse_sd, column.mcse_sd),
        });
    }
    comparison
}

/// The largest value, NaN if any is NaN; 0 for none.
fn max_or_nan(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |max, z| if z.is_nan() || z > max { z } else { max })
}

impl Comparison {
    /// Largest |z| of the means (NaN if any is NaN).
    pub fn max_z_mean(&self) -> f64 {
        max_or_nan(self.columns.iter().map(|c| c.z_mean))
    }

    /// Largest |z| of the sds (NaN if any is NaN).
    pub fn max_z_sd(&self) -> f64 {
        max_or_nan(self.columns.iter().map(|c| c.z_sd))
    }

    /// No missing column and every column within [`Z_MAX`].
    pub fn passed(&self) -> bool {
        self.missing.is_empty() && self.columns.iter().all(ColumnCheck::passed)
    }

    /// One line per problem: missing columns, then columns past [`Z_MAX`].
    pub fn failures(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.missing.is_empty() {
            lines.push(format!(
                "columns missing from the output: {}",
                self.missing.join(", ")
            ));
        }
        for c in self.columns.iter().filter(|c| !c.passed()) {
            lines.push(format!(
                "{}: mean {:.6} vs {:.6} (|z| {:.2}), sd {:.6} vs {:.6} (|z| {:.2})",
                c.name, c.mean.0, c.mean.1, c.z_mean, c.sd.0, c.sd.1, c.z_sd
            ));
        }
        lines
    }
}

/// Notes when the first draw of any chain arrives.
#[derive(Debug, Default)]
pub struct FirstDraw(OnceLock<Instant>);

impl FirstDraw {
    /// When the first draw arrived, if one has.
    pub fn at(&self) -> Option<Instant> {
        self.0.get().copied()
    }
}

impl Observer for FirstDraw {
    fn on_draw(&self, _event: &DrawEvent) {
        let _ = self.0.set(Instant::now());
    }
}

/// What a run on the CPU gives.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuRun {
    pub comparison: Comparison,
    /// Smallest bulk ESS over the sampled parameters per second of one core: over the sum of
    /// the chains' sampling times, warmup excluded (as `cluster-cli bench`, whose one chain
    /// runs on one core), so that it does not depend on the number of threads.
    pub min_ess_bulk_per_second: f64,
    /// From the program's text to the first draw: parse, data, lowering, the IR check and
    /// the sampler's setup.
    pub to_first_draw: Duration,
    /// The whole sampler call, warmup included.
    pub wall: Duration,
}

/// Why a posterior has no comparison.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    #[error("sampling failed: {0}")]
    Sample(String),
}

impl From<SampleError> for RunError {
    fn from(err: SampleError) -> RunError {
        RunError::Sample(err.to_string())
    }
}

/// A CPU run with what it sampled, for callers that also write the chains out.
#[derive(Debug, Clone)]
pub struct CpuChains {
    pub run: CpuRun,
    pub model: CheckedModel,
    /// The settings run: `base` with the reference's adapt_delta and max_treedepth.
    pub settings: SamplerSettings,
    pub traces: Vec<ChainTrace>,
    pub summary: RunSummary,
    /// Parsing, reading the data and lowering.
    pub load: Duration,
}

/// Loads the posterior and samples it on CPU threads with `base` settings changed to the
/// reference's adapt_delta and max_treedepth, then compares.
pub fn run_on_cpu(
    reference: &Reference,
    source: &str,
    data_json: &str,
    base: &SamplerSettings,
    seed: Seed,
    n_chains: u32,
) -> Result<CpuRun, RunError> {
    sample_on_cpu(reference, source, data_json, base, seed, n_chains).map(|chains| chains.run)
}

/// [`run_on_cpu`], keeping the chains.
pub fn sample_on_cpu(
    reference: &Reference,
    source: &str,
    data_json: &str,
    base: &SamplerSettings,
    seed: Seed,
    n_chains: u32,
) -> Result<CpuChains, RunError> {
    let started = Instant::now();
    let model = load(source, data_json, &reference.model)?;
    let load = started.elapsed();
    let settings = reference.settings(base);
    let first_draw = FirstDraw::default();
    let sampling_started = Instant::now();
    let traces = sampler::sample(&model, &settings, seed, n_chains, &first_draw)?;
    let wall = sampling_started.elapsed();
    let core_seconds: f64 = traces.iter().map(|t| t.sampling_seconds).sum();
    let to_first_draw = first_draw.at().unwrap_or_else(Instant::now) - started;
    let summary = RunSummary::new(
        &model.columns(),
        model.program().n_parameter_columns(),
        &traces,
        &settings,
    );
    let run = CpuRun {
        comparison: compare(reference, &summary),
        min_ess_bulk_per_second: summary.min_ess_bulk() / core_seconds,
        to_first_draw,
        wall,
    };
    Ok(CpuChains {
        run,
        model,
        settings,
        traces,
        summary,
        load,
    })
}

#[cfg(test)]
mod tests;
