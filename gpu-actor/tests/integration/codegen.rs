//! Every shader the generator produces for our models is valid WGSL, by naga's validator:
//! no GPU needed.

use gpu_actor::Precision;
use gpu_actor::wgsl::{
    DataPlacement, IndexChecks, KernelKind, ShaderOptions, TapePlacement, kernel_source,
    longest_split,
};
use naga::valid::{Capabilities, ValidationFlags, Validator};

use crate::models;

/// Parses and validates `source`; f32 shaders are validated without the f64 capability, so
/// that an f64 value slipping into them fails.
fn validate(source: &str, precision: Precision) -> Result<(), String> {
    validate_with(source, precision, Capabilities::empty())
}

/// [`validate`] with `extra` capabilities (subgroup operations for split chains).
fn validate_with(source: &str, precision: Precision, extra: Capabilities) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|err| err.emit_to_string(source))?;
    let capabilities = extra
        | match precision {
            Precision::F32 => Capabilities::empty(),
            Precision::F64 => Capabilities::FLOAT64,
        };
    Validator::new(ValidationFlags::all(), capabilities)
        .validate(&module)
        .map_err(|err| err.emit_to_string(source))?;
    Ok(())
}

#[test]
fn codegen_every_shader_passes_naga_validation() {
    let mut failures = Vec::new();
    let mut count = 0;
    for model in models::all() {
        let program = model.model.program();
        for &precision in &[Precision::F32, Precision::F64] {
            for placement in [
                TapePlacement::Private,
                TapePlacement::Storage,
                TapePlacement::Interpreted,
            ] {
                for data in [DataPlacement::Storage, DataPlacement::Workgroup] {
                    if data == DataPlacement::Workgroup && program.data.is_empty() {
                        continue;
                    }
                    for lanes in [1, 2, 8, 32] {
                        if lanes > 1
                            && (placement.in_storage()
                                || !longest_split(program, lanes).is_ok_and(|len| len > 0))
                        {
                            continue;
                        }
                        let options = ShaderOptions {
                            precision,
                            placement,
                            workgroup_size: 64,
                            data,
                            lanes,
                            checks: IndexChecks::All,
                        };
                        // Split chains are the only users of subgroup operations.
                        let extra = if lanes > 1 {
                            Capabilities::SUBGROUP
                        } else {
                            Capabilities::empty()
                        };
                        for kernel in KernelKind::ALL {
                            let label = format!(
                                "{} {kernel} {precision} {placement} {data} data {lanes} lanes",
                                model.name
                            );
                            let result = kernel_source(program, kernel, &options)
                                .map_err(|err| err.to_string())
                                .and_then(|source| validate_with(&source, precision, extra));
                            count += 1;
                            if let Err(err) = result {
                                failures.push(format!("{label}:\n{err}"));
                            }
                        }
                    }
                }
            }
        }
    }
    for precision in [Precision::F32, Precision::F64] {
        count += 1;
        if let Err(err) = validate(&gpu_actor::wgsl::rng_check_source(precision), precision) {
            failures.push(format!("rng check {precision}:\n{err}"));
        }
        count += 1;
        if let Err(err) = validate(&gpu_actor::wgsl::nuts_moments_source(precision), precision) {
            failures.push(format!("nuts moments {precision}:\n{err}"));
        }
    }
    let probe = gpu_actor::wgsl::f64_builtins_source();
    count += 1;
    if let Err(err) = validate(probe, Precision::F64) {
        failures.push(format!("f64 built-in check:\n{err}"));
    }
    assert!(
        failures.is_empty(),
        "{} of {count} shaders are invalid:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
