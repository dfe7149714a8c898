//! Remote sampling on clusters of real node processes: a CPU-only client samples on a GPU
//! node, placement by capacity, two nodes of one speed sharing jobs placed by their measured
//! speed, warmup once then broadcast, a node killed mid-run and a pool
//! that panics mid-run (their chains run again elsewhere, with the same draws), malformed
//! requests, and one job followed across nodes by its log spans. Posteriors are checked
//! against the exact posterior of a conjugate model, with MCSE-based tolerances.

use std::time::Duration;

use workspace_tests::cluster::{Cluster, NodeOptions, NodeProcess, START_LIMIT};
use workspace_tests::posterior::{Chain, NormalMean};
use workspace_tests::process::Process;

const MESH_LIMIT: Duration = Duration::from_secs(15);
/// A whole sampling job, start to summary (small settings; the machine may be busy).
pub(crate) const JOB_LIMIT: Duration = Duration::from_secs(90);

/// `cluster-cli sample --cluster AT MODEL ARGS --output OUT --quiet`, followed while it runs.
pub(crate) fn sample(
    cluster: &Cluster,
    at: &NodeProcess,
    model: &str,
    out: &str,
    args: &[&str],
) -> Process {
    let address = at.address.to_string();
    let mut all = vec![
        "sample",
        "--cluster",
        &address,
        model,
        "--output",
        out,
        "--quiet",
    ];
    all.extend_from_slice(args);
    cluster.spawn_cli(&all)
}

/// Waits for the client to exit successfully; its output otherwise.
pub(crate) fn finish(mut client: Process) -> Vec<String> {
    let status = client.wait_exit(JOB_LIMIT);
    let lines = client.lines();
    assert!(
        status.is_some_and(|s| s.success()),
        "sample exited with {status:?}:\n{}",
        lines.join("\n")
    );
    lines
}

/// `chains by node: a@127.0.0.1: 0,1; b@127.0.0.1: 2` as (node, number of chains).
fn chains_by_node(lines: &[String]) -> Vec<(String, usize)> {
    let line = lines
        .iter()
        .find_map(|l| l.strip_prefix("chains by node: "))
        .unwrap_or_else(|| panic!("no placement report in:\n{}", lines.join("\n")));
    line.split("; ")
        .map(|entry| {
            let (node, chains) = entry.split_once(": ").expect("node: chains");
            (node.to_owned(), chains.split(',').count())
        })
        .collect()
}

fn mu(chains: &[Chain]) -> Vec<Vec<f64>> {
    chains.iter().map(|c| c.column("mu")).collect()
}

/// `sample --cluster AT MODEL --output OUT --quiet ARGS` by a client that finds no Vulkan
/// driver, to its end.
fn sample_without_gpu(
    cluster: &Cluster,
    at: &NodeProcess,
    model: &str,
    out: &str,
    args: &[&str],
) -> Vec<String> {
    let address = at.address.to_string();
    let mut command = cluster.command();
    command
        .args(["sample", "--cluster", &address, model, "--output", out])
        .arg("--quiet")
        .args(args)
        .env("VK_ICD_FILENAMES", "/nonexistent")
        .env("VK_DRIVER_FILES", "/nonexistent");
    finish(Process::spawn(command))
}

