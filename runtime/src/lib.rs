//! `runtime`: the cluster node (ractor_cluster server, membership, discovery, job coordinator,
//! supervision) and its versioned wire types.
//!
//! Not built yet (issue 4); local sampling goes straight to the `sampler` crate.
