//! A test cluster of real `cluster-cli node` processes on 127.0.0.1: its own cookie and
//! config directory, free ports, and `cluster-cli status` as the way to look at it.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{self, Finished, Process, wait_until};

/// How long a node may take to start listening.
pub const START_LIMIT: Duration = Duration::from_secs(15);
/// How long nodes may take to see each other up.
pub const MESH_LIMIT: Duration = Duration::from_secs(15);
/// How long one `cluster-cli join`/`status` may take.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(20);

/// Settings shared by the nodes and commands of one test.
#[derive(Debug)]
pub struct Cluster {
    cookie: String,
    config_home: PathBuf,
}

/// A running node process; killed on drop.
#[derive(Debug)]
pub struct NodeProcess {
    /// Full name, `short@127.0.0.1`.
    pub name: String,
    /// Where it listens.
    pub address: SocketAddr,
    /// The process.
    pub process: Process,
}

/// How a test node differs from the default: two CPU slots, `--no-gpu`.
#[derive(Debug, Clone, Copy)]
pub struct NodeOptions {
    /// Look for GPU adapters (a GPU pool on the best one).
    pub gpu: bool,
    /// `--cpu-slots`.
    pub cpu_slots: u32,
    /// Start the node under `ulimit -n` of this many open files.
    pub open_files: Option<u32>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            gpu: false,
            cpu_slots: 2,
            open_files: None,
        }
    }
}

/// One row of `cluster-cli status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Full node name.
    pub name: String,
    /// `local`, `up`, `connecting`, `down`.
    pub state: String,
    /// CPU slots.
    pub cpu_slots: String,
    /// Running jobs.
    pub running_jobs: String,
}

impl Cluster {
    /// A cluster for the test `test`, with a cookie and config directory of its own.
    pub fn new(test: &str) -> Self {
        let config_home = scratch_dir(test);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Self {
            cookie: format!("TESTCOOKIE{nanos}X{}", std::process::id()),
            config_home,
        }
    }

    /// The cluster's cookie.
    pub fn cookie(&self) -> &str {
        &self.cookie
    }

    /// The test's own config directory (`XDG_CONFIG_HOME` and `HOME` of every command).
    pub fn config_home(&self) -> &Path {
        &self.config_home
    }

    /// `cluster-cli` with the cluster's environment: its cookie in `BAYES_CLUSTER_COOKIE`,
    /// its config directory, and no `RUST_LOG` from the caller.
    pub fn command(&self) -> Command {
        let mut command = Command::new(process::cluster_cli());
        command
            .env("BAYES_CLUSTER_COOKIE", &self.cookie)
            .env("XDG_CONFIG_HOME", &self.config_home)
            .env("HOME", &self.config_home)
            .env_remove("RUST_LOG");
        command
    }

    /// Starts node `short`, joining `seeds`, and waits until it listens. A port taken
    /// between choosing and binding it is retried with another one.
    pub fn node(&self, short: &str, seeds: &[&NodeProcess]) -> NodeProcess {
        self.node_with(short, seeds, |_| {})
    }

    /// [`Self::node`] with changes to the command (environment, arguments).
    pub fn node_with(
        &self,
        short: &str,
        seeds: &[&NodeProcess],
        adjust: impl Fn(&mut Command),
    ) -> NodeProcess {
        self.node_opts(short, seeds, NodeOptions::default(), adjust)
    }

