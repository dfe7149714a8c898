//! The watch of an f32 run that auto chose: its warmup's step sizes against the CPU path's,
//! decided when every chain has ended warmup and before any of its draws reach the caller.
//!
//! The check before warmup sees f32 at a few points; a model whose f32 is off only in
//! places the CPU path did not reach passes it, and then f32 warmup shows the symptoms:
//! step sizes collapsing far below the CPU's (by [`STEP_COLLAPSE`]), or running away far
//! above it with trees saturating `max_depth` ([`collapse`]). [`WarmupWatch`] stands
//! between a driver and the caller's observer. It takes each chain's last warmup step size
//! and counts its saturated trees in the second half of warmup; it holds back what must not reach the caller twice (saved warmup draws, and any
//! sampling draw before the verdict) until every chain has ended warmup. Then either the run
//! goes on and what was held is handed over, or the run is stopped (`should_stop`) and
//! nothing held is handed over: the caller restarts the run in f64 (`sample_on_device_with`).
//! Saved warmup draws past [`HELD_BYTES`] go to the caller at once; a failed warmup then only
//! warns, in the run's reason.
//!
//! Progress events of warmup without values (warmup not saved) go through at once: a
//! restarted run reports its warmup again from iteration 0.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

use sampler::{ChainId, DrawBatch, DrawEvent, DrawStats, Observer};

use super::STEP_COLLAPSE;

/// The most bytes of draws held back before the verdict (saved warmup draws of many
/// chains): past it they go to the caller, and a failed warmup only warns.
const HELD_BYTES: usize = 256 << 20;

/// No verdict yet.
const PENDING: u8 = 0;
/// The run goes on: everything goes to the caller.
const PASSED: u8 = 1;
/// The run stops: nothing goes to the caller any more.
const COLLAPSED: u8 = 2;

/// What the watch keeps until every chain has ended warmup.
#[derive(Default)]
struct Watched {
    /// Each chain's (by its position in the request) last warmup step size, transitions in
    /// the second half of warmup, and how many of those reached `max_depth`.
    chains: Vec<ChainWarmup>,
    /// Chains that made their last warmup draw.
    done: usize,
    /// Draws held back from the caller, in the order they came, and their bytes.
    held: Vec<HeldDraw>,
    held_bytes: usize,
    /// Whether held draws went to the caller before the verdict (past [`HELD_BYTES`]): the
    /// run cannot start again unseen, and a failed warmup only warns.
    released: bool,
    /// What a warmup that failed after `released` showed.
    warning: Option<String>,
    /// Why the run stops (set with [`COLLAPSED`]).
    collapse: Option<String>,
}

/// What one chain's warmup showed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ChainWarmup {
    /// The step size of its last warmup transition.
    pub(crate) step_size: f64,
    /// Transitions in the second half of warmup.
    pub(crate) late: u64,
    /// How many of those reached the maximum tree depth.
    pub(crate) saturated: u64,
}

/// A draw event, owned.
struct HeldDraw {
    chain: ChainId,
    iteration: u64,
    total: u64,
    warmup: bool,
    stats: DrawStats,
    values: Vec<f64>,
}

impl HeldDraw {
    fn event(&self) -> DrawEvent<'_> {
        DrawEvent {
            chain: self.chain,
            iteration: self.iteration,
            total: self.total,
            warmup: self.warmup,
            stats: &self.stats,
            values: &self.values,
        }
    }
}

/// An observer that watches an f32 warmup for a collapsed step size (see the module
/// documentation).
pub(crate) struct WarmupWatch<'a> {
    inner: &'a dyn Observer,
    index: HashMap<ChainId, usize>,
    cpu_step_size: f64,
    num_warmup: u64,
    max_depth: u32,
    verdict: AtomicU8,
    watched: Mutex<Watched>,
}

