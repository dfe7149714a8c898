//! The transport's pure parts: escaping, log limits, penalties and caps, the preamble codec,
//! connection labels; the guard over in-memory streams (frame limit, handshake checks,
//! deadline, pass-through once authenticated); TLS identities and the sorting of handshake
//! failures, over in-memory pipes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use prost::Message as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::guard::{
    Auth, AuthenticationMessage, Challenge, Closer, GuardedRead, Kind, NameMessage, NetworkMessage,
};
use super::limits::{Admission, Refusal, address_key, penalty_after};
use super::log::{LogLimit, MAX_LOGGED_CHARS, peer_text};
use super::preamble::{Answer, BusyScope, Hello, PreambleError, Status, VERSION};
use super::*;

// ---------------------------------------------------------------- escaping and log limits

#[test]
fn peer_text_escapes_and_cuts() {
    assert_eq!(peer_text("a@127.0.0.1"), r#""a@127.0.0.1""#);
    assert_eq!(peer_text(b"a\nb\"c\\\x00\xff"), r#""a\nb\"c\\\x00\xff""#);
    // A 60 KiB name: at most 64 characters of it, and its length.
    let long = vec![b'x'; 60 * 1024];
    let text = peer_text(&long);
    assert_eq!(text, format!("\"{}\"... (61440 bytes)", "x".repeat(64)));
    // Escapes count as what they print: never past the limit, never half an escape.
    let text = peer_text(vec![0u8; 100]);
    let inside = text.split('"').nth(1).unwrap();
    assert!(inside.len() <= MAX_LOGGED_CHARS, "{text}");
    assert_eq!(inside.len() % 4, 0, "{text}");
    assert!(text.ends_with("(100 bytes)"), "{text}");
    assert!(
        text.chars().all(|c| c.is_ascii_graphic() || c == ' '),
        "{text}"
    );
}

#[test]
fn log_limit_allows_a_few_lines_a_second_and_counts_the_rest() {
    let t0 = Instant::now();
    let mut limit = LogLimit::new(2);
    assert_eq!(limit.allow(t0), Some(0));
    assert_eq!(limit.allow(t0), Some(0));
    for _ in 0..1000 {
        assert_eq!(limit.allow(t0 + Duration::from_millis(500)), None);
    }
    assert_eq!(limit.allow(t0 + Duration::from_millis(1000)), Some(1000));
    assert_eq!(limit.allow(t0 + Duration::from_millis(1001)), Some(0));
    assert_eq!(limit.allow(t0 + Duration::from_millis(1002)), None);
}

// ---------------------------------------------------------------- admission

fn settings() -> TransportSettings {
    TransportSettings {
        max_unauthenticated: 5,
        max_unauthenticated_per_address: 2,
        ..TransportSettings::default()
    }
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

#[test]
fn penalty_grows_after_the_grace_doubling_up_to_the_cap() {
    let settings = TransportSettings::default();
    let ms = |failures| penalty_after(failures, &settings).as_millis();
    assert_eq!([ms(0), ms(1), ms(2), ms(3)], [0, 0, 0, 0]);
    assert_eq!([ms(4), ms(5), ms(6), ms(9)], [100, 200, 400, 3200]);
    assert_eq!(ms(13), 30_000);
    assert_eq!(ms(u32::MAX), 30_000);
}

#[test]
fn caps_refuse_per_address_then_per_node_and_release_frees_them() {
    let t0 = Instant::now();
    let mut admission = Admission::new(settings());
    assert_eq!(admission.admit(ip(1), t0), Ok(()));
    assert_eq!(admission.admit(ip(1), t0), Ok(()));
    assert_eq!(
        admission.admit(ip(1), t0),
        Err(Refusal::Busy {
            scope: BusyScope::Address,
            limit: 2
        })
    );
    for last in 2..=4 {
        assert_eq!(admission.admit(ip(last), t0), Ok(()));
    }
    assert_eq!(
        admission.admit(ip(9), t0),
        Err(Refusal::Busy {
            scope: BusyScope::Node,
            limit: 5
        })
    );
    assert_eq!(admission.unauthenticated(), 5);
    admission.release(ip(1));
    assert_eq!(admission.admit(ip(9), t0), Ok(()));
    assert_eq!(admission.admit(ip(1), t0).unwrap_err().clone(), {
        Refusal::Busy {
            scope: BusyScope::Node,
            limit: 5,
        }
    });
}

#[test]
fn failures_throttle_the_address_until_the_penalty_ends_or_a_success() {
    let t0 = Instant::now();
    let mut admission = Admission::new(settings());
    for _ in 0..3 {
        assert_eq!(admission.failed(ip(1), t0), Duration::ZERO);
    }
    assert_eq!(admission.admit(ip(1), t0), Ok(()));
    admission.release(ip(1));
    assert_eq!(admission.failed(ip(1), t0), Duration::from_millis(100));
    assert_eq!(
        admission.admit(ip(1), t0 + Duration::from_millis(40)),
        Err(Refusal::Throttled {
            retry_after: Duration::from_millis(60),
            failures: 4
        })
    );
    // Another address is not concerned; the penalty ends by itself.
    assert_eq!(admission.admit(ip(2), t0), Ok(()));
    let later = t0 + Duration::from_millis(100);
    assert_eq!(admission.admit(ip(1), later), Ok(()));
    // It doubles; a success lifts it and the count starts again.
    assert_eq!(admission.failed(ip(1), later), Duration::from_millis(200));
    admission.succeeded(ip(1));
    assert_eq!(admission.admit(ip(1), later), Ok(()));
    assert_eq!(admission.failed(ip(1), later), Duration::ZERO);
}

#[test]
fn ipv6_addresses_count_by_their_64_prefix_and_mapped_ipv4_as_ipv4() {
    let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
    let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
    let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
    assert_eq!(address_key(a), address_key(b));
    assert_ne!(address_key(a), address_key(c));
    let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
    assert_eq!(address_key(mapped), ip(1));
    assert_eq!(
        address_key(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        "::".parse::<IpAddr>().unwrap()
    );
}

// ---------------------------------------------------------------- preamble

fn name(text: &str) -> NodeName {
    text.parse().unwrap()
}

#[test]
fn hello_round_trips_and_parses_only_when_complete() {
    let hello = Hello::new(&name("a@127.0.0.1"), 0x0102_0304_0506_0708);
    let bytes = hello.encode();
    assert_eq!(&bytes[..4], b"BYCL");
    assert_eq!(bytes.len(), 15 + 11);
    for cut in 0..bytes.len() {
        assert_eq!(Hello::parse(&bytes[..cut]), Ok(None), "{cut} bytes");
    }
    assert_eq!(Hello::parse(&bytes), Ok(Some((hello, bytes.len()))));
}

#[test]
fn a_hello_that_is_not_one_is_refused_early() {
    // A TLS ClientHello record.
    assert_eq!(
        Hello::parse(&[0x16, 0x03, 0x01]),
        Err(PreambleError::BadMagic {
            first: vec![0x16, 0x03, 0x01],
            tls: true
        })
    );
    assert!(matches!(
        Hello::parse(b"GET / HTTP/1.1"),
        Err(PreambleError::BadMagic { tls: false, .. })
    ));
    // Another version: refused as soon as the version is read, whatever follows.
    let mut other = Hello::new(&name("a@h"), 1).encode();
    other[5] = 9;
    assert_eq!(
        Hello::parse(&other[..6]),
        Err(PreambleError::Version { theirs: 9 })
    );
    // A name over the limit is cut when encoded (node names are shorter).
    let long = Hello {
        version: VERSION,
        incarnation: 1,
        name: vec![b'n'; 1000],
    };
    let (parsed, _) = Hello::parse(&long.encode()).unwrap().unwrap();
    assert_eq!(parsed.name.len(), 255);
}

#[test]
fn every_status_round_trips() {
    let statuses = [
        Status::Ok {
            incarnation: 7,
            name: b"b@127.0.0.1".to_vec(),
        },
        Status::NameInUse {
            name: b"b@127.0.0.1".to_vec(),
            connected_from: b"127.0.0.1:5000".to_vec(),
        },
        Status::NameInUse {
            name: b"b@127.0.0.1".to_vec(),
            connected_from: Vec::new(),
        },
        Status::Busy {
            scope: BusyScope::Address,
            limit: 16,
        },
        Status::Busy {
            scope: BusyScope::Node,
            limit: 256,
        },
        Status::Throttled {
            retry_after: Duration::from_millis(1600),
            failures: 8,
        },
        Status::TlsRequired,
        Status::TlsUnsupported,
        Status::VersionMismatch,
        Status::BadHello,
        Status::UnknownLink,
    ];
    for status in statuses {
        let bytes = status.encode();
        for cut in 0..bytes.len() {
            assert_eq!(
                Status::parse(&bytes[..cut]),
                Ok(None),
                "{status:?} cut at {cut}"
            );
        }
        let answer = Answer {
            version: VERSION,
            status: status.clone(),
        };
        assert_eq!(Status::parse(&bytes), Ok(Some((answer, bytes.len()))));
    }
}

#[test]
fn a_malformed_status_is_an_error() {
    let mut unknown = Status::TlsRequired.encode();
    unknown[6] = 200;
    assert_eq!(
        Status::parse(&unknown),
        Err(PreambleError::UnknownCode { code: 200 })
    );
    // A payload length over the bound is refused before the payload is read.
    let mut huge = Status::TlsRequired.encode();
    huge[7..9].copy_from_slice(&u16::MAX.to_be_bytes());
    assert!(matches!(
        Status::parse(&huge),
        Err(PreambleError::BadPayload { len: 65535, .. })
    ));
    // A payload too short for its code.
    let mut short = Status::TlsRequired.encode();
    short[6] = 3;
    assert!(matches!(
        Status::parse(&short),
        Err(PreambleError::BadPayload { code: 3, len: 0 })
    ));
    // Another version's status still parses: a version mismatch is reported as such.
    let mut other = Status::VersionMismatch.encode();
    other[5] = 2;
    assert_eq!(Status::parse(&other).unwrap().unwrap().0.version, 2);
}

#[test]
fn labels_carry_the_socket_address_and_the_connection() {
    assert_eq!(
        label_address("127.0.0.1:4370#12"),
        Some("127.0.0.1:4370".parse().unwrap())
    );
    assert_eq!(
        label_address("[::1]:4370#3"),
        Some("[::1]:4370".parse().unwrap())
    );
    assert_eq!(
        label_address("127.0.0.1:4370"),
        Some("127.0.0.1:4370".parse().unwrap())
    );
    assert_eq!(label_address("external"), None);
    assert_eq!(label_id("[::1]:4370#3"), Some(3));
    assert_eq!(label_id("127.0.0.1:4370"), None);
}

// ---------------------------------------------------------------- the guard

fn frame(message: &NetworkMessage) -> Vec<u8> {
    let body = message.encode_to_vec();
    let mut bytes = (body.len() as u64).to_be_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes
}

fn auth(auth: Auth) -> Vec<u8> {
    frame(&NetworkMessage {
        kind: Some(Kind::Auth(AuthenticationMessage { msg: Some(auth) })),
    })
}

fn name_frame(name: &str, connection_string: &str) -> Vec<u8> {
    auth(Auth::Name(NameMessage {
        name: name.to_owned(),
        connection_string: connection_string.to_owned(),
    }))
}

fn node_frame(len: usize) -> Vec<u8> {
    frame(&NetworkMessage {
        kind: Some(Kind::Node(vec![7; len])),
    })
}

struct GuardCheck {
    transport: Transport,
    connection: Arc<Connection>,
    /// What the peer writes.
    peer: tokio::io::DuplexStream,
    guard: GuardedRead,
}

/// A guard over an in-memory pipe for a connection from `b@127.0.0.1` (`inbound`) or to it.
fn guard(inbound: bool, deadline: Duration) -> GuardCheck {
    let transport = Transport::new(name("a@127.0.0.1"), TransportSettings::default(), None);
    let peer_addr = SocketAddr::from((Ipv4Addr::new(10, 0, 0, 9), 5000));
    let ticket =
        inbound.then(|| Ticket::admit(&transport.shared, peer_addr.ip(), Instant::now()).unwrap());
    let connection = transport
        .shared
        .register(peer_addr, name("b@127.0.0.1"), 1, ticket);
    let (peer, ours) = tokio::io::duplex(1 << 20);
    let guard = GuardedRead::new(
        Box::new(ours),
        Closer(Arc::clone(&connection)),
        Instant::now() + deadline,
    );
    GuardCheck {
        transport,
        connection,
        peer,
        guard,
    }
}

impl GuardCheck {
    /// What the guard hands on until it ends the stream (or `limit` of the test clock).
    async fn read_to_end(&mut self, limit: Duration) -> Vec<u8> {
        let mut out = Vec::new();
        tokio::time::timeout(limit, self.guard.read_to_end(&mut out))
            .await
            .expect("the guard ends the stream")
            .unwrap();
        out
    }

    fn failure(&self) -> Option<String> {
        self.connection.progress().failure.clone()
    }
}

#[tokio::test]
async fn handshake_frames_pass_unchanged_until_the_peer_closes() {
    let mut check = guard(true, Duration::from_secs(5));
    let mut sent = name_frame("b@127.0.0.1", "127.0.0.1:4371");
    sent.extend(auth(Auth::ClientChallenge(vec![1; 36])));
    check.peer.write_all(&sent).await.unwrap();
    drop(check.peer);
    let mut out = Vec::new();
    check.guard.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, sent);
    assert_eq!(check.connection.progress().failure, None);
    assert!(check.connection.final_seen());
}

#[tokio::test]
async fn a_large_length_prefix_closes_before_anything_is_allocated() {
    let mut check = guard(true, Duration::from_secs(5));
    let mut sent = (60u64 << 20).to_be_bytes().to_vec();
    sent.extend_from_slice(&[0; 1000]);
    check.peer.write_all(&sent).await.unwrap();
    // The peer keeps its end open: the guard ends the stream by itself.
    let out = check.read_to_end(Duration::from_secs(1)).await;
    assert!(out.is_empty());
    let failure = check.failure().unwrap();
    assert!(failure.contains("a frame of 62914560 bytes"), "{failure}");
    // Just over the limit too.
    let mut check = guard(true, Duration::from_secs(5));
    let header = (PREAUTH_FRAME_BYTES + 1).to_be_bytes();
    check.peer.write_all(&header).await.unwrap();
    assert!(check.read_to_end(Duration::from_secs(1)).await.is_empty());
    assert!(check.failure().is_some());
}

#[tokio::test]
async fn a_name_other_than_the_announced_one_or_a_dirty_address_closes() {
    for (name, address) in [
        ("c@127.0.0.1", "127.0.0.1:4371"),
        ("b@127.0.0.1", "127.0.0.1:4371\n[fake log line]"),
        ("b@127.0.0.1", ""),
    ] {
        let mut check = guard(true, Duration::from_secs(5));
        check
            .peer
            .write_all(&name_frame(name, address))
            .await
            .unwrap();
        assert!(check.read_to_end(Duration::from_secs(1)).await.is_empty());
        let failure = check.failure().unwrap();
        assert!(!failure.contains('\n'), "{failure}");
    }
    // A 60 KiB name in a frame under the limit: refused, and only a cut, escaped piece of it
    // in the reason.
    let mut check = guard(true, Duration::from_secs(5));
    let huge = format!("{}@127.0.0.1", "x".repeat(60 * 1024));
    check
        .peer
        .write_all(&name_frame(&huge, "127.0.0.1:1"))
        .await
        .unwrap();
    assert!(check.read_to_end(Duration::from_secs(1)).await.is_empty());
    let failure = check.failure().unwrap();
    assert!(failure.len() < 300, "{failure}");
}

#[tokio::test]
async fn only_the_peer_sides_handshake_messages_pass_before_authentication() {
    // A dialler may not send a server's challenge, nor cluster messages before its reply.
    for sent in [
        auth(Auth::ServerChallenge(Challenge {
            name: "b@127.0.0.1".into(),
            connection_string: "127.0.0.1:1".into(),
        })),
        node_frame(10),
        frame(&NetworkMessage { kind: None }),
        b"\x00\x00\x00\x00\x00\x00\x00\x03\xff\xff\xff".to_vec(),
    ] {
        let mut check = guard(true, Duration::from_secs(5));
        check.peer.write_all(&sent).await.unwrap();
        assert!(check.read_to_end(Duration::from_secs(1)).await.is_empty());
        assert!(check.failure().is_some(), "{sent:?}");
    }
    // A node's challenge naming another node closes an outbound connection.
    let mut check = guard(false, Duration::from_secs(5));
    let challenge = auth(Auth::ServerChallenge(Challenge {
        name: "c@127.0.0.1".into(),
        connection_string: "127.0.0.1:1".into(),
    }));
    check.peer.write_all(&challenge).await.unwrap();
    assert!(check.read_to_end(Duration::from_secs(1)).await.is_empty());
    assert!(!check.connection.progress().challenge_seen);
    // A flood of small handshake frames is cut.
    let mut check = guard(true, Duration::from_secs(5));
    let status = auth(Auth::ClientStatus(vec![8, 1]));
    check.peer.write_all(&status.repeat(20)).await.unwrap();
    let out = check.read_to_end(Duration::from_secs(1)).await;
    assert_eq!(out, status.repeat(MAX_PREAUTH_FRAMES as usize));
}

#[tokio::test(start_paused = true)]
async fn an_idle_or_trickling_peer_is_closed_at_the_deadline() {
    let mut check = guard(true, Duration::from_secs(5));
    let started = Instant::now();
    // Three bytes of a header, then nothing.
    check.peer.write_all(&[0, 0, 0]).await.unwrap();
    let out = check.read_to_end(Duration::from_secs(60)).await;
    assert!(out.is_empty());
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(
        check.failure().as_deref(),
        Some("the handshake deadline passed")
    );
}

#[tokio::test(start_paused = true)]
async fn a_large_frame_after_the_handshake_waits_for_authentication() {
    let mut check = guard(false, Duration::from_secs(5));
    let challenge = auth(Auth::ServerChallenge(Challenge {
        name: "b@127.0.0.1".into(),
        connection_string: "127.0.0.1:4371".into(),
    }));
    let ack = auth(Auth::ServerAck(vec![3; 32]));
    let big = node_frame(200 * 1024);
    let mut sent = challenge.clone();
    sent.extend_from_slice(&ack);
    sent.extend_from_slice(&big);
    check.peer.write_all(&sent).await.unwrap();
    let mut first = vec![0u8; challenge.len() + ack.len()];
    check.guard.read_exact(&mut first).await.unwrap();
    assert!(check.connection.progress().challenge_seen);
    // The big frame is held while the session is not authenticated...
    let mut byte = [0u8; 1];
    let held = tokio::time::timeout(Duration::from_secs(1), check.guard.read(&mut byte)).await;
    assert!(held.is_err(), "nothing passes before authentication");
    // ...and goes through, whole, once it is.
    check.transport.shared.authenticated(check.connection.id);
    drop(check.peer);
    let mut rest = Vec::new();
    check.guard.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, big);
    assert_eq!(check.connection.progress().failure, None);
}

#[tokio::test]
async fn authenticated_connections_pass_frames_of_any_size() {
    let mut check = guard(true, Duration::from_secs(5));
    check.transport.shared.authenticated(check.connection.id);
    let big = node_frame(3 << 20);
    let writer = tokio::spawn(async move {
        check.peer.write_all(&big).await.unwrap();
        big
    });
    let mut out = Vec::new();
    check.guard.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, writer.await.unwrap());
}

#[tokio::test]
async fn the_guard_counts_connections_and_failed_handshakes() {
    let check = guard(true, Duration::from_secs(5));
    let shared = Arc::clone(&check.transport.shared);
    assert_eq!(check.transport.unauthenticated(), 1);
    check.connection.fail("a test".into());
    drop(check.guard);
    assert_eq!(check.transport.unauthenticated(), 0);
    assert!(shared.lock().connections.is_empty());
    // Three more failures: past the grace, the address is throttled.
    let peer = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9));
    for _ in 0..3 {
        let ticket = Ticket::admit(&shared, peer, Instant::now()).unwrap();
        ticket.fail();
    }
    assert!(matches!(
        Ticket::admit(&shared, peer, Instant::now()),
        Err(Refusal::Throttled { failures: 4, .. })
    ));
    // An authenticated session releases its count at once and lifts the penalty.
    let other = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 10));
    let ticket = Ticket::admit(&shared, other, Instant::now()).unwrap();
    let connection = shared.register(SocketAddr::new(other, 1), name("c@h"), 1, Some(ticket));
    assert_eq!(check.transport.unauthenticated(), 1);
    shared.authenticated(connection.id);
    assert_eq!(check.transport.unauthenticated(), 0);
}

