//! The host side of kernel (b), whole NUTS transitions on the device.
//!
//! * Warmup: every chain runs exactly the same iterations per dispatch (at most M, fewer where
//!   the pooled schedule needs the host), so that all chains' draws of an iteration are there
//!   when the metric is estimated; dual averaging runs in the kernel after every transition;
//!   step-size searches run in their own kernel. The moments kernel pools each iteration's
//!   draws per chunk of chains right after the dispatch, and the host merges those chunks
//!   before the next one; the draws themselves stay on the device unless warmup is saved
//!   (their statistics come back for the traces' counts and the observer). A batch's traces
//!   are written while the next one runs.
//! * Sampling: nothing is shared between chains, so each dispatch gives every chain the same
//!   leapfrog budget (about M transitions' worth, from the mean trajectory length seen so far)
//!   instead of the same number of transitions. Lanes of a warp then stay busy for the whole
//!   dispatch whatever their trajectories' lengths; a trajectory longer than the budget goes
//!   on in the next dispatch. The last dispatch has no budget and ends every chain. Two
//!   dispatches are in flight (`NutsCommand::Queue`): the device has the next one when one
//!   ends, and the host records a batch's draws while the device runs.

use std::ops::Range;
use std::time::{Duration, Instant};

use sampler::{AdaptationKind, ChainTrace, DrawStats, Observer, SampleError, Tuning};

use super::adapt::{IterationMoments, LpFloors, Search, Warmup, reseats, start_warmup};
use super::init::{InitialPoints, initial_points};
use super::records::{Draw, RecordSettings, empty_traces, give_room, record};
use super::{DispatchStats, GpuRun, GpuSampleRequest, Iterations, Phase, max_log_step};
use crate::device::nuts::{
    MomentsRequest, NutsBatch, NutsCommand, NutsDispatch, NutsOpen, NutsReply, NutsShape,
    NutsSnapshot, NutsStart, SessionId,
};
use crate::device::{GpuDevice, KernelPlan, ModelKey};
use crate::error::{CheckedPoint, GpuError};
use crate::kernels::layout::{
    NS_C_COUNT, NS_C_DA_GAMMA, NS_C_DA_KAPPA, NS_C_DA_MAX_LOG_STEP, NS_C_DA_T0, NS_C_DA_TARGET,
    NS_C_JITTER, NS_C_MAX_ENERGY_ERROR, NS_C_SEARCH_MU, NS_ERROR_STEP_TOO_LARGE,
    NS_ERROR_STEP_ZERO, NS_FLAG_ADAPT, NS_FLAG_SEARCH_CONTINUE, NS_FLAG_SEARCH_MU, NS_O_ACCEPT,
    NS_O_COUNT, NS_O_ENERGY, NS_O_LP, NS_O_STEP, NS_OU_DEPTH, NS_OU_DIVERGENT, NS_OU_NLEAP,
    NS_U_DRAWS, NS_U_ERROR, NS_U_STEPS, NsParams,
};
use crate::wgsl::KernelKind;
use sampler::OutputWriter;

/// The pooled moments of each of the `len` iterations of a warmup block in `batch`, from the
/// moments kernel's per-chunk moments, merged in chunk order.
fn pooled_moments(
    batch: &NutsBatch,
    len: usize,
    dim: usize,
    with_grad: bool,
) -> Vec<IterationMoments> {
    (0..len)
        .map(|bin| {
            let mut pooled = IterationMoments::new(dim);
            for chunk in 0..batch.moment_chunks() {
                let (count, values) = batch.moments(chunk, bin);
                pooled.merge_device(count as u64, values, with_grad);
            }
            pooled
        })
        .collect()
}

/// Closes a session when the run ends, however it ends.
struct SessionGuard<'a> {
    device: &'a GpuDevice,
    id: SessionId,
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        // Nothing to do if the device is gone: its sessions went with it.
        let _ = self.device.nuts(NutsCommand::Close(self.id)).wait();
    }
}

/// The batch of a `Run`, `Collect`, or of a `Queue` behind another dispatch.
fn expect_batch(reply: NutsReply) -> Result<Box<NutsBatch>, GpuError> {
    match reply {
        NutsReply::Batch(batch) | NutsReply::Queued(Some(batch)) => Ok(batch),
        _ => Err(unexpected()),
    }
}

fn expect_snapshot(reply: NutsReply) -> Result<Box<NutsSnapshot>, GpuError> {
    match reply {
        NutsReply::Snapshot(snapshot) => Ok(snapshot),
        _ => Err(unexpected()),
    }
}

fn unexpected() -> GpuError {
    GpuError::Device {
        operation: "nuts session",
        message: "the device thread answered a different request".into(),
    }
}

/// The kernels' real settings followed by the metric.
fn consts(request: &GpuSampleRequest, metric: &[f64]) -> Vec<f64> {
    let settings = &request.settings;
    let mut values = vec![0.0; NS_C_COUNT + metric.len()];
    values[NS_C_MAX_ENERGY_ERROR] = settings.max_energy_error;
    values[NS_C_JITTER] = settings.jitter();
    values[NS_C_DA_TARGET] = settings.target_accept;
    values[NS_C_DA_GAMMA] = 0.05;
    values[NS_C_DA_T0] = 10.0;
    values[NS_C_DA_KAPPA] = 0.75;
    values[NS_C_DA_MAX_LOG_STEP] = max_log_step(settings.adaptation);
    values[NS_C_SEARCH_MU] = (10.0 * settings.initial_step_size).ln();
    values[NS_C_COUNT..].copy_from_slice(metric);
    values
}

