//! The peer table's transitions, driven by hand: session events, heartbeat answers and ticks
//! at chosen instants, checked through the effects they return.

use std::time::Duration;

use super::*;

const INTERVAL: Duration = Duration::from_millis(500);

fn name(short: &str) -> NodeName {
    NodeName::new(short, "127.0.0.1").unwrap()
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn refused(port: u16) -> ConnectError {
    ConnectError::Unreachable {
        address: addr(port),
        reason: "refused".into(),
    }
}

fn info(short: &str, port: u16) -> NodeInfo {
    NodeInfo {
        name: name(short),
        address: addr(port),
        resources: NodeResources {
            cpu_slots: 4,
            gpus: Vec::new(),
            running_jobs: 0,
        },
        draining: false,
    }
}

struct Check {
    table: PeerTable,
    t0: Instant,
}

impl Check {
    fn new() -> Self {
        let settings = MembershipSettings {
            heartbeat_interval: INTERVAL,
            max_missed_heartbeats: 3,
            ..MembershipSettings::default()
        };
        Self {
            table: PeerTable::new(info("a", 4370), settings),
            t0: Instant::now(),
        }
    }

    fn at(&self, millis: u64) -> Instant {
        self.t0 + Duration::from_millis(millis)
    }

    fn states(&self) -> Vec<(String, MemberState)> {
        self.table
            .members()
            .into_iter()
            .map(|m| (m.name.short().to_owned(), m.state))
            .collect()
    }

    /// Dials `b` at port 4371 and brings it up over session `session`; returns the effects
    /// of the heartbeat answer.
    fn bring_up(
        &mut self,
        short: &str,
        port: u16,
        session: u64,
        gossip: &[(&str, u16)],
    ) -> Vec<Effect> {
        let id = SessionId(session);
        assert_eq!(
            self.table.join(addr(port), true, self.t0),
            [Effect::Dial(addr(port))]
        );
        self.table
            .session_opened(id, true, Some(addr(port)), self.t0);
        self.table.session_authenticated(id, Some(name(short)));
        let effects =
            self.table
                .session_ready(id, Some(name(short)), Some(addr(port)), true, self.t0);
        let [
            Effect::Heartbeat {
                peer,
                session: s,
                seq,
            },
        ] = effects.as_slice()
        else {
            panic!("expected one heartbeat, got {effects:?}");
        };
        assert_eq!((peer, *s), (&name(short), id));
        let members = gossip.iter().map(|(n, p)| (name(n), addr(*p))).collect();
        self.table.heartbeat_answered(
            &name(short),
            id,
            *seq,
            Ok((info(short, port), members)),
            self.t0,
        )
    }

    fn heartbeat_seq(effects: &[Effect]) -> u64 {
        match effects {
            [Effect::Heartbeat { seq, .. }] => *seq,
            other => panic!("expected one heartbeat, got {other:?}"),
        }
    }
}

#[test]
fn a_seed_becomes_up_after_its_first_heartbeat_and_its_gossip_is_dialled() {
    let mut check = Check::new();
    let effects = check.bring_up("b", 4371, 1, &[("c", 4372), ("a", 4370)]);
    assert_eq!(
        effects,
        [
            Effect::Event(MembershipEvent::NodeUp {
                node: info("b", 4371),
                reconnected: false
            }),
            Effect::JoinOutcome {
                address: addr(4371),
                result: Ok(info("b", 4371))
            },
            // c is new; a is this node and is not dialled.
            Effect::Dial(addr(4372)),
        ]
    );
    assert_eq!(
        check.states(),
        [
            ("a".into(), MemberState::Local),
            ("b".into(), MemberState::Up)
        ]
    );
    assert_eq!(check.table.up_members(), [(name("b"), addr(4371))]);
    // Joining an up node answers at once.
    assert_eq!(
        check.table.join(addr(4371), true, check.t0),
        [Effect::JoinOutcome {
            address: addr(4371),
            result: Ok(info("b", 4371))
        }]
    );
}

#[test]
fn a_refused_handshake_is_an_authentication_failure_retried_with_backoff() {
    let mut check = Check::new();
    assert_eq!(
        check.table.join(addr(4371), true, check.t0),
        [Effect::Dial(addr(4371))]
    );
    check
        .table
        .session_opened(SessionId(1), true, Some(addr(4371)), check.t0);
    assert_eq!(
        check.table.session_disconnected(SessionId(1), check.at(2)),
        [Effect::JoinOutcome {
            address: addr(4371),
            result: Err(ConnectError::AuthenticationFailed {
                address: addr(4371)
            })
        }]
    );
    // Backoff 500 ms, then 1 s: no dial before.
    assert_eq!(check.table.tick(check.at(400)), []);
    assert_eq!(check.table.tick(check.at(502)), [Effect::Dial(addr(4371))]);
    assert!(matches!(
        check
            .table
            .dial_failed(addr(4371), refused(4371), check.at(510))
            .as_slice(),
        [Effect::JoinOutcome {
            result: Err(ConnectError::Unreachable { .. }),
            ..
        }]
    ));
    assert_eq!(check.table.tick(check.at(1500)), []);
    assert_eq!(check.table.tick(check.at(1510)), [Effect::Dial(addr(4371))]);
    assert_eq!(check.states(), [("a".into(), MemberState::Local)]);
}

#[test]
fn a_stalled_peer_is_down_after_three_missed_heartbeats_and_comes_back() {
    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[]);
    let seq = Check::heartbeat_seq(&check.table.tick(check.at(500)));
    // The answer to the previous heartbeat came back: a fresh one goes out each tick.
    let effects = check.table.heartbeat_answered(
        &name("b"),
        SessionId(1),
        seq,
        Ok((info("b", 4371), vec![])),
        check.at(501),
    );
    assert_eq!(effects, []);
    Check::heartbeat_seq(&check.table.tick(check.at(1000)));
    // b stops answering: misses at 1.5 s and 2 s, down at 2.5 s.
    assert_eq!(check.table.tick(check.at(1500)), []);
    assert_eq!(check.table.tick(check.at(2000)), []);
    assert_eq!(
        check.table.tick(check.at(2500)),
        [
            Effect::Disconnect {
                session: SessionId(1),
                reason: "heartbeat timeout"
            },
            Effect::Event(MembershipEvent::NodeDown {
                node: name("b"),
                reason: DownReason::HeartbeatTimeout {
                    missed: 3,
                    after: INTERVAL * 3
                }
            }),
        ]
    );
    assert_eq!(
        check.states(),
        [
            ("a".into(), MemberState::Local),
            ("b".into(), MemberState::Down)
        ]
    );
    // Our own close of the session changes nothing more.
    assert_eq!(
        check
            .table
            .session_disconnected(SessionId(1), check.at(2501)),
        []
    );
    // Reconnect after the backoff; b answers again: reconnected.
    assert_eq!(check.table.tick(check.at(3000)), [Effect::Dial(addr(4371))]);
    check
        .table
        .session_opened(SessionId(2), true, Some(addr(4371)), check.at(3001));
    let seq = Check::heartbeat_seq(&check.table.session_ready(
        SessionId(2),
        Some(name("b")),
        Some(addr(4371)),
        true,
        check.at(3002),
    ));
    assert_eq!(
        check.table.heartbeat_answered(
            &name("b"),
            SessionId(2),
            seq,
            Ok((info("b", 4371), vec![])),
            check.at(3003)
        )[0],
        Effect::Event(MembershipEvent::NodeUp {
            node: info("b", 4371),
            reconnected: true
        })
    );
}

