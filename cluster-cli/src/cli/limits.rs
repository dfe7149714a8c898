//! What this machine can hold, and the limits a node puts on jobs: the machine's memory (from
//! `/proc/meminfo` and the cgroup's `memory.max`), the `node --max-*` flags with defaults
//! derived from it, byte sizes as people write them (`8GiB`, `500MB`), and the check of a
//! local run or a client's job against the memory available here.

use std::path::Path;

use anyhow::Context;
use runtime::{Holder, JobLimits, JobShape, LimitExceeded, format_bytes};

/// The memory of this machine, as far as this process may use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// All of it.
    pub total: u64,
    /// What can be had now without swapping.
    pub available: u64,
}

/// The machine's memory: `/proc/meminfo`'s `MemTotal` and `MemAvailable`, lowered to the
/// cgroup's limit (containers); `None` where they cannot be read.
pub fn machine_memory() -> Option<Memory> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let mut memory = parse_meminfo(&meminfo)?;
    let cgroup = Path::new("/sys/fs/cgroup");
    let read = |name: &str| std::fs::read_to_string(cgroup.join(name)).ok();
    if let Some(max) = read("memory.max").and_then(|text| text.trim().parse::<u64>().ok()) {
        let used = read("memory.current")
            .and_then(|text| text.trim().parse::<u64>().ok())
            .unwrap_or(0);
        memory.total = memory.total.min(max);
        memory.available = memory.available.min(max.saturating_sub(used));
    }
    Some(memory)
}

/// `MemTotal` and `MemAvailable` (or `MemFree` on old kernels) of `/proc/meminfo`, in bytes.
fn parse_meminfo(text: &str) -> Option<Memory> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
            Some(kib.saturating_mul(1024))
        })
    };
    let total = field("MemTotal")?;
    let available = field("MemAvailable").or_else(|| field("MemFree"))?;
    Some(Memory { total, available })
}

/// The memory a local run or a client may fill: what is available, or an assumption
/// where that is not known.
pub fn available_memory() -> u64 {
    machine_memory().map_or(runtime::DEFAULT_MEMORY_BYTES, |memory| memory.available)
}

/// Checks that a local run, or the draws a client keeps, fit this machine's available
/// memory; the error says what it needs against what there is and lowers `--draws/--chains`.
pub fn check_fits_here(shape: &JobShape, subject: &str) -> Result<(), LimitExceeded> {
    JobLimits::memory(available_memory()).check(shape, subject, &Holder::Machine)
}

/// The `node` flags that limit jobs.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Most memory one job's draws and data may take, as bytes or with a unit (500MB,
    /// 8GiB) [default: half of this machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_job_bytes: Option<u64>,
    /// Most chains in one job [default: 1048576].
    #[arg(long, value_name = "N")]
    max_chains: Option<u32>,
    /// Most draws per chain [default: 100000000].
    #[arg(long, value_name = "N")]
    max_draws: Option<u64>,
    /// Most warmup iterations per chain, burn-in included [default: 100000000].
    #[arg(long, value_name = "N")]
    max_warmup: Option<u64>,
}

impl LimitArgs {
    /// The limits: the flags given, the defaults of this machine's memory for the rest.
    pub fn limits(&self) -> JobLimits {
        let memory = machine_memory().map_or(runtime::DEFAULT_MEMORY_BYTES, |m| m.total);
        let defaults = JobLimits::for_memory(memory);
        JobLimits {
            max_chains: self.max_chains.unwrap_or(defaults.max_chains),
            max_warmup: self.max_warmup.unwrap_or(defaults.max_warmup),
            max_draws: self.max_draws.unwrap_or(defaults.max_draws),
            max_job_bytes: self.max_job_bytes.unwrap_or(defaults.max_job_bytes),
        }
    }
}

/// A byte size: a plain number of bytes, or a number with a decimal (kB, MB, GB, TB: powers
/// of 1000) or binary (KiB, MiB, GiB, TiB: powers of 1024) unit, case-insensitive, with or
/// without a space (`500MB`, `8 GiB`, `1.5GB`).
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "m" | "mb" => 1000_u64.pow(2),
        "g" | "gb" => 1000_u64.pow(3),
        "t" | "tb" => 1000_u64.pow(4),
        "ki" | "kib" => 1 << 10,
        "mi" | "mib" => 1 << 20,
        "gi" | "gib" => 1 << 30,
        "ti" | "tib" => 1 << 40,
        _ => anyhow::bail!(
            "{text:?}: unknown unit {unit:?} (use bytes, kB, MB, GB, TB, KiB, MiB, GiB or TiB)"
        ),
    };
    if let Ok(whole) = number.parse::<u64>() {
        return whole
            .checked_mul(scale)
            .with_context(|| format!("{text:?} is more bytes than a 64-bit count holds"));
    }
    let value: f64 = number
        .parse()
        .ok()
        .filter(|value: &f64| value.is_finite())
        .with_context(|| format!("{text:?} is not a size (expected 8GiB, 500MB, 1000000, ...)"))?;
    let bytes = value * scale as f64;
    anyhow::ensure!(
        bytes < u64::MAX as f64,
        "{text:?} is more bytes than a 64-bit count holds"
    );
    Ok(bytes.round() as u64)
}

/// One line for a node's log: its limits.
pub fn describe(limits: &JobLimits) -> String {
    format!(
        "job limits: {} of draws and data, {} chains, {} draws and {} warmup iterations per chain",
        format_bytes(limits.max_job_bytes),
        limits.max_chains,
        limits.max_draws,
        limits.max_warmup
    )
}

#[cfg(test)]
mod tests;