/// Lockstep statistics of a dispatch from each chain's step count.
fn dispatch_stats(phase: Phase, batch: &NutsBatch, width: usize, draws: u64) -> DispatchStats {
    let steps: Vec<u64> = batch
        .state_row(NS_U_STEPS)
        .iter()
        .map(|&steps| u64::from(steps))
        .collect();
    let useful = steps.iter().sum();
    let lockstep = steps
        .chunks(width)
        // A last, partial group counts only its chains: lanes without a chain wait for nobody.
        .map(|group| group.len() as u64 * group.iter().copied().max().unwrap_or(0))
        .sum();
    let max = steps.iter().copied().max().unwrap_or(0);
    DispatchStats {
        phase,
        device_time: batch.elapsed,
        kernel_time: batch.kernel_time,
        useful_steps: useful,
        lockstep_steps: lockstep,
        dispatch_steps: steps.len() as u64 * max,
        draws,
    }
}

/// A batch with each chain's draws in it and the leapfrog steps they took, counted once.
struct Counted {
    batch: Box<NutsBatch>,
    draws: Vec<usize>,
    steps: Vec<u64>,
}

impl Counted {
    /// Counts `batch`'s draws and their steps, slot by slot (a slot's statistics are rows of
    /// neighbouring chains).
    fn new(batch: Box<NutsBatch>) -> Counted {
        let n = batch.sizes.n;
        let draws: Vec<usize> = batch
            .state_row(NS_U_DRAWS)
            .iter()
            .map(|&draws| draws as usize)
            .collect();
        let mut steps = vec![0u64; n];
        for slot in 0..draws.iter().copied().max().unwrap_or(0) {
            let row = batch.stat_u_row(slot, NS_OU_NLEAP, 0..n);
            for ((steps, &draws), &leapfrog) in steps.iter_mut().zip(&draws).zip(row) {
                if slot < draws {
                    *steps += u64::from(leapfrog);
                }
            }
        }
        Counted {
            batch,
            draws,
            steps,
        }
    }

    fn total_draws(&self) -> u64 {
        self.draws.iter().sum::<usize>() as u64
    }
}

/// Sets one field of a draw's statistics.
type SetStat = fn(&mut DrawStats, f64);

/// Where each real statistic of an output slot (`NS_O_*`) goes in a draw's statistics.
const REAL_STATS: [(usize, SetStat); 4] = [
    (NS_O_LP, |s, v| s.lp = v),
    (NS_O_ACCEPT, |s, v| s.accept_stat = v),
    (NS_O_STEP, |s, v| s.step_size = v),
    (NS_O_ENERGY, |s, v| s.energy = v),
];

/// The statistics of slot `slot` of the chains `chains`, into `stats` (in order); `row` is
/// room for one row of them.
fn draw_stats_row(
    batch: &NutsBatch,
    slot: usize,
    chains: Range<usize>,
    stats: &mut [DrawStats],
    row: &mut [f64],
) {
    for (k, set) in REAL_STATS {
        batch.stat_row(slot, k, chains.clone(), row);
        for (stats, &value) in stats.iter_mut().zip(row.iter()) {
            set(stats, value);
        }
    }
    draw_int_stats_row(batch, slot, chains, stats);
}

/// The integer statistics of slot `slot` of the chains `chains`, into `stats` (in order).
fn draw_int_stats_row(
    batch: &NutsBatch,
    slot: usize,
    chains: Range<usize>,
    stats: &mut [DrawStats],
) {
    let depth = batch.stat_u_row(slot, NS_OU_DEPTH, chains.clone());
    let leapfrog = batch.stat_u_row(slot, NS_OU_NLEAP, chains.clone());
    let divergent = batch.stat_u_row(slot, NS_OU_DIVERGENT, chains);
    for (i, stats) in stats.iter_mut().enumerate() {
        stats.tree_depth = depth[i];
        stats.n_leapfrog = leapfrog[i];
        stats.divergent = divergent[i] != 0;
    }
}

