//! Clusters of real `cluster-cli node` processes on 127.0.0.1: joining and meshing, the
//! cookie, failures (stopped, killed, terminated nodes), and remote sampling (a GPU node, a
//! node killed mid-run, a pool that panics, malformed requests, placement, broadcast warmup),
//! connections before authentication (limits, deadline, throttling, a name in use) and TLS.
//! Needs the `cluster-cli` binary (`cargo test --workspace --release` builds it; see
//! `workspace_tests::process::cluster_cli`).

mod cookie;
mod faults;
mod join;
mod preauth;
mod sampling;
mod tls;
