//! Helpers shared by the integration tests.

use std::path::PathBuf;

use sampler::{CheckedModel, Limits};

/// The repository root (the parent of the `sampler` crate).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Loads and checks `models/<name>.json`.
pub fn bench_model(name: &str) -> CheckedModel {
    let path = repo_root().join("models").join(format!("{name}.json"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    CheckedModel::from_json(&text, &Limits::default())
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The seven benchmark models (eight files: eight schools comes centered and non-centered).
pub const BENCH_MODELS: [&str; 8] = [
    "simple",
    "medium",
    "stress",
    "eight_schools",
    "eight_schools_noncentered",
    "funnel",
    "logistic",
    "sv",
];