/// The draws of `batch` for the chains `chains`, handed to `emit` chain by chain within
/// each slot: chain `c` made `draws[c]` draws, the first at iteration `next[c]`, of `dim`
/// values each (0 when the batch has only statistics). Slot by slot: where the slots are
/// chain-major (chains split across lanes), each chain's values and statistics are one
/// contiguous read; else each value and statistic is a row of the range's chains.
fn batch_draws(
    batch: &NutsBatch,
    draws: &[usize],
    next: &[u64],
    dim: usize,
    warmup: bool,
    chains: Range<usize>,
    emit: &mut dyn FnMut(usize, Draw<'_>),
) {
    let most = chains.clone().map(|c| draws[c]).max().unwrap_or(0);
    let m = chains.len();
    let mut q = vec![0.0; m * dim];
    let mut stats = vec![DrawStats::default(); m];
    let mut row = vec![0.0; m];
    let chain_major = batch.sizes.chain_major;
    for slot in 0..most {
        if chain_major {
            let mut reals = [0.0; NS_O_COUNT];
            for (i, c) in chains.clone().enumerate() {
                if slot < draws[c] {
                    if dim > 0 {
                        batch.chain_values(slot, c, &mut q[i * dim..(i + 1) * dim]);
                    }
                    batch.chain_stats(slot, c, &mut reals);
                    for (k, set) in REAL_STATS {
                        set(&mut stats[i], reals[k]);
                    }
                }
            }
            draw_int_stats_row(batch, slot, chains.clone(), &mut stats);
        } else {
            for j in 0..dim {
                batch.value_row(slot, j, chains.clone(), &mut row);
                for (i, &value) in row.iter().enumerate() {
                    q[i * dim + j] = value;
                }
            }
            draw_stats_row(batch, slot, chains.clone(), &mut stats, &mut row);
        }
        for (i, c) in chains.clone().enumerate() {
            if slot >= draws[c] {
                continue;
            }
            emit(
                c,
                Draw {
                    q: &q[i * dim..(i + 1) * dim],
                    stats: stats[i],
                    iteration: next[c] + slot as u64,
                    warmup,
                },
            );
        }
    }
}

/// The state of one run of kernel (b).
struct Run<'a> {
    device: &'a GpuDevice,
    request: &'a GpuSampleRequest,
    observer: &'a dyn Observer,
    session: SessionId,
    dim: usize,
    width: usize,
    params: NsParams,
    writer: OutputWriter,
    traces: Vec<ChainTrace>,
    record: RecordSettings,
    dispatches: Vec<DispatchStats>,
    search_time: Duration,
    /// Step-size search tries per dispatch on a device that caps loop iterations.
    search_budget: Option<u32>,
    /// Leapfrog steps per dispatch on a device that caps loop iterations.
    soft_budget: Option<u32>,
    /// Each chain's next iteration (warmup included).
    next_iteration: Vec<u64>,
    /// Transitions per dispatch (M).
    m: u64,
    /// Output slots of a sampling dispatch under a step budget.
    sample_capacity: u64,
    /// Warmup iterations, and warmup and draws.
    iterations: Iterations,
    /// Whether warmup pools gradients too (nutpie's adaptation).
    with_grad: bool,
    /// The diagonal inverse metric the chains run with.
    metric: Vec<f64>,
    /// Settings and metric not yet sent to the device: they go with the next dispatch.
    pending_consts: Option<Vec<f64>>,
    /// A batch whose draws are not yet in the traces.
    unrecorded: Option<Counted>,
    /// Whether a batch's first draws were checked against the CPU: the first warmup block's,
    /// or with no warmup the first sampling batch's.
    first_draws_checked: bool,
    /// When the last batch came back, for the timeline.
    last_reply: Option<Instant>,
    /// When the run began (warmup included), for the timeline.
    started: Instant,
    queued_warmup_dispatches: usize,
    /// The log-density floors of the warmup blocks read (robust pooling, `adapt.rs`).
    lp_floors: LpFloors,
    /// The chains that started sampling from another chain's point (`adapt::reseats`).
    restarted: Vec<sampler::ChainId>,
}

