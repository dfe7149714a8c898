//! Draws against known posterior moments: how many Monte Carlo standard errors the estimated
//! mean (and sd) of one output column are from reference values, such as analytic posteriors
//! or posteriordb's reference draws. The posterior tests of the CPU and GPU paths check every
//! sampler configuration this way.

use std::fmt;

use super::{mcse_mean, mcse_sd};
use crate::{ChainTrace, CheckedModel};

/// The reference mean, and sd where it is known and its MCSE trustworthy, of one output
/// column.
#[derive(Clone, Debug, PartialEq)]
pub struct Truth {
    /// The column's name, as `CheckedModel::columns` prints it.
    pub label: String,
    /// Its index in a draw's values.
    pub column: usize,
    pub mean: f64,
    pub sd: Option<f64>,
}

impl Truth {
    /// The truth for column `name` of `model` (a scalar when `index` is `None`, else element
    /// `index` of a vector); `None` if the model has no such column.
    pub fn new(
        model: &CheckedModel,
        name: &str,
        index: Option<usize>,
        mean: f64,
        sd: Option<f64>,
    ) -> Option<Truth> {
        let columns = model.columns();
        let column = columns
            .iter()
            .position(|c| c.name == name && c.index == index)?;
        Some(Truth {
            label: columns[column].to_string(),
            column,
            mean,
            sd,
        })
    }
}

/// How far a run's estimates of one column are from its [`Truth`], in MCSE.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub label: String,
    /// The mean over all chains' draws, and its distance from the truth in MCSE
    /// ([`mcse_mean`]).
    pub mean: f64,
    pub z_mean: f64,
    /// The sd over all draws, and its distance from the truth in MCSE ([`mcse_sd`]) where
    /// the truth has an sd.
    pub sd: f64,
    pub z_sd: Option<f64>,
    /// The MCSE of the mean.
    pub mcse_mean: f64,
}

impl Comparison {
    /// The larger |z| of the mean and the sd.
    pub fn max_abs_z(&self) -> f64 {
        self.z_mean.abs().max(self.z_sd.map_or(0.0, f64::abs))
    }

    /// Whether both estimates are within `tolerance` MCSE of the truth; a NaN z-score (no
    /// MCSE) never agrees.
    pub fn agrees(&self, tolerance: f64) -> bool {
        self.max_abs_z() <= tolerance
    }

    /// The smallest bias of the mean, in posterior sds, that `tolerance` lets through.
    pub fn resolution(&self, tolerance: f64) -> f64 {
        tolerance * self.mcse_mean / self.sd
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: mean {:.4} (z {:+.2}), sd {:.4} (z {})",
            self.label,
            self.mean,
            self.z_mean,
            self.sd,
            self.z_sd
                .map_or("not checked".into(), |z| format!("{z:+.2}"))
        )
    }
}

/// Compares the draws of `truth.column` over all of `traces` with `truth`.
pub fn compare(traces: &[ChainTrace], truth: &Truth) -> Comparison {
    let chains: Vec<Vec<f64>> = traces.iter().map(|t| t.column(truth.column)).collect();
    let chains: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
    let n_total: usize = chains.iter().map(|c| c.len()).sum();
    let mean = chains.iter().flat_map(|c| c.iter()).sum::<f64>() / n_total as f64;
    let variance = chains
        .iter()
        .flat_map(|c| c.iter())
        .map(|x| (x - mean).powi(2))
        .sum::<f64>()
        / (n_total as f64 - 1.0);
    let sd = variance.sqrt();
    let mcse_of_mean = mcse_mean(&chains);
    Comparison {
        label: truth.label.clone(),
        mean,
        z_mean: (mean - truth.mean) / mcse_of_mean,
        sd,
        z_sd: truth.sd.map(|true_sd| (sd - true_sd) / mcse_sd(&chains)),
        mcse_mean: mcse_of_mean,
    }
}

/// At most `n` of `comparisons`, furthest from their truths first ([`Comparison::max_abs_z`]):
/// worth printing even when all agree, so that a near miss shows.
pub fn worst(comparisons: &[Comparison], n: usize) -> Vec<&Comparison> {
    let mut worst: Vec<&Comparison> = comparisons.iter().collect();
    worst.sort_by(|a, b| b.max_abs_z().total_cmp(&a.max_abs_z()));
    worst.truncate(n);
    worst
}

/// A line for each of `comparisons` that does not agree with its truth (`truths`, in the same
/// order) within `tolerance` MCSE, naming the truth.
pub fn disagreements(comparisons: &[Comparison], truths: &[Truth], tolerance: f64) -> Vec<String> {
    comparisons
        .iter()
        .zip(truths)
        .filter(|(comparison, _)| !comparison.agrees(tolerance))
        .map(|(comparison, truth)| {
            format!(
                "{comparison}; truth: mean {}, sd {:?}",
                truth.mean, truth.sd
            )
        })
        .collect()
}
