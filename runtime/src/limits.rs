//! What one job may ask of a node: chains, warmup iterations, draws per chain, and the memory
//! its draws take. Checked where a request enters (the coordinator endpoint for the whole
//! job, each pool endpoint for its task, the client before it submits) and before anything
//! is sized from the request's numbers.
//!
//! A job's memory is what its draws take where they are kept in full (the client, and a node
//! whose samplers keep traces): `chains x rows x (columns + STAT_VALUES) x 8` bytes, rows
//! being the kept draws plus the warmup draws when they are saved, and the model's data on
//! top. Products saturate: a job whose size overflows a `u64` is over every limit.

use sampler::{CheckedModel, SamplerSettings};

use crate::sampling::MAX_CHAINS;
use crate::wire::{WireError, WireLimit, WireLimitExceeded};

/// Values kept per draw besides the model's output columns: the seven sampler statistics
/// (Stan's `lp__` to `energy__`).
pub const STAT_VALUES: u64 = 7;

/// Warmup iterations and draws per chain a node accepts unless told otherwise.
pub const DEFAULT_MAX_ITERATIONS: u64 = 100_000_000;

/// The memory assumed where the machine's is not known (the default limits take half).
pub const DEFAULT_MEMORY_BYTES: u64 = 8 << 30;

/// The limits of one node (or of a client, for what it keeps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// Most chains in one job (`node --max-chains`).
    pub max_chains: u32,
    /// Most warmup iterations per chain, burn-in included (`node --max-warmup`).
    pub max_warmup: u64,
    /// Most draws kept per chain (`node --max-draws`).
    pub max_draws: u64,
    /// Most bytes one job's draws and data take (`node --max-job-bytes`).
    pub max_job_bytes: u64,
}

impl JobLimits {
    /// Limits on memory alone: `max_job_bytes` and [`MAX_CHAINS`] chains, any number of
    /// iterations (for what a client or a local run keeps).
    pub fn memory(max_job_bytes: u64) -> Self {
        Self {
            max_chains: MAX_CHAINS,
            max_warmup: u64::MAX,
            max_draws: u64::MAX,
            max_job_bytes,
        }
    }

    /// The default limits of a machine with `memory_bytes` of memory: a job may take half.
    pub fn for_memory(memory_bytes: u64) -> Self {
        Self {
            max_chains: MAX_CHAINS,
            max_warmup: DEFAULT_MAX_ITERATIONS,
            max_draws: DEFAULT_MAX_ITERATIONS,
            max_job_bytes: memory_bytes / 2,
        }
    }

    /// Checks `shape`; the error names the first limit it is over. `subject` says what is
    /// checked ("job", "task of 2 chains"), `holder` whose limits these are.
    pub fn check(
        &self,
        shape: &JobShape,
        subject: &str,
        holder: &Holder,
    ) -> Result<(), LimitExceeded> {
        let over = |limit, value, max| LimitExceeded {
            limit,
            value,
            max,
            subject: subject.to_owned(),
            detail: String::new(),
            holder: holder.clone(),
        };
        if shape.chains > u64::from(self.max_chains) {
            return Err(over(
                Limit::Chains,
                shape.chains,
                u64::from(self.max_chains),
            ));
        }
        let bytes = shape.bytes();
        if bytes > self.max_job_bytes || bytes == u64::MAX {
            return Err(LimitExceeded {
                detail: shape.detail(),
                ..over(Limit::JobBytes, bytes, self.max_job_bytes)
            });
        }
        if shape.draws > self.max_draws {
            return Err(over(Limit::Draws, shape.draws, self.max_draws));
        }
        if shape.warmup > self.max_warmup {
            return Err(over(Limit::Warmup, shape.warmup, self.max_warmup));
        }
        Ok(())
    }
}

impl Default for JobLimits {
    /// [`JobLimits::for_memory`] of [`DEFAULT_MEMORY_BYTES`].
    fn default() -> Self {
        Self::for_memory(DEFAULT_MEMORY_BYTES)
    }
}

/// What a job, or the part of one a pool runs, will hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobShape {
    /// Chains.
    pub chains: u64,
    /// Warmup iterations per chain, burn-in included.
    pub warmup: u64,
    /// Draws kept per chain.
    pub draws: u64,
    /// Whether the warmup iterations are kept as draws too.
    pub save_warmup: bool,
    /// The model's output columns per draw.
    pub columns: u64,
    /// The model's data.
    pub data_bytes: u64,
}

impl JobShape {
    /// `chains` chains of `model` with `settings`, dropping `burn_in` draws each.
    pub fn new(
        model: &CheckedModel,
        settings: &SamplerSettings,
        chains: u64,
        burn_in: u64,
    ) -> Self {
        let program = model.program();
        let columns = program
            .outputs
            .iter()
            .map(|output| u64::from(output.len))
            .fold(0, u64::saturating_add);
        let data_bytes = (program.data.len() as u64)
            .saturating_mul(8)
            .saturating_add((program.index.len() as u64).saturating_mul(4));
        Self {
            chains,
            warmup: settings.num_warmup.saturating_add(burn_in),
            draws: settings.num_draws,
            save_warmup: settings.save_warmup,
            columns,
            data_bytes,
        }
    }

    /// Values per draw: the columns and the statistics.
    pub fn values_per_draw(&self) -> u64 {
        self.columns.saturating_add(STAT_VALUES)
    }

    /// Draws kept per chain, saved warmup draws included.
    pub fn rows_per_chain(&self) -> u64 {
        if self.save_warmup {
            self.draws.saturating_add(self.warmup)
        } else {
            self.draws
        }
    }