impl Run<'_> {
    fn check_stop(&self) -> Result<(), GpuError> {
        if self.observer.should_stop() {
            return Err(SampleError::Cancelled.into());
        }
        Ok(())
    }

    fn send(&self, command: NutsCommand) -> crate::Pending<NutsReply> {
        self.device.nuts(command)
    }

    fn search(
        &mut self,
        search: Search,
        consts: Option<Vec<f64>>,
        first: bool,
    ) -> Result<Box<NutsSnapshot>, GpuError> {
        let mut params = self.params;
        params.search_kind = match search {
            Search::Stan => 0,
            Search::Nutpie => 1,
        };
        params.flags = if first { NS_FLAG_SEARCH_MU } else { 0 };
        params.search_budget = self.search_budget.unwrap_or(0);
        let started = Instant::now();
        let mut consts = consts;
        // Under a budget of tries per dispatch, a search goes on over dispatches until every
        // chain's has ended (each dispatch makes at least one try per unfinished chain).
        let snapshot = loop {
            let snapshot = expect_snapshot(
                self.send(NutsCommand::Search(
                    self.session,
                    NutsDispatch::plain(params, consts.take()),
                ))
                .wait()?,
            )?;
            if !(0..self.request.chains.len()).any(|c| snapshot.search_under_way(c)) {
                break snapshot;
            }
            params.flags |= NS_FLAG_SEARCH_CONTINUE;
        };
        self.search_time += started.elapsed();
        for (c, spec) in self.request.chains.iter().enumerate() {
            let message = match snapshot.state(NS_U_ERROR, c) {
                0 => continue,
                NS_ERROR_STEP_TOO_LARGE => {
                    "the step size grew past 1e7: the posterior may be improper (check the priors)"
                }
                NS_ERROR_STEP_ZERO => {
                    "no acceptably small step size: the model may be misspecified or its gradient wrong"
                }
                _ => "the step-size search failed",
            };
            return Err(SampleError::StepSize {
                chain: spec.chain,
                message: message.into(),
            }
            .into());
        }
        Ok(snapshot)
    }

    /// Checks the first draw of the first few chains that have one in this sampling batch
    /// against the CPU's log density (`check.rs`) before any is recorded; whether any was.
    fn check_first_draws(&self, counted: &Counted) -> Result<bool, GpuError> {
        let batch = &counted.batch;
        if !batch.has_values() {
            return Ok(false);
        }
        let program = self.request.model.program();
        let mut q = vec![0.0; self.dim];
        let mut reals = [0.0; NS_O_COUNT];
        let chains = (0..self.request.chains.len())
            .filter(|&c| counted.draws[c] > 0)
            .take(super::check::CHECKED_CHAINS);
        let mut checked = false;
        for c in chains {
            batch.chain_values(0, c, &mut q);
            batch.chain_stats(0, c, &mut reals);
            super::check::check_point(
                &self.device.report().name,
                program,
                self.request.resolved_precision(),
                c,
                CheckedPoint::FirstDraw,
                &q,
                reals[NS_O_LP],
                None,
            )?;
            checked = true;
        }
        Ok(checked)
    }

    /// Checks the first draws of `counted` unless a batch's were checked before.
    fn check_first_draws_once(&mut self, counted: &Counted) -> Result<(), GpuError> {
        if !self.first_draws_checked {
            self.first_draws_checked = self.check_first_draws(counted)?;
        }
        Ok(())
    }

    /// Records the draws of `batch` (warmup or sampling), each chain's from its own next
    /// iteration, and moves the counters on. A warmup batch without values has statistics
    /// only (warmup draws not saved).
    fn record_batch(&mut self, counted: &Counted, warmup: bool) {
        let Counted {
            batch,
            draws,
            steps,
        } = counted;
        let dim = if batch.has_values() { self.dim } else { 0 };
        let next = &self.next_iteration;
        let started = Instant::now();
        record(
            &mut self.traces,
            &self.writer,
            self.record,
            self.observer,
            |chains, emit| batch_draws(batch, draws, next, dim, warmup, chains, emit),
        );
        tracing::debug!(
            target: "gpu_actor::timeline",
            record_ms = started.elapsed().as_secs_f64() * 1e3,
            draws = counted.total_draws(),
            "recorded"
        );
        for (c, trace) in self.traces.iter_mut().enumerate() {
            if warmup {
                trace.grad_evals_warmup += steps[c];
            } else {
                trace.grad_evals_sampling += steps[c];
            }
            self.next_iteration[c] += draws[c] as u64;
        }
    }

    /// Records the batch kept back (`unrecorded`), if any.
    fn record_unrecorded(&mut self, warmup: bool) {
        if let Some(previous) = self.unrecorded.take() {
            self.record_batch(&previous, warmup);
        }
    }

    /// Waits for `pending`'s batch, spinning where the device thread does.
    fn wait(&self, pending: crate::Pending<NutsReply>) -> Result<NutsReply, GpuError> {
        pending.wait_spinning(self.device.spin_wait())
    }

    /// Starts every chain at its initial point with its step size; the warmup schedule when
    /// the chains adapt, and the metric they start with.
    fn start_chains(&mut self, init: &InitialPoints) -> Result<Option<Warmup>, GpuError> {
        let request = self.request;
        let settings = &request.settings;
        let (warmup, metric) = start_warmup(
            settings.adaptation,
            request.chains[0].tuning.as_ref(),
            self.iterations.warmup,
            self.dim,
            &init.q,
            &init.g,
        );
        self.metric = metric;
        let steps: Vec<f64> = request
            .chains
            .iter()
            .map(|spec| {
                spec.tuning
                    .as_ref()
                    .map_or(settings.initial_step_size, |t| t.step_size)
            })
            .collect();
        self.send(NutsCommand::Start(
            self.session,
            NutsStart {
                q: init.q.concat(),
                g: init.g.concat(),
                logp: init.logp.clone(),
                step: steps,
            },
        ))
        .wait()?;
        timeline(self.started, "chains started");
        for (trace, evals) in self.traces.iter_mut().zip(&init.grad_evals) {
            trace.grad_evals_warmup = *evals;
        }
        self.pending_consts = Some(consts(request, &self.metric));
        Ok(warmup)
    }

    /// Whether the next warmup block may wait on the device behind the one in flight.
    ///
    /// Without a step budget (or one no block can reach: every transition of every chain
    /// at the deepest tree) every chain ends each block in one dispatch, so the next block
    /// can wait on the device behind it (`NutsCommand::Queue`) while the host reads this
    /// one: the device never idles between blocks. That block then runs with the metric of
    /// the blocks before this one (one block older than the host would give it after reading
    /// this one), except after a boundary that may start a step-size search, where the host
    /// waits as before.
    fn queue_blocks(&self) -> bool {
        let max_depth = self.request.settings.max_depth;
        self.soft_budget.is_none_or(|budget| {
            u64::from(budget) >= self.m.saturating_mul((1u64 << max_depth.min(63)) - 1)
        })
    }

    /// The kernel's parameters and the moments to pool for the warmup block of iterations
    /// `start..end`, as the schedule `warmup` plans it.
    fn block_plan(&self, warmup: &Warmup, start: u64, end: u64) -> (NsParams, MomentsRequest) {
        let mut params = self.params;
        params.iter_end = end as u32;
        params.capacity = (end - start) as u32;
        params.step_budget = self.soft_budget.unwrap_or(0);
        params.with_grad = u32::from(self.with_grad);
        params.flags = NS_FLAG_ADAPT;
        params.late_from_iter = warmup.late_from(start).min(u64::from(u32::MAX)) as u32;
        let moments = MomentsRequest {
            block_start: start as u32,
            bins: (end - start) as u32,
            usable_only: warmup.usable_only(),
            lp_floor: self.lp_floors.for_block(start),
        };
        (params, moments)
    }

    /// A warmup dispatch, with the settings and metric not yet sent. The first block's values
    /// come back even when warmup is not saved: its first draws are checked against the CPU
    /// (`check_first_draws`).
    fn warmup_dispatch(&mut self, params: NsParams, moments: MomentsRequest) -> NutsDispatch {
        NutsDispatch {
            params,
            consts: self.pending_consts.take(),
            moments: Some(moments),
            read_values: self.request.settings.save_warmup || moments.block_start == 0,
        }
    }

    /// Warmup: all chains in step, block after block of the schedule, a block's pooled
    /// moments learned at its end, the metric and step-size searches the boundaries ask for.
    fn warm_up(&mut self, warmup: &mut Warmup) -> Result<(), GpuError> {
        let n_warm = self.iterations.warmup;
        let pending = self.pending_consts.take();
        self.search(warmup.initial_search(), pending, true)?;
        timeline(self.started, "first step-size search");
        let queue_blocks = self.queue_blocks();
        // What the block on the device, not yet read, was sent with.
        let mut queued: Option<NsParams> = None;
        let mut iteration = 0;
        let mut last_lp = Vec::new();
        while iteration < n_warm {
            self.check_stop()?;
            let end = warmup.boundary(iteration, self.m, n_warm);
            let (params, moments) = self.block_plan(warmup, iteration, end);
            if let Some(queued) = queued.take() {
                check_queued_block(&queued, &params)?;
            } else if queue_blocks {
                let dispatch = self.warmup_dispatch(params, moments);
                let reply = self
                    .send(NutsCommand::Queue(self.session, dispatch))
                    .wait()?;
                if !matches!(reply, NutsReply::Queued(None)) {
                    return Err(unexpected());
                }
            }
            let block;
            (block, last_lp) = self.run_block(warmup, iteration, end, queue_blocks, &mut queued)?;
            self.lp_floors.push(end, &last_lp);
            for (slot, moments) in block.iter().enumerate() {
                warmup.learn(iteration + slot as u64, moments);
            }
            let action = warmup.at_boundary(iteration);
            iteration = end;
            if let Some(new) = action.metric {
                for (old, new) in self.metric.iter_mut().zip(new) {
                    if new.is_finite() {
                        *old = new;
                    }
                }
                self.pending_consts = Some(consts(self.request, &self.metric));
            }
            if iteration < n_warm
                && let Some(search) = action.search
            {
                if queued.is_some() {
                    return Err(GpuError::Device {
                        operation: "nuts warmup",
                        message: "a step-size search came after a block with another queued".into(),
                    });
                }
                self.record_unrecorded(true);
                let pending = self.pending_consts.take();
                self.search(search, pending, false)?;
            }
        }
        self.record_unrecorded(true);
        self.reseat(&last_lp)
    }

    /// Starts the chains that end warmup far below the others (`last_lp`: each chain's log
    /// density at its last warmup draw) or with a step size far from theirs from other
    /// chains' points and step sizes (`adapt::reseats`).
    fn reseat(&mut self, last_lp: &[f64]) -> Result<(), GpuError> {
        let ended = expect_snapshot(self.send(NutsCommand::Snapshot(self.session)).wait()?)?;
        let pairs = reseats(last_lp, &ended.step);
        if pairs.is_empty() {
            return Ok(());
        }
        self.restarted = pairs
            .iter()
            .map(|&(c, _)| self.request.chains[c].chain)
            .collect();
        tracing::info!(
            chains = pairs.len(),
            "chains far from the others at the end of warmup (log density or step size) sample from where others ended it"
        );
        match self.send(NutsCommand::Reseat(self.session, pairs)).wait()? {
            NutsReply::Done => Ok(()),
            _ => Err(unexpected()),
        }
    }

    /// Runs the warmup block of iterations `start..end` (sent already when `queue_blocks`)
    /// until every chain has made its draws; the pooled moments of each of its iterations,
    /// and each chain's log density at its last draw.
    /// With `queue_blocks`, the next block is queued behind it where the schedule allows
    /// (`queued`: what it was sent with).
    fn run_block(
        &mut self,
        warmup: &Warmup,
        start: u64,
        end: u64,
        queue_blocks: bool,
        queued: &mut Option<NsParams>,
    ) -> Result<(Vec<IterationMoments>, Vec<f64>), GpuError> {
        let n_warm = self.iterations.warmup;
        let len = (end - start) as usize;
        let mut last_lp = vec![f64::NAN; self.request.chains.len()];
        let mut stats = [0.0; NS_O_COUNT];
        // The pooled moments of each iteration of this block, and each chain's draws so far.
        let mut block = vec![IterationMoments::new(self.dim); len];
        let mut done = vec![0usize; self.request.chains.len()];
        while done.iter().any(|&d| d < len) {
            let waiting = Instant::now();
            let pending = if queue_blocks {
                let next = (end < n_warm && !warmup.may_search_after(start, end))
                    .then(|| warmup.ahead(start, end, self.dim));
                match next {
                    Some(ahead) => {
                        let next_end = ahead.boundary(end, self.m, n_warm);
                        let (next_params, next_moments) = self.block_plan(&ahead, end, next_end);
                        *queued = Some(next_params);
                        self.queued_warmup_dispatches += 1;
                        let dispatch = self.warmup_dispatch(next_params, next_moments);
                        self.send(NutsCommand::Queue(self.session, dispatch))
                    }
                    None => self.send(NutsCommand::Collect(self.session)),
                }
            } else {
                let (params, moments) = self.block_plan(warmup, start, end);
                let dispatch = self.warmup_dispatch(params, moments);
                self.send(NutsCommand::Run(self.session, dispatch))
            };
            // The last batch's traces are written while the device runs this one.
            self.record_unrecorded(true);
            let reply = self.wait(pending)?;
            let counted = Counted::new(expect_batch(reply)?);
            dispatch_timeline(Phase::Warmup, &mut self.last_reply, waiting, &counted.batch);
            self.check_first_draws_once(&counted)?;
            check_block_draws(&done, &counted.draws, len, queue_blocks)?;
            let moments = pooled_moments(&counted.batch, len, self.dim, self.with_grad);
            for (block, moments) in block.iter_mut().zip(&moments) {
                block.merge(moments);
            }
            for (c, (done, &draws)) in done.iter_mut().zip(&counted.draws).enumerate() {
                *done += draws;
                if draws > 0 {
                    counted.batch.chain_stats(draws - 1, c, &mut stats);
                    last_lp[c] = stats[NS_O_LP];
                }
            }
            self.push_dispatch(Phase::Warmup, &counted);
            self.unrecorded = Some(counted);
        }
        Ok((block, last_lp))
    }

    fn push_dispatch(&mut self, phase: Phase, counted: &Counted) {
        let stats = dispatch_stats(phase, &counted.batch, self.width, counted.total_draws());
        self.dispatches.push(stats);
    }

    /// The kernel's parameters for a sampling dispatch. `known`: the draws each chain has
    /// left as far as the host has read; `estimate`: less those the dispatch in flight should
    /// make. The last dispatch (no budget) is sized for the known draws, so that it ends every
    /// chain unless the one in flight fell short.
    fn sampling_plan(
        &self,
        known: &[u64],
        estimate: &[u64],
        steps_per_draw: Option<f64>,
    ) -> NsParams {
        let m = self.m;
        let mut params = self.params;
        params.iter_end = self.iterations.total as u32;
        params.with_grad = 0;
        params.flags = 0;
        let most = |left: &[u64]| left.iter().copied().max().unwrap_or(0);
        match steps_per_draw {
            Some(per_draw) if most(estimate) > m => {
                params.capacity = self.sample_capacity.min(most(known)) as u32;
                params.step_budget = (m as f64 * per_draw).ceil().max(1.0) as u32;
            }
            _ => {
                params.capacity = most(known).min(self.sample_capacity.max(m)) as u32;
                params.step_budget = 0;
            }
        }
        if let Some(soft) = self.soft_budget {
            params.step_budget = match params.step_budget {
                0 => soft,
                budget => budget.min(soft),
            };
        }
        params
    }

    /// Sampling: chains independent, equal leapfrog budgets. Two dispatches in flight: each
    /// `Queue` submits the next one before waiting for the one before it, so the device never
    /// waits for the host between them. A dispatch is planned from the draws known so far
    /// less those the one in flight should make.
    fn sample(&mut self) -> Result<(), GpuError> {
        let n = self.request.chains.len();
        let mut remaining: Vec<u64> = vec![self.request.settings.num_draws; n];
        let mut steps_per_draw = mean_steps_per_draw(&self.dispatches);
        let mut in_flight: Option<Vec<u64>> = None;
        loop {
            let estimate: Vec<u64> = match &in_flight {
                Some(expected) => remaining
                    .iter()
                    .zip(expected)
                    .map(|(left, made)| left.saturating_sub(*made))
                    .collect(),
                None => remaining.clone(),
            };
            let next = estimate
                .iter()
                .any(|&left| left > 0)
                .then(|| self.sampling_plan(&remaining, &estimate, steps_per_draw));
            let pending = match (&next, in_flight.is_some()) {
                (Some(params), _) => {
                    self.check_stop()?;
                    let consts = self.pending_consts.take();
                    self.send(NutsCommand::Queue(
                        self.session,
                        NutsDispatch::plain(*params, consts),
                    ))
                }
                (None, true) => self.send(NutsCommand::Collect(self.session)),
                // Nothing in flight and nothing planned: every chain has all its draws.
                (None, false) => break,
            };
            // The last batch's draws are recorded while the device runs.
            self.record_unrecorded(false);
            let waiting = Instant::now();
            let batch = match self.wait(pending)? {
                NutsReply::Queued(batch) => batch,
                NutsReply::Batch(batch) => Some(batch),
                _ => return Err(unexpected()),
            };
            if let Some(batch) = &batch {
                dispatch_timeline(Phase::Sampling, &mut self.last_reply, waiting, batch);
            }
            in_flight = next.map(|params| expected_draws(&estimate, &params, self.m));
            let Some(batch) = batch else { continue };
            self.take_sampling_batch(Counted::new(batch), &mut remaining, &mut steps_per_draw)?;
        }
        self.record_unrecorded(false);
        Ok(())
    }

    /// Takes a sampling batch in: checks its first draws if none were, counts its draws off
    /// `remaining`, updates the mean steps per draw and keeps it to record.
    fn take_sampling_batch(
        &mut self,
        counted: Counted,
        remaining: &mut [u64],
        steps_per_draw: &mut Option<f64>,
    ) -> Result<(), GpuError> {
        self.check_first_draws_once(&counted)?;
        for (left, made) in remaining.iter_mut().zip(&counted.draws) {
            *left = left.saturating_sub(*made as u64);
        }
        let draws = counted.total_draws();
        let steps: u64 = counted.steps.iter().sum();
        self.push_dispatch(Phase::Sampling, &counted);
        if draws > 0 {
            let seen = steps as f64 / draws as f64;
            *steps_per_draw = Some(steps_per_draw.map_or(seen, |old| 0.5 * (old + seen)));
        }
        self.unrecorded = Some(counted);
        Ok(())
    }

    /// The step sizes and search counts that warmup left, read with the last point after
    /// sampling (sampling changes neither): no round trip to the device between the phases.
    fn finish_traces(
        &mut self,
        adapted: bool,
        warmup_time: Duration,
        sampling_time: Duration,
    ) -> Result<(), GpuError> {
        let dim = self.dim;
        let last = expect_snapshot(self.send(NutsCommand::Snapshot(self.session)).wait()?)?;
        for (c, trace) in self.traces.iter_mut().enumerate() {
            if adapted {
                trace.grad_evals_warmup += u64::from(last.search_evals(c));
            }
            trace.tuning = Tuning {
                step_size: last.step[c],
                inv_metric: self.metric.clone(),
                dense: false,
            };
            trace.final_position = last.q[c * dim..(c + 1) * dim].to_vec();
            trace.warmup_seconds = warmup_time.as_secs_f64();
            trace.sampling_seconds = sampling_time.as_secs_f64();
        }
        Ok(())
    }
}

