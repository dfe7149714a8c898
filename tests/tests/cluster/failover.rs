//! The entry node is no single point of failure, and a node stops gracefully: a client
//! whose entry node is killed, stopped or drained mid-job resubmits the chains it has not
//! received to another member and gets the draws an undisturbed run gives, bit for bit; a
//! node sent SIGTERM drains (it takes no new work, finishes its chains, leaves, exits 0),
//! and a second signal stops it at once.

use std::time::{Duration, Instant};

use workspace_tests::cluster::{Cluster, NodeProcess};
use workspace_tests::posterior::{Chain, NormalMean};
use workspace_tests::process::{self, Process};

use super::sampling::{JOB_LIMIT, finish, sample};

/// Deadline for events that take "a few seconds" (a failover, a drain): generous, as the
/// machine may be busy; not a timing claim.
const EVENT_LIMIT: Duration = Duration::from_secs(30);
const CHAINS: usize = 6;
/// Slow gradients (many observations), so that chains run for seconds and a signal sent
/// when a node starts its chains lands mid-job.
const OBSERVATIONS: usize = 10_000;

/// Three meshed nodes of two CPU slots; `adjust` changes every node's command.
fn three_nodes(
    cluster: &Cluster,
    adjust: impl Fn(&mut std::process::Command) + Copy,
) -> [NodeProcess; 3] {
    let a = cluster.node_with("a", &[], adjust);
    let b = cluster.node_with("b", &[&a], adjust);
    let c = cluster.node_with("c", &[&a], adjust);
    cluster.mesh(&[&a, &b, &c]);
    [a, b, c]
}

/// The model file and the arguments of the job.
fn job(cluster: &Cluster, seed: &'static str, draws: &'static str) -> (String, Vec<&'static str>) {
    let path = NormalMean::new(OBSERVATIONS).write(cluster.config_home(), "normal.json");
    let args = vec![
        "--chains", "6", "--warmup", "200", "--draws", draws, "--seed", seed,
    ];
    (path, args)
}

fn output(cluster: &Cluster, name: &str) -> String {
    cluster
        .config_home()
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The same job on this machine (CPU): what an undisturbed run draws.
fn local_run(cluster: &Cluster, path: &str, args: &[&str]) -> Vec<Chain> {
    let out = output(cluster, "local.csv");
    let mut command = cluster.command();
    command
        .args(["sample", path, "--output", &out, "--quiet"])
        .args(args);
    let local = process::run(command, JOB_LIMIT);
    assert!(local.status.success(), "{local:?}");
    Chain::read_all(&out, CHAINS)
}

fn assert_same_draws(remote: &[Chain], reference: &[Chain]) {
    assert_eq!(remote.len(), reference.len());
    for (chain, (remote, reference)) in remote.iter().zip(reference).enumerate() {
        assert!(!remote.lines.is_empty(), "chain {chain} has no draws");
        assert!(
            remote.lines == reference.lines,
            "chain {chain}: draws differ from the undisturbed run"
        );
    }
}

/// Waits until the client has the coordinator's answer that it runs the job: a node lost
/// before that answer did not take the job, which the client hands to another member at once
/// (no failover of unfinished chains).
fn wait_submitted(client: &Process) {
    client
        .wait_for_line(" submitted to ", JOB_LIMIT)
        .unwrap_or_else(|output| panic!("the client did not submit the job: {output}"));
}

/// The client's line about its failover, once it is printed.
fn failover_line(client: &Process, from: &NodeProcess, since: Instant) -> String {
    let line = client
        .wait_for_line("unfinished chains (job", EVENT_LIMIT)
        .unwrap_or_else(|output| panic!("the client did not fail over: {output}"));
    eprintln!(
        "failed over {:.2} s after the signal: {line}",
        since.elapsed().as_secs_f64()
    );
    assert!(
        line.contains(&format!("entry node {} lost (", from.name))
            && line.contains("; continuing on "),
        "{line}"
    );
    line
}

/// The report's retries: each names the lost node and none finished there.
fn assert_resubmitted_from(lines: &[String], from: &NodeProcess) {
    let retried: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("retried: chain"))
        .collect();
    assert!(!retried.is_empty(), "{}", lines.join("\n"));
    for line in &retried {
        assert!(line.contains(&format!("from {}", from.name)), "{line}");
        assert!(
            !line.ends_with(&format!("finished on {}", from.name)),
            "{line}"
        );
    }
}

