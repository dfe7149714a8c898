//! Poison jobs: a request that kills whatever node runs it (here test-only fault injection:
//! the node's process aborts as soon as it starts a chain) is stopped after two nodes at
//! most, with an error naming the chain, the nodes tried and what each reported; the node
//! that took the job and the rest of the cluster stay up.

use std::time::Duration;

use workspace_tests::cluster::{Cluster, NodeOptions, NodeProcess};
use workspace_tests::posterior::NormalMean;

const MESH_LIMIT: Duration = Duration::from_secs(15);
/// The whole job: two nodes lost and the error (the machine may be busy).
const JOB_LIMIT: Duration = Duration::from_secs(60);

#[test]
fn poison_a_job_that_kills_its_nodes_fails_before_it_takes_the_cluster_down() {
    let cluster = Cluster::new("poison");
    // a takes the job but samples nothing on its CPU; b, c and d die running any chain.
    let no_cpu = NodeOptions {
        cpu_slots: 0,
        ..NodeOptions::default()
    };
    let a = cluster.node_opts("a", &[], no_cpu, |_| {});
    let faults = |c: &mut std::process::Command| {
        c.arg("--allow-fault-injection");
    };
    let mut workers = [
        cluster.node_with("b", &[&a], faults),
        cluster.node_with("c", &[&a], faults),
        cluster.node_with("d", &[&a], faults),
    ];
    {
        let [b, c, d] = &workers;
        cluster.mesh(&[&a, b, c, d]);
    }
    for node in &workers {
        let armed = cluster.cli(&[
            "debug",
            "--cluster",
            &node.address.to_string(),
            "fault",
            "abort-on-run",
        ]);
        assert!(armed.status.success(), "{}: {armed:?}", node.name);
    }
    let model = NormalMean::new(20);
    let path = model.write(cluster.config_home(), "normal.json");
    let out = cluster.config_home().join("poison.csv");
    let mut client = cluster.spawn_cli(&[
        "sample",
        "--cluster",
        &a.address.to_string(),
        &path,
        "--output",
        &out.to_string_lossy(),
        "--quiet",
        "--chains",
        "1",
        "--warmup",
        "100",
        "--draws",
        "100",
    ]);
    let status = client.wait_exit(JOB_LIMIT);
    let lines = client.lines();
    assert!(
        status.is_some_and(|s| s.code() == Some(1)),
        "sample exited with {status:?}:\n{}",
        lines.join("\n")
    );
    let error = lines
        .iter()
        .find(|l| l.contains("failed on every node tried"))
        .unwrap_or_else(|| panic!("no poison error in:\n{}", lines.join("\n")));
    assert!(
        error.contains("chain 0 failed on every node tried: "),
        "{error}"
    );
    assert!(
        error.ends_with("the job is stopped so that it cannot take down more nodes"),
        "{error}"
    );

    // The nodes the error names are the two that died; the third never ran the chain.
    let named: Vec<&NodeProcess> = workers
        .iter()
        .filter(|n| error.contains(&format!("{} (", n.name)))
        .collect();
    assert_eq!(named.len(), 2, "{error}");
    let named: Vec<String> = named.iter().map(|n| n.name.clone()).collect();
    for node in &mut workers {
        let aborted = node
            .process
            .lines()
            .iter()
            .any(|l| l.contains("fault injection: aborting the process"));
        if named.contains(&node.name) {
            let exit = node.process.wait_exit(MESH_LIMIT);
            assert!(
                exit.is_some_and(|e| !e.success()),
                "{}: {exit:?}",
                node.name
            );
            assert!(aborted, "{}", node.process.lines().join("\n"));
        } else {
            assert!(!aborted, "{}", node.process.lines().join("\n"));
        }
    }
    let survivor = workers
        .iter()
        .find(|n| !named.contains(&n.name))
        .expect("a node the job did not reach");
    // a (which took the job) is up and still sees the survivor up.
    cluster.wait_for_states(&a, &[(&a, "local"), (survivor, "up")], MESH_LIMIT);
}
