//! The device thread's behaviour: what it keeps, what it refuses, how it fails.

use std::time::Duration;

use gpu_actor::{
    Fault, GpuDevice, GpuError, LogpGradRequest, ModelKey, Precision, TapePlacement,
    enumerate_adapters,
};
use sampler::{CheckedModel, Limits};

use crate::support;

fn eight_schools() -> CheckedModel {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/eight_schools_noncentered.json"
    );
    let text = std::fs::read_to_string(path).expect("the benchmark model is readable");
    CheckedModel::from_json(&text, &Limits::default()).expect("the benchmark model checks")
}

/// The eight-schools model uploaded in f32.
fn upload(device: &GpuDevice) -> ModelKey {
    device
        .upload_model(&eight_schools(), Precision::F32)
        .wait()
        .expect("upload")
}

/// Log densities and gradients at `points` of `model`, placements and lanes left open.
fn points(model: ModelKey, points: Vec<f64>) -> LogpGradRequest {
    LogpGradRequest {
        model,
        points,
        placement: None,
        lanes: None,
    }
}

#[test]
fn device_enumeration_reports_the_open_adapter() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let adapters = enumerate_adapters().expect("an adapter is open, so one is listed");
    let open = device.report();
    assert!(
        adapters.iter().any(|adapter| adapter.name == open.name),
        "{} not among {adapters:?}",
        open.name
    );
    assert_eq!(open.backend, "vulkan");
    let text = open.to_string();
    for field in ["backend:", "type:", "memory:", "features:", "limits:"] {
        assert!(text.contains(field), "missing {field} in:\n{text}");
    }
}

#[test]
fn device_uploads_a_model_once_and_compiles_a_pipeline_once() {
    // A device of its own, so that other tests do not touch its counts.
    let Some(device) = support::open_device() else {
        return;
    };
    let mut builder = sampler::ModelBuilder::new("upload_once");
    let y = builder.data_vector("y", vec![0.25, -1.5, 2.0]);
    let mu = builder.param("mu");
    builder.sample(&y, sampler::Dist::normal(&mu, 1.0));
    let model = CheckedModel::new(builder.build(), &Limits::default()).expect("checks");

    let first = device
        .upload_model(&model, Precision::F32)
        .wait()
        .expect("upload");
    let before = device.stats().wait().expect("stats");
    let again = device
        .upload_model(&model, Precision::F32)
        .wait()
        .expect("upload");
    assert_eq!(first, again);
    let after_upload = device.stats().wait().expect("stats");
    assert_eq!(after_upload.models_uploaded, before.models_uploaded);
    assert!(after_upload.model_upload_hits > before.model_upload_hits);

    let request = |points: Vec<f64>| LogpGradRequest {
        model: first,
        points,
        placement: Some(TapePlacement::Storage),
        lanes: None,
    };
    let small = device
        .logp_grad(request(vec![0.3, -0.2]))
        .wait()
        .expect("batch");
    let compiled = device.stats().wait().expect("stats").pipelines_compiled;
    // A larger batch grows the buffers but reuses the pipeline and the model's data.
    let points: Vec<f64> = (0..300).map(|c| f64::from(c) / 100.0 - 1.5).collect();
    let large = device
        .logp_grad(request(points.clone()))
        .wait()
        .expect("batch");
    let stats = device.stats().wait().expect("stats");
    assert_eq!(stats.pipelines_compiled, compiled);
    assert_eq!(stats.models_uploaded, after_upload.models_uploaded);
    assert_eq!(small.n_chains, 2);
    assert_eq!(large.n_chains, 300);
    // log p(mu) = -0.5 sum (y - mu)^2: exact enough in f32 to tell chains apart.
    for (c, &mu) in points.iter().enumerate() {
        let expected: f64 = [0.25, -1.5, 2.0]
            .iter()
            .map(|y| -0.5 * (y - mu) * (y - mu))
            .sum();
        assert!(
            (large.logp[c] - expected).abs() < 1e-4,
            "chain {c}: {} vs {expected}",
            large.logp[c]
        );
    }

    assert!(device.unload_model(first).wait().expect("unload"));
    assert!(!device.unload_model(first).wait().expect("unload"));
    let missing = device.logp_grad(request(vec![0.0])).wait();
    assert!(
        matches!(missing, Err(GpuError::ModelNotLoaded { .. })),
        "{missing:?}"
    );
    device.shutdown().expect("shutdown");
}

#[test]
fn device_refuses_points_that_do_not_fill_whole_chains() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let key = upload(&device);
    for len in [0, 9, 21] {
        let result = device.logp_grad(points(key, vec![0.1; len])).wait();
        match result {
            Err(GpuError::BadPoints {
                len: found,
                dim: 10,
            }) => assert_eq!(found, len),
            other => panic!("{len} values: {other:?}"),
        }
    }
}

#[test]
fn device_requests_for_unknown_models_are_errors() {
    let Some(device) = support::shared_device() else {
        return;
    };
    let key = ModelKey {
        hash: sampler::ModelHash([7; 16]),
        precision: Precision::F32,
    };
    let result = device.logp_grad(points(key, vec![0.0])).wait();
    let message = result.expect_err("unknown model").to_string();
    assert!(message.contains("07070707"), "{message}");
}