impl Run<'_> {
    /// Starts the chains at `init`, warms them up and samples; `room` is the traces' room
    /// for the draws, given to them before sampling.
    fn run(mut self, init: &InitialPoints, room: sampler::Room) -> Result<GpuRun, GpuError> {
        let started = self.started;
        let mut warmup = self.start_chains(init)?;
        let init_time = started.elapsed();
        if let Some(warmup) = warmup.as_mut() {
            self.warm_up(warmup)?;
        }
        timeline(started, "warmup");
        let warmup_time = started.elapsed();

        let sampling_started = Instant::now();
        give_room(room, &mut self.traces);
        timeline(started, "room given");
        self.sample()?;
        timeline(started, "sampling");
        let sampling_time = sampling_started.elapsed();

        self.finish_traces(warmup.is_some(), warmup_time, sampling_time)?;
        Ok(GpuRun {
            traces: self.traces,
            dispatches: self.dispatches,
            warmup_time,
            init_time,
            search_time: self.search_time,
            sampling_time,
            queued_warmup_dispatches: self.queued_warmup_dispatches,
            precision: super::PrecisionChoice::asked(self.request.resolved_precision()),
            restarted: self.restarted,
        })
    }
}

/// A queued warmup block was planned before the block ahead of it was learned
/// (`Warmup::ahead`); the schedule counts iterations, so the plan is the schedule's own, and
/// a difference is a bug there, not the draws' doing.
fn check_queued_block(queued: &NsParams, params: &NsParams) -> Result<(), GpuError> {
    if queued != params {
        return Err(GpuError::Device {
            operation: "nuts warmup",
            message: format!(
                "a queued warmup block was planned as {queued:?}, the schedule asked for {params:?}"
            ),
        });
    }
    Ok(())
}

