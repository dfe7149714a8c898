// rng_check.wgsl: runs rng.wgsl's functions on given counters (entry point `rng_check_main`),
// so that tests compare the device's Philox, uniforms and normals with the CPU's
// (gpu-actor's kernels/philox.rs) and check their distribution.

struct RcKey {
    key: vec2<u32>,
    n: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> rc_key: RcKey;
@group(0) @binding(1) var<storage, read> rc_counters: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> rc_bits: array<vec4<u32>>;
// Three per counter: rng_uniform, then rng_normal2's pair.
@group(0) @binding(3) var<storage, read_write> rc_values: array<T>;

@compute @workgroup_size(64)
fn rng_check_main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= rc_key.n) {
        return;
    }
    let counter = rc_counters[i];
    rc_bits[i] = rng_philox(counter, rc_key.key);
    rc_values[3u * i] = rng_uniform(counter, rc_key.key);
    let pair = rng_normal2(counter, rc_key.key);
    rc_values[3u * i + 1u] = pair.a;
    rc_values[3u * i + 2u] = pair.b;
}