#[test]
fn failover_the_entry_node_killed_mid_job_the_client_finishes_elsewhere_with_the_same_draws() {
    let cluster = Cluster::new("failover-kill");
    let [a, _b, _c] = three_nodes(&cluster, |_| {});
    let (path, args) = job(&cluster, "31", "3000");
    let out = output(&cluster, "remote.csv");
    let client = sample(&cluster, &a, &path, &out, &args);
    a.process
        .wait_for_line("running chains", JOB_LIMIT)
        .expect("a runs chains of the job");
    wait_submitted(&client);
    a.process.signal("KILL");
    let line = failover_line(&client, &a, Instant::now());
    assert!(line.contains("(connection lost)"), "{line}");
    let lines = finish(client);
    assert_resubmitted_from(&lines, &a);
    assert_same_draws(
        &Chain::read_all(&out, CHAINS),
        &local_run(&cluster, &path, &args),
    );
}

#[test]
fn failover_the_entry_node_stopped_mid_job_is_detected_and_left_behind() {
    let cluster = Cluster::new("failover-stop");
    let [a, b, _c] = three_nodes(&cluster, |_| {});
    let (path, mut args) = job(&cluster, "32", "3000");
    // Warmup once and broadcast: the new coordinator runs the warmup chain again, from the
    // same random stream.
    args.extend(["--warmup-mode", "broadcast", "--burn-in", "20"]);
    let undisturbed = output(&cluster, "undisturbed.csv");
    finish(sample(&cluster, &b, &path, &undisturbed, &args));

    let out = output(&cluster, "remote.csv");
    // a ran chains of the undisturbed job too: wait for more.
    let before = a
        .process
        .lines()
        .iter()
        .filter(|l| l.contains("running chains"))
        .count();
    let client = sample(&cluster, &a, &path, &out, &args);
    a.process
        .wait_for_lines("running chains", before + 1, JOB_LIMIT)
        .expect("a runs chains of the job");
    wait_submitted(&client);
    a.process.signal("STOP");
    let line = failover_line(&client, &a, Instant::now());
    assert!(line.contains("(no answer for "), "{line}");
    let lines = finish(client);
    assert_resubmitted_from(&lines, &a);
    let warmups = lines
        .iter()
        .filter(|l| l.starts_with("warmup done on"))
        .count();
    assert!(warmups >= 1, "{}", lines.join("\n"));
    assert_same_draws(
        &Chain::read_all(&out, CHAINS),
        &Chain::read_all(&undisturbed, CHAINS),
    );
}

#[test]
fn failover_a_terminated_worker_drains_finishes_its_chains_and_exits() {
    let cluster = Cluster::new("drain-worker");
    let grace = |c: &mut std::process::Command| {
        c.args(["--drain-grace", "60"]);
    };
    let [a, mut b, c] = three_nodes(&cluster, grace);
    let (path, args) = job(&cluster, "33", "6000");
    let out = output(&cluster, "remote.csv");
    let client = sample(&cluster, &a, &path, &out, &args);
    b.process
        .wait_for_line("running chains", JOB_LIMIT)
        .expect("b runs chains of the job");
    b.process.signal("TERM");
    // Everyone learns that b drains; b says it itself.
    b.process
        .wait_for_line("SIGTERM: draining", EVENT_LIMIT)
        .expect("b drains");
    for me in [&a, &c] {
        me.process
            .wait_for_line("node b@127.0.0.1 is draining", EVENT_LIMIT)
            .unwrap_or_else(|e| panic!("{}: {e}", me.name));
    }
    let exit = b.process.wait_exit(JOB_LIMIT);
    assert!(exit.is_some_and(|e| e.success()), "b exited with {exit:?}");
    b.process
        .wait_for_line("node b@127.0.0.1 drained in", EVENT_LIMIT)
        .expect("b's chains finished before it left");
    a.process
        .wait_for_line("node b@127.0.0.1 left the cluster", EVENT_LIMIT)
        .unwrap();
    let lines = finish(client);
    // No chain was lost: nothing ran twice.
    assert!(
        lines.iter().any(|l| l == "retried: none"),
        "{}",
        lines.join("\n")
    );
    assert_same_draws(
        &Chain::read_all(&out, CHAINS),
        &local_run(&cluster, &path, &args),
    );
}

