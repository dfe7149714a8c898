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

use super::adapt::{IterationMoments, Search, Warmup};
use super::init::initial_points;
use super::outputs::OutputWriter;
use super::records::{Draw, RecordSettings, Room, empty_traces, record};
use super::{
    DispatchStats, GpuRun, GpuSampleRequest, GpuSamplingOptions, Iterations, Phase, max_log_step,
};
use crate::device::nuts::{
    MomentsRequest, NutsBatch, NutsCommand, NutsDispatch, NutsOpen, NutsReply, NutsSnapshot,
    NutsStart, SessionId,
};
use crate::device::{GpuDevice, ModelKey};
use crate::error::{CheckedPoint, GpuError};
use crate::kernels::layout::{
    NS_C_COUNT, NS_C_DA_GAMMA, NS_C_DA_KAPPA, NS_C_DA_MAX_LOG_STEP, NS_C_DA_T0, NS_C_DA_TARGET,
    NS_C_JITTER, NS_C_MAX_ENERGY_ERROR, NS_C_SEARCH_MU, NS_ERROR_STEP_TOO_LARGE,
    NS_ERROR_STEP_ZERO, NS_FLAG_ADAPT, NS_FLAG_SEARCH_CONTINUE, NS_FLAG_SEARCH_MU, NS_O_ACCEPT,
    NS_O_COUNT, NS_O_ENERGY, NS_O_LP, NS_O_STEP, NS_OU_DEPTH, NS_OU_DIVERGENT, NS_OU_NLEAP,
    NS_U_DRAWS, NS_U_ERROR, NS_U_STEPS, NsParams,
};
use crate::wgsl::KernelKind;

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
    /// Each chain's next iteration (warmup included).
    next_iteration: Vec<u64>,
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
                self.request.precision,
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
}

