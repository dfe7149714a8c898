//! Limits before allocation: a request of a billion draws is answered with an error naming
//! the limit and the flag that raises it, by the client before it sends anything and by the
//! node when it gets one, and every node stays up; a pool whose node has a smaller limit than
//! the coordinator's fails the job with its own limit rather than retrying it everywhere;
//! the local `sample` refuses at once with exit code 2.

use std::time::{Duration, Instant};

use workspace_tests::cluster::{Cluster, NodeOptions, NodeProcess};
use workspace_tests::posterior::{Chain, NormalMean};
use workspace_tests::process::Process;

const MESH_LIMIT: Duration = Duration::from_secs(15);
/// A whole (small) sampling job, start to summary (the machine may be busy).
const JOB_LIMIT: Duration = Duration::from_secs(90);
/// A refusal needs no sampling: it comes within the time of a command's start.
const REFUSAL_LIMIT: Duration = Duration::from_secs(20);

/// `cluster-cli sample --cluster AT MODEL ARGS --quiet`, run to its end.
fn sample(cluster: &Cluster, at: &NodeProcess, model: &str, args: &[&str]) -> Process {
    let address = at.address.to_string();
    let mut all = vec!["sample", "--cluster", &address, model, "--quiet"];
    all.extend_from_slice(args);
    let mut client = cluster.spawn_cli(&all);
    let status = client.wait_exit(JOB_LIMIT);
    assert!(
        status.is_some(),
        "sample did not end:\n{:?}",
        client.lines()
    );
    client
}

/// The exit code of a client that ended.
fn exit_code(client: &mut Process) -> Option<i32> {
    client.wait_exit(Duration::ZERO).and_then(|s| s.code())
}

#[test]
fn limits_a_billion_draws_is_refused_and_every_node_stays_up() {
    let cluster = Cluster::new("limits-huge");
    // An explicit limit: the default, half of this machine's memory, differs by machine.
    let a = cluster.node_with("a", &[], |command| {
        command.args(["--max-job-bytes", "8GiB"]);
    });
    let b = cluster.node("b", &[&a]);
    let c = cluster.node("c", &[&a]);
    cluster.mesh(&[&a, &b, &c]);
    let model = NormalMean::new(20);
    let path = model.write(cluster.config_home(), "normal.json");

    // The request reaches the node (the client's own check skipped): the coordinator
    // refuses it, naming its limit and the flag.
    let address = a.address.to_string();
    let answer = cluster.cli(&[
        "debug",
        "--cluster",
        &address,
        "raw",
        "--payload",
        "huge-job",
    ]);
    assert!(answer.status.success(), "{answer:?}");
    let reply = answer
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("reply: error: "))
        .unwrap_or_else(|| panic!("no error reply: {}", answer.stdout));
    assert!(
        reply.starts_with(
            "job needs 64.0 GB (1 chain x 1000000000 draws x 8 values), over node \
             a@127.0.0.1's limit of 8.6 GB: "
        ),
        "{reply}"
    );
    assert!(
        reply.ends_with("lower --draws/--chains or start the node with a larger --max-job-bytes"),
        "{reply}"
    );

    // Through `sample --cluster`, the client refuses before it sends anything: the draws
    // would be kept here.
    let started = Instant::now();
    let mut client = sample(
        &cluster,
        &a,
        &path,
        &["--chains", "1", "--draws", "1000000000000"],
    );
    let lines = client.lines().join("\n");
    assert_eq!(exit_code(&mut client), Some(2), "{lines}");
    assert!(
        lines.contains(
            "job needs 64.0 TB (1 chain x 1000000000000 draws x 8 values), over this \
             machine's available memory of"
        ),
        "{lines}"
    );
    assert!(lines.contains("lower --draws/--chains"), "{lines}");
    assert!(started.elapsed() < REFUSAL_LIMIT, "{:?}", started.elapsed());

    // Every node is up, and a normal job runs.
    cluster.mesh(&[&a, &b, &c]);
    for node in [&a, &b, &c] {
        assert!(
            !node
                .process
                .lines()
                .iter()
                .any(|l| l.contains("memory allocation")),
            "{}",
            node.name
        );
    }
    let out = cluster.config_home().join("after.csv");
    let out = out.to_string_lossy();
    let mut client = sample(
        &cluster,
        &a,
        &path,
        &[
            "--chains", "6", "--warmup", "200", "--draws", "200", "--output", &out,
        ],
    );
    assert_eq!(exit_code(&mut client), Some(0), "{:?}", client.lines());
    let chains = Chain::read_all(&out, 6);
    model.check(&chains.iter().map(|c| c.column("mu")).collect::<Vec<_>>());
}

