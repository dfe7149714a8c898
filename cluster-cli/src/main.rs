//! `cluster-cli`: the only binary. Reads arguments, environment and files; everything else is
//! in the libraries.

fn main() {}
