//! One node in this process (pg and the registry are process-wide, so only one test here
//! starts a node): start errors, the local member list, a failed join, a sampling job through
//! the node's own coordinator and pool (the draws are the local sampler's), a pool that
//! panics mid-job (restarted by its supervisor, the job completes with its chains retried),
//! runs that fail under their chains mid-job (the chains run again, the job completes),
//! a job over a subset of its chains (they keep their draws), a membership restart under
//! the rest-for-one root, a drain (no new work, clients told, a grace), clean shutdown.
//! Nodes talking to each other are tested with real processes in the workspace `tests` crate.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use sampler::{CheckedModel, Limits, SamplerSettings, Seed};

use super::*;
use crate::discovery::{COORDINATOR, CPU_POOL};
use crate::ids::{JobId, RequestId};
use crate::membership::MemberState;
use crate::sampling::{AssembleError, Assembler, JobOutcome, SampleRequest};
use crate::session::ConnectError;
use crate::wire::{
    self, Envelope, JobReply, JobRequest, PoolReply, PoolRequest, WireError, WireFault,
    WireJobEvent,
};

const MODEL: &str = r#"{"ir_version": 1, "name": "normal_mean",
  "data": {"y": {"vector": [0.1, -0.3, 0.5, 1.2]}},
  "parameters": [{"name": "mu"}],
  "model": [
    {"sample": {"value": "mu", "dist": {"normal": {"mu": 0, "sigma": 10}}}},
    {"sample": {"value": "y", "dist": {"normal": {"mu": "mu", "sigma": 1}}}}
  ]}"#;

/// Submits `request` to this process's coordinator and follows it to its outcome; calls
/// `on_draws` once, when the first draws arrived.
async fn run_job(
    me: &NodeName,
    request: &SampleRequest,
    on_draws: impl AsyncFnOnce(),
) -> Result<JobOutcome, AssembleError> {
    let (_, coordinator) = COORDINATOR.all_members().remove(0);
    let timeout = Duration::from_secs(20);
    // Request ids are unique per client: a reused one would be refused (or, for the same
    // request, answered with the earlier job).
    let fresh = || RequestId(crate::ids::fresh_u64());
    let submit = Envelope::new(fresh(), me, JobRequest::Submit(request.to_wire()));
    let reply = wire::call(&coordinator, "local", &submit, timeout)
        .await
        .unwrap();
    let JobReply::Submitted { job, n_chains, .. } = reply.body else {
        panic!("{:?}", reply.body);
    };
    assert_eq!(n_chains, request.n_chains);
    let mut assembler = Assembler::new(job, n_chains);
    let mut ack = 0;
    let mut on_draws = Some(on_draws);
    while !assembler.is_finished() {
        let poll = Envelope::new(
            fresh(),
            me,
            JobRequest::Poll {
                job,
                ack,
                wait_ms: 1000,
                follow: false,
            },
        );
        let reply = wire::call(&coordinator, "local", &poll, timeout)
            .await
            .unwrap();
        let JobReply::Events {
            job: polled,
            events,
            ..
        } = reply.body
        else {
            panic!("{:?}", reply.body);
        };
        assert_eq!(polled, job, "events of another job");
        for event in events {
            ack = event.seq;
            let draws = matches!(
                &event.event,
                crate::wire::WireJobEvent::Progress { draws: Some(_), .. }
            );
            assembler.apply(event.event)?;
            if draws && let Some(on_draws) = on_draws.take() {
                on_draws().await;
            }
        }
    }
    assembler.finish()
}

/// Asks the node's CPU pool for its load until nothing runs or waits there.
async fn wait_until_the_pool_is_idle(me: &NodeName) {
    let (_, pool) = CPU_POOL.all_members().remove(0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = Envelope::new(RequestId(crate::ids::fresh_u64()), me, PoolRequest::Status);
        let reply = wire::call(&pool, "local", &status, Duration::from_secs(5))
            .await
            .unwrap();
        if let PoolReply::Status {
            running: 0,
            queued: 0,
            ..
        } = reply.body
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pool is still busy: {:?}",
            reply.body
        );
        tokio::task::yield_now().await;
    }
}