pub(super) fn run(
    device: &GpuDevice,
    key: ModelKey,
    request: &GpuSampleRequest,
    options: &GpuSamplingOptions,
    width: u32,
    transitions: u32,
    observer: &dyn Observer,
) -> Result<GpuRun, GpuError> {
    let settings = &request.settings;
    let program = request.model.program();
    let dim = program.dim;
    let n = request.chains.len();
    let Iterations {
        warmup: n_warm,
        total,
    } = Iterations::of(request)?;
    let adapt = n_warm > 0;
    let m = u64::from(transitions);
    let sample_capacity = (3 * m).div_ceil(2) + 2;
    let with_grad = adapt && settings.adaptation == AdaptationKind::Nutpie;

    let warmup_started = Instant::now();
    // The three kernels compile side by side while the initial points wait for the first.
    super::prepare(
        device,
        key,
        [(KernelKind::Nuts, n), (KernelKind::NutsSearch, n)],
        options,
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
        ms = warmup_started.elapsed().as_secs_f64() * 1e3,
        device_ms = init.device_time.as_secs_f64() * 1e3,
        "initial points"
    );
    let open = NutsOpen {
        model: key,
        n_chains: n,
        max_depth: settings.max_depth,
        capacity: m.max(sample_capacity) as usize,
        with_grad,
        shader: options.shader(),
        draws: options.draws,
    };
    let session = match device.nuts(NutsCommand::Open(open)).wait()? {
        NutsReply::Opened(id) => id,
        _ => return Err(unexpected()),
    };
    let _guard = SessionGuard {
        device,
        id: session,
    };
    timeline(warmup_started, "session open");
    let writer = OutputWriter::new(program);
    let traces = empty_traces(&request.chains, &init.q, writer.n_columns());
    let record = RecordSettings::new(settings, observer);
    let room = Room::make(n, writer.n_columns(), record.draws);
    let mut run = Run {
        device,
        request,
        observer,
        session,
        dim,
        width: width as usize,
        params: NsParams {
            n_chains: n as u32,
            max_depth: settings.max_depth,
            seed_lo: request.seed.0 as u32,
            seed_hi: (request.seed.0 >> 32) as u32,
            da_final_iter: if adapt { (n_warm - 1) as u32 } else { u32::MAX },
            late_from_iter: u32::MAX,
            ..NsParams::default()
        },
        writer,
        traces,
        record,
        dispatches: Vec::new(),
        search_time: Duration::ZERO,
        search_budget: None,
        next_iteration: vec![0; n],
    };
    // On a device that caps loop iterations a dispatch may only run so many steps and tries.
    let budget = super::loop_budget(device, program, settings.max_depth, options)?;
    let soft_budget = budget.map(|budget| budget.nuts_steps);
    run.search_budget = budget.map(|budget| budget.search_tries);

    let (mut warmup, mut metric) = match (&request.chains[0].tuning, adapt) {
        (Some(tuning), _) => (None, tuning.inv_metric.clone()),
        (None, false) => (None, vec![1.0; dim]),
        (None, true) => {
            let (warmup, metric) = Warmup::new(settings.adaptation, n_warm, dim, &init.q, &init.g);
            (Some(warmup), metric)
        }
    };
    let steps: Vec<f64> = request
        .chains
        .iter()
        .map(|spec| {
            spec.tuning
                .as_ref()
                .map_or(settings.initial_step_size, |t| t.step_size)
        })
        .collect();
    run.send(NutsCommand::Start(
        session,
        NutsStart {
            q: init.q.concat(),
            g: init.g.concat(),
            logp: init.logp.clone(),
            step: steps,
        },
    ))
    .wait()?;
    timeline(warmup_started, "chains started");
    for (trace, evals) in run.traces.iter_mut().zip(&init.grad_evals) {
        trace.grad_evals_warmup = *evals;
    }
    let init_time = warmup_started.elapsed();
    let mut pending_consts = Some(consts(request, &metric));

    // Warmup: all chains in step.
    let mut last_reply = None;
    // Whether a batch's first draws were checked against the CPU: the first warmup block's,
    // or with no warmup the first sampling batch's.
    let mut first_draws_checked = false;
    // A warmup batch whose draws are not yet in the traces.
    let mut unrecorded: Option<Counted> = None;
    let mut queued_warmup_dispatches = 0;
    if let Some(warmup) = warmup.as_mut() {
        run.search(warmup.initial_search(), pending_consts.take(), true)?;
        timeline(warmup_started, "first step-size search");
        // Without a step budget (or one no block can reach: every transition of every chain
        // at the deepest tree) every chain ends each block in one dispatch, so the next
        // block can wait on the device behind it (`NutsCommand::Queue`) while the host reads
        // this one: the device never idles between blocks. That block then runs with the
        // metric of the blocks before this one (one block older than the host would give it
        // after reading this one), except after a boundary that may start a step-size search,
        // where the host waits as before.
        let queue_blocks = soft_budget.is_none_or(|budget| {
            u64::from(budget) >= m.saturating_mul((1u64 << settings.max_depth.min(63)) - 1)
        });
        let base = run.params;
        let block_plan = |warmup: &Warmup, start: u64, end: u64| {
            let mut params = base;
            params.iter_end = end as u32;
            params.capacity = (end - start) as u32;
            params.step_budget = soft_budget.unwrap_or(0);
            params.with_grad = u32::from(with_grad);
            params.flags = NS_FLAG_ADAPT;
            params.late_from_iter = warmup.late_from(start).min(u64::from(u32::MAX)) as u32;
            let moments = MomentsRequest {
                block_start: start as u32,
                bins: (end - start) as u32,
                usable_only: warmup.usable_only(),
            };
            (params, moments)
        };
        // The first block's values come back even when warmup is not saved: its first draws
        // are checked against the CPU (`check_first_draws`).
        let dispatch = |params, moments: MomentsRequest, consts| NutsDispatch {
            params,
            consts,
            moments: Some(moments),
            read_values: settings.save_warmup || moments.block_start == 0,
        };
        // What the block on the device, not yet read, was sent with.
        let mut queued: Option<NsParams> = None;
        let mut iteration = 0;
        while iteration < n_warm {
            run.check_stop()?;
            let end = warmup.boundary(iteration, m, n_warm);
            let len = (end - iteration) as usize;
            let (params, moments) = block_plan(warmup, iteration, end);
            if let Some(queued) = queued.take() {
                // Planned before the block ahead of it was learned (`Warmup::ahead`); the
                // schedule counts iterations, so the plan is the schedule's own, and a
                // difference is a bug there, not the draws' doing.
                if queued != params {
                    return Err(GpuError::Device {
                        operation: "nuts warmup",
                        message: format!(
                            "a queued warmup block was planned as {queued:?}, the schedule asked for {params:?}"
                        ),
                    });
                }
            } else if queue_blocks {
                let reply = run
                    .send(NutsCommand::Queue(
                        session,
                        dispatch(params, moments, pending_consts.take()),
                    ))
                    .wait()?;
                if !matches!(reply, NutsReply::Queued(None)) {
                    return Err(unexpected());
                }
            }
            // The pooled moments of each iteration of this block, and each chain's draws so far.
            let mut block = vec![IterationMoments::new(dim); len];
            let mut done = vec![0usize; n];
            while done.iter().any(|&d| d < len) {
                let waiting = Instant::now();
                let pending = if queue_blocks {
                    let next = (end < n_warm && !warmup.may_search_after(iteration, end))
                        .then(|| warmup.ahead(iteration, end, dim));
                    match next {
                        Some(ahead) => {
                            let next_end = ahead.boundary(end, m, n_warm);
                            let (next_params, next_moments) = block_plan(&ahead, end, next_end);
                            queued = Some(next_params);
                            queued_warmup_dispatches += 1;
                            run.send(NutsCommand::Queue(
                                session,
                                dispatch(next_params, next_moments, pending_consts.take()),
                            ))
                        }
                        None => run.send(NutsCommand::Collect(session)),
                    }
                } else {
                    run.send(NutsCommand::Run(
                        session,
                        dispatch(params, moments, pending_consts.take()),
                    ))
                };
                // The last batch's traces are written while the device runs this one.
                if let Some(previous) = unrecorded.take() {
                    run.record_batch(&previous, true);
                }
                let reply = pending.wait_spinning(run.device.spin_wait())?;
                let counted = Counted::new(expect_batch(reply)?);
                dispatch_timeline(Phase::Warmup, &mut last_reply, waiting, &counted.batch);
                if !first_draws_checked {
                    first_draws_checked = run.check_first_draws(&counted)?;
                }
                for (c, (done, draws)) in done.iter().zip(&counted.draws).enumerate() {
                    // A queued block must end in its dispatch: the next one already follows.
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
                let moments = pooled_moments(&counted.batch, len, dim, with_grad);
                for (block, moments) in block.iter_mut().zip(&moments) {
                    block.merge(moments);
                }
                for (done, draws) in done.iter_mut().zip(&counted.draws) {
                    *done += draws;
                }
                run.dispatches.push(dispatch_stats(
                    Phase::Warmup,
                    &counted.batch,
                    run.width,
                    counted.total_draws(),
                ));
                unrecorded = Some(counted);
            }
            for (slot, moments) in block.iter().enumerate() {
                warmup.learn(iteration + slot as u64, moments);
            }
            let action = warmup.at_boundary(iteration);
            iteration = end;
            if let Some(new) = action.metric {
                for (old, new) in metric.iter_mut().zip(new) {
                    if new.is_finite() {
                        *old = new;
                    }
                }
                pending_consts = Some(consts(request, &metric));
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
                if let Some(previous) = unrecorded.take() {
                    run.record_batch(&previous, true);
                }
                run.search(search, pending_consts.take(), false)?;
            }
        }
        if let Some(previous) = unrecorded.take() {
            run.record_batch(&previous, true);
        }
    }
    // The step sizes and search counts that warmup left are read with the last point, after
    // sampling (sampling changes neither): no round trip to the device between the phases.
    timeline(warmup_started, "warmup");
    let warmup_time = warmup_started.elapsed();

    // Sampling: chains independent, equal leapfrog budgets.
    let sampling_started = Instant::now();
    room.give(&mut run.traces);
    timeline(warmup_started, "room given");
    let num_draws = settings.num_draws;
    let mut remaining: Vec<u64> = vec![num_draws; n];
    let mut steps_per_draw = mean_steps_per_draw(&run.dispatches);
    let base = run.params;
    // `known`: the draws each chain has left as far as the host has read; `estimate`: less
    // those the dispatch in flight should make. The last dispatch (no budget) is sized for
    // the known draws, so that it ends every chain unless the one in flight fell short.
    let plan = |known: &[u64], estimate: &[u64], steps_per_draw: Option<f64>| -> NsParams {
        let mut params = base;
        params.iter_end = total as u32;
        params.with_grad = 0;
        params.flags = 0;
        let most = |left: &[u64]| left.iter().copied().max().unwrap_or(0);
        match steps_per_draw {
            Some(per_draw) if most(estimate) > m => {
                params.capacity = sample_capacity.min(most(known)) as u32;
                params.step_budget = (m as f64 * per_draw).ceil().max(1.0) as u32;
            }
            _ => {
                params.capacity = most(known).min(sample_capacity.max(m)) as u32;
                params.step_budget = 0;
            }
        }
        if let Some(soft) = soft_budget {
            params.step_budget = match params.step_budget {
                0 => soft,
                budget => budget.min(soft),
            };
        }
        params
    };
    // Two dispatches in flight: each `Queue` submits the next one before waiting for the
    // one before it, so the device never waits for the host between them. A dispatch is
    // planned from the draws known so far less those the one in flight should make.
    let mut in_flight: Option<Vec<u64>> = None;
    let mut unrecorded: Option<Counted> = None;
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
            .then(|| plan(&remaining, &estimate, steps_per_draw));
        let pending = match (&next, in_flight.is_some()) {
            (Some(params), _) => {
                run.check_stop()?;
                run.send(NutsCommand::Queue(
                    session,
                    NutsDispatch::plain(*params, pending_consts.take()),
                ))
            }
            (None, true) => run.send(NutsCommand::Collect(session)),
            // Nothing in flight and nothing planned: every chain has all its draws.
            (None, false) => break,
        };
        // The last batch's draws are recorded while the device runs.
        if let Some(previous) = unrecorded.take() {
            run.record_batch(&previous, false);
        }
        let waiting = Instant::now();
        let batch = match pending.wait_spinning(run.device.spin_wait())? {
            NutsReply::Queued(batch) => batch,
            NutsReply::Batch(batch) => Some(batch),
            _ => return Err(unexpected()),
        };
        if let Some(batch) = &batch {
            dispatch_timeline(Phase::Sampling, &mut last_reply, waiting, batch);
        }
        in_flight = next.map(|params| expected_draws(&estimate, &params, m));
        let Some(batch) = batch else { continue };
        let counted = Counted::new(batch);
        if !first_draws_checked {
            first_draws_checked = run.check_first_draws(&counted)?;
        }
        for (left, made) in remaining.iter_mut().zip(&counted.draws) {
            *left = left.saturating_sub(*made as u64);
        }
        let draws = counted.total_draws();
        let steps: u64 = counted.steps.iter().sum();
        run.dispatches.push(dispatch_stats(
            Phase::Sampling,
            &counted.batch,
            run.width,
            draws,
        ));
        if draws > 0 {
            let seen = steps as f64 / draws as f64;
            steps_per_draw = Some(steps_per_draw.map_or(seen, |old| 0.5 * (old + seen)));
        }
        unrecorded = Some(counted);
    }
    if let Some(previous) = unrecorded.take() {
        run.record_batch(&previous, false);
    }
    timeline(warmup_started, "sampling");
    let sampling_time = sampling_started.elapsed();

    let last = expect_snapshot(run.send(NutsCommand::Snapshot(session)).wait()?)?;
    for (c, trace) in run.traces.iter_mut().enumerate() {
        if warmup.is_some() {
            trace.grad_evals_warmup += u64::from(last.search_evals(c));
        }
        trace.tuning = Tuning {
            step_size: last.step[c],
            inv_metric: metric.clone(),
            dense: false,
        };
        trace.final_position = last.q[c * dim..(c + 1) * dim].to_vec();
        trace.warmup_seconds = warmup_time.as_secs_f64();
        trace.sampling_seconds = sampling_time.as_secs_f64();
    }
    Ok(GpuRun {
        traces: run.traces,
        dispatches: run.dispatches,
        warmup_time,
        init_time,
        search_time: run.search_time,
        sampling_time,
        queued_warmup_dispatches,
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