#[test]
fn a_lost_session_is_down_at_once_and_failed_answers_count_as_misses() {
    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[]);
    assert_eq!(
        check.table.session_disconnected(SessionId(1), check.at(10)),
        [Effect::Event(MembershipEvent::NodeDown {
            node: name("b"),
            reason: DownReason::ConnectionLost
        })]
    );

    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[]);
    for (n, at) in [(1, 500), (2, 1000), (3, 1500)] {
        let seq = Check::heartbeat_seq(&check.table.tick(check.at(at)));
        let effects = check.table.heartbeat_answered(
            &name("b"),
            SessionId(1),
            seq,
            Err("unreachable".into()),
            check.at(at + 1),
        );
        assert_eq!(effects.is_empty(), n < 3, "{effects:?}");
    }
    assert_eq!(check.states()[1].1, MemberState::Down);
}

#[test]
fn stale_and_mismatched_answers_are_ignored() {
    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[]);
    let seq = Check::heartbeat_seq(&check.table.tick(check.at(500)));
    for (session, answer_seq) in [(SessionId(9), seq), (SessionId(1), seq + 100)] {
        let effects = check.table.heartbeat_answered(
            &name("b"),
            session,
            answer_seq,
            Ok((info("b", 4371), vec![])),
            check.at(501),
        );
        assert_eq!(effects, []);
    }
    // Still in flight: the next tick counts a miss instead of sending another heartbeat.
    assert_eq!(check.table.tick(check.at(1000)), []);
}

