//! Draws of many chains in one event ([`WireDrawBlock`]): how a GPU task streams, where
//! thousands of chains advance in lockstep and one event per chain would cost more than its
//! draws. Columns are raw little-endian bytes (`serde_bytes`), so a block encodes and decodes
//! as a few memory copies instead of one MessagePack value per number.
//!
//! A block is checked as a whole before anything reads it ([`WireDrawBlock::entries`]):
//! every column's length must match the counts it announces, and nothing is allocated from
//! a number in the block, only from the lengths of the bytes that arrived.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use sampler::DrawStats;

use super::sampling::{WireDraws, WireStats};

/// Draws of several chains, segment by segment: each entry is one chain's consecutive draws
/// of one phase (possibly none: an entry without draws reports the chain's iteration).
/// Entry columns hold one value per entry; draw columns one per draw, the entries' draws one
/// after another in entry order; `values` holds `n_columns` values per draw, row-major.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireDrawBlock {
    /// Values per draw.
    pub n_columns: u32,
    /// Iterations in all of each chain (warmup and burn-in included).
    pub total: u64,
    /// Entries: the chain (u32).
    #[serde(with = "serde_bytes")]
    pub chains: Vec<u8>,
    /// Entries: warmup draws (1) or kept draws (0) (u8).
    #[serde(with = "serde_bytes")]
    pub warmup: Vec<u8>,
    /// Entries: index of the first draw within its phase (u64): a chain's draws join up.
    #[serde(with = "serde_bytes")]
    pub first: Vec<u8>,
    /// Entries: number of draws (u32).
    #[serde(with = "serde_bytes")]
    pub count: Vec<u8>,
    /// Entries: the chain's iterations done (u64).
    #[serde(with = "serde_bytes")]
    pub iteration: Vec<u8>,
    /// Draws: values (f64, `n_columns` per draw).
    #[serde(with = "serde_bytes")]
    pub values: Vec<u8>,
    /// Draws: log density (f64).
    #[serde(with = "serde_bytes")]
    pub lp: Vec<u8>,
    /// Draws: mean acceptance statistic (f64).
    #[serde(with = "serde_bytes")]
    pub accept_stat: Vec<u8>,
    /// Draws: step size (f64).
    #[serde(with = "serde_bytes")]
    pub step_size: Vec<u8>,
    /// Draws: tree depth (u32).
    #[serde(with = "serde_bytes")]
    pub tree_depth: Vec<u8>,
    /// Draws: leapfrog steps (u32).
    #[serde(with = "serde_bytes")]
    pub n_leapfrog: Vec<u8>,
    /// Draws: divergent (u8, 0 or 1).
    #[serde(with = "serde_bytes")]
    pub divergent: Vec<u8>,
    /// Draws: Hamiltonian (f64).
    #[serde(with = "serde_bytes")]
    pub energy: Vec<u8>,
}

/// One entry of a checked block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockEntry {
    /// The chain.
    pub chain: u32,
    /// Warmup draws, or kept ones.
    pub warmup: bool,
    /// Index of its first draw within its phase.
    pub first: u64,
    /// Iterations done.
    pub iteration: u64,
    /// Its draws among the block's.
    pub draws: Range<usize>,
}

impl BlockEntry {
    /// Number of draws.
    pub fn len(&self) -> usize {
        self.draws.len()
    }

    /// Whether it carries no draws (progress only).
    pub fn is_empty(&self) -> bool {
        self.draws.is_empty()
    }
}

impl WireDrawBlock {
    /// An empty block of draws of `n_columns` values, of chains of `total` iterations.
    pub fn new(n_columns: usize, total: u64) -> Self {
        Self {
            n_columns: u32::try_from(n_columns).unwrap_or(u32::MAX),
            total,
            ..Self::default()
        }
    }

    /// Makes room for `entries` more entries of `draws` more draws in all.
    pub fn reserve(&mut self, entries: usize, draws: usize) {
        let n_columns = self.n_columns as usize;
        for (column, width) in [
            (&mut self.chains, 4),
            (&mut self.warmup, 1),
            (&mut self.first, 8),
            (&mut self.count, 4),
            (&mut self.iteration, 8),
        ] {
            column.reserve(width * entries);
        }
        for (column, width) in [
            (&mut self.values, 8 * n_columns),
            (&mut self.lp, 8),
            (&mut self.accept_stat, 8),
            (&mut self.step_size, 8),
            (&mut self.tree_depth, 4),
            (&mut self.n_leapfrog, 4),
            (&mut self.divergent, 1),
            (&mut self.energy, 8),
        ] {
            column.reserve(width.saturating_mul(draws));
        }
    }

