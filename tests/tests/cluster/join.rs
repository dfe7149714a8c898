//! Joining: nodes mesh through seeds and gossip; `join` checks a peer, or makes a running node
//! join it.

use std::time::Duration;

use workspace_tests::cluster::{Cluster, free_port};

const LIMIT: Duration = Duration::from_secs(15);

#[test]
fn join_three_nodes_mesh_through_gossip() {
    let cluster = Cluster::new("mesh");
    let a = cluster.node("a", &[]);
    let b = cluster.node("b", &[&a]);
    // c knows only b, and meets a through b's gossip.
    let c = cluster.node("c", &[&b]);
    for (me, [x, y]) in [(&a, [&b, &c]), (&b, [&a, &c]), (&c, [&a, &b])] {
        cluster.wait_for_states(me, &[(me, "local"), (x, "up"), (y, "up")], LIMIT);
    }
    let rows = cluster.status(&a).unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in &rows {
        assert_eq!(
            (row.cpu_slots.as_str(), row.running_jobs.as_str()),
            ("2", "0")
        );
    }
    // One info line per node event.
    for (me, [x, y]) in [(&a, [&b, &c]), (&c, [&a, &b])] {
        for other in [x, y] {
            let joined = format!("node {} joined", other.name);
            me.process.wait_for_line(&joined, LIMIT).unwrap();
            let count = me
                .process
                .lines()
                .iter()
                .filter(|l| l.contains(&joined))
                .count();
            assert_eq!(count, 1, "{joined} logged {count} times by {}", me.name);
        }
    }
}

#[test]
fn join_checks_a_peer_and_joins_a_running_node() {
    let cluster = Cluster::new("join-cmd");
    let a = cluster.node("a", &[]);
    let b = cluster.node("b", &[]);
    let checked = cluster.cli(&["join", &a.address.to_string()]);
    assert!(checked.status.success(), "{checked:?}");
    assert!(
        checked.stdout.contains(&format!(
            "connected to a@127.0.0.1 at {}: cookie accepted",
            a.address
        )),
        "{checked:?}"
    );
    // The checking client did not become a member.
    assert_eq!(cluster.status(&a).unwrap().len(), 1);

    let joined = cluster.cli(&[
        "join",
        "--node",
        &b.address.to_string(),
        &a.address.to_string(),
    ]);
    assert!(joined.status.success(), "{joined:?}");
    assert!(
        joined
            .stdout
            .contains("node b@127.0.0.1 joined a@127.0.0.1"),
        "{joined:?}"
    );
    cluster.wait_for_states(&a, &[(&b, "up")], LIMIT);
}

#[test]
fn join_an_unreachable_peer_is_a_network_error_naming_it() {
    let cluster = Cluster::new("unreachable");
    let nobody = format!("127.0.0.1:{}", free_port());
    let failed = cluster.cli(&["join", &nobody]);
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    assert!(
        failed
            .stderr
            .contains(&format!("cannot connect to {nobody}")),
        "{failed:?}"
    );
    assert!(!failed.stderr.contains("cookie"), "{failed:?}");
}