/// Checks that no chain made more draws than a warmup block of `len` iterations has, and
/// with `queue_blocks` that each ended its block in its dispatch (the next one already
/// follows): `done` draws before this batch, `draws` in it.
fn check_block_draws(
    done: &[usize],
    draws: &[usize],
    len: usize,
    queue_blocks: bool,
) -> Result<(), GpuError> {
    for (c, (done, draws)) in done.iter().zip(draws).enumerate() {
        let short = queue_blocks && done + draws < len;
        if done + draws > len || short {
            return Err(GpuError::Device {
                operation: "nuts warmup",
                message: format!(
                    "chain {c} made {} draws in a warmup block of {len} iterations",
                    done + draws
                ),
            });
        }
    }
    Ok(())
}

/// Compiles the kernels, finds the initial points and opens a session on the device.
fn open_session(
    device: &GpuDevice,
    key: ModelKey,
    request: &GpuSampleRequest,
    plan: &KernelPlan,
    shape: &NutsShape,
) -> Result<(InitialPoints, SessionId), GpuError> {
    let settings = &request.settings;
    let n = request.chains.len();
    let started = Instant::now();
    // The three kernels compile side by side while the initial points wait for the first.
    super::prepare(
        device,
        key,
        [(KernelKind::Nuts, n), (KernelKind::NutsSearch, n)],
        plan,
    )?;
    let init = initial_points(
        device,
        key,
        &request.model,
        settings,
        request.seed,
        &request.chains,
    )?;
    tracing::debug!(
        target: "gpu_actor::timeline",
        ms = started.elapsed().as_secs_f64() * 1e3,
        device_ms = init.device_time.as_secs_f64() * 1e3,
        "initial points"
    );
    let open = NutsOpen {
        model: key,
        n_chains: n,
        max_depth: settings.max_depth,
        capacity: shape.capacity,
        with_grad: shape.with_grad,
        grad_capacity: shape.grad_capacity,
        overrides: plan.pinned(),
    };
    let session = match device.nuts(NutsCommand::Open(open)).wait()? {
        NutsReply::Opened(id) => id,
        _ => return Err(unexpected()),
    };
    Ok((init, session))
}

