//! Shared by the GPU tests: the device (or a skip), random points, and the CPU reference with
//! the scale each comparison is relative to.

use std::sync::OnceLock;

use gpu_actor::{DeviceOptions, GpuDevice, GpuError, Precision};
pub use sampler::reference::{Errors, compare, reference};
use sampler::{ChainId, ChainRng, Seed};

/// Whether a missing GPU fails the tests (CI) instead of skipping them.
pub fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|value| value == "1")
}

/// Opens a device of its own (for tests that break it), or says why not.
pub fn open_device() -> Option<GpuDevice> {
    match GpuDevice::open(&DeviceOptions::default()) {
        Ok(device) => Some(device),
        Err(err @ GpuError::NoAdapter) if !gpu_required() => {
            eprintln!("skipping GPU test: {err} (set REQUIRE_GPU=1 to make this a failure)");
            None
        }
        Err(err) => panic!("cannot open a GPU device: {err}"),
    }
}

/// The device shared by the tests of this binary (each test's requests are serialised by its
/// thread), or `None` with a skip line.
pub fn shared_device() -> Option<GpuDevice> {
    static DEVICE: OnceLock<Option<GpuDevice>> = OnceLock::new();
    let device = DEVICE.get_or_init(open_device).clone();
    if device.is_none() {
        eprintln!("skipping GPU test: no GPU adapter");
    }
    device
}

/// Whether f64 tests can run on `device`; a skip line if not (a failure with REQUIRE_GPU=1).
pub fn supports(device: &GpuDevice, precision: Precision) -> bool {
    if device.supports(precision) {
        return true;
    }
    assert!(
        !gpu_required(),
        "REQUIRE_GPU=1 but adapter {} has no {precision} support",
        device.report().name
    );
    eprintln!(
        "skipping {precision} GPU test: adapter {} has no SHADER_F64",
        device.report().name
    );
    false
}

/// `n_chains` points uniform in `(-radius, radius)^dim`, chain after chain.
pub fn random_points(seed: u64, n_chains: usize, dim: usize, radius: f64) -> Vec<f64> {
    let mut rng = ChainRng::new(Seed(seed), ChainId(0));
    (0..n_chains * dim)
        .map(|_| rng.uniform_in(-radius, radius))
        .collect()
}

/// The parity tolerance: relative to `max(1, scale)`.
pub fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::F32 => 1e-4,
        Precision::F64 => 1e-10,
    }
}

/// The CPU sampler's traces for `request`'s chains, seed and settings: what a GPU run of
/// the same request is compared with.
pub fn cpu_traces(request: &gpu_actor::GpuSampleRequest) -> Vec<sampler::ChainTrace> {
    sampler::sample_chains(
        || request.model.evaluator(),
        &request.settings,
        request.seed,
        &request.chains,
        &sampler::NoObserver,
    )
    .expect("the CPU sampler")
}