#[test]
fn sampling_on_a_remote_gpu_from_a_cpu_only_client() {
    let cluster = Cluster::new("remote-gpu");
    let a = cluster.node("a", &[]);
    let gpu = NodeOptions {
        gpu: true,
        ..NodeOptions::default()
    };
    // CI's GPU is lavapipe, a software adapter: used only when asked.
    let g = cluster.node_opts("g", &[&a], gpu, |c| {
        c.arg("--software-gpu");
    });
    let b = cluster.node("b", &[&a]);
    // The GPU pool opens its device before the node says it listens.
    if !g.process.lines().iter().any(|l| l.contains("gpu pool on")) {
        let lines = g.process.lines().join("\n");
        assert!(
            std::env::var_os("REQUIRE_GPU").is_none_or(|v| v != "1"),
            "REQUIRE_GPU=1 but node g has no GPU pool:\n{lines}"
        );
        eprintln!("skipped: no GPU adapter (set REQUIRE_GPU=1 to make this a failure)");
        return;
    }
    cluster.mesh(&[&a, &g, &b]);
    let model = NormalMean::new(20);
    let path = model.write(cluster.config_home(), "normal.json");
    let out = cluster.config_home().join("gpu.csv");
    let out = out.to_string_lossy();
    // The client is sent to a, a CPU-only node; it finds no Vulkan driver itself.
    let lines = sample_without_gpu(
        &cluster,
        &a,
        &path,
        &out,
        &[
            "--chains", "64", "--device", "gpu", "--warmup", "300", "--draws", "200", "--seed",
            "11",
        ],
    );
    assert_eq!(
        chains_by_node(&lines),
        [(g.name.clone(), 64)],
        "{}",
        lines.join("\n")
    );
    assert!(lines.iter().any(|l| l == "retried: none"), "{lines:?}");
    // Under the header's first line (stdout's lines keep their order; stderr's may come
    // between them): where the GPU node ran the chains, in which precision and why (auto's
    // check), as the node told the coordinator.
    let header = lines
        .iter()
        .position(|l| l.contains(": 64 chains x 200 draws after 300 warmup, seed 11 ("))
        .unwrap_or_else(|| panic!("no header in {lines:?}"));
    let table = lines
        .iter()
        .position(|l| l.starts_with("chains by node: "))
        .unwrap_or_else(|| panic!("no report in {lines:?}"));
    let notes: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("ran on node "))
        .collect();
    let prefix = format!("ran on node {}: GPU gpu", g.name);
    assert!(!notes.is_empty(), "no note on the GPU run in {lines:?}");
    for note in &notes {
        let at = lines.iter().position(|l| l == *note).unwrap();
        assert!(header < at && at < table, "{lines:?}");
        assert!(note.starts_with(&prefix), "{note}");
        assert!(
            note.contains(" f32 (auto: ") || note.contains(" f64 (auto: "),
            "{note}"
        );
    }
    // The draws came through the job's link, not the cluster session.
    let polls = lines
        .iter()
        .find_map(|l| l.strip_prefix("polls: "))
        .unwrap_or_else(|| panic!("no poll counts in {lines:?}"));
    let (link, session) = polls
        .split_once(" through the job link, ")
        .unwrap_or_else(|| panic!("{polls}"));
    assert!(link.parse::<u64>().unwrap() > 0, "{polls}");
    assert_eq!(session, "0 through the session", "{polls}");
    let chains = Chain::read_all(&out, 64);
    assert!(chains.iter().all(|c| c.lines.len() == 200));
    model.check(&mu(&chains));

    // A model whose reported values are transformed (tau, theta): the GPU node sends each
    // draw's unconstrained position and the client writes the values, the ones a run on
    // this machine's own adapter writes, digit for digit.
    let schools = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/eight_schools_noncentered.json")
        .to_string_lossy()
        .into_owned();
    let settings = [
        "--chains",
        "16",
        "--warmup",
        "100",
        "--draws",
        "50",
        "--seed",
        "5",
        "--device",
        "gpu",
        "--precision",
        "f32",
    ];
    let remote = cluster.config_home().join("schools-remote.csv");
    let remote = remote.to_string_lossy();
    let lines = sample_without_gpu(&cluster, &a, &schools, &remote, &settings);
    assert_eq!(chains_by_node(&lines), [(g.name.clone(), 16)], "{lines:?}");
    let local = cluster.config_home().join("schools-local.csv");
    let local = local.to_string_lossy();
    let mut args = vec!["sample", schools.as_str(), "--output", &local, "--quiet"];
    args.extend(settings);
    let ran = cluster.cli(&args);
    assert!(ran.status.success(), "{ran:?}");
    let (remote, local) = (Chain::read_all(&remote, 16), Chain::read_all(&local, 16));
    assert!(
        remote[0].columns.iter().any(|c| c == "theta.8"),
        "{:?}",
        remote[0].columns
    );
    for (chain, (remote, local)) in remote.iter().zip(&local).enumerate() {
        assert_eq!(remote.columns, local.columns);
        assert_eq!(remote.lines.len(), 50);
        assert_eq!(local.lines.len(), 50);
        if let Some((draw, (r, l))) = remote
            .lines
            .iter()
            .zip(&local.lines)
            .enumerate()
            .find(|(_, (r, l))| r != l)
        {
            panic!("chain {chain}, draw {draw}:\n remote {r}\n local  {l}");
        }
    }
}

