//! The moments kernel against the host: the pooled moments of a warmup block computed on the
//! device equal those of the same draws read back, for whole and partial chunks, both usable
//! rules, and chains that stop mid-block (a step budget) and go on in the next dispatch.
//! A batch held while the next dispatch runs keeps its bytes (each has its own read-back buffer),
//! and queued dispatches give what dispatches one at a time give. Recording a batch's draws
//! into the traces, on synthetic batches (no device).

use sampler::{
    ChainId, ChainSpec, CheckedModel, Dist, Limits, ModelBuilder, SamplerSettings, Seed,
};

use super::{MomentsRequest, NutsBatch, pooled_moments};
use crate::device::GpuDevice;
use crate::device::nuts::{NutsCommand, NutsDispatch, NutsOpen, NutsReply, NutsStart, SessionId};
use crate::kernels::layout::{NS_FLAG_ADAPT, NS_OU_DIVERGENT, NS_U_DRAWS, NS_U_ITER, NsParams};
use crate::sampling::adapt::IterationMoments;
use crate::sampling::init::{InitialPoints, initial_points};
use crate::sampling::tests::device;
use crate::wgsl::Precision;

/// The host's moments of `batch`'s draws of iterations `start..start + len`, from the values
/// read back, chain after chain in chunk order as the device merges them.
fn host_moments(
    batch: &NutsBatch,
    start: u32,
    len: usize,
    dim: usize,
    usable_only: bool,
    lp_floor: f64,
) -> Vec<IterationMoments> {
    let mut moments = vec![IterationMoments::new(dim); len];
    for c in 0..batch.sizes.n {
        let draws = batch.state_row(NS_U_DRAWS)[c];
        let first = batch.state_row(NS_U_ITER)[c] - draws;
        for slot in 0..draws as usize {
            let bin = (first + slot as u32).wrapping_sub(start) as usize;
            if bin >= len {
                continue;
            }
            let index = i64::from(
                batch.stat_u_row(slot, crate::kernels::layout::NS_OU_INDEX, c..c + 1)[0] as i32,
            );
            let usable = if batch.stat_u_row(slot, NS_OU_DIVERGENT, c..c + 1)[0] != 0 {
                index.abs() > 4
            } else {
                index != 0
            };
            if usable_only && !usable {
                continue;
            }
            // The kernel compares with the floor rounded to f32 (`NmParams::lp_floor_bits`).
            let mut stats = [0.0; crate::kernels::layout::NS_O_COUNT];
            batch.chain_stats(slot, c, &mut stats);
            if stats[crate::kernels::layout::NS_O_LP] < f64::from(lp_floor as f32) {
                continue;
            }
            let value = |k| {
                let mut one = [0.0];
                batch.value_row(slot, k, c..c + 1, &mut one);
                one[0]
            };
            let q: Vec<f64> = (0..dim).map(value).collect();
            let g: Vec<f64> = (dim..2 * dim).map(value).collect();
            moments[bin].add(&q, &g);
        }
    }
    moments
}

/// Every value and real statistic of `batch`'s first slot.
fn first_slot(batch: &NutsBatch) -> Vec<f64> {
    let n = batch.sizes.n;
    let mut row = vec![0.0; n];
    let mut values = Vec::new();
    for k in 0..batch.sizes.width() {
        batch.value_row(0, k, 0..n, &mut row);
        values.extend_from_slice(&row);
    }
    for k in 0..crate::kernels::layout::NS_O_COUNT {
        batch.stat_row(0, k, 0..n, &mut row);
        values.extend_from_slice(&row);
    }
    values
}

fn assert_close(device: &IterationMoments, host: &IterationMoments, what: &str) {
    assert_eq!(device.q.count(), host.q.count(), "{what}: counts");
    for (estimator, name) in [(&device.q, "q"), (&device.g, "g")] {
        let host = if name == "q" { &host.q } else { &host.g };
        for (j, (d, h)) in estimator
            .sum_squares()
            .iter()
            .zip(host.sum_squares())
            .enumerate()
        {
            assert!(
                (d - h).abs() <= 1e-4 * h.abs().max(1e-3),
                "{what}: {name}[{j}] sum of squares {d} on the device, {h} on the host"
            );
        }
    }
}