#[tokio::test]
async fn a_name_is_in_use_when_another_live_process_holds_it() {
    let transport = Transport::new(name("a@127.0.0.1"), TransportSettings::default(), None);
    let shared = &transport.shared;
    let me = shared.incarnation;
    // This node's own name: in use for another process, a self-connection for this one.
    assert_eq!(
        shared.name_in_use(&name("a@127.0.0.1"), me + 1),
        Some(String::new())
    );
    assert_eq!(shared.name_in_use(&name("a@127.0.0.1"), me), None);
    let peer = SocketAddr::from(([127, 0, 0, 1], 4371));
    let connection = shared.register(peer, name("b@127.0.0.1"), 42, None);
    // Not yet authenticated: not in use.
    assert_eq!(shared.name_in_use(&name("b@127.0.0.1"), 43), None);
    shared.authenticated(connection.id);
    assert_eq!(
        shared.name_in_use(&name("b@127.0.0.1"), 43),
        Some("127.0.0.1:4371".to_owned())
    );
    // The same process connecting again (simultaneous dials, a second session) is not.
    assert_eq!(shared.name_in_use(&name("b@127.0.0.1"), 42), None);
    connection.closed();
    assert_eq!(shared.name_in_use(&name("b@127.0.0.1"), 43), None);
}

