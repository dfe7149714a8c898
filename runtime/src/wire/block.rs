//! Draws of many chains in one event ([`WireDrawBlock`]): how a GPU task streams, where
//! thousands of chains advance in lockstep and one event per chain would cost more than its
//! draws. Columns are raw little-endian bytes (`serde_bytes`), so a block encodes and decodes
//! as a few memory copies instead of one MessagePack value per number.
//!
//! A block is checked as a whole before anything reads it ([`WireDrawBlock::entries`]):
//! every column's length must match the counts it announces, and nothing is allocated from
//! a number in the block, only from the lengths of the bytes that arrived.
//!
//! A block's values are either each draw's reported values or, for a client that writes
//! them itself from the model, its unconstrained position ([`WireDrawBlock::positions`]):
//! fewer numbers where parameters are transformed, and the position of an f32 run packs to
//! f32s where values computed from it in f64 do not.
//!
//! A block is packed before it is sent ([`WireDrawBlock::pack`]): a column of floats whose
//! every number is an `f32` exactly (the positions and statistics of a GPU run in f32) goes
//! as `f32`s, tree depths as bytes, leapfrog counts as `u16`s, when they fit. Packing loses
//! nothing: the reader gets the same `f64`s, bit for bit.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use sampler::DrawStats;

use super::is_false;
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
    /// Bytes per number of each draw column, where packed: one per value column, then one
    /// each for lp, accept_stat, step_size, tree_depth, n_leapfrog and energy (floats 4 or
    /// 8, tree depths 1 or 4, leapfrog counts 2 or 4). Empty: not packed, every column as
    /// documented above.
    #[serde(default, with = "serde_bytes")]
    pub widths: Vec<u8>,
    /// The values are each draw's unconstrained position (`n_columns` coordinates), not its
    /// reported values: sent where the job's client writes the values itself, from the model
    /// (`WireTask::positions`). Absent from the bytes when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub positions: bool,
}

/// Statistics columns after the value columns in [`WireDrawBlock::widths`].
const STAT_COLUMNS: usize = 6;