#[test]
fn sampling_places_chains_by_capacity_and_broadcasts_one_warmup() {
    let cluster = Cluster::new("placement");
    let slots = |cpu_slots| NodeOptions {
        cpu_slots,
        ..NodeOptions::default()
    };
    let a = cluster.node_opts("a", &[], slots(1), |_| {});
    let b = cluster.node_opts("b", &[&a], slots(2), |_| {});
    let c = cluster.node_opts("c", &[&a], slots(3), |_| {});
    cluster.mesh(&[&a, &b, &c]);
    let model = NormalMean::new(50);
    let path = model.write(cluster.config_home(), "normal.json");

    // Six chains on 1 + 2 + 3 free slots: each node gets as many as it has slots.
    let out = cluster.config_home().join("independent.csv");
    let out = out.to_string_lossy();
    let client = sample(
        &cluster,
        &a,
        &path,
        &out,
        &["--chains", "6", "--warmup", "300", "--draws", "300"],
    );
    let lines = finish(client);
    let mut placed = chains_by_node(&lines);
    placed.sort();
    assert_eq!(
        placed,
        [
            (a.name.clone(), 1),
            (b.name.clone(), 2),
            (c.name.clone(), 3)
        ],
        "{}",
        lines.join("\n")
    );
    model.check(&mu(&Chain::read_all(&out, 6)));

    // Warmup once, then every chain starts from its result with its tuning.
    let out = cluster.config_home().join("broadcast.csv");
    let out = out.to_string_lossy();
    let args = [
        "--chains",
        "6",
        "--warmup",
        "300",
        "--draws",
        "300",
        "--warmup-mode",
        "broadcast",
        "--burn-in",
        "20",
    ];
    let lines = finish(sample(&cluster, &b, &path, &out, &args));
    let warmups: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("warmup done on"))
        .collect();
    assert_eq!(warmups.len(), 1, "{lines:?}");
    let step_size: f64 = warmups[0]
        .split_once("(step size ")
        .and_then(|(_, rest)| rest.split(')').next()?.parse().ok())
        .expect("the warmup line names the step size");
    let chains = Chain::read_all(&out, 6);
    for chain in &chains {
        let used = chain.step_size().expect("a step size comment");
        assert!(
            (used - step_size).abs() <= 1e-3 * step_size,
            "{used} vs {step_size}"
        );
        assert_eq!(chain.lines.len(), 300);
    }
    model.check(&mu(&chains));
}

#[test]
fn sampling_two_cpu_nodes_of_one_speed_share_a_job_evenly() {
    let cluster = Cluster::new("even");
    let slots = || NodeOptions {
        cpu_slots: 2,
        ..NodeOptions::default()
    };
    let a = cluster.node_opts("a", &[], slots(), |_| {});
    let b = cluster.node_opts("b", &[&a], slots(), |_| {});
    cluster.mesh(&[&a, &b]);
    let model = NormalMean::new(50);
    let path = model.write(cluster.config_home(), "normal.json");
    // The first job measures both nodes on the model (a wave of two chains each, then the
    // rest as chains finish); the second is placed by those measurements from the start.
    for job in ["first", "second"] {
        let out = cluster.config_home().join(format!("{job}.csv"));
        let out = out.to_string_lossy();
        let args = ["--chains", "12", "--warmup", "300", "--draws", "300"];
        let lines = finish(sample(&cluster, &a, &path, &out, &args));
        let placed = chains_by_node(&lines);
        let on = |node: &NodeProcess| {
            placed
                .iter()
                .filter(|(name, _)| *name == node.name)
                .map(|(_, n)| n)
                .sum::<usize>()
        };
        // Evenly, up to a wave of slack for the noise of measured speeds on a busy machine;
        // nothing left to one node alone.
        for node in [&a, &b] {
            assert!(
                (4..=8).contains(&on(node)),
                "{job} job: {placed:?}\n{}",
                lines.join("\n")
            );
        }
        model.check(&mu(&Chain::read_all(&out, 12)));
    }
}

#[test]
fn sampling_a_killed_node_s_chains_run_again_with_the_same_draws() {
    let cluster = Cluster::new("kill-mid-run");
    let a = cluster.node("a", &[]);
    let b = cluster.node("b", &[&a]);
    let c = cluster.node("c", &[&a]);
    cluster.mesh(&[&a, &b, &c]);
    // Slow gradients (many observations) so that chains run for seconds.
    let model = NormalMean::new(10_000);
    let path = model.write(cluster.config_home(), "normal.json");
    let out = cluster.config_home().join("remote.csv");
    let out = out.to_string_lossy();
    let args = [
        "--chains", "6", "--warmup", "200", "--draws", "3000", "--seed", "21",
    ];
    let client = sample(&cluster, &a, &path, &out, &args);
    b.process
        .wait_for_line("running chains", JOB_LIMIT)
        .expect("b runs chains");
    b.process.signal("KILL");
    let lines = finish(client);
    let retried: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("retried: chain"))
        .collect();
    assert!(!retried.is_empty(), "{lines:?}");
    for line in &retried {
        assert!(line.contains(&format!("from {}", b.name)), "{line}");
        assert!(
            !line.ends_with(&format!("finished on {}", b.name)),
            "{line}"
        );
    }
    a.process
        .wait_for_line("retrying chains", MESH_LIMIT)
        .expect("the coordinator logs the retry");
    let remote = Chain::read_all(&out, 6);

    // The same seed on this machine: every chain, the re-run ones included, drew the same.
    let local_out = cluster.config_home().join("local.csv");
    let local_out = local_out.to_string_lossy();
    let mut command = cluster.command();
    command
        .args(["sample", &path, "--output", &local_out, "--quiet"])
        .args(args);
    let local = workspace_tests::process::run(command, JOB_LIMIT);
    assert!(local.status.success(), "{local:?}");
    let local = Chain::read_all(&local_out, 6);
    for (chain, (remote, local)) in remote.iter().zip(&local).enumerate() {
        assert_eq!(remote.lines.len(), 3000);
        assert!(
            remote.lines == local.lines,
            "chain {chain}: draws differ from the local run"
        );
    }
    model.check(&mu(&remote));
}