// ---------------------------------------------------------------- TLS

struct Pki {
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_pem: String,
}

impl Pki {
    fn new() -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test CA");
        let cert = params.self_signed(&key).unwrap();
        Self {
            ca_pem: cert.pem(),
            ca: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate for 127.0.0.1, valid now unless `expired`.
    fn identity(&self, expired: bool) -> TlsIdentity {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &self.ca).unwrap();
        TlsIdentity::from_pem(
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
            self.ca_pem.as_bytes(),
        )
        .unwrap()
    }
}

/// A TLS handshake over an in-memory pipe; the dialler then reads one byte, where a node's
/// refusal of its certificate shows (TLS 1.3). Returns the dialler's error, sorted, and the
/// node's, described.
async fn handshake(
    node: &TlsIdentity,
    dialler: &TlsIdentity,
) -> (Option<TlsProblem>, Option<String>) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let accept = tokio::spawn({
        let acceptor = node.acceptor();
        async move {
            match acceptor.accept(a).await {
                Ok(mut stream) => {
                    let _ = stream.write_all(b"!").await;
                    let _ = stream.flush().await;
                    None
                }
                Err(error) => Some(tls::describe_accept_error(&error)),
            }
        }
    });
    let name = tls::server_name(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let dialled = match dialler.connector().connect(name, b).await {
        Ok(mut stream) => {
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).await.err()
        }
        Err(error) => Some(error),
    };
    let accepted = accept.await.unwrap();
    (
        dialled.map(|error| tls::classify_dial_error(&error).expect("a rustls error")),
        accepted,
    )
}