/// Where a block's numbers are: its widths, or the unpacked ones. Not checked (see
/// [`WireDrawBlock::entries`]).
#[derive(Clone, Copy)]
struct Layout<'a> {
    /// Widths of the value columns; `None`: all 8.
    values: Option<&'a [u8]>,
    /// Bytes of one draw's values.
    row: usize,
    lp: usize,
    accept_stat: usize,
    step_size: usize,
    tree_depth: usize,
    n_leapfrog: usize,
    energy: usize,
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
        debug_assert!(self.widths.is_empty(), "pushing to a packed block");
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
            &self.widths,
        ];
        256 + columns.iter().map(|c| c.len()).sum::<usize>()
    }

    /// Packs the draw columns (see the module's documentation): each float column goes as
    /// `f32`s if every one of its numbers is an `f32` exactly, tree depths as bytes and
    /// leapfrog counts as `u16`s if they fit. A block already packed, or where nothing
    /// narrows, is left as it is.
    pub fn pack(&mut self) {
        if !self.widths.is_empty() || self.divergent.is_empty() {
            return;
        }
        let n_columns = self.n_columns as usize;
        // Every value column narrows until one of its numbers is not an f32.
        let mut widths = vec![4u8; n_columns];
        if n_columns > 0 {
            let mut narrow = n_columns;
            for row in self.values.chunks_exact(8 * n_columns) {
                for (width, word) in widths.iter_mut().zip(row.chunks_exact(8)) {
                    if *width == 4 && !is_f32(word) {
                        *width = 8;
                        narrow -= 1;
                    }
                }
                if narrow == 0 {
                    break;
                }
            }
        }
        let float = |column: &[u8]| {
            if column.chunks_exact(8).all(is_f32) {
                4
            } else {
                8
            }
        };
        let fits = |column: &[u8], max: u32| {
            column
                .chunks_exact(4)
                .all(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) <= max)
        };
        let lp = float(&self.lp);
        let accept_stat = float(&self.accept_stat);
        let step_size = float(&self.step_size);
        let tree_depth = if fits(&self.tree_depth, u32::from(u8::MAX)) {
            1
        } else {
            4
        };
        let n_leapfrog = if fits(&self.n_leapfrog, u32::from(u16::MAX)) {
            2
        } else {
            4
        };
        let energy = float(&self.energy);
        widths.extend([lp, accept_stat, step_size, tree_depth, n_leapfrog, energy]);
        let unpacked = [8, 8, 8, 4, 4, 8];
        if widths[..n_columns].iter().all(|&w| w == 8) && widths[n_columns..] == unpacked {
            return;
        }
        if widths[..n_columns].contains(&4) {
            narrow_column(&mut self.values, 8, &widths[..n_columns]);
        }
        let narrow = |column: &mut Vec<u8>, from: usize, to: u8| {
            narrow_column(column, from, &[to]);
        };
        narrow(&mut self.lp, 8, lp);
        narrow(&mut self.accept_stat, 8, accept_stat);
        narrow(&mut self.step_size, 8, step_size);
        narrow(&mut self.tree_depth, 4, tree_depth);
        narrow(&mut self.n_leapfrog, 4, n_leapfrog);
        narrow(&mut self.energy, 8, energy);
        self.widths = widths;
    }

    /// Where the numbers are (not checked).
    fn layout(&self) -> Layout<'_> {
        let n_columns = self.n_columns as usize;
        match self.widths.get(n_columns..) {
            Some(&[lp, accept_stat, step_size, tree_depth, n_leapfrog, energy]) => Layout {
                values: Some(&self.widths[..n_columns]),
                row: self.widths[..n_columns]
                    .iter()
                    .map(|&w| usize::from(w))
                    .sum(),
                lp: usize::from(lp),
                accept_stat: usize::from(accept_stat),
                step_size: usize::from(step_size),
                tree_depth: usize::from(tree_depth),
                n_leapfrog: usize::from(n_leapfrog),
                energy: usize::from(energy),
            },
            _ => Layout {
                values: None,
                row: n_columns.saturating_mul(8),
                lp: 8,
                accept_stat: 8,
                step_size: 8,
                tree_depth: 4,
                n_leapfrog: 4,
                energy: 8,
            },
        }
    }

    /// The widths' check: as many as the columns, each one its column may have.
    fn check_widths(&self) -> Result<(), String> {
        if self.widths.is_empty() {
            return Ok(());
        }
        let n_columns = self.n_columns as usize;
        if self.widths.len() != n_columns.saturating_add(STAT_COLUMNS) {
            return Err(format!(
                "block has {} widths for {} values and {STAT_COLUMNS} statistics per draw",
                self.widths.len(),
                self.n_columns
            ));
        }
        let (values, stats) = self.widths.split_at(n_columns);
        let allowed: [&[u8]; STAT_COLUMNS] = [&[4, 8], &[4, 8], &[4, 8], &[1, 4], &[2, 4], &[4, 8]];
        let bad = values
            .iter()
            .map(|w| (w, &[4u8, 8][..]))
            .chain(stats.iter().zip(allowed))
            .find(|(w, allowed)| !allowed.contains(w));
        match bad {
            Some((width, _)) => Err(format!("block has a column {width} bytes wide")),
            None => Ok(()),
        }
    }

    /// The entries, once every column is checked against the others: the same number of
    /// entries in each entry column, the counts adding up to the draws of each draw column,
    /// `n_columns` values per draw, widths each column may have, flags 0 or 1.
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
        self.check_widths()?;
        let layout = self.layout();
        let n_draws = self.divergent.len();
        let draw_columns = [
            ("lp", &self.lp, layout.lp),
            ("accept_stat", &self.accept_stat, layout.accept_stat),
            ("step_size", &self.step_size, layout.step_size),
            ("tree_depth", &self.tree_depth, layout.tree_depth),
            ("n_leapfrog", &self.n_leapfrog, layout.n_leapfrog),
            ("energy", &self.energy, layout.energy),
        ];
        for (name, column, width) in draw_columns {
            if column.len() != n_draws.saturating_mul(width) {
                return Err(format!(
                    "block column {name} has {} bytes for {n_draws} draws",
                    column.len()
                ));
            }
        }
        let values = match layout.values {
            None => n_draws
                .checked_mul(self.n_columns as usize)
                .and_then(|n| n.checked_mul(8)),
            Some(_) => n_draws.checked_mul(layout.row),
        };
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
        let mut values = Vec::with_capacity(entry.len() * self.n_columns as usize);
        self.append_values_of(entry, &mut values);
        let mut stats = WireStats::default();
        for s in self.stats_of(entry) {
            stats.push(&s);
        }
        WireDraws {
            warmup: entry.warmup,
            first: entry.first,
            values,
            stats,
        }
    }

    /// Appends the values of `entry`'s draws (one of [`WireDrawBlock::entries`]), row-major,
    /// to `to`: a copy of bytes where they are unpacked `f64`s.
    pub fn append_values_of(&self, entry: &BlockEntry, to: &mut Vec<f64>) {
        let layout = self.layout();
        let bytes = &self.values[entry.draws.start * layout.row..entry.draws.end * layout.row];
        match layout.values {
            None if cfg!(target_endian = "little") => {
                let start = to.len();
                to.resize(start + bytes.len() / 8, 0.0);
                bytemuck::cast_slice_mut::<f64, u8>(&mut to[start..]).copy_from_slice(bytes);
            }
            None => to.extend(bytes.chunks_exact(8).map(|w| float_from(w, 8))),
            Some(widths) if widths.iter().all(|&w| w == 4) => {
                to.extend(bytes.chunks_exact(4).map(|w| float_from(w, 4)));
            }
            Some(widths) => {
                // Written in place (no `push` per value): the client takes in every draw so.
                let start = to.len();
                to.resize(start + entry.len() * widths.len(), 0.0);
                let rows = bytes.chunks_exact(layout.row.max(1));
                for (row, out) in rows.zip(to[start..].chunks_exact_mut(widths.len().max(1))) {
                    let mut at = 0;
                    for (value, &width) in out.iter_mut().zip(widths) {
                        let width = usize::from(width);
                        *value = float_from(&row[at..at + width], width);
                        at += width;
                    }
                }
            }
        }
    }

    /// The values of `entry`'s draws (one of [`WireDrawBlock::entries`]), row-major.
    pub fn values_of(&self, entry: &BlockEntry) -> impl Iterator<Item = f64> + '_ {
        let mut values = Vec::with_capacity(entry.len() * self.n_columns as usize);
        self.append_values_of(entry, &mut values);
        values.into_iter()
    }

    /// The statistics of `entry`'s draws (one of [`WireDrawBlock::entries`]).
    pub fn stats_of(&self, entry: &BlockEntry) -> impl Iterator<Item = DrawStats> + '_ {
        let layout = self.layout();
        entry.draws.clone().map(move |i| DrawStats {
            lp: float_at(&self.lp, i, layout.lp),
            accept_stat: float_at(&self.accept_stat, i, layout.accept_stat),
            step_size: float_at(&self.step_size, i, layout.step_size),
            tree_depth: uint_at(&self.tree_depth, i, layout.tree_depth),
            n_leapfrog: uint_at(&self.n_leapfrog, i, layout.n_leapfrog),
            divergent: self.divergent[i] == 1,
            energy: float_at(&self.energy, i, layout.energy),
        })
    }

    /// A block of the entries `keep` (indices into `entries`, the checked entries of this
    /// block, in increasing order), their draws copied, packed as this one.
    pub fn select(&self, entries: &[BlockEntry], keep: &[usize]) -> Self {
        let mut block = Self {
            n_columns: self.n_columns,
            total: self.total,
            widths: self.widths.clone(),
            positions: self.positions,
            ..Self::default()
        };
        let layout = self.layout();
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
            copy(&mut block.values, &self.values, layout.row);
            copy(&mut block.lp, &self.lp, layout.lp);
            copy(
                &mut block.accept_stat,
                &self.accept_stat,
                layout.accept_stat,
            );
            copy(&mut block.step_size, &self.step_size, layout.step_size);
            copy(&mut block.tree_depth, &self.tree_depth, layout.tree_depth);
            copy(&mut block.n_leapfrog, &self.n_leapfrog, layout.n_leapfrog);
            copy(&mut block.divergent, &self.divergent, 1);
            copy(&mut block.energy, &self.energy, layout.energy);
        }
        block
    }
}

