//! Child processes for tests: `cluster-cli` runs with a deadline, and node processes whose
//! output is collected line by line and which are always killed (on drop, so on panic too).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The `cluster-cli` binary: `$CLUSTER_CLI`, else `cluster-cli` next to this test's `deps/`
/// directory (`target/<profile>/`), where `cargo test --workspace` builds it.
pub fn cluster_cli() -> PathBuf {
    if let Some(path) = std::env::var_os("CLUSTER_CLI") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable lives in target/<profile>/deps");
    let path = profile_dir.join("cluster-cli");
    assert!(
        path.is_file(),
        "{} is missing: build it first (`cargo build --release -p cluster-cli`, or run \
         `cargo test --workspace --release`), or set CLUSTER_CLI=/path/to/cluster-cli",
        path.display()
    );
    path
}

/// A finished command.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs `command` to completion; kills it and panics after `limit`.
pub fn run(mut command: Command, limit: Duration) -> Finished {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let description = format!("{command:?}");
    let mut child = command.spawn().expect("the command starts");
    let pid = child.id();
    let stdout = read_all(child.stdout.take().expect("stdout"));
    let stderr = read_all(child.stderr.take().expect("stderr"));
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let _ = sender.send(child.wait());
    });
    match receiver.recv_timeout(limit) {
        Ok(status) => Finished {
            status: status.expect("wait"),
            stdout: stdout.join().expect("stdout reader"),
            stderr: stderr.join().expect("stderr reader"),
        },
        Err(_) => {
            signal(pid, "KILL");
            panic!("{description} did not finish within {limit:?}");
        }
    }
}

fn read_all(mut stream: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    })
}

/// Sends a signal (`"STOP"`, `"CONT"`, `"TERM"`, `"KILL"`) with `kill(1)`.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// The output lines of a process so far, and whether both of its streams have closed.
#[derive(Debug, Default)]
struct Output {
    lines: Vec<String>,
    closed_streams: usize,
}

/// A process whose stdout and stderr lines are collected as they come; killed on drop.
#[derive(Debug)]
pub struct Process {
    child: Child,
    output: Arc<(Mutex<Output>, Condvar)>,
}

impl Process {
    /// Starts `command` and collects its output.
    pub fn spawn(mut command: Command) -> Self {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the process starts");
        let output = Arc::new((Mutex::new(Output::default()), Condvar::new()));
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        collect(stdout, Arc::clone(&output));
        collect(stderr, Arc::clone(&output));
        Self { child, output }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.output.0.lock().expect("output lock").lines.clone()
    }

    /// Waits until a line contains `needle`, or both streams close, or `limit` passes.
    pub fn wait_for_line(&self, needle: &str, limit: Duration) -> Result<String, String> {
        self.wait_for_lines(needle, 1, limit)
    }

    /// Waits until `count` lines contain `needle` (returns the last of them), or both streams
    /// close, or `limit` passes.
    pub fn wait_for_lines(
        &self,
        needle: &str,
        count: usize,
        limit: Duration,
    ) -> Result<String, String> {
        let deadline = Instant::now() + limit;
        let (lock, changed) = &*self.output;
        let mut output = lock.lock().expect("output lock");
        loop {
            if let Some(line) = output
                .lines
                .iter()
                .filter(|line| line.contains(needle))
                .nth(count.saturating_sub(1))
            {
                return Ok(line.clone());
            }
            let now = Instant::now();
            if output.closed_streams == 2 || now >= deadline {
                return Err(format!(
                    "no {count} lines containing {needle:?} (process {}) in:\n{}",
                    if output.closed_streams == 2 {
                        "exited"
                    } else {
                        "still running"
                    },
                    output.lines.join("\n")
                ));
            }
            output = changed
                .wait_timeout(output, deadline - now)
                .expect("output lock")
                .0;
        }
    }

    /// Waits for the process to exit by itself within `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        // Both streams close when the process exits: wait for that, then reap it.
        let (lock, changed) = &*self.output;
        let mut output = lock.lock().expect("output lock");
        while output.closed_streams < 2 {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            output = changed
                .wait_timeout(output, deadline - now)
                .expect("output lock")
                .0;
        }
        drop(output);
        self.child.wait().ok()
    }

    /// Sends a signal to the process.
    pub fn signal(&self, name: &str) {
        signal(self.pid(), name);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SIGKILL also ends a stopped process.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(stream: impl Read + Send + 'static, output: Arc<(Mutex<Output>, Condvar)>) {
    thread::spawn(move || {
        let reader = BufReader::new(stream);
        for line in reader.lines() {
            let Ok(line) = line else { break };
            let (lock, changed) = &*output;
            lock.lock().expect("output lock").lines.push(line);
            changed.notify_all();
        }
        let (lock, changed) = &*output;
        lock.lock().expect("output lock").closed_streams += 1;
        changed.notify_all();
    });
}

/// Polls `condition` until it holds or `limit` passes; each poll runs a command, so there is
/// no event to wait on. Returns how long it took.
pub fn wait_until(
    limit: Duration,
    what: &str,
    mut condition: impl FnMut() -> Result<(), String>,
) -> Duration {
    let start = Instant::now();
    loop {
        let outcome = condition();
        match outcome {
            Ok(()) => return start.elapsed(),
            Err(last) if start.elapsed() >= limit => {
                panic!("{what}: not within {limit:?}; last: {last}")
            }
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    }
}