/// The test model (d = 3) uploaded, and `n` chains' initial points.
fn setup(device: &GpuDevice, n: u32) -> (crate::device::ModelKey, InitialPoints) {
    let mut m = ModelBuilder::new("moments");
    let x = m.param("x");
    let y = m.vector_param("y", 2);
    m.sample(&x, Dist::normal(1.0, 2.0));
    m.sample(&y, Dist::normal(0.5 * &x, 0.7));
    let model = CheckedModel::new(m.build(), &Limits::default()).expect("the test model checks");
    let key = device
        .upload_model(&model, Precision::F32)
        .wait()
        .expect("uploads");
    let specs: Vec<ChainSpec> = (0..n).map(|c| ChainSpec::new(ChainId(c))).collect();
    let settings = SamplerSettings::default();
    let init = initial_points(device, key, &model, &settings, Seed(7), &specs).expect("starts");
    (key, init)
}

/// A session of `n` chains with `capacity` slots, started at `init`.
fn open_session(
    device: &GpuDevice,
    key: crate::device::ModelKey,
    init: &InitialPoints,
    n: u32,
    capacity: u32,
) -> SessionId {
    open_session_with(device, key, init, n, capacity, Default::default())
}

fn open_session_with(
    device: &GpuDevice,
    key: crate::device::ModelKey,
    init: &InitialPoints,
    n: u32,
    capacity: u32,
    overrides: crate::device::KernelOverrides,
) -> SessionId {
    let open = NutsOpen {
        model: key,
        n_chains: n as usize,
        max_depth: 6,
        capacity: capacity as usize,
        with_grad: true,
        grad_capacity: capacity as usize,
        overrides,
    };
    let NutsReply::Opened(session) = device.nuts(NutsCommand::Open(open)).wait().expect("opens")
    else {
        panic!("not a session");
    };
    device
        .nuts(NutsCommand::Start(
            session,
            NutsStart {
                q: init.q.concat(),
                g: init.g.concat(),
                logp: init.logp.clone(),
                step: vec![0.9; n as usize],
            },
        ))
        .wait()
        .expect("starts");
    session
}

/// The kernels' settings and a unit metric.
fn test_consts(dim: usize) -> Vec<f64> {
    use crate::kernels::layout::{
        NS_C_COUNT, NS_C_DA_GAMMA, NS_C_DA_KAPPA, NS_C_DA_MAX_LOG_STEP, NS_C_DA_T0, NS_C_DA_TARGET,
        NS_C_MAX_ENERGY_ERROR,
    };
    let mut consts = vec![0.0; NS_C_COUNT + dim];
    consts[NS_C_MAX_ENERGY_ERROR] = 1000.0;
    consts[NS_C_DA_TARGET] = 0.8;
    consts[NS_C_DA_GAMMA] = 0.05;
    consts[NS_C_DA_T0] = 10.0;
    consts[NS_C_DA_KAPPA] = 0.75;
    consts[NS_C_DA_MAX_LOG_STEP] = f64::INFINITY;
    for value in &mut consts[NS_C_COUNT..] {
        *value = 1.0;
    }
    consts
}

#[test]
fn device_moments_equal_the_hosts() {
    let Some(device) = device() else {
        return;
    };
    let (key, init) = setup(&device, 300);
    // Output slots value after value (one lane per chain) and chain after chain (lanes).
    for lanes in [None, Some(4)] {
        let overrides = crate::device::KernelOverrides {
            lanes,
            ..Default::default()
        };
        check_device_moments(&device, key, &init, overrides);
    }
}