    /// Appends an entry: `stats.len()` draws of `chain` (`values` holds `n_columns` per
    /// draw), the first of them number `first` of its phase.
    pub fn push(
        &mut self,
        chain: u32,
        warmup: bool,
        first: u64,
        iteration: u64,
        values: &[f64],
        stats: &[DrawStats],
    ) {
        debug_assert_eq!(values.len(), stats.len() * self.n_columns as usize);
        self.chains.extend_from_slice(&chain.to_le_bytes());
        self.warmup.push(u8::from(warmup));
        self.first.extend_from_slice(&first.to_le_bytes());
        let count = u32::try_from(stats.len()).unwrap_or(u32::MAX);
        self.count.extend_from_slice(&count.to_le_bytes());
        self.iteration.extend_from_slice(&iteration.to_le_bytes());
        put_f64s(&mut self.values, values);
        for s in stats {
            self.lp.extend_from_slice(&s.lp.to_le_bytes());
            self.accept_stat
                .extend_from_slice(&s.accept_stat.to_le_bytes());
            self.step_size.extend_from_slice(&s.step_size.to_le_bytes());
            self.tree_depth
                .extend_from_slice(&s.tree_depth.to_le_bytes());
            self.n_leapfrog
                .extend_from_slice(&s.n_leapfrog.to_le_bytes());
            self.divergent.push(u8::from(s.divergent));
            self.energy.extend_from_slice(&s.energy.to_le_bytes());
        }
    }

    /// Number of entries (not checked).
    pub fn n_entries(&self) -> usize {
        self.chains.len() / 4
    }

    /// Number of draws (not checked).
    pub fn n_draws(&self) -> usize {
        self.divergent.len()
    }

    /// Bytes this takes on the wire, roughly.
    pub fn estimated_bytes(&self) -> usize {
        let columns = [
            &self.chains,
            &self.warmup,
            &self.first,
            &self.count,
            &self.iteration,
            &self.values,
            &self.lp,
            &self.accept_stat,
            &self.step_size,
            &self.tree_depth,
            &self.n_leapfrog,
            &self.divergent,
            &self.energy,
        ];
        256 + columns.iter().map(|c| c.len()).sum::<usize>()
    }

    /// The entries, once every column is checked against the others: the same number of
    /// entries in each entry column, the counts adding up to the draws of each draw column,
    /// `n_columns` values per draw, flags 0 or 1.
    pub fn entries(&self) -> Result<Vec<BlockEntry>, String> {
        let n_entries = self.warmup.len();
        let entry_columns = [
            ("chains", &self.chains, 4),
            ("first", &self.first, 8),
            ("count", &self.count, 4),
            ("iteration", &self.iteration, 8),
        ];
        for (name, column, width) in entry_columns {
            if column.len() != n_entries.saturating_mul(width) {
                return Err(format!(
                    "block column {name} has {} bytes for {n_entries} entries",
                    column.len()
                ));
            }
        }
        let n_draws = self.divergent.len();
        let draw_columns = [
            ("lp", &self.lp, 8),
            ("accept_stat", &self.accept_stat, 8),
            ("step_size", &self.step_size, 8),
            ("tree_depth", &self.tree_depth, 4),
            ("n_leapfrog", &self.n_leapfrog, 4),
            ("energy", &self.energy, 8),
        ];
        for (name, column, width) in draw_columns {
            if column.len() != n_draws.saturating_mul(width) {
                return Err(format!(
                    "block column {name} has {} bytes for {n_draws} draws",
                    column.len()
                ));
            }
        }
        let values = n_draws
            .checked_mul(self.n_columns as usize)
            .and_then(|n| n.checked_mul(8));
        if values != Some(self.values.len()) {
            return Err(format!(
                "block has {} bytes of values for {n_draws} draws of {} values",
                self.values.len(),
                self.n_columns
            ));
        }
        if let Some(flag) = self.warmup.iter().chain(&self.divergent).find(|&&f| f > 1) {
            return Err(format!("block has a flag of {flag} (0 or 1 expected)"));
        }
        let mut entries = Vec::with_capacity(n_entries);
        let mut start = 0usize;
        for i in 0..n_entries {
            let count = u32_at(&self.count, i) as usize;
            let end = start
                .checked_add(count)
                .filter(|&end| end <= n_draws)
                .ok_or_else(|| format!("block entries count more than its {n_draws} draws"))?;
            entries.push(BlockEntry {
                chain: u32_at(&self.chains, i),
                warmup: self.warmup[i] == 1,
                first: u64_at(&self.first, i),
                iteration: u64_at(&self.iteration, i),
                draws: start..end,
            });
            start = end;
        }
        if start != n_draws {
            return Err(format!(
                "block entries count {start} draws, but it holds {n_draws}"
            ));
        }
        Ok(entries)
    }

    /// The draws of `entry` (one of [`WireDrawBlock::entries`]).
    pub fn draws(&self, entry: &BlockEntry) -> WireDraws {
        let range = entry.draws.clone();
        let n_columns = self.n_columns as usize;
        let values = f64s(&self.values, range.start * n_columns..range.end * n_columns);
        let stats = WireStats {
            lp: f64s(&self.lp, range.clone()),
            accept_stat: f64s(&self.accept_stat, range.clone()),
            step_size: f64s(&self.step_size, range.clone()),
            tree_depth: range.clone().map(|i| u32_at(&self.tree_depth, i)).collect(),
            n_leapfrog: range.clone().map(|i| u32_at(&self.n_leapfrog, i)).collect(),
            divergent: self.divergent[range.clone()]
                .iter()
                .map(|&d| d == 1)
                .collect(),
            energy: f64s(&self.energy, range),
        };
        WireDraws {
            warmup: entry.warmup,
            first: entry.first,
            values,
            stats,
        }
    }