#[tokio::test]
async fn tls_refusals_say_which_certificate_and_why() {
    let pki = Pki::new();
    let other = Pki::new();
    let good = pki.identity(false);
    assert_eq!(handshake(&good, &pki.identity(false)).await, (None, None));

    // A dialler from another cluster: the node refuses its certificate, both say so.
    let (dialler, node) = handshake(&good, &other.identity(false)).await;
    assert_eq!(dialler, Some(TlsProblem::NodeCertificateUnknownIssuer));
    assert!(node.is_some());
    let (dialler, node) = handshake(&other.identity(false), &good).await;
    assert_eq!(dialler, Some(TlsProblem::NodeCertificateUnknownIssuer));
    assert!(node.unwrap().contains("refused this node's certificate"));

    // Expired certificates, either side.
    let (dialler, node) = handshake(&pki.identity(true), &good).await;
    assert_eq!(dialler, Some(TlsProblem::NodeCertificateExpired));
    assert!(node.is_some());
    let (dialler, node) = handshake(&good, &pki.identity(true)).await;
    assert_eq!(dialler, Some(TlsProblem::OurCertificateExpired));
    assert_eq!(
        node.as_deref(),
        Some("its certificate has expired (or is not valid yet)")
    );
}

#[test]
fn tls_identities_refuse_bad_pem_clearly() {
    let pki = Pki::new();
    assert_eq!(
        TlsIdentity::from_pem(b"", b"", pki.ca_pem.as_bytes()).unwrap_err(),
        TlsError::NoCertificate {
            what: "certificate"
        }
    );
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["x".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    assert!(matches!(
        TlsIdentity::from_pem(cert.pem().as_bytes(), b"no key here", pki.ca_pem.as_bytes()),
        Err(TlsError::BadPem {
            what: "private key",
            ..
        })
    ));
    // A key that is not the certificate's.
    let stranger = rcgen::KeyPair::generate().unwrap();
    assert!(matches!(
        TlsIdentity::from_pem(
            cert.pem().as_bytes(),
            stranger.serialize_pem().as_bytes(),
            pki.ca_pem.as_bytes()
        ),
        Err(TlsError::Config { .. })
    ));
    assert!(format!("{:?}", pki.identity(false)).contains(".."));
}

// ---------------------------------------------------------------- errors on the wire

#[test]
fn every_refusal_survives_a_remote_join_answer() {
    use crate::session::ConnectError;
    use crate::wire::{Envelope, MembershipReply};

    let address = SocketAddr::from(([10, 0, 0, 3], 4370));
    let errors = [
        ConnectError::NameInUse {
            address,
            name: name("b@10.0.0.2"),
            holder: Some("10.0.0.2:40000".into()),
        },
        ConnectError::NameInUse {
            address,
            name: name("b@10.0.0.2"),
            holder: None,
        },
        ConnectError::Busy {
            address,
            per_address: true,
            limit: 16,
        },
        ConnectError::Throttled {
            address,
            retry_after: Duration::from_millis(1600),
            failures: 8,
        },
        ConnectError::TlsRequired { address },
        ConnectError::TlsUnsupported { address },
        ConnectError::Tls {
            address,
            problem: TlsProblem::OurCertificateExpired,
        },
        ConnectError::Tls {
            address,
            problem: TlsProblem::OurCertificateRefused {
                alert: "BadCertificate".into(),
            },
        },
        ConnectError::VersionMismatch { address, theirs: 2 },
        ConnectError::AuthenticationFailed { address },
    ];
    for error in errors {
        let reply = MembershipReply::JoinFailed {
            error: error.to_wire(),
        };
        let bytes = Envelope::new(crate::RequestId(1), &name("a@h"), reply)
            .encode()
            .unwrap();
        let MembershipReply::JoinFailed { error: wire } =
            Envelope::<MembershipReply>::decode(&bytes).unwrap().body
        else {
            panic!("not a join failure");
        };
        let fallback = SocketAddr::from(([127, 0, 0, 1], 1));
        assert_eq!(ConnectError::from_wire(wire, fallback), error);
    }
    // What the user reads names the problem, not a cookie.
    let in_use = ConnectError::NameInUse {
        address,
        name: name("b@10.0.0.2"),
        holder: Some("10.0.0.2:40000".into()),
    };
    assert_eq!(
        in_use.to_string(),
        "the name b@10.0.0.2 is already in use in the cluster (a live node connected from 10.0.0.2:40000); start this node with another --name"
    );
}