#[test]
fn sampling_a_pool_that_panics_is_restarted_and_the_job_completes() {
    let cluster = Cluster::new("panic-mid-run");
    let faults = |c: &mut std::process::Command| {
        c.arg("--allow-fault-injection");
    };
    let a = cluster.node_with("a", &[], faults);
    let b = cluster.node_with("b", &[&a], faults);
    let c = cluster.node_with("c", &[&a], faults);
    cluster.mesh(&[&a, &b, &c]);
    let model = NormalMean::new(10_000);
    let path = model.write(cluster.config_home(), "normal.json");
    let out = cluster.config_home().join("remote.csv");
    let out = out.to_string_lossy();
    let args = [
        "--chains", "6", "--warmup", "200", "--draws", "2000", "--seed", "5",
    ];
    let client = sample(&cluster, &a, &path, &out, &args);
    c.process
        .wait_for_line("running chains", JOB_LIMIT)
        .expect("c runs chains");
    // Through the wire, as any client would.
    let fault = cluster.cli(&[
        "debug",
        "--cluster",
        &c.address.to_string(),
        "fault",
        "panic-pool",
    ]);
    assert!(fault.status.success(), "{fault:?}");
    let lines = finish(client);
    c.process
        .wait_for_line("child restarted", MESH_LIMIT)
        .expect("c's pool supervisor restarts the pool");
    let retried: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("retried: chain"))
        .collect();
    assert!(!retried.is_empty(), "{lines:?}");
    assert!(
        retried
            .iter()
            .all(|l| l.contains(&format!("from {}", c.name))),
        "{retried:?}"
    );
    // c is still a member and still serves.
    cluster.wait_for_states(&a, &[(&c, "up")], MESH_LIMIT);
    let chains = Chain::read_all(&out, 6);
    assert!(chains.iter().all(|c| c.lines.len() == 2000));
    model.check(&mu(&chains));
}

#[test]
fn sampling_malformed_requests_get_an_error_reply_and_the_node_serves_on() {
    let cluster = Cluster::new("malformed");
    let a = cluster.node("a", &[]);
    let b = cluster.node("b", &[&a]);
    let c = cluster.node("c", &[&a]);
    cluster.mesh(&[&a, &b, &c]);
    let address = a.address.to_string();
    for (service, payload, expected) in [
        ("coordinator", "garbage", "malformed message"),
        ("pool", "garbage", "malformed message"),
        ("membership", "garbage", "malformed message"),
        ("coordinator", "oversized", "exceeds the limit"),
        (
            "coordinator",
            "bad-version",
            "protocol version 3 is not supported",
        ),
        ("coordinator", "bad-model", "invalid model"),
    ] {
        let answer = cluster.cli(&[
            "debug",
            "--cluster",
            &address,
            "raw",
            "--service",
            service,
            "--payload",
            payload,
        ]);
        assert!(answer.status.success(), "{service} {payload}: {answer:?}");
        let reply = answer
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("reply: error: "));
        assert!(
            reply.is_some_and(|reply| reply.contains(expected)),
            "{service} {payload}: {}",
            answer.stdout
        );
    }
    // The node is up and serves the next request: a job, with a span that follows it across
    // nodes (the client's, the coordinator's and the workers' lines name the job).
    cluster.wait_for_states(&b, &[(&a, "up")], MESH_LIMIT);
    let model = NormalMean::new(20);
    let path = model.write(cluster.config_home(), "normal.json");
    let out = cluster.config_home().join("after.csv");
    let out = out.to_string_lossy();
    let client = sample(
        &cluster,
        &a,
        &path,
        &out,
        &["--chains", "6", "--warmup", "200", "--draws", "200"],
    );
    let lines = finish(client);
    let job = lines
        .iter()
        .find_map(|l| l.strip_prefix("job ")?.split(':').next())
        .expect("the client names its job")
        .to_owned();
    let span = format!("job{{job={job}}}");
    assert!(lines.iter().any(|l| l.contains(&span)), "client: {lines:?}");
    for node in [&a, &b, &c] {
        node.process
            .wait_for_line(&span, START_LIMIT)
            .unwrap_or_else(|e| panic!("{}: {e}", node.name));
    }
    model.check(&mu(&Chain::read_all(&out, 6)));
}
