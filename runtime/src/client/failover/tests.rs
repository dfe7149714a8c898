//! Where a client goes when its node is lost: the order of the candidates.

use super::*;

fn member(short: &str, port: u16, state: MemberState) -> MemberStatus {
    MemberStatus {
        name: NodeName::new(short, "127.0.0.1").unwrap(),
        address: SocketAddr::from(([127, 0, 0, 1], port)),
        state,
        resources: None,
    }
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[test]
fn candidates_are_members_up_then_given_addresses_never_lost_down_or_draining_ones() {
    let known = Known {
        given: vec![addr(1), addr(9), addr(3)],
        members: vec![
            member("a", 1, MemberState::Local),
            member("b", 2, MemberState::Connecting),
            member("c", 3, MemberState::Up),
            member("d", 4, MemberState::Down),
            member("e", 5, MemberState::Draining),
            member("f", 6, MemberState::Up),
        ],
        refreshed: None,
    };
    let lost = [(NodeName::new("a", "127.0.0.1").unwrap(), addr(1))];
    assert_eq!(
        known.candidates(&lost),
        [addr(3), addr(6), addr(9), addr(2)]
    );
    // Lost by name, at another address than the one gossiped: still left out.
    let lost = [(NodeName::new("c", "127.0.0.1").unwrap(), addr(7))];
    assert_eq!(
        known.candidates(&lost),
        [addr(1), addr(6), addr(9), addr(2)]
    );
    assert_eq!(Known::given(&[addr(1)]).candidates(&[]), [addr(1)]);
}

#[test]
fn a_member_list_is_fresh_only_from_the_current_node_and_for_a_while() {
    let mut known = Known::given(&[addr(1)]);
    assert!(!known.fresh(Duration::from_secs(60)), "never asked");
    known.refreshed = Some(Instant::now());
    assert!(known.fresh(Duration::from_secs(60)));
    assert!(!known.fresh(Duration::ZERO));
}