    /// [`Self::node_with`] with other [`NodeOptions`].
    pub fn node_opts(
        &self,
        short: &str,
        seeds: &[&NodeProcess],
        options: NodeOptions,
        adjust: impl Fn(&mut Command),
    ) -> NodeProcess {
        let mut last = String::new();
        for _ in 0..5 {
            let address = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
            let mut command = self.command();
            command.args(["node", "--name", short, "--listen"]);
            command.arg(address.to_string());
            if !options.gpu {
                command.arg("--no-gpu");
            }
            command
                .arg("--cpu-slots")
                .arg(options.cpu_slots.to_string());
            for seed in seeds {
                command.arg("--join").arg(seed.address.to_string());
            }
            adjust(&mut command);
            if let Some(limit) = options.open_files {
                command = under_ulimit(&command, limit);
            }
            let process = Process::spawn(command);
            match process.wait_for_line("listening on", START_LIMIT) {
                Ok(_) => {
                    return NodeProcess {
                        name: format!("{short}@127.0.0.1"),
                        address,
                        process,
                    };
                }
                Err(output) if output.contains("in use") => last = output,
                Err(output) => panic!("node {short} did not start: {output}"),
            }
        }
        panic!("node {short} found no free port: {last}");
    }

    /// Starts `cluster-cli ARGS` and returns at once: for commands whose output a test
    /// follows while they run (a sampling job). `RUST_LOG` is `info`.
    pub fn spawn_cli(&self, args: &[&str]) -> Process {
        let mut command = self.command();
        command.args(args).env("RUST_LOG", "info");
        Process::spawn(command)
    }

    /// Runs `cluster-cli ARGS`.
    pub fn cli(&self, args: &[&str]) -> Finished {
        let mut command = self.command();
        command.args(args);
        process::run(command, COMMAND_LIMIT)
    }

    /// `cluster-cli status --cluster AT`, parsed; the command's stderr when it fails.
    pub fn status(&self, at: &NodeProcess) -> Result<Vec<Row>, String> {
        let finished = self.cli(&["status", "--cluster", &at.address.to_string()]);
        if !finished.status.success() {
            return Err(finished.stderr);
        }
        Ok(parse_status(&finished.stdout))
    }

    /// Waits until every node of `nodes` sees every other one up (within [`MESH_LIMIT`]).
    pub fn mesh(&self, nodes: &[&NodeProcess]) {
        for me in nodes {
            let want: Vec<(&NodeProcess, &str)> = nodes
                .iter()
                .map(|n| (*n, if n.name == me.name { "local" } else { "up" }))
                .collect();
            self.wait_for_states(me, &want, MESH_LIMIT);
        }
    }

    /// Polls `status` at `at` until every `(node, state)` of `want` holds; returns how long
    /// it took.
    pub fn wait_for_states(
        &self,
        at: &NodeProcess,
        want: &[(&NodeProcess, &str)],
        limit: Duration,
    ) -> Duration {
        let what = format!("{} seeing {:?}", at.name, states(want));
        wait_until(limit, &what, || {
            let rows = self.status(at)?;
            let missing: Vec<_> = want
                .iter()
                .filter(|(node, state)| {
                    !rows
                        .iter()
                        .any(|row| row.name == node.name && row.state == *state)
                })
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("{rows:?}"))
            }
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.config_home);
    }
}

fn states(want: &[(&NodeProcess, &str)]) -> Vec<(String, String)> {
    want.iter()
        .map(|(node, state)| (node.name.clone(), (*state).to_owned()))
        .collect()
}

/// The rows of `cluster-cli status` output (header and summary line skipped).
pub fn parse_status(stdout: &str) -> Vec<Row> {
    stdout
        .lines()
        .filter(|line| !line.starts_with("NODE") && !line.contains(" nodes ("))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            if cells.len() < 6 {
                return None;
            }
            Some(Row {
                name: cells[0].to_owned(),
                state: cells[2].to_owned(),
                cpu_slots: cells[3].to_owned(),
                running_jobs: cells[cells.len() - 1].to_owned(),
            })
        })
        .collect()
}

/// `command` run by `sh` under `ulimit -n limit` (exec'd: same process id).
fn under_ulimit(command: &Command, limit: u32) -> Command {
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    shell
}

/// A port that was free a moment ago (the OS picks it); callers retry if it is taken.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address").port()
}

/// An empty directory for one test.
pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bayes-cluster-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}
