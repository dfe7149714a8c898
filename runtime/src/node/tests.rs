//! One node in this process (pg and the registry are process-wide, so only one test here
//! starts a node): start errors, the local member list, a failed join, a membership restart
//! under the rest-for-one root, clean shutdown.
//! Nodes talking to each other are tested with real processes in the workspace `tests` crate.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use super::*;
use crate::membership::MemberState;
use crate::session::ConnectError;

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
            "cannot start node solo@127.0.0.1 on {listen}: child node-server failed to start:"
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
            ("membership", 1),
            ("membership-endpoint", 1)
        ]
    );

    node.shutdown().await.unwrap();
    assert!(ractor::registry::where_is(NODE_SERVER_NAME).is_none());
    // The port is free again.
    TcpListener::bind(listen).unwrap();
}