fn check_device_moments(
    device: &GpuDevice,
    key: crate::device::ModelKey,
    init: &InitialPoints,
    overrides: crate::device::KernelOverrides,
) {
    let dim = 3;
    // 300 chains: a whole chunk of 256 and a partial one.
    let n = 300;
    let len = 4u32;
    let session = open_session_with(device, key, init, n, len, overrides);
    let mut consts = Some(test_consts(dim));
    // The third block's log-density floor: the median of the chains' log densities at the
    // end of the second, so that it leaves out about half the draws.
    let mut median = f64::NEG_INFINITY;

    // Three blocks: the first with a step budget small enough that chains stop mid-block at
    // different iterations and finish it in later dispatches; the third with a floor.
    for (block, budget, usable_only, with_floor) in [
        (0u32, 5u32, false, false),
        (len, 0, true, false),
        (2 * len, 0, false, true),
    ] {
        let lp_floor = if with_floor {
            median
        } else {
            f64::NEG_INFINITY
        };
        let params = NsParams {
            n_chains: n,
            max_depth: 6,
            iter_end: block + len,
            capacity: len,
            step_budget: budget,
            with_grad: 1,
            flags: NS_FLAG_ADAPT,
            seed_lo: 7,
            da_final_iter: u32::MAX,
            late_from_iter: u32::MAX,
            ..NsParams::default()
        };
        let request = MomentsRequest {
            block_start: block,
            bins: len,
            usable_only,
            lp_floor,
        };
        let mut dispatches = 0;
        let mut device_total = vec![IterationMoments::new(dim); len as usize];
        let mut host_total = device_total.clone();
        let mut partial = false;
        // The last batch, held while the next dispatch runs, as the driver holds it.
        let mut held: Option<(Box<NutsBatch>, Vec<f64>)> = None;
        loop {
            let reply = device
                .nuts(NutsCommand::Run(
                    session,
                    NutsDispatch {
                        params,
                        consts: consts.take(),
                        moments: Some(request),
                        read_values: true,
                    },
                ))
                .wait()
                .expect("runs");
            let NutsReply::Batch(batch) = reply else {
                panic!("not a batch");
            };
            dispatches += 1;
            if let Some((held, values)) = &held {
                let now = first_slot(held);
                assert!(
                    now.iter()
                        .zip(values)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "block {block}, dispatch {dispatches}: a held batch changed under the next one"
                );
            }
            let values = first_slot(&batch);
            let device_moments = pooled_moments(&batch, len as usize, dim, true);
            let host = host_moments(&batch, block, len as usize, dim, usable_only, lp_floor);
            for bin in 0..len as usize {
                let what = format!("block {block}, dispatch {dispatches}, bin {bin}");
                assert_close(&device_moments[bin], &host[bin], &what);
                device_total[bin].merge(&device_moments[bin]);
                host_total[bin].merge(&host[bin]);
            }
            let iters: Vec<u32> = (0..n as usize)
                .map(|c| batch.state_row(NS_U_ITER)[c])
                .collect();
            partial |= iters.iter().any(|&i| i > block && i < block + len);
            if iters.iter().all(|&i| i == block + len) {
                let mut last: Vec<f64> = (0..n as usize)
                    .map(|c| {
                        let mut stats = [0.0; crate::kernels::layout::NS_O_COUNT];
                        batch.chain_stats(len as usize - 1, c, &mut stats);
                        stats[crate::kernels::layout::NS_O_LP]
                    })
                    .collect();
                last.sort_by(f64::total_cmp);
                median = last[last.len() / 2];
                break;
            }
            assert!(dispatches < 100, "block {block} does not end");
            held = Some((batch, values));
        }
        for bin in 0..len as usize {
            assert_close(
                &device_total[bin],
                &host_total[bin],
                &format!("block {block} bin {bin}"),
            );
            if lp_floor > f64::NEG_INFINITY {
                let count = device_total[bin].q.count();
                assert!(
                    count > 0 && count < u64::from(n),
                    "block {block} bin {bin}: the floor left {count} of {n} draws"
                );
            } else if !usable_only {
                assert_eq!(
                    device_total[bin].q.count(),
                    u64::from(n),
                    "every chain's draw"
                );
            }
        }
        if budget > 0 {
            assert!(dispatches > 1 && partial, "the budget split the block");
        }
    }
    let _ = device.nuts(NutsCommand::Close(session)).wait();
}

