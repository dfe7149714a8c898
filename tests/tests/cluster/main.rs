//! Clusters of real `cluster-cli node` processes on 127.0.0.1: joining and meshing, the
//! cookie, failures (stopped, killed, terminated nodes), and remote sampling (a GPU node, a
//! node killed mid-run, a pool that panics, malformed requests, placement, broadcast warmup),
//! and the limits on what a job may ask.
//! Needs the `cluster-cli` binary (`cargo test --workspace --release` builds it; see
//! `workspace_tests::process::cluster_cli`).

mod cookie;
mod faults;
mod join;
mod limits;
mod sampling;
