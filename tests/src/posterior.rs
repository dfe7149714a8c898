//! Posterior checks for runs of real processes: a conjugate model with an analytic posterior,
//! Stan CSV files read back, and tolerances derived from the Monte Carlo standard error (as
//! the sampler's own posterior tests use), so that a distributed run is checked like a local
//! one.

use std::path::Path;

use sampler::diagnostics::{mcse_mean, mcse_sd};
use sampler::stan_csv::chain_file_names;

/// Tolerance in MCSEs: a correct sampler misses it with probability about 1e-4 per check,
/// and the seeds are fixed, so a passing test keeps passing.
const Z: f64 = 4.0;

/// `y_i ~ normal(mu, 1)`, `mu ~ normal(0, 10)`: its JSON IR and the exact posterior of `mu`.
#[derive(Debug, Clone)]
pub struct NormalMean {
    /// The model IR as JSON.
    pub json: String,
    /// Posterior mean of `mu`.
    pub mean: f64,
    /// Posterior standard deviation of `mu`.
    pub sd: f64,
}

impl NormalMean {
    /// The model with `n` observations (a fixed pseudo-random sequence around 0.7). More
    /// observations make each gradient slower, not the posterior harder.
    pub fn new(n: usize) -> Self {
        let y: Vec<f64> = (0..n)
            .map(|i| {
                let u = ((i as u64).wrapping_mul(2_654_435_761) % 1000) as f64 / 1000.0;
                0.7 + 2.0 * (u - 0.5)
            })
            .collect();
        let values: Vec<String> = y.iter().map(|v| format!("{v:.3}")).collect();
        // The posterior of the values as written (rounded).
        let sum: f64 = values
            .iter()
            .map(|v| v.parse::<f64>().expect("a number"))
            .sum();
        let precision = n as f64 + 1.0 / 100.0;
        let json = format!(
            r#"{{"ir_version": 1, "name": "normal_mean",
  "data": {{"y": {{"vector": [{}]}}}},
  "parameters": [{{"name": "mu"}}],
  "model": [
    {{"sample": {{"value": "mu", "dist": {{"normal": {{"mu": 0, "sigma": 10}}}}}}}},
    {{"sample": {{"value": "y", "dist": {{"normal": {{"mu": "mu", "sigma": 1}}}}}}}}
  ]}}"#,
            values.join(", ")
        );
        Self {
            json,
            mean: sum / precision,
            sd: precision.sqrt().recip(),
        }
    }

    /// Writes the model to `dir/name` and returns the path.
    pub fn write(&self, dir: &Path, name: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, &self.json).expect("write the model");
        path.to_string_lossy().into_owned()
    }

    /// Checks the draws of `mu` (one vector per chain) against the exact posterior.
    pub fn check(&self, chains: &[Vec<f64>]) {
        let refs: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
        let all: Vec<f64> = chains.iter().flatten().copied().collect();
        let n = all.len() as f64;
        let mean = all.iter().sum::<f64>() / n;
        let sd = (all.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let (se_mean, se_sd) = (mcse_mean(&refs), mcse_sd(&refs));
        assert!(
            (mean - self.mean).abs() < Z * se_mean,
            "posterior mean {mean} vs exact {}: more than {Z} MCSE ({se_mean}) apart",
            self.mean
        );
        assert!(
            (sd - self.sd).abs() < Z * se_sd,
            "posterior sd {sd} vs exact {}: more than {Z} MCSE ({se_sd}) apart",
            self.sd
        );
    }
}

/// One chain's Stan CSV file: its column names and draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// Column names (`lp__`, ..., then the model's).
    pub columns: Vec<String>,
    /// The data lines as written, comments dropped (for exact comparisons).
    pub lines: Vec<String>,
    /// Comment lines (`# Step size = ...`).
    pub comments: Vec<String>,
}

impl Chain {
    /// Reads one file, and checks that it ends as CmdStan's do: with one timing block.
    pub fn read(path: &str) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        check_timing_block(path, &text);
        let mut comments = Vec::new();
        let mut body = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') {
                comments.push(line.to_owned());
            } else if !line.is_empty() {
                body.push(line.to_owned());
            }
        }
        assert!(!body.is_empty(), "{path} has no header");
        let columns = body.remove(0).split(',').map(str::to_owned).collect();
        Self {
            columns,
            lines: body,
            comments,
        }
    }

    /// The files `cluster-cli sample --output PATH --chains N` wrote, in chain order.
    pub fn read_all(path: &str, n_chains: usize) -> Vec<Self> {
        chain_file_names(path, n_chains)
            .iter()
            .map(|name| Self::read(name))
            .collect()
    }

    /// The draws of column `name`.
    pub fn column(&self, name: &str) -> Vec<f64> {
        let index = self
            .columns
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name} in {:?}", self.columns));
        self.lines
            .iter()
            .map(|line| {
                line.split(',')
                    .nth(index)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("bad line {line}"))
            })
            .collect()
    }

    /// The value of the `# Step size = X` comment.
    pub fn step_size(&self) -> Option<f64> {
        self.comments
            .iter()
            .find_map(|c| c.split_once("Step size = ")?.1.trim().parse().ok())
    }
}

/// A Stan CSV file has one `Elapsed Time` block (Stan's `mcmc_writer::write_timing`), at its
/// end: an empty comment, warmup, sampling and total seconds, an empty comment.
fn check_timing_block(path: &str, text: &str) {
    let blocks = text.matches("Elapsed Time").count();
    assert_eq!(blocks, 1, "{path}: {blocks} timing blocks, want one");
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(5)..];
    let shape = [
        ("# ", ""),
        ("#  Elapsed Time: ", " seconds (Warm-up)"),
        ("#                ", " seconds (Sampling)"),
        ("#                ", " seconds (Total)"),
        ("# ", ""),
    ];
    let matches = tail.len() == 5
        && tail.iter().zip(shape).all(|(line, (start, end))| {
            let number = line
                .strip_prefix(start)
                .and_then(|rest| rest.strip_suffix(end));
            match number {
                Some("") => end.is_empty(),
                Some(number) => number.parse::<f64>().is_ok_and(|s| s >= 0.0),
                None => false,
            }
        });
    assert!(
        matches,
        "{path} does not end with CmdStan's timing block:\n{}",
        tail.join("\n")
    );
}