#[test]
fn limits_a_pool_over_its_nodes_limit_fails_the_job_with_that_limit() {
    let cluster = Cluster::new("limits-pool");
    // The coordinator a has the default limits; b takes jobs of 500 kB at most.
    let a = cluster.node("a", &[]);
    let b = cluster.node_opts("b", &[&a], NodeOptions::default(), |command| {
        command.args(["--max-job-bytes", "500kB"]);
    });
    cluster.mesh(&[&a, &b]);
    b.process
        .wait_for_line("job limits: 500.0 kB", MESH_LIMIT)
        .expect("b logs its limits");
    let model = NormalMean::new(20);
    let path = model.write(cluster.config_home(), "normal.json");

    // 16 chains of 10000 draws of 8 values, 640 kB a chain: every task b gets is over its
    // limit, and none of a's.
    let mut client = sample(
        &cluster,
        &a,
        &path,
        &["--chains", "16", "--warmup", "100", "--draws", "10000"],
    );
    let lines = client.lines();
    let text = lines.join("\n");
    assert_eq!(exit_code(&mut client), Some(1), "{text}");
    let failure = lines
        .iter()
        .find(|l| l.starts_with("error: job "))
        .unwrap_or_else(|| panic!("no job failure:\n{text}"));
    assert!(
        failure.contains("over node b@127.0.0.1's limit of 500.0 kB"),
        "{failure}"
    );
    assert!(failure.contains("--max-job-bytes"), "{failure}");
    // A job error: no chain was sent to run again anywhere.
    assert!(!text.contains("retried"), "{text}");
    b.process
        .wait_for_line("refusing a task from a@127.0.0.1", JOB_LIMIT)
        .expect("b refused the task");

    // Both nodes are up and a job that fits b's limit runs on both.
    cluster.mesh(&[&a, &b]);
    let mut client = sample(
        &cluster,
        &a,
        &path,
        &["--chains", "4", "--warmup", "100", "--draws", "1000"],
    );
    let text = client.lines().join("\n");
    assert_eq!(exit_code(&mut client), Some(0), "{text}");
    assert!(text.contains(&format!("placed on {}", b.name)), "{text}");
}

#[test]
fn limits_a_local_sample_of_a_trillion_draws_exits_2_at_once() {
    let cluster = Cluster::new("limits-local");
    let model = NormalMean::new(20);
    let path = model.write(cluster.config_home(), "normal.json");
    let started = Instant::now();
    let finished = cluster.cli(&["sample", &path, "--draws", "1000000000000", "--quiet"]);
    assert_eq!(finished.status.code(), Some(2), "{finished:?}");
    assert!(
        finished.stderr.starts_with(
            "error: sample needs 256.0 TB (4 chains x 1000000000000 draws x 8 values), over \
             this machine's available memory of"
        ),
        "{}",
        finished.stderr
    );
    assert!(
        finished
            .stderr
            .trim_end()
            .ends_with("lower --draws/--chains"),
        "{}",
        finished.stderr
    );
    assert!(started.elapsed() < REFUSAL_LIMIT, "{:?}", started.elapsed());
}