/// Sampling's queued dispatches (each submitted before the one ahead is waited for) give the
/// batches that the same dispatches run one at a time give; a collect with nothing queued is
/// an error, and closing a session with a dispatch queued leaves the device working.
#[test]
fn queued_dispatches_give_what_dispatches_one_at_a_time_give() {
    let Some(device) = device() else {
        return;
    };
    let n = 64;
    let (key, init) = setup(&device, n);
    let params = |round: u32| NsParams {
        n_chains: n,
        max_depth: 6,
        iter_end: 3 * (round + 1),
        capacity: 3,
        seed_lo: 7,
        da_final_iter: u32::MAX,
        late_from_iter: u32::MAX,
        ..NsParams::default()
    };
    let consts = || Some(test_consts(3));
    let one_at_a_time = open_session(&device, key, &init, n, 3);
    let mut expected = Vec::new();
    for round in 0..3 {
        let dispatch = NutsDispatch::plain(params(round), consts());
        let reply = device
            .nuts(NutsCommand::Run(one_at_a_time, dispatch))
            .wait();
        let Ok(NutsReply::Batch(batch)) = reply else {
            panic!("not a batch");
        };
        expected.push((first_slot(&batch), batch.state_row(NS_U_ITER).to_vec()));
    }
    let queued = open_session(&device, key, &init, n, 3);
    let collect = device.nuts(NutsCommand::Collect(queued)).wait();
    assert!(collect.is_err(), "a collect with nothing queued");
    let mut got = Vec::new();
    for round in 0..3 {
        let dispatch = NutsDispatch::plain(params(round), consts());
        match device.nuts(NutsCommand::Queue(queued, dispatch)).wait() {
            Ok(NutsReply::Queued(None)) => assert_eq!(round, 0, "only the first has none ahead"),
            Ok(NutsReply::Queued(Some(batch))) => {
                got.push((first_slot(&batch), batch.state_row(NS_U_ITER).to_vec()));
            }
            _ => panic!("not queued"),
        }
    }
    let Ok(NutsReply::Batch(last)) = device.nuts(NutsCommand::Collect(queued)).wait() else {
        panic!("not a batch");
    };
    got.push((first_slot(&last), last.state_row(NS_U_ITER).to_vec()));
    assert_eq!(got.len(), expected.len());
    for (round, ((got, got_iter), (want, want_iter))) in got.iter().zip(&expected).enumerate() {
        assert_eq!(got_iter, want_iter, "round {round}: iterations");
        assert!(
            got.iter()
                .zip(want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "round {round}: the queued batch differs"
        );
    }
    // Closed with a dispatch queued; the device goes on.
    let dispatch = NutsDispatch::plain(params(3), consts());
    let reply = device.nuts(NutsCommand::Queue(queued, dispatch)).wait();
    assert!(matches!(reply, Ok(NutsReply::Queued(None))));
    device
        .nuts(NutsCommand::Close(queued))
        .wait()
        .expect("closes");
    let dispatch = NutsDispatch::plain(params(3), consts());
    let reply = device
        .nuts(NutsCommand::Run(one_at_a_time, dispatch))
        .wait();
    assert!(
        matches!(reply, Ok(NutsReply::Batch(_))),
        "the device still runs"
    );
    let _ = device.nuts(NutsCommand::Close(one_at_a_time)).wait();
}

/// A logistic regression's program (its outputs are its coefficients, copied), for the
/// recording tests: `dim` coefficients.
fn regression_program(dim: usize) -> sampler::Program {
    let mut m = ModelBuilder::new("recording");
    let rows: Vec<Vec<f64>> = (0..4)
        .map(|r| (0..dim).map(|c| (r + c) as f64 / 10.0).collect())
        .collect();
    let x = m.data_matrix("x", rows);
    let y = m.data_vector("y", vec![0.0, 1.0, 1.0, 0.0]);
    let beta = m.vector_param("beta", dim);
    m.sample(&beta, Dist::normal(0.0, 1.0));
    m.sample(&y, Dist::bernoulli_logit(x.matvec(&beta)));
    let checked = CheckedModel::new(m.build(), &Limits::default()).expect("the model checks");
    (**checked.program()).clone()
}

/// Records `slots` synthetic batches of `n` chains; returns the traces and the seconds the
/// recording took.
fn record_synthetic(
    n: usize,
    dim: usize,
    slots: usize,
    batches: usize,
    chain_major: bool,
) -> (Vec<sampler::ChainTrace>, f64) {
    use crate::kernels::layout::NsSizes;
    use crate::sampling::records::{RecordSettings, empty_traces, give_room, record};
    use sampler::OutputWriter;

    let program = regression_program(dim);
    let writer = OutputWriter::new(&program);
    let sizes = NsSizes {
        n,
        dim,
        max_depth: 10,
        capacity: slots,
        with_grad: false,
        grad_capacity: slots,
        chain_major,
    };
    let chains: Vec<ChainSpec> = (0..n).map(|c| ChainSpec::new(ChainId(c as u32))).collect();
    let mut traces = empty_traces(&chains, &vec![vec![0.0; dim]; n], writer.n_columns());
    give_room(
        sampler::Room::make(n, writer.n_columns(), slots * batches),
        &mut traces,
    );
    let settings = RecordSettings {
        save_warmup: false,
        total: (slots * batches) as u64,
        draws: slots * batches,
        keep: true,
    };
    let mut seconds = 0.0;
    for b in 0..batches {
        let batch = NutsBatch::synthetic(sizes, slots as u32, |slot, k, c| {
            ((b * slots + slot) * 1000 + k * 10) as f32 + c as f32 / 8.0
        });
        let draws = vec![slots; n];
        let next = vec![(b * slots) as u64; n];
        let started = std::time::Instant::now();
        record(
            &mut traces,
            &writer,
            settings,
            &sampler::NoObserver,
            |range, emit| super::batch_draws(&batch, &draws, &next, dim, false, range, emit),
        );
        seconds += started.elapsed().as_secs_f64();
    }
    (traces, seconds)
}

/// Each chain's trace holds its draws in order, each draw's values and statistics those its
/// slot held, whichever the slots' layout.
#[test]
fn recording_puts_each_value_of_a_batch_in_its_chains_trace() {
    use crate::kernels::layout::{NS_O_ACCEPT, NS_O_ENERGY, NS_O_LP, NS_O_STEP};
    let (n, dim, slots, batches) = (70, 5, 3, 2);
    for chain_major in [false, true] {
        let (traces, _) = record_synthetic(n, dim, slots, batches, chain_major);
        for (c, trace) in traces.iter().enumerate() {
            assert_eq!(trace.draws.len(), slots * batches * dim, "chain {c}");
            assert_eq!(trace.stats.len(), slots * batches);
            for draw in 0..slots * batches {
                for k in 0..dim {
                    let expected = (draw * 1000 + k * 10) as f64 + c as f64 / 8.0;
                    assert_eq!(
                        trace.draws[draw * dim + k],
                        expected,
                        "chain {c} draw {draw} (chain-major {chain_major})"
                    );
                }
                let stats = &trace.stats[draw];
                let stat = |k: usize| 0.5 + k as f64 / 4.0;
                assert_eq!(
                    (stats.lp, stats.accept_stat, stats.step_size, stats.energy),
                    (
                        stat(NS_O_LP),
                        stat(NS_O_ACCEPT),
                        stat(NS_O_STEP),
                        stat(NS_O_ENERGY)
                    ),
                    "chain {c} draw {draw} (chain-major {chain_major})"
                );
            }
        }
    }
}

/// How long recording a logistic batch at 8192 chains takes on this machine (not a test of
/// speed: run with `--ignored --nocapture` to read it).
#[test]
#[ignore = "a measurement, not a test"]
fn recording_a_batch_of_8192_chains() {
    let (slots, batches) = (16, 6);
    let (traces, seconds) = record_synthetic(8192, 21, slots, batches, true);
    assert_eq!(traces[0].draws.len(), slots * batches * 21);
    println!(
        "recorded {batches} batches of 8192 chains x {slots} draws x 21 values: {:.2} ms per batch",
        seconds * 1e3 / batches as f64
    );
}

/// `NutsCommand::Reseat` gives each pair's chain the other's point and scalars (step size
/// among them), in either layout of the chain state, and leaves every other chain alone.
#[test]
fn reseat_copies_a_chains_state_over_another_and_nothing_else() {
    let Some(device) = device() else {
        return;
    };
    let n = 16;
    let (key, init) = setup(&device, n);
    let snapshot = |session| {
        let reply = device.nuts(NutsCommand::Snapshot(session)).wait();
        match reply.expect("snapshots") {
            NutsReply::Snapshot(snapshot) => snapshot,
            _ => panic!("not a snapshot"),
        }
    };
    for lanes in [1, 2] {
        let overrides = crate::device::KernelOverrides {
            lanes: Some(lanes),
            ..Default::default()
        };
        let session = open_session_with(&device, key, &init, n, 4, overrides);
        let steps: Vec<f64> = (0..n).map(|c| 0.125 * f64::from(c + 1)).collect();
        device
            .nuts(NutsCommand::Start(
                session,
                NutsStart {
                    q: init.q.concat(),
                    g: init.g.concat(),
                    logp: init.logp.clone(),
                    step: steps.clone(),
                },
            ))
            .wait()
            .expect("starts");
        let before = snapshot(session);
        let pairs = vec![(3, 10), (7, 1), (15, 0)];
        device
            .nuts(NutsCommand::Reseat(session, pairs.clone()))
            .wait()
            .expect("reseats");
        let after = snapshot(session);
        let dim = init.q[0].len();
        let point = |snapshot: &crate::device::nuts::NutsSnapshot, c: usize| {
            snapshot.q[c * dim..(c + 1) * dim].to_vec()
        };
        for c in 0..n as usize {
            let from = pairs
                .iter()
                .find(|&&(chain, _)| chain == c)
                .map_or(c, |&(_, from)| from);
            assert_eq!(
                point(&after, c),
                point(&before, from),
                "lanes {lanes}: chain {c}'s point"
            );
            assert_eq!(
                after.step[c], steps[from],
                "lanes {lanes}: chain {c}'s step size"
            );
        }
        let bad = device
            .nuts(NutsCommand::Reseat(session, vec![(0, n as usize)]))
            .wait();
        assert!(
            bad.is_err(),
            "lanes {lanes}: a chain out of range is refused"
        );
        device
            .nuts(NutsCommand::Close(session))
            .wait()
            .expect("closes");
    }
}
