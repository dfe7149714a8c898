//! Failures: a stopped node (SIGSTOP, as a stall or partition) is marked down by the others'
//! heartbeats and comes back on SIGCONT; a killed node is marked down; a terminated node
//! drains, stops cleanly and leaves.

use std::time::Duration;

use workspace_tests::cluster::{Cluster, NodeProcess};

const MESH_LIMIT: Duration = Duration::from_secs(15);
/// "Within a few seconds": 3 missed heartbeats at 500 ms, plus polling.
const DETECT_LIMIT: Duration = Duration::from_secs(5);

fn mesh(cluster: &Cluster) -> [NodeProcess; 3] {
    let a = cluster.node("a", &[]);
    let b = cluster.node("b", &[&a]);
    let c = cluster.node("c", &[&a]);
    for me in [&a, &b, &c] {
        cluster.wait_for_states(
            me,
            &[(&a, "up"), (&b, "up"), (&c, "up")]
                .map(|(n, s)| (n, if n.name == me.name { "local" } else { s })),
            MESH_LIMIT,
        );
    }
    [a, b, c]
}

#[test]
fn faults_a_stopped_node_is_marked_down_then_comes_back() {
    let cluster = Cluster::new("sigstop");
    let [a, b, c] = mesh(&cluster);
    c.process.signal("STOP");
    for me in [&a, &b] {
        cluster.wait_for_states(me, &[(&c, "down")], DETECT_LIMIT);
    }
    a.process
        .wait_for_line("node c@127.0.0.1 down: no heartbeat answer", DETECT_LIMIT)
        .unwrap();
    c.process.signal("CONT");
    for me in [&a, &b] {
        cluster.wait_for_states(me, &[(&c, "up")], MESH_LIMIT);
    }
    cluster.wait_for_states(&c, &[(&a, "up"), (&b, "up")], MESH_LIMIT);
    a.process
        .wait_for_line("node c@127.0.0.1 reconnected", MESH_LIMIT)
        .unwrap();
}

#[test]
fn faults_a_killed_node_is_marked_down() {
    let cluster = Cluster::new("sigkill");
    let [a, b, c] = mesh(&cluster);
    b.process.signal("KILL");
    for me in [&a, &c] {
        cluster.wait_for_states(me, &[(&b, "down"), (me, "local")], DETECT_LIMIT);
        me.process
            .wait_for_line("node b@127.0.0.1 down: connection lost", DETECT_LIMIT)
            .unwrap();
    }
}

#[test]
fn faults_a_terminated_node_stops_cleanly_and_leaves() {
    let cluster = Cluster::new("sigterm");
    let a = cluster.node("a", &[]);
    let mut b = cluster.node("b", &[&a]);
    cluster.wait_for_states(&a, &[(&b, "up")], MESH_LIMIT);
    b.process.signal("TERM");
    let exit = b.process.wait_exit(MESH_LIMIT);
    assert!(exit.is_some_and(|e| e.success()), "b exited with {exit:?}");
    // With nothing running, the drain ends at once.
    b.process
        .wait_for_line("node b@127.0.0.1 drained in", MESH_LIMIT)
        .unwrap();
    b.process
        .wait_for_line("node b@127.0.0.1 stopped", MESH_LIMIT)
        .unwrap();
    a.process
        .wait_for_line("node b@127.0.0.1 left the cluster", MESH_LIMIT)
        .unwrap();
    let rows = cluster.status(&a).unwrap();
    assert!(rows.iter().all(|row| row.name != b.name), "{rows:?}");
    // No error at exit (ractor_cluster's listener-respawn flood when the NodeServer is not
    // stopped first).
    let errors: Vec<_> = b
        .process
        .lines()
        .into_iter()
        .filter(|l| l.contains("ERROR"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}