    /// The bytes the job's draws and data take; `u64::MAX` when that overflows.
    pub fn bytes(&self) -> u64 {
        self.chains
            .saturating_mul(self.rows_per_chain())
            .saturating_mul(self.values_per_draw())
            .saturating_mul(8)
            .saturating_add(self.data_bytes)
    }

    /// How [`Self::bytes`] comes about, in words.
    fn detail(&self) -> String {
        let chains = match self.chains {
            1 => "1 chain".to_owned(),
            n => format!("{n} chains"),
        };
        let rows = if self.save_warmup && self.warmup > 0 {
            format!("({} draws + {} warmup draws)", self.draws, self.warmup)
        } else {
            format!("{} draws", self.draws)
        };
        format!("{chains} x {rows} x {} values", self.values_per_draw())
    }
}

/// Which limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Chains per job.
    Chains,
    /// Warmup iterations per chain.
    Warmup,
    /// Draws per chain.
    Draws,
    /// Bytes per job.
    JobBytes,
}

impl Limit {
    /// The node flag that raises it.
    pub fn flag(self) -> &'static str {
        match self {
            Limit::Chains => "--max-chains",
            Limit::Warmup => "--max-warmup",
            Limit::Draws => "--max-draws",
            Limit::JobBytes => "--max-job-bytes",
        }
    }

    /// The request's options that lower the value.
    fn lower(self) -> &'static str {
        match self {
            Limit::Chains => "--chains",
            Limit::Warmup => "--warmup (or --burn-in)",
            Limit::Draws => "--draws",
            Limit::JobBytes => "--draws/--chains",
        }
    }

    fn show(self, value: u64) -> String {
        match self {
            Limit::JobBytes => format_bytes(value),
            _ => value.to_string(),
        }
    }
}

/// Whose limit a request is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A node's (its full name).
    Node(String),
    /// The memory this machine has available (the command line's own check).
    Machine,
    /// Limits the caller of the client API chose.
    Caller,
}

/// A request over a limit: which, the value asked for, the limit, and whose it is. Its
/// message says what lowers the value and, for a node, the flag that raises the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct LimitExceeded {
    /// The limit.
    pub limit: Limit,
    /// What the request asks for (bytes, chains, iterations).
    pub value: u64,
    /// The most allowed.
    pub max: u64,
    /// What was checked: "job", "task of 2 chains", "sample".
    pub subject: String,
    /// How the value comes about, for [`Limit::JobBytes`] ("1 chain x 1000 draws x 25
    /// values"); empty otherwise.
    pub detail: String,
    /// Whose limit it is.
    pub holder: Holder,
}

impl LimitExceeded {
    fn message(&self) -> String {
        let limit = self.limit;
        let asks = match limit {
            Limit::JobBytes if self.value == u64::MAX => {
                format!(
                    "{} needs more than {}",
                    self.subject,
                    format_bytes(u64::MAX)
                )
            }
            Limit::JobBytes => format!("{} needs {}", self.subject, format_bytes(self.value)),
            Limit::Chains => format!("{} asks for {} chains", self.subject, self.value),
            Limit::Warmup => format!(
                "{} asks for {} warmup iterations per chain",
                self.subject, self.value
            ),
            Limit::Draws => format!("{} asks for {} draws per chain", self.subject, self.value),
        };
        let detail = if self.detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.detail)
        };
        let max = limit.show(self.max);
        let lower = limit.lower();
        match &self.holder {
            Holder::Node(node) => format!(
                "{asks}{detail}, over node {node}'s limit of {max}: lower {lower} or start the node with a larger {}",
                limit.flag()
            ),
            Holder::Machine if limit == Limit::JobBytes => format!(
                "{asks}{detail}, over this machine's available memory of {max}: lower {lower}"
            ),
            Holder::Machine => format!("{asks}, over the limit of {max}: lower {lower}"),
            Holder::Caller => format!("{asks}{detail}, over the limit of {max}: lower {lower}"),
        }
    }

    /// The refusal as it crosses the wire, from the node the request reached.
    pub fn to_wire(&self) -> WireError {
        WireError::LimitExceeded(Box::new(WireLimitExceeded {
            limit: match self.limit {
                Limit::Chains => WireLimit::Chains,
                Limit::Warmup => WireLimit::Warmup,
                Limit::Draws => WireLimit::Draws,
                Limit::JobBytes => WireLimit::JobBytes,
            },
            value: self.value,
            max: self.max,
            flag: match self.holder {
                Holder::Node(_) => self.limit.flag().to_owned(),
                _ => String::new(),
            },
            node: match &self.holder {
                Holder::Node(node) => node.clone(),
                _ => String::new(),
            },
            subject: self.subject.clone(),
            detail: self.detail.clone(),
        }))
    }

    /// A refusal read from the wire: the node's, when it named itself.
    pub fn from_wire(wire: &WireLimitExceeded) -> Self {
        Self {
            limit: match wire.limit {
                WireLimit::Chains => Limit::Chains,
                WireLimit::Warmup => Limit::Warmup,
                WireLimit::Draws => Limit::Draws,
                WireLimit::JobBytes => Limit::JobBytes,
            },
            value: wire.value,
            max: wire.max,
            subject: wire.subject.clone(),
            detail: wire.detail.clone(),
            holder: if wire.node.is_empty() {
                Holder::Caller
            } else {
                Holder::Node(wire.node.clone())
            },
        }
    }
}

/// `bytes` in decimal units with one decimal ("144.0 GB"), as `df -H` shows them.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["kB", "MB", "GB", "TB", "PB", "EB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 999.95 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests;
