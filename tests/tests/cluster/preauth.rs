//! Before authentication: what an unauthenticated peer can make a node do. Partial frames and
//! idle connections are closed by the handshake deadline with the node's memory bounded;
//! oversized frames, garbage and a huge node name are closed at once and never reach the
//! log; an EMFILE storm neither spins the accept loop nor floods the log; failed handshakes
//! slow their address down until the penalty ends; a name in use is refused as such; a job
//! link opened with a wrong token is refused and counts as a failed handshake.
//!
//! Raw peers connect from other loopback addresses (127.0.0.2, ...), so that the per-address
//! caps and penalties they trip do not hold back the test's own `cluster-cli` commands, which
//! come from 127.0.0.1.

use std::io::Write;
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use runtime::transport::preamble::{LINK_TOKEN_BYTES, LinkHello, Status, VERSION};
use workspace_tests::cluster::{Cluster, NodeOptions, NodeProcess};
use workspace_tests::process::wait_until;
use workspace_tests::raw::{
    admitted, connect_from, cpu_seconds, hello, name_frame, open_files, rss_kib, wait_closed,
};

const LIMIT: Duration = Duration::from_secs(15);
/// The handshake deadline (the default) and slack for a busy machine.
const DEADLINE: Duration = Duration::from_secs(5);
const SLACK: Duration = Duration::from_secs(3);

fn source(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, n)
}

/// Lines of the node's log so far, and the longest one.
fn log_size(node: &NodeProcess) -> (usize, usize) {
    let lines = node.process.lines();
    let longest = lines.iter().map(String::len).max().unwrap_or(0);
    (lines.len(), longest)
}

#[test]
fn preauth_partial_frames_and_idle_connections_close_by_the_deadline_with_memory_bounded() {
    let cluster = Cluster::new("preauth-deadline");
    let a = cluster.node("a", &[]);
    let pid = a.process.pid();
    let rss_before = rss_kib(pid);
    let started = Instant::now();
    let mut held: Vec<(&str, TcpStream)> = Vec::new();
    // Six kinds of unauthenticated peer, four of each, from four addresses (the default cap
    // is 16 per address).
    for i in 0..4u8 {
        let from = source(2 + i);
        // Nothing at all.
        held.push(("idle", connect_from(from, a.address).unwrap()));
        // A hello, then nothing.
        held.push(("hello only", admitted(from, a.address, "x@127.0.0.2")));
        // A hello, then half of a frame under the limit.
        let mut half = admitted(from, a.address, "x@127.0.0.2");
        half.write_all(&60_000u64.to_be_bytes()).unwrap();
        half.write_all(&[0x0a; 1000]).unwrap();
        held.push(("half a small frame", half));
        // Admitted before any of this address's connections fails a handshake: each failure
        // below adds to the address's penalty, and a later hello could be throttled.
        let mut large = admitted(from, a.address, "x@127.0.0.2");
        let mut over = admitted(from, a.address, "x@127.0.0.2");
        // A hello, then the start of a 60 MiB frame: closed at once.
        large.write_all(&(60u64 << 20).to_be_bytes()).unwrap();
        let _ = large.write_all(&[0x0a; 64 * 1024]);
        held.push(("60 MiB frame", large));
        // No hello, the start of a 60 MiB frame (ractor_cluster's framing): closed at once.
        let mut raw = connect_from(from, a.address).unwrap();
        raw.write_all(&(60u64 << 20).to_be_bytes()).unwrap();
        let _ = raw.write_all(&[0x0a; 64 * 1024]);
        held.push(("60 MiB frame without hello", raw));
        // Just over the pre-authentication frame limit: closed at once.
        over.write_all(&(64u64 * 1024 + 1).to_be_bytes()).unwrap();
        held.push(("frame of 64 KiB + 1", over));
    }
    // Oversized frames and garbage are closed at once, long before the deadline...
    let (mut at_once, mut by_deadline): (Vec<_>, Vec<_>) = held
        .into_iter()
        .partition(|(kind, _)| kind.contains("MiB") || kind.contains("64 KiB"));
    for (kind, stream) in &mut at_once {
        let closed = wait_closed(stream, started + Duration::from_secs(3));
        assert!(closed.is_ok(), "{kind}: {closed:?}");
    }
    // ...the others by the deadline.
    for (kind, stream) in &mut by_deadline {
        let closed = wait_closed(stream, started + DEADLINE + SLACK);
        assert!(closed.is_ok(), "{kind}: {closed:?}");
    }
    assert!(started.elapsed() >= DEADLINE - Duration::from_millis(500));
    let growth_mb = rss_kib(pid).saturating_sub(rss_before) / 1024;
    assert!(growth_mb < 100, "RSS grew by {growth_mb} MB");
    a.process
        .wait_for_line("a frame of 62914560 bytes (at most 65536", LIMIT)
        .unwrap();
    a.process
        .wait_for_line("before authentication: no hello within 5s", LIMIT)
        .unwrap();
    // The node is fine: a command from 127.0.0.1 works.
    let rows = cluster.status(&a).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
}