    /// Appends the values of `entry`'s draws (one of [`WireDrawBlock::entries`]), row-major,
    /// to `to`: [`Self::values_of`] as a copy of bytes.
    pub fn append_values_of(&self, entry: &BlockEntry, to: &mut Vec<f64>) {
        let width = 8 * self.n_columns as usize;
        let bytes = &self.values[entry.draws.start * width..entry.draws.end * width];
        if cfg!(target_endian = "little") {
            let start = to.len();
            to.resize(start + bytes.len() / 8, 0.0);
            bytemuck::cast_slice_mut::<f64, u8>(&mut to[start..]).copy_from_slice(bytes);
        } else {
            to.extend(self.values_of(entry));
        }
    }

    /// The values of `entry`'s draws (one of [`WireDrawBlock::entries`]), row-major.
    pub fn values_of(&self, entry: &BlockEntry) -> impl Iterator<Item = f64> + '_ {
        let width = 8 * self.n_columns as usize;
        self.values[entry.draws.start * width..entry.draws.end * width]
            .chunks_exact(8)
            .map(|word| {
                let mut array = [0; 8];
                array.copy_from_slice(word);
                f64::from_le_bytes(array)
            })
    }

    /// The statistics of `entry`'s draws (one of [`WireDrawBlock::entries`]).
    pub fn stats_of(&self, entry: &BlockEntry) -> impl Iterator<Item = DrawStats> + '_ {
        entry.draws.clone().map(|i| DrawStats {
            lp: f64_at(&self.lp, i),
            accept_stat: f64_at(&self.accept_stat, i),
            step_size: f64_at(&self.step_size, i),
            tree_depth: u32_at(&self.tree_depth, i),
            n_leapfrog: u32_at(&self.n_leapfrog, i),
            divergent: self.divergent[i] == 1,
            energy: f64_at(&self.energy, i),
        })
    }

    /// A block of the entries `keep` (indices into `entries`, the checked entries of this
    /// block, in increasing order), their draws copied.
    pub fn select(&self, entries: &[BlockEntry], keep: &[usize]) -> Self {
        let mut block = Self {
            n_columns: self.n_columns,
            total: self.total,
            ..Self::default()
        };
        let n_columns = self.n_columns as usize;
        for &i in keep {
            let entry = &entries[i];
            let r = entry.draws.clone();
            let copy = |to: &mut Vec<u8>, from: &[u8], width: usize| {
                to.extend_from_slice(&from[r.start * width..r.end * width]);
            };
            block
                .chains
                .extend_from_slice(&self.chains[i * 4..i * 4 + 4]);
            block.warmup.push(self.warmup[i]);
            block.first.extend_from_slice(&self.first[i * 8..i * 8 + 8]);
            block.count.extend_from_slice(&self.count[i * 4..i * 4 + 4]);
            block
                .iteration
                .extend_from_slice(&self.iteration[i * 8..i * 8 + 8]);
            copy(&mut block.values, &self.values, 8 * n_columns);
            copy(&mut block.lp, &self.lp, 8);
            copy(&mut block.accept_stat, &self.accept_stat, 8);
            copy(&mut block.step_size, &self.step_size, 8);
            copy(&mut block.tree_depth, &self.tree_depth, 4);
            copy(&mut block.n_leapfrog, &self.n_leapfrog, 4);
            copy(&mut block.divergent, &self.divergent, 1);
            copy(&mut block.energy, &self.energy, 8);
        }
        block
    }
}

/// Appends `values` as little-endian bytes (one copy where the machine is little-endian).
fn put_f64s(to: &mut Vec<u8>, values: &[f64]) {
    if cfg!(target_endian = "little") {
        to.extend_from_slice(bytemuck::cast_slice(values));
    } else {
        to.reserve(8 * values.len());
        for value in values {
            to.extend_from_slice(&value.to_le_bytes());
        }
    }
}

fn u32_at(bytes: &[u8], i: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[4 * i..4 * i + 4]);
    u32::from_le_bytes(word)
}

fn u64_at(bytes: &[u8], i: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[8 * i..8 * i + 8]);
    u64::from_le_bytes(word)
}

fn f64_at(bytes: &[u8], i: usize) -> f64 {
    f64::from_bits(u64_at(bytes, i))
}

fn f64s(bytes: &[u8], range: Range<usize>) -> Vec<f64> {
    bytes[8 * range.start..8 * range.end]
        .chunks_exact(8)
        .map(|word| {
            let mut array = [0; 8];
            array.copy_from_slice(word);
            f64::from_le_bytes(array)
        })
        .collect()
}

#[cfg(test)]
mod tests;