impl<'a> WarmupWatch<'a> {
    /// A watch of `chains`' warmup of `num_warmup` iterations with trees up to `max_depth`,
    /// against the CPU path's step size, handing draws on to `inner`; one that lets
    /// everything through at once without a warmup or a CPU path to compare with.
    pub(crate) fn new(
        inner: &'a dyn Observer,
        chains: impl IntoIterator<Item = ChainId>,
        cpu_step_size: Option<f64>,
        num_warmup: u64,
        max_depth: u32,
    ) -> WarmupWatch<'a> {
        let index: HashMap<ChainId, usize> = chains
            .into_iter()
            .enumerate()
            .map(|(k, chain)| (chain, k))
            .collect();
        let watched = Watched {
            chains: vec![ChainWarmup::default(); index.len()],
            ..Watched::default()
        };
        let verdict = if cpu_step_size.is_some() && num_warmup > 0 {
            PENDING
        } else {
            PASSED
        };
        WarmupWatch {
            inner,
            index,
            cpu_step_size: cpu_step_size.unwrap_or(0.0),
            num_warmup,
            max_depth,
            verdict: AtomicU8::new(verdict),
            watched: Mutex::new(watched),
        }
    }

    /// Why the run was stopped, where warmup's step sizes collapsed.
    pub(crate) fn collapse(&self) -> Option<String> {
        self.lock().collapse.clone()
    }

    /// What a failed warmup showed where the run could not be stopped unseen (its saved
    /// warmup draws too many to hold).
    pub(crate) fn warning(&self) -> Option<String> {
        self.lock().warning.clone()
    }

    /// Hands over what is still held where no verdict came (a run stopped or failed in
    /// warmup): the caller then has every draw the run made.
    pub(crate) fn finish(&self) {
        let mut watched = self.lock();
        if self.verdict.load(Ordering::SeqCst) == PENDING {
            watched.collapse = None;
            let held: Vec<HeldDraw> = watched.held.drain(..).collect();
            self.verdict.store(PASSED, Ordering::SeqCst);
            for draw in held {
                self.inner.on_draw(&draw.event());
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decides once every chain has ended warmup: hands over what was held, or stops.
    fn decide(&self, watched: &mut Watched) {
        let found = collapse(&watched.chains, self.cpu_step_size);
        match found {
            Some(found) if watched.released => {
                tracing::warn!(%found, "auto precision: f32 warmup failed, too late to restart");
                watched.warning = Some(found);
                self.verdict.store(PASSED, Ordering::SeqCst);
            }
            Some(found) => {
                tracing::warn!(%found, "auto precision: f32 warmup failed");
                watched.collapse = Some(found);
                watched.held.clear();
                self.verdict.store(COLLAPSED, Ordering::SeqCst);
            }
            None => {
                for draw in watched.held.drain(..) {
                    self.inner.on_draw(&draw.event());
                }
                self.verdict.store(PASSED, Ordering::SeqCst);
            }
        }
    }
}

impl Observer for WarmupWatch<'_> {
    fn wants_batches(&self) -> bool {
        self.inner.wants_batches()
    }

    /// Positions only once the verdict passed: until then batches go draw by draw, and
    /// `on_draw` gets values. A batch of positions comes from a recording that began after
    /// the verdict passed (it is never taken back).
    fn wants_positions(&self) -> bool {
        self.verdict.load(Ordering::SeqCst) == PASSED && self.inner.wants_positions()
    }

    fn on_batch(&self, batch: &DrawBatch) {
        // Once the verdict passed, batches go through whole; until then, draw by draw.
        if self.verdict.load(Ordering::SeqCst) == PASSED {
            self.inner.on_batch(batch);
        } else {
            batch.for_each_event(|event| self.on_draw(event));
        }
    }

    fn on_draw(&self, event: &DrawEvent) {
        match self.verdict.load(Ordering::SeqCst) {
            PASSED => return self.inner.on_draw(event),
            COLLAPSED => return,
            _ => {}
        }
        let mut watched = self.lock();
        // Decided while this thread waited for the lock.
        match self.verdict.load(Ordering::SeqCst) {
            PASSED => {
                drop(watched);
                return self.inner.on_draw(event);
            }
            COLLAPSED => return,
            _ => {}
        }
        let hold = !event.warmup || !event.values.is_empty();
        if event.warmup
            && let Some(&k) = self.index.get(&event.chain)
        {
            let chain = &mut watched.chains[k];
            chain.step_size = event.stats.step_size;
            if 2 * event.iteration >= self.num_warmup {
                chain.late += 1;
                if event.stats.tree_depth >= self.max_depth {
                    chain.saturated += 1;
                }
            }
            if event.iteration + 1 == self.num_warmup {
                watched.done += 1;
            }
        }
        if hold && !watched.released {
            watched.held_bytes += size_of::<HeldDraw>() + size_of_val(event.values);
            watched.held.push(HeldDraw {
                chain: event.chain,
                iteration: event.iteration,
                total: event.total,
                warmup: event.warmup,
                stats: *event.stats,
                values: event.values.to_vec(),
            });
            if watched.held_bytes > HELD_BYTES {
                watched.released = true;
                for draw in watched.held.drain(..) {
                    self.inner.on_draw(&draw.event());
                }
            }
        } else {
            self.inner.on_draw(event);
        }
        if watched.done >= self.index.len() {
            self.decide(&mut watched);
        }
    }

    fn should_stop(&self) -> bool {
        self.verdict.load(Ordering::SeqCst) == COLLAPSED || self.inner.should_stop()
    }

    fn keeps_draws(&self) -> bool {
        self.inner.keeps_draws()
    }
}

/// What went wrong in an f32 warmup, where a quarter of its `chains` or more (at least one)
/// ended it with a step size that left the CPU path's: below 1/[`STEP_COLLAPSE`] of it
/// (collapsed: the energy errors of a wrong gradient), or above [`STEP_COLLAPSE`] times it
/// with most trees of the second half of warmup at the maximum depth (ran away: a log
/// density rounded flat, whose energy errors vanish at any step size). A step size far
/// above the CPU's alone is no symptom: a short CPU path may end early in its adaptation.
pub(crate) fn collapse(chains: &[ChainWarmup], cpu_step_size: f64) -> Option<String> {
    let collapsed = chains
        .iter()
        .filter(|c| !(c.step_size * STEP_COLLAPSE >= cpu_step_size))
        .count();
    let ran_away = chains
        .iter()
        .filter(|c| c.step_size > STEP_COLLAPSE * cpu_step_size && 2 * c.saturated > c.late)
        .count();
    let n = chains.len();
    if n == 0 || 4 * (collapsed + ran_away) < n {
        return None;
    }
    let mut step_sizes: Vec<f64> = chains.iter().map(|c| c.step_size).collect();
    step_sizes.sort_by(f64::total_cmp);
    let (low, high) = (step_sizes[0], step_sizes[n - 1]);
    let mut what = Vec::new();
    if collapsed > 0 {
        what.push(format!("{collapsed} below 1/{STEP_COLLAPSE} of it"));
    }
    if ran_away > 0 {
        what.push(format!(
            "{ran_away} above {STEP_COLLAPSE} times it with most late trees at the maximum depth"
        ));
    }
    Some(format!(
        "f32 warmup's step sizes ({low:.2e} to {high:.2e}) left the CPU's {cpu_step_size:.2e} in {} of {n} chains: {}",
        collapsed + ran_away,
        what.join(", ")
    ))
}
