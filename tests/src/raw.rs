//! Raw TCP peers for the pre-authentication tests: connections from a chosen loopback source
//! address (127.0.0.0/8 is all loopback on Linux, so per-address limits can be shown on one
//! machine), the cluster's preamble, hand-built handshake frames, and what `/proc` says about
//! a node process (memory, CPU time, open files).

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use runtime::NodeName;
use runtime::transport::preamble::{Answer, Hello, Status};
use socket2::{Domain, Socket, Type};

/// A TCP connection to `to` from the loopback address `from` (any port).
pub fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.bind(&SocketAddr::from((from, 0)).into())?;
    socket.connect_timeout(&to.into(), Duration::from_secs(5))?;
    Ok(socket.into())
}

/// Sends a hello as `name` and reads the node's answer.
pub fn hello(stream: &mut TcpStream, name: &str) -> std::io::Result<Answer> {
    let name: NodeName = name.parse().expect("a valid node name");
    stream.write_all(&Hello::new(&name, 1).encode())?;
    read_status(stream)
}

/// Reads one preamble status (within 5 s).
pub fn read_status(stream: &mut TcpStream) -> std::io::Result<Answer> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        match Status::parse(&bytes) {
            Ok(Some((answer, _))) => return Ok(answer),
            Ok(None) => {}
            Err(error) => return Err(std::io::Error::new(ErrorKind::InvalidData, error)),
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// A connection that got past the preamble as `name` from `from`: what follows goes to the
/// node's cookie handshake.
pub fn admitted(from: Ipv4Addr, to: SocketAddr, name: &str) -> TcpStream {
    let mut stream = connect_from(from, to).expect("connect");
    let answer = hello(&mut stream, name).expect("a status");
    assert!(
        matches!(answer.status, Status::Ok { .. }),
        "not admitted: {answer:?}"
    );
    stream
}

/// Waits until the node closes `stream` (end of stream or a reset), reading and dropping what
/// it sends; `Err` with what happened if it is still open at `deadline`.
pub fn wait_closed(stream: &mut TcpStream, deadline: Instant) -> Result<Duration, String> {
    let started = Instant::now();
    let mut sink = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("still open after {:?}", started.elapsed()));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| e.to_string())?;
        match stream.read(&mut sink) {
            Ok(0) => return Ok(started.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Ok(started.elapsed()),
        }
    }
}

/// A protobuf varint.
fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A length-delimited protobuf field.
fn field(tag: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint((tag << 3) | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// ractor_cluster's `Name` handshake frame (`NetworkMessage { auth: { name: { name,
/// connection_string } } }`), with its `u64` length prefix.
pub fn name_frame(name: &[u8], connection_string: &[u8]) -> Vec<u8> {
    let mut name_message = Vec::new();
    field(1, name, &mut name_message);
    field(3, connection_string, &mut name_message);
    let mut auth = Vec::new();
    field(1, &name_message, &mut auth);
    let mut network = Vec::new();
    field(1, &auth, &mut network);
    let mut frame = (network.len() as u64).to_be_bytes().to_vec();
    frame.extend_from_slice(&network);
    frame
}

fn status_field(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:").expect("VmRSS of a live process")
}

/// CPU time (user and system) a process used so far, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat of a process");
    // Fields after the command name (which may hold spaces) start at state, field 3.
    let after = &stat[stat.rfind(')').expect("(comm)") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / clock_ticks_per_second()
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Open file descriptors of a process.
pub fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}
