//! Workspace integration tests: real node processes, GPU against CPU. The tests live in
//! `tests/tests/`; this library holds their shared helpers.

pub mod cluster;
pub mod posterior;
pub mod process;
pub mod raw;