/// Whether the little-endian `f64` in `word` is an `f32` exactly (its bits come back).
fn is_f32(word: &[u8]) -> bool {
    let value = float_from(word, 8);
    f64::from(value as f32).to_bits() == value.to_bits()
}

/// Narrows `column`, rows of `to.len()` words of `from` bytes, in place: word `c` of each
/// row to `to[c]` bytes (see [`narrow_in_place`]), front to back, so that what is written
/// never passes what is read. Where every word narrows alike, one loop over the words.
fn narrow_column(column: &mut Vec<u8>, from: usize, to: &[u8]) {
    let Some(&first) = to.first() else { return };
    if to.iter().all(|&w| w == first) {
        narrow_words(column, from, first);
        return;
    }
    let (mut read, mut at) = (0, 0);
    for _ in 0..column.len() / from / to.len() {
        for &width in to {
            narrow_in_place(column, read, at, from, width);
            read += from;
            at += usize::from(width);
        }
    }
    column.truncate(at);
}

/// Narrows every word of `column`, `from` bytes, to `to` bytes in place (as
/// [`narrow_in_place`] does one): a block's columns are megabytes, and this is the loop
/// packing spends its time in.
fn narrow_words(column: &mut Vec<u8>, from: usize, to: u8) {
    let to = usize::from(to);
    if to >= from {
        return;
    }
    let n = column.len() / from;
    if from == 8 && to == 4 {
        for k in 0..n {
            let mut word = [0; 8];
            word.copy_from_slice(&column[8 * k..8 * k + 8]);
            let narrowed = (f64::from_le_bytes(word) as f32).to_le_bytes();
            column[4 * k..4 * k + 4].copy_from_slice(&narrowed);
        }
    } else {
        for k in 0..n {
            for b in 0..to {
                column[to * k + b] = column[from * k + b];
            }
        }
    }
    column.truncate(n * to);
}

