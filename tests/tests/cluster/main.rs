//! Clusters of real `cluster-cli node` processes on 127.0.0.1: joining and meshing, the
//! cookie, and failures (stopped, killed, terminated nodes). Needs the `cluster-cli` binary
//! (`cargo test --workspace --release` builds it; see `workspace_tests::process::cluster_cli`).

mod cookie;
mod faults;
mod join;