pub(super) fn run(
    device: &GpuDevice,
    key: ModelKey,
    request: &GpuSampleRequest,
    plan: &KernelPlan,
    transitions: u32,
    observer: &dyn Observer,
) -> Result<GpuRun, GpuError> {
    let settings = &request.settings;
    let program = request.model.program();
    let n = request.chains.len();
    let iterations = Iterations::of(request)?;
    let adapt = iterations.warmup > 0;
    let m = u64::from(transitions);
    let sample_capacity = sample_capacity(m);
    let shape = session_shape(request, transitions)?;
    let with_grad = shape.with_grad;

    let warmup_started = Instant::now();
    let (init, session) = open_session(device, key, request, plan, &shape)?;
    let _guard = SessionGuard {
        device,
        id: session,
    };
    timeline(warmup_started, "session open");
    let writer = OutputWriter::new(program);
    let traces = empty_traces(&request.chains, &init.q, writer.n_columns());
    let record = RecordSettings::new(settings, observer);
    let room = sampler::Room::make(n, writer.n_columns(), record.draws);
    // On a device that caps loop iterations a dispatch may only run so many steps and tries.
    let budget = super::loop_budget(device, program, settings.max_depth, plan)?;
    let run = Run {
        device,
        request,
        observer,
        session,
        dim: program.dim,
        width: plan.lockstep_width as usize,
        params: NsParams {
            n_chains: n as u32,
            max_depth: settings.max_depth,
            seed_lo: request.seed.0 as u32,
            seed_hi: (request.seed.0 >> 32) as u32,
            da_final_iter: if adapt {
                (iterations.warmup - 1) as u32
            } else {
                u32::MAX
            },
            late_from_iter: u32::MAX,
            ..NsParams::default()
        },
        writer,
        traces,
        record,
        dispatches: Vec::new(),
        search_time: Duration::ZERO,
        search_budget: budget.map(|budget| budget.search_tries),
        soft_budget: budget.map(|budget| budget.nuts_steps),
        next_iteration: vec![0; n],
        m,
        sample_capacity,
        iterations,
        with_grad,
        metric: Vec::new(),
        pending_consts: None,
        unrecorded: None,
        first_draws_checked: false,
        last_reply: None,
        started: warmup_started,
        queued_warmup_dispatches: 0,
        lp_floors: LpFloors::default(),
        restarted: Vec::new(),
    };
    run.run(&init, room)
}