#[test]
fn clients_without_an_endpoint_are_not_members() {
    let mut check = Check::new();
    check
        .table
        .session_opened(SessionId(1), false, Some(addr(50000)), check.t0);
    check
        .table
        .session_authenticated(SessionId(1), Some(name("client-1")));
    let effects =
        check
            .table
            .session_ready(SessionId(1), Some(name("client-1")), None, false, check.t0);
    assert_eq!(effects, []);
    assert_eq!(check.table.tick(check.at(500)), []);
    assert_eq!(check.states(), [("a".into(), MemberState::Local)]);
}

#[test]
fn an_inbound_member_is_adopted_and_a_late_endpoint_is_found_by_its_heartbeat() {
    let mut check = Check::new();
    // c connects to us; its endpoint was not visible yet when the session became ready.
    check
        .table
        .session_opened(SessionId(1), false, Some(addr(50000)), check.t0);
    let effects = check.table.session_ready(
        SessionId(1),
        Some(name("c")),
        Some(addr(4372)),
        false,
        check.t0,
    );
    assert_eq!(effects, []);
    // Its heartbeat shows it is a member: adopt the session, do not dial it.
    let effects =
        check
            .table
            .heartbeat_received(&info("c", 4372), &[(name("d"), addr(4373))], check.at(5));
    assert!(
        matches!(
            effects.as_slice(),
            [Effect::Heartbeat { session: SessionId(1), .. }, Effect::Dial(d)] if *d == addr(4373)
        ),
        "{effects:?}"
    );
    assert_eq!(check.states()[1], ("c".into(), MemberState::Connecting));
}

#[test]
fn a_peer_that_left_is_not_redialled() {
    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[]);
    assert_eq!(
        check.table.left(&name("b")),
        [Effect::Event(MembershipEvent::NodeDown {
            node: name("b"),
            reason: DownReason::Left
        })]
    );
    assert_eq!(
        check.table.session_disconnected(SessionId(1), check.at(1)),
        []
    );
    for at in [500, 1000, 5000, 20_000] {
        assert_eq!(check.table.tick(check.at(at)), []);
    }
    assert_eq!(check.states(), [("a".into(), MemberState::Local)]);
}

#[test]
fn a_node_that_accepts_but_never_handshakes_times_out() {
    let mut check = Check::new();
    check.table.join(addr(4371), true, check.t0);
    check
        .table
        .session_opened(SessionId(1), true, Some(addr(4371)), check.at(1));
    assert_eq!(check.table.tick(check.at(2000)), []);
    let effects = check.table.tick(check.at(3001));
    assert!(
        matches!(
            effects.as_slice(),
            [
                Effect::Disconnect {
                    session: SessionId(1),
                    reason: "handshake timeout"
                },
                Effect::JoinOutcome {
                    result: Err(ConnectError::Timeout { .. }),
                    ..
                },
            ]
        ),
        "{effects:?}"
    );
}