/// Writes the little-endian word of `width` bytes at `from` in `bytes` as `to` bytes at `at`
/// (`at <= from`): an `f64` as an `f32` (`width` 8, `to` 4), an unsigned integer cut to its
/// low bytes, or the word itself.
fn narrow_in_place(bytes: &mut [u8], from: usize, at: usize, width: usize, to: u8) {
    let to = usize::from(to);
    if width == 8 && to == 4 {
        let narrowed = (float_from(&bytes[from..from + 8], 8) as f32).to_le_bytes();
        bytes[at..at + 4].copy_from_slice(&narrowed);
    } else {
        bytes.copy_within(from..from + to, at);
    }
}

/// The float in `word`, `width` bytes (4 or 8), little-endian.
fn float_from(word: &[u8], width: usize) -> f64 {
    if width == 4 {
        f64::from(f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
    } else {
        let mut array = [0; 8];
        array.copy_from_slice(&word[..8]);
        f64::from_le_bytes(array)
    }
}

fn float_at(bytes: &[u8], i: usize, width: usize) -> f64 {
    float_from(&bytes[width * i..width * (i + 1)], width)
}

/// The unsigned integer at `i` of a column `width` bytes wide (1, 2 or 4).
fn uint_at(bytes: &[u8], i: usize, width: usize) -> u32 {
    let word = &bytes[width * i..width * (i + 1)];
    match width {
        1 => u32::from(word[0]),
        2 => u32::from(u16::from_le_bytes([word[0], word[1]])),
        _ => u32_at(bytes, i),
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

#[cfg(test)]
mod tests;
