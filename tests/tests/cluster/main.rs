//! Clusters of real `cluster-cli node` processes on 127.0.0.1: joining and meshing, the
//! cookie, failures (stopped, killed, terminated nodes), remote sampling (a GPU node, a
//! node killed mid-run, a pool that panics, malformed requests, placement, broadcast warmup),
//! poison jobs (a request that kills the nodes running it), software GPUs used only when
//! asked, jobs that survive their entry node (killed, stopped, drained) and drained workers,
//! connections before authentication (limits, deadline, throttling, a name in use), TLS,
//! and the limits on what a job may ask.
//! Needs the `cluster-cli` binary (`cargo test --workspace --release` builds it; see
//! `workspace_tests::process::cluster_cli`).

mod cookie;
mod failover;
mod faults;
mod join;
mod limits;
mod poison;
mod preauth;
mod sampling;
mod software_gpu;
mod tls;