#[test]
fn failover_the_entry_node_terminated_mid_job_hands_the_job_over_after_its_grace() {
    let cluster = Cluster::new("drain-entry");
    // A grace shorter than the job: the entry node leaves with the job unfinished.
    let grace = |c: &mut std::process::Command| {
        c.args(["--drain-grace", "1"]);
    };
    let [mut a, _b, _c] = three_nodes(&cluster, grace);
    let (path, args) = job(&cluster, "34", "6000");
    let out = output(&cluster, "remote.csv");
    let client = sample(&cluster, &a, &path, &out, &args);
    a.process
        .wait_for_line("running chains", JOB_LIMIT)
        .expect("a runs chains of the job");
    wait_submitted(&client);
    a.process.signal("TERM");
    client
        .wait_for_line("entry node a@127.0.0.1 is draining", EVENT_LIMIT)
        .expect("the client hears that its entry node drains");
    let line = failover_line(&client, &a, Instant::now());
    assert!(line.contains("(it drained and left"), "{line}");
    let exit = a.process.wait_exit(EVENT_LIMIT);
    assert!(exit.is_some_and(|e| e.success()), "a exited with {exit:?}");
    a.process
        .wait_for_line("drain grace of 1s over", EVENT_LIMIT)
        .expect("a left at the end of its grace");
    let lines = finish(client);
    assert_resubmitted_from(&lines, &a);
    assert_same_draws(
        &Chain::read_all(&out, CHAINS),
        &local_run(&cluster, &path, &args),
    );
}

#[test]
fn failover_a_draining_node_shows_so_and_a_second_signal_stops_it_at_once() {
    let cluster = Cluster::new("drain-twice");
    let grace = |c: &mut std::process::Command| {
        c.args(["--drain-grace", "600"]);
    };
    let [a, mut b, _c] = three_nodes(&cluster, grace);
    // Chains far longer than the test: b drains until the second signal.
    let (path, args) = job(&cluster, "35", "200000");
    let out = output(&cluster, "remote.csv");
    let _client = sample(&cluster, &a, &path, &out, &args);
    b.process
        .wait_for_line("running chains", JOB_LIMIT)
        .expect("b runs chains of the job");
    b.process.signal("TERM");
    b.process
        .wait_for_line("chains running here", EVENT_LIMIT)
        .expect("b waits for its chains");
    for me in [&a, &b] {
        cluster.wait_for_states(me, &[(&b, "draining")], EVENT_LIMIT);
    }
    b.process.signal("INT");
    let exit = b.process.wait_exit(EVENT_LIMIT);
    assert!(exit.is_some_and(|e| e.success()), "b exited with {exit:?}");
    b.process
        .wait_for_line("second signal (SIGINT): stopping now", EVENT_LIMIT)
        .unwrap();
    // b's chains did not finish there: the job's coordinator runs them again.
    let retry = a
        .process
        .wait_for_line("retrying chains", EVENT_LIMIT)
        .unwrap();
    assert!(
        retry.contains(&format!("of {}: node lost: left the cluster", b.name)),
        "{retry}"
    );
}