#[test]
fn device_panic_gives_errors_never_a_hang() {
    let Some(device) = support::open_device() else {
        return;
    };
    let key = upload(&device);
    let clone = device.clone();
    let fault = device
        .inject_fault(Fault::Panic)
        .wait_timeout(Duration::from_secs(30));
    assert!(
        matches!(fault, Err(GpuError::DeviceThreadGone)),
        "{fault:?}"
    );
    let after = clone
        .logp_grad(points(key, vec![0.1; 10]))
        .wait_timeout(Duration::from_secs(30));
    assert!(
        matches!(after, Err(GpuError::DeviceThreadGone)),
        "{after:?}"
    );
    assert!(device.shutdown().is_ok());
    // A new device is the supervisor's restart: it works.
    let Some(restarted) = support::open_device() else {
        return;
    };
    let key = restarted
        .upload_model(&eight_schools(), Precision::F32)
        .wait()
        .expect("upload after restart");
    let batch = restarted
        .logp_grad(points(key, vec![0.1; 10]))
        .wait()
        .expect("a batch after restart");
    assert!(batch.logp[0].is_finite());
    restarted.shutdown().expect("shutdown");
}

#[test]
fn device_loss_gives_device_lost_errors() {
    let Some(device) = support::open_device() else {
        return;
    };
    let key = upload(&device);
    let _ = device
        .inject_fault(Fault::LoseDevice)
        .wait_timeout(Duration::from_secs(30));
    let after = device
        .logp_grad(points(key, vec![0.1; 10]))
        .wait_timeout(Duration::from_secs(30));
    assert!(
        matches!(after, Err(GpuError::DeviceLost { .. })),
        "{after:?}"
    );
    device.shutdown().expect("shutdown");
}

#[test]
fn device_shutdown_stops_the_thread() {
    let Some(device) = support::open_device() else {
        return;
    };
    let other = device.clone();
    device.shutdown().expect("shutdown");
    let result = other.stats().wait_timeout(Duration::from_secs(30));
    assert!(
        matches!(result, Err(GpuError::DeviceThreadGone)),
        "{result:?}"
    );
}

/// The driver's own f64 `exp`/`log` are measured, or refused, without a panic or a hang. On
/// a device of its own: NVIDIA's driver loses the device over them.
#[test]
fn device_f64_builtin_check_reports_or_fails_cleanly() {
    let Some(device) = support::open_device() else {
        return;
    };
    if !support::supports(&device, Precision::F64) {
        return;
    }
    match device
        .check_f64_builtins()
        .wait_timeout(Duration::from_secs(120))
    {
        Ok(check) => {
            eprintln!("f64 built-ins on {}: {check:?}", device.report().name);
            assert_eq!(check.points, 1024);
            device.shutdown().expect("shutdown");
        }
        Err(err) => {
            eprintln!("f64 built-ins on {}: {err}", device.report().name);
            assert!(
                matches!(
                    err,
                    GpuError::DeviceLost { .. }
                        | GpuError::Pipeline { .. }
                        | GpuError::Device { .. }
                ),
                "{err:?}"
            );
            // Tearing down a device the driver lost this way crashed the process on NVIDIA;
            // the test leaves it to the process's end.
            std::mem::forget(device);
        }
    }
}

/// A kernel that does not compile within the budget fails its request with the typed error
/// naming its model, its kernel and the budget (a zero budget: no slow compilation needed);
/// the device thread goes on serving requests, and shuts down without waiting for the
/// compilation it left running.
#[test]
fn device_a_kernel_over_the_compile_budget_fails_with_a_typed_error() {
    let options = gpu_actor::DeviceOptions {
        compile_budget: Duration::ZERO,
        ..gpu_actor::DeviceOptions::default()
    };
    let device = match GpuDevice::open(&options) {
        Ok(device) => device,
        Err(GpuError::NoAdapter) if !support::gpu_required() => return,
        Err(err) => panic!("cannot open a GPU device: {err}"),
    };
    let key = upload(&device);
    let error = device
        .logp_grad(points(key, vec![0.1; 10]))
        .wait()
        .expect_err("nothing compiles in no time");
    let GpuError::CompileBudget {
        key: pipeline,
        budget,
        stage,
    } = &error
    else {
        panic!("not a compile budget error: {error}");
    };
    assert_eq!(pipeline.model, key.hash);
    assert_eq!(pipeline.kernel, gpu_actor::KernelKind::LogpGrad);
    assert_eq!(*budget, Duration::ZERO);
    assert_eq!(*stage, gpu_actor::CompileStage::Creation);
    let text = error.to_string();
    for part in ["logp_grad", &key.hash.to_string(), "compile budget of 0ns"] {
        assert!(text.contains(part), "{part} not in: {text}");
    }
    // Asked again, the build still running is waited for, not started again.
    let again = device.logp_grad(points(key, vec![0.1; 10])).wait();
    assert!(
        matches!(again, Err(GpuError::CompileBudget { .. })),
        "{again:?}"
    );
    let stats = device
        .stats()
        .wait()
        .expect("the device thread still answers");
    assert_eq!(stats.pipelines_compiled, 0);
    device.shutdown().expect("shuts down");
}