#[test]
fn preauth_a_huge_node_name_never_reaches_the_log() {
    let cluster = Cluster::new("preauth-name");
    let a = cluster.node("a", &[]);
    let deadline = Instant::now() + LIMIT;
    let huge = "x".repeat(60 * 1024);
    // In the hello: the name field holds at most 255 bytes; not a node name, refused.
    let mut stream = connect_from(source(2), a.address).unwrap();
    let mut bad_hello = b"BYCL\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\xff".to_vec();
    bad_hello.extend_from_slice(&[b'\n'; 255]);
    stream.write_all(&bad_hello).unwrap();
    wait_closed(&mut stream, deadline).unwrap();
    // In the handshake, after a valid hello: a 60 KiB name (under the frame limit).
    let mut stream = admitted(source(3), a.address, "x@127.0.0.3");
    let frame = name_frame(format!("{huge}@127.0.0.3").as_bytes(), b"127.0.0.3:1");
    stream.write_all(&frame).unwrap();
    wait_closed(&mut stream, deadline).unwrap();
    // In a frame of 60 MiB: closed before it is read.
    let mut stream = admitted(source(4), a.address, "x@127.0.0.4");
    let frame = name_frame("y".repeat(60 << 20).as_bytes(), b"127.0.0.4:1");
    let _ = stream.write_all(&frame[..1 << 20]);
    wait_closed(&mut stream, deadline).unwrap();
    // A name with a line break and a fake log line in the address.
    let mut stream = admitted(source(5), a.address, "x@127.0.0.5");
    let frame = name_frame(b"x@127.0.0.5", b"1.2.3.4:1\nERROR forged line");
    stream.write_all(&frame).unwrap();
    wait_closed(&mut stream, deadline).unwrap();

    a.process.wait_for_line("its hello names", LIMIT).unwrap();
    a.process
        .wait_for_line("its handshake names \"xxxxxxxx", LIMIT)
        .unwrap();
    a.process
        .wait_for_line("its handshake gives the address \"1.2.3.4:1\\nERROR", LIMIT)
        .unwrap();
    let lines = a.process.lines();
    let (count, longest) = log_size(&a);
    assert!(
        longest < 400,
        "a line of {longest} characters:\n{}",
        lines.join("\n")
    );
    assert!(count < 30, "{count} lines:\n{}", lines.join("\n"));
    assert!(
        !lines.iter().any(|l| l.starts_with("ERROR forged")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains(&"x".repeat(100))),
        "{lines:?}"
    );
}

#[test]
fn preauth_an_emfile_storm_neither_spins_nor_floods_and_the_node_recovers() {
    let cluster = Cluster::new("preauth-emfile");
    let options = NodeOptions {
        open_files: Some(64),
        ..NodeOptions::default()
    };
    let a = cluster.node_opts("a", &[], options, |_| {});
    let pid = a.process.pid();
    let (lines_before, _) = log_size(&a);
    // 100 idle connections from 7 addresses (15 each, under the per-address cap): more than
    // the node's 64 file descriptors.
    let mut idle = Vec::new();
    for i in 0..100u8 {
        idle.push(connect_from(source(2 + i / 15), a.address).unwrap());
    }
    let cpu_before = cpu_seconds(pid);
    let window = Instant::now();
    // Wait for the node to say it cannot accept (it is out of descriptors), then watch it for
    // a while before any held connection reaches its deadline.
    a.process
        .wait_for_line("cannot accept connections on", LIMIT)
        .unwrap();
    assert!(open_files(pid) >= 60, "{} open files", open_files(pid));
    while window.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let cpu = cpu_seconds(pid) - cpu_before;
    let wall = window.elapsed().as_secs_f64();
    assert!(
        cpu < 0.2 * wall,
        "the node used {cpu:.2} s of CPU in {wall:.2} s: a busy loop?"
    );
    let (lines_during, longest) = log_size(&a);
    assert!(
        lines_during - lines_before < 15,
        "{} log lines in {wall:.1} s:\n{}",
        lines_during - lines_before,
        a.process.lines().join("\n")
    );
    assert!(longest < 400);
    // The storm ends; a legitimate command works again.
    drop(idle);
    wait_until(Duration::from_secs(15), "status after the storm", || {
        cluster.status(&a).map(|_| ())
    });
}