#[test]
fn a_replacement_session_keeps_an_up_peer_up() {
    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[]);
    // Simultaneous connect: ractor_cluster elects session 2 and closes session 1.
    check
        .table
        .session_opened(SessionId(2), false, Some(addr(50001)), check.at(1));
    let effects = check.table.session_ready(
        SessionId(2),
        Some(name("b")),
        Some(addr(4371)),
        true,
        check.at(2),
    );
    assert_eq!(effects, []);
    assert_eq!(
        check.table.session_disconnected(SessionId(1), check.at(3)),
        []
    );
    assert_eq!(check.table.session_of(&name("b")), Some(SessionId(2)));
    assert_eq!(check.states()[1].1, MemberState::Up);
}

#[test]
fn a_long_dead_peer_is_forgotten() {
    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[]);
    check.table.session_disconnected(SessionId(1), check.at(0));
    let forget = MembershipSettings::default().forget_after;
    let later = check.t0 + forget;
    assert_eq!(check.table.tick(later), []);
    assert_eq!(check.states(), [("a".into(), MemberState::Local)]);
    assert_eq!(check.table.tick(later + INTERVAL), []);
}

#[test]
fn gossiped_and_one_off_dials_get_one_attempt() {
    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[("c", 4372)]);
    // c was gossiped and is dialled once: refused, it is dropped.
    assert!(matches!(
        check
            .table
            .dial_failed(addr(4372), refused(4372), check.at(1))
            .as_slice(),
        [Effect::JoinOutcome { result: Err(_), .. }]
    ));
    // A one-off join fails the same way.
    assert_eq!(
        check.table.join(addr(4373), false, check.at(2)),
        [Effect::Dial(addr(4373))]
    );
    check
        .table
        .dial_failed(addr(4373), refused(4373), check.at(3));
    for at in [1000, 5000, 60_000] {
        let effects = check.table.tick(check.at(at));
        assert!(
            effects.iter().all(|e| !matches!(e, Effect::Dial(_))),
            "{effects:?}"
        );
    }
}

#[test]
fn a_draining_peer_is_published_once_shown_draining_and_forgotten_as_such_when_down() {
    let mut check = Check::new();
    check.bring_up("b", 4371, 1, &[]);
    let mut draining = info("b", 4371);
    draining.draining = true;
    // Its heartbeat says it drains: one event, then nothing more on the next heartbeat.
    assert_eq!(
        check.table.heartbeat_received(&draining, &[], check.at(1)),
        [Effect::Event(MembershipEvent::NodeDraining {
            node: name("b")
        })]
    );
    assert_eq!(
        check.table.heartbeat_received(&draining, &[], check.at(2)),
        []
    );
    assert_eq!(check.states()[1], ("b".into(), MemberState::Draining));
    assert_eq!(check.table.draining_nodes(), [name("b")]);
    // This node drains too: its own row and what it tells peers say so.
    check.table.set_draining();
    assert_eq!(check.states()[0], ("a".into(), MemberState::Draining));
    assert!(check.table.me().draining);
    // Down, then back as a new process that does not drain: up again, not draining.
    check.table.session_disconnected(SessionId(1), check.at(3));
    assert_eq!(check.table.draining_nodes(), []);
    let effects = check.table.tick(check.at(1000));
    assert!(effects.contains(&Effect::Dial(addr(4371))), "{effects:?}");
    check
        .table
        .session_opened(SessionId(2), true, Some(addr(4371)), check.at(1001));
    check
        .table
        .session_authenticated(SessionId(2), Some(name("b")));
    let effects = check.table.session_ready(
        SessionId(2),
        Some(name("b")),
        Some(addr(4371)),
        true,
        check.at(1002),
    );
    let seq = Check::heartbeat_seq(&effects);
    let effects = check.table.heartbeat_answered(
        &name("b"),
        SessionId(2),
        seq,
        Ok((info("b", 4371), Vec::new())),
        check.at(1003),
    );
    assert!(
        effects
            .iter()
            .all(|e| !matches!(e, Effect::Event(MembershipEvent::NodeDraining { .. }))),
        "{effects:?}"
    );
    assert_eq!(check.states()[1], ("b".into(), MemberState::Up));
}