/// Submits `request` to this process's coordinator; its job id.
async fn submit_wire(
    me: &NodeName,
    request: crate::wire::WireSampleRequest,
) -> Result<JobId, wire::CallError> {
    let (_, coordinator) = COORDINATOR.all_members().remove(0);
    let fresh = RequestId(crate::ids::fresh_u64());
    let submit = Envelope::new(fresh, me, JobRequest::Submit(request));
    let reply = wire::call(&coordinator, "local", &submit, Duration::from_secs(20)).await?;
    let JobReply::Submitted { job, .. } = reply.body else {
        panic!("{:?}", reply.body);
    };
    Ok(job)
}

/// Polls job `job` after `ack` until `stop` holds for an event; the events, and the new ack.
async fn poll_until(
    me: &NodeName,
    job: JobId,
    mut ack: u64,
    stop: impl Fn(&WireJobEvent) -> bool,
) -> (Vec<WireJobEvent>, u64) {
    let (_, coordinator) = COORDINATOR.all_members().remove(0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no such event in {seen:?}"
        );
        let request = JobRequest::Poll {
            job,
            ack,
            wait_ms: 1000,
            follow: false,
        };
        let poll = Envelope::new(RequestId(crate::ids::fresh_u64()), me, request);
        let reply = wire::call(&coordinator, "local", &poll, Duration::from_secs(5))
            .await
            .unwrap();
        let JobReply::Events { events, .. } = reply.body else {
            panic!("{:?}", reply.body);
        };
        for event in events {
            ack = event.seq;
            let done = stop(&event.event);
            seen.push(event.event);
            if done {
                return (seen, ack);
            }
        }
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_node_starts_reports_itself_fails_a_join_and_stops() {
    // The port is taken: a clear start error, and nothing left registered.
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let listen = taken.local_addr().unwrap();
    let name = NodeName::new("solo", "127.0.0.1").unwrap();
    let cookie = Cookie::new("unit-test-cookie").unwrap();
    let error = Node::start(NodeSettings::new(name.clone(), listen, cookie.clone()))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot start node solo@127.0.0.1 on {listen}: child listener failed to start: cannot listen on {listen}:"
        )),
        "{text}"
    );
    assert!(text.contains("Address already in use"), "{text}");
    assert!(
        !text.contains("panicked"),
        "ractor's wrapping is unwrapped: {text}"
    );
    drop(taken);

    let mut settings = NodeSettings::new(name.clone(), listen, cookie);
    settings.resources.cpu_slots = 3;
    settings.allow_fault_injection = true;
    let node = Node::start(settings).await.unwrap();
    let members = node.members(Duration::from_secs(5)).await.unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].name, name);
    assert_eq!(members[0].state, MemberState::Local);
    assert_eq!(members[0].resources.as_ref().unwrap().cpu_slots, 3);

    // Nobody listens there: the join answers with a network error naming the address.
    let nobody = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let membership = node.membership().unwrap();
    let answer = membership
        .call(
            |reply| MembershipMsg::Join {
                address: nobody,
                reply: Some(reply),
            },
            Some(Duration::from_secs(10)),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&answer, Err(ConnectError::Unreachable { address, .. }) if *address == nobody),
        "{answer:?}"
    );

    // A job through the node's coordinator and pool: the local sampler's draws, bit for bit.
    let model = CheckedModel::from_json(MODEL, &Limits::default()).unwrap();
    let sampler_settings = SamplerSettings {
        num_warmup: 200,
        num_draws: 300,
        ..SamplerSettings::default()
    };
    let request = SampleRequest::new(model.model().clone(), sampler_settings.clone(), 5, Seed(4));
    let outcome = run_job(&name, &request, async || {}).await.unwrap();
    let local =
        sampler::sample(&model, &sampler_settings, Seed(4), 5, &sampler::NoObserver).unwrap();
    assert_eq!(outcome.traces.len(), 5);
    for (remote, local) in outcome.traces.iter().zip(&local) {
        assert_eq!(remote.draws, local.draws, "chain {}", local.chain);
        assert_eq!(remote.stats, local.stats);
        assert_eq!(remote.tuning, local.tuning);
    }
    assert!(outcome.retried.is_empty());

    // A submission retried with its request id gets its job again; another request with that
    // id is refused, naming the problem (it would otherwise be handed the first job's events).
    let (_, coordinator) = COORDINATOR.all_members().remove(0);
    let submit = |request: &SampleRequest| {
        Envelope::new(RequestId(7), &name, JobRequest::Submit(request.to_wire()))
    };
    let timeout = Duration::from_secs(5);
    let first = wire::call(&coordinator, "local", &submit(&request), timeout)
        .await
        .unwrap();
    let again = wire::call(&coordinator, "local", &submit(&request), timeout)
        .await
        .unwrap();
    assert_eq!(first.body, again.body);
    let JobReply::Submitted { job: reused, .. } = first.body else {
        panic!("{:?}", first.body);
    };
    let other = SampleRequest::new(model.model().clone(), sampler_settings.clone(), 2, Seed(4));
    let refused = wire::call(&coordinator, "local", &submit(&other), timeout)
        .await
        .unwrap_err();
    let text = refused.to_string();
    assert!(
        text.contains("request 7 of solo@127.0.0.1 was already used")
            && text.contains(&reused.to_string()),
        "{text}"
    );
    let cancel = Envelope::new(RequestId(8), &name, JobRequest::Cancel { job: reused });
    let cancelled = wire::call(&coordinator, "local", &cancel, timeout)
        .await
        .unwrap();
    assert_eq!(cancelled.body, JobReply::Cancelled { job: reused });
    // Its chains stop within an iteration: the jobs below find every slot free, so that all
    // their chains run (and fail) at once.
    wait_until_the_pool_is_idle(&name).await;

    // The pool panics once the first draws arrived: its supervisor restarts it (not the
    // root), and the job completes, its chains retried, with the same draws.
    let long = SamplerSettings {
        num_warmup: 200,
        num_draws: 200_000,
        ..SamplerSettings::default()
    };
    let request = SampleRequest::new(model.model().clone(), long.clone(), 2, Seed(5));
    let me = name.clone();
    let outcome = run_job(&name, &request, async || {
        let (_, pool) = CPU_POOL.all_members().remove(0);
        let fault = Envelope::new(
            RequestId(99),
            &me,
            PoolRequest::InjectFault(WireFault::PanicPool),
        );
        let reply = wire::call(&pool, "local", &fault, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply.body, PoolReply::FaultInjected);
    })
    .await
    .unwrap();
    assert_eq!(outcome.retried.len(), 2, "{:?}", outcome.retried);
    assert!(outcome.placements.iter().all(|p| p.attempts == 2));
    let first = sampler::sample_chains(
        || model.evaluator(),
        &long,
        Seed(5),
        &[sampler::ChainSpec::new(sampler::ChainId(0))],
        &sampler::NoObserver,
    )
    .unwrap();
    assert_eq!(outcome.traces[0].draws, first[0].draws);

    // The pool's runs fail under their chains as if its device were lost, once the first
    // draws arrived: the chains run again (here, on the same pool), the job completes with
    // them retried, and every chain draws what a local run draws.
    wait_until_the_pool_is_idle(&name).await;
    let request = SampleRequest::new(model.model().clone(), long.clone(), 2, Seed(6));
    let me = name.clone();
    let outcome = run_job(&name, &request, async || {
        let (_, pool) = CPU_POOL.all_members().remove(0);
        let fault = Envelope::new(
            RequestId(100),
            &me,
            PoolRequest::InjectFault(WireFault::FailRuns),
        );
        let reply = wire::call(&pool, "local", &fault, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply.body, PoolReply::FaultInjected);
    })
    .await
    .unwrap();
    assert_eq!(outcome.retried.len(), 2, "{:?}", outcome.retried);
    for retry in &outcome.retried {
        assert_eq!(retry.attempt, 2, "{retry:?}");
        assert!(
            retry
                .reason
                .contains("worker failed: fault injection: the device was lost"),
            "{retry:?}"
        );
    }
    let local = sampler::sample_chains(
        || model.evaluator(),
        &long,
        Seed(6),
        &[
            sampler::ChainSpec::new(sampler::ChainId(0)),
            sampler::ChainSpec::new(sampler::ChainId(1)),
        ],
        &sampler::NoObserver,
    )
    .unwrap();
    for (remote, local) in outcome.traces.iter().zip(&local) {
        assert_eq!(remote.draws, local.draws, "chain {}", local.chain);
    }

    // A job over chains 1 and 3 of 4 (a client's resubmission after a failover): they keep
    // their numbers, so their draws; the others do not run.
    wait_until_the_pool_is_idle(&name).await;
    let short = SamplerSettings {
        num_warmup: 100,
        num_draws: 50,
        ..SamplerSettings::default()
    };
    let mut subset = SampleRequest::new(model.model().clone(), short.clone(), 4, Seed(8)).to_wire();
    subset.chains = Some(vec![1, 3]);
    let job = submit_wire(&name, subset).await.unwrap();
    let (events, _) = poll_until(&name, job, 0, |e| {
        matches!(e, WireJobEvent::Finished { .. })
    })
    .await;
    let mut draws: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
    for event in &events {
        if let WireJobEvent::Progress {
            chain,
            draws: Some(chunk),
            ..
        } = event
        {
            draws.entry(*chain).or_default().extend(&chunk.values);
        }
    }
    let specs = [1, 3].map(|c| sampler::ChainSpec::new(sampler::ChainId(c)));
    let local = sampler::sample_chains(
        || model.evaluator(),
        &short,
        Seed(8),
        &specs,
        &sampler::NoObserver,
    )
    .unwrap();
    assert_eq!(draws.keys().copied().collect::<Vec<_>>(), [1, 3]);
    assert_eq!(draws[&1], local[0].draws);
    assert_eq!(draws[&3], local[1].draws);

    // Membership killed: the root restarts it, and its endpoint after it (rest-for-one).
    membership.kill();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let restarted = node
            .membership()
            .is_some_and(|current| current.get_id() != membership.get_id());
        if restarted && node.members(Duration::from_secs(1)).await.is_some() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "membership not restarted"
        );
        tokio::task::yield_now().await;
    }
    let children = ractor::call_t!(node.root, SupervisorMsg::Children, 5000).unwrap();
    let restarts: Vec<_> = children
        .iter()
        .map(|c| (c.id.as_str(), c.restarts))
        .collect();
    assert_eq!(
        restarts,
        [
            ("node-server", 0),
            ("listener", 0),
            ("membership", 1),
            ("membership-endpoint", 1),
            // The pool's panic was its own supervisor's business.
            ("cpu-pool", 1),
            ("coordinator", 1),
            ("coordinator-endpoint", 1),
        ]
    );

    // A drain while a chain runs, with a grace shorter than the chain: the node says it
    // drains, the job's client hears of it, a new job and a pool status are refused naming
    // the node, and the drain ends at the grace with the chain and the job left.
    let longer = SamplerSettings {
        num_draws: 2_000_000,
        ..long.clone()
    };
    let request = SampleRequest::new(model.model().clone(), longer, 1, Seed(9));
    let job = submit_wire(&name, request.to_wire()).await.unwrap();
    let running = |e: &WireJobEvent| matches!(e, WireJobEvent::Progress { draws: Some(_), .. });
    let (_, ack) = poll_until(&name, job, 0, running).await;
    let report = node.drain(Duration::from_millis(300)).await;
    assert!(!report.is_complete(), "{report:?}");
    assert_eq!(report.jobs_left, 1, "{report:?}");
    assert!(report.chains_left >= 1, "{report:?}");
    assert!(report.waited >= Duration::from_millis(300), "{report:?}");
    let members = node.members(Duration::from_secs(5)).await.unwrap();
    assert_eq!(members[0].state, MemberState::Draining);
    let draining = |e: &WireJobEvent| matches!(e, WireJobEvent::Draining { .. });
    let (events, _) = poll_until(&name, job, ack, draining).await;
    assert_eq!(
        events.last(),
        Some(&WireJobEvent::Draining {
            node: name.to_string(),
            grace_ms: 300
        })
    );
    let refused = submit_wire(&name, request.to_wire()).await.unwrap_err();
    let expected = WireError::Draining {
        node: name.to_string(),
    };
    assert!(
        matches!(&refused, wire::CallError::Refused { error, .. } if *error == expected),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("submit to another member"),
        "{refused}"
    );
    let (_, pool) = CPU_POOL.all_members().remove(0);
    let status = Envelope::new(RequestId(101), &name, PoolRequest::Status);
    let refused = wire::call(&pool, "local", &status, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, wire::CallError::Refused { error, .. } if *error == expected),
        "{refused}"
    );

    node.shutdown().await.unwrap();
    assert!(ractor::registry::where_is(NODE_SERVER_NAME).is_none());
    // The port is free again.
    TcpListener::bind(listen).unwrap();
}