#[test]
fn preauth_a_job_link_with_a_wrong_token_is_refused_and_slows_its_address_down() {
    let cluster = Cluster::new("preauth-link");
    let a = cluster.node("a", &[]);
    let from = source(9);
    let mut statuses = Vec::new();
    for job in 1..=8u64 {
        let mut stream = connect_from(from, a.address).unwrap();
        let hello = LinkHello {
            version: VERSION,
            job,
            token: [job as u8; LINK_TOKEN_BYTES],
        };
        // A throttled address is answered before it says anything.
        let _ = stream.write_all(&hello.encode());
        let answer = workspace_tests::raw::read_status(&mut stream).unwrap();
        statuses.push(answer.status);
    }
    // The first ones are told that no such link exists; past the grace the address waits.
    assert_eq!(statuses[0], Status::UnknownLink, "{statuses:?}");
    assert!(
        statuses
            .iter()
            .any(|status| matches!(status, Status::Throttled { .. })),
        "{statuses:?}"
    );
    a.process
        .wait_for_line("refused a job link from 127.0.0.9", LIMIT)
        .unwrap();
    // The node serves on.
    cluster.status(&a).unwrap();
}

#[test]
fn preauth_failed_handshakes_are_throttled_until_the_penalty_ends() {
    let cluster = Cluster::new("preauth-penalty");
    let a = cluster.node("a", &[]);
    let address = a.address.to_string();
    // Wrong cookies from 127.0.0.1, one after another: the first few are cookie mismatches,
    // then the address is refused for a while.
    let mut throttled = None;
    for attempt in 1..=12 {
        let refused = cluster.cli(&["join", "--cookie", "WRONGCOOKIE", &address]);
        assert_eq!(refused.status.code(), Some(1), "{refused:?}");
        if refused
            .stderr
            .contains("refuses connections from this address")
        {
            throttled = Some((attempt, refused.stderr));
            break;
        }
        assert!(
            refused.stderr.contains("cookie mismatch"),
            "attempt {attempt}: {refused:?}"
        );
    }
    let (attempt, message) = throttled.expect("throttled within 12 attempts");
    assert!(attempt > 3, "throttled at attempt {attempt}: {message}");
    assert!(message.contains("failed handshakes"), "{message}");
    a.process
        .wait_for_line("failed handshakes from 127.0.0.1 lately", LIMIT)
        .unwrap();
    // The penalty is the address's: another address is admitted meanwhile.
    let mut other = connect_from(source(2), a.address).unwrap();
    let answer = hello(&mut other, "x@127.0.0.2").unwrap();
    assert!(matches!(answer.status, Status::Ok { .. }), "{answer:?}");
    drop(other);
    // It ends: the right cookie gets in again (and lifts the penalty).
    let waited = wait_until(Duration::from_secs(40), "status after the penalty", || {
        cluster.status(&a).map(|_| ())
    });
    assert!(waited < Duration::from_secs(35), "{waited:?}");
    let accepted = cluster.cli(&["join", &address]);
    assert!(accepted.status.success(), "{accepted:?}");
}

#[test]
fn preauth_a_second_node_under_a_name_in_use_is_told_so() {
    let cluster = Cluster::new("preauth-name-in-use");
    let a = cluster.node("a", &[]);
    let b = cluster.node("b", &[&a]);
    cluster.wait_for_states(&a, &[(&b, "up")], LIMIT);
    let impostor = cluster.node("b", &[&a]);
    let line = impostor
        .process
        .wait_for_line("already in use", LIMIT)
        .unwrap();
    assert!(
        line.contains("the name b@127.0.0.1 is already in use in the cluster (a live node connected from 127.0.0.1:"),
        "{line}"
    );
    assert!(
        line.contains("start this node with another --name"),
        "{line}"
    );
    assert!(!line.contains("cookie"), "{line}");
    a.process
        .wait_for_line("as b@127.0.0.1: that name is in use", LIMIT)
        .unwrap();
    // The first b is still the one in the cluster.
    let rows = cluster.status(&a).unwrap();
    let bs: Vec<_> = rows.iter().filter(|r| r.name == "b@127.0.0.1").collect();
    assert_eq!(bs.len(), 1, "{rows:?}");
    assert_eq!(bs[0].state, "up");
    assert!(
        !impostor
            .process
            .lines()
            .iter()
            .any(|l| l.contains("cookie mismatch")),
        "{:?}",
        impostor.process.lines()
    );
}
