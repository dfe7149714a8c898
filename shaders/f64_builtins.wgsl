// f64_builtins.wgsl: WGSL's own `exp` and `log` on f64, for `GpuDevice::check_f64_builtins`:
// can a driver's f64 built-ins be trusted? Generated models never call them (they use
// `sf_exp`/`sf_log` of math_f64.wgsl): naga emits GLSL.std.450 instructions that are only
// defined for 16- and 32-bit floats. lavapipe returns garbage; NVIDIA's compiler (driver 580)
// rejects the shader and the device is lost.

@group(0) @binding(0) var<storage, read> fb_input: array<f64>;
// Two values per input: exp(x) and log(|x| + 0.5).
@group(0) @binding(1) var<storage, read_write> fb_output: array<f64>;

@compute @workgroup_size(64)
fn f64_builtins_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= arrayLength(&fb_input)) {
        return;
    }
    let x = fb_input[i];
    fb_output[2u * i] = exp(x);
    fb_output[2u * i + 1u] = log(abs(x) + 0.5);
}