/// Output slots of a sampling dispatch of about `m` transitions: room for chains that run
/// ahead of the others.
fn sample_capacity(m: u64) -> u64 {
    (3 * m).div_ceil(2) + 2
}

/// The numbers that size the session of `request` run with `transitions` transitions per
/// dispatch: its chains, trees, output slots (for a warmup dispatch of `transitions` or a
/// sampling one) and whether warmup records gradients (nutpie's adaptation).
pub(super) fn session_shape(
    request: &GpuSampleRequest,
    transitions: u32,
) -> Result<NutsShape, GpuError> {
    let settings = &request.settings;
    let m = u64::from(transitions.max(1));
    let adapt = Iterations::of(request)?.warmup > 0;
    Ok(NutsShape {
        n_chains: request.chains.len(),
        max_depth: settings.max_depth,
        capacity: m.max(sample_capacity(m)) as usize,
        with_grad: adapt && settings.adaptation == AdaptationKind::Nutpie,
        // Warmup's blocks, the only dispatches that record gradients, are at most `m` long.
        grad_capacity: m as usize,
    })
}

/// The draws each chain should make in a sampling dispatch of `params`, from the draws it
/// has left (`left`): about `m` under a step budget, else as many as the slots hold.
fn expected_draws(left: &[u64], params: &NsParams, m: u64) -> Vec<u64> {
    let most = if params.step_budget > 0 {
        m.min(u64::from(params.capacity))
    } else {
        u64::from(params.capacity)
    };
    left.iter().map(|&left| left.min(most)).collect()
}

/// A `debug` event of target `gpu_actor::timeline`: `what` ended, this long into the run.
fn timeline(started: Instant, what: &str) {
    tracing::debug!(
        target: "gpu_actor::timeline",
        ms = started.elapsed().as_secs_f64() * 1e3,
        "{what}"
    );
}

/// A `debug` event of target `gpu_actor::timeline` for a batch the driver began to wait
/// for at `waiting`: the host's time from the last reply to then (`host_ms`), the wait, the
/// device's time from submission to mapped results and the kernels' own. Where `device_ms`
/// exceeds `kernel_ms` the device copied or waited; with one dispatch in flight (warmup),
/// `host_ms` is time the device sat idle.
fn dispatch_timeline(
    phase: Phase,
    last_reply: &mut Option<Instant>,
    waiting: Instant,
    batch: &NutsBatch,
) {
    let now = Instant::now();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    tracing::debug!(
        target: "gpu_actor::timeline",
        ?phase,
        host_ms = last_reply.map(|last| ms(waiting.saturating_duration_since(last))),
        wait_ms = ms(now - waiting),
        device_ms = ms(batch.elapsed),
        kernel_ms = batch.kernel_time.map(ms),
        "dispatch"
    );
    *last_reply = Some(now);
}

/// Mean leapfrog steps per draw over the last warmup dispatches, if any.
fn mean_steps_per_draw(dispatches: &[DispatchStats]) -> Option<f64> {
    let recent: Vec<&DispatchStats> = dispatches.iter().rev().take(4).collect();
    let draws: u64 = recent.iter().map(|d| d.draws).sum();
    let steps: u64 = recent.iter().map(|d| d.useful_steps).sum();
    (draws > 0).then(|| steps as f64 / draws as f64)
}

#[cfg(test)]
mod tests;
