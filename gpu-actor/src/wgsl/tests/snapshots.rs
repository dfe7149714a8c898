//! Whole generated shaders for a few representative programs, compared exactly with the files
//! in `src/wgsl/snapshots/`: a change to code generation shows as a diff of those files, to be
//! reviewed with the change. `UPDATE_SNAPSHOTS=1 cargo test -p gpu-actor snapshot` rewrites
//! them.

use std::path::PathBuf;

use super::super::*;
use super::{options, program, regression};

/// Compares `text` with the snapshot `name`, or writes it under `UPDATE_SNAPSHOTS=1`.
fn check(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/wgsl/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|value| value == "1") {
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("snapshot directory");
        std::fs::write(&path, text).expect("snapshot written");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "{}: {error}; run with UPDATE_SNAPSHOTS=1 to write it",
            path.display()
        )
    });
    if expected == text {
        return;
    }
    let line = expected
        .lines()
        .zip(text.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.lines().count().min(text.lines().count()));
    panic!(
        "{} differs from the generated shader from line {}:\n  snapshot:  {:?}\n  generated: {:?}\n\
         review the change and run with UPDATE_SNAPSHOTS=1 to accept it",
        path.display(),
        line + 1,
        expected.lines().nth(line),
        text.lines().nth(line),
    );
}

fn snapshot(name: &str, program: &sampler::Program, kernel: KernelKind, options: &ShaderOptions) {
    let text = kernel_source(program, kernel, options).expect("generates");
    check(name, &text);
}

/// A gather, a normal density and a positive constraint, one chain per invocation, private
/// tape, data in storage.
#[test]
fn snapshot_small_logp_grad_f32_private() {
    let options = options(Precision::F32, TapePlacement::Private);
    snapshot(
        "small_logp_grad_f32_private.wgsl",
        &program(),
        KernelKind::LogpGrad,
        &options,
    );
}

/// The same program with its tape in storage, in f64, data staged in workgroup memory.
#[test]
fn snapshot_small_logp_grad_f64_storage_workgroup() {
    let options = ShaderOptions {
        data: DataPlacement::Workgroup,
        ..options(Precision::F64, TapePlacement::Storage)
    };
    snapshot(
        "small_logp_grad_f64_storage_workgroup.wgsl",
        &program(),
        KernelKind::LogpGrad,
        &options,
    );
}

/// A logistic regression split across 8 lanes: the fused loop over each lane's rows and the
/// subgroup sums.
#[test]
fn snapshot_regression_logp_grad_f32_lanes8() {
    let options = ShaderOptions {
        lanes: 8,
        ..options(Precision::F32, TapePlacement::Private)
    };
    snapshot(
        "regression_logp_grad_f32_lanes8.wgsl",
        &regression(),
        KernelKind::LogpGrad,
        &options,
    );
}

/// The whole NUTS kernel around the small program.
#[test]
fn snapshot_small_nuts_f32_private() {
    let options = options(Precision::F32, TapePlacement::Private);
    snapshot(
        "small_nuts_f32_private.wgsl",
        &program(),
        KernelKind::Nuts,
        &options,
    );
}
