// math_f32.wgsl: `sf_exp` and `sf_log` for `alias T = f32`.
//
// In f32 the GPU's own transcendentals are accurate enough for the 1e-4 parity target
// (Vulkan: exp within 3 + 2|x| ulp, log within 3 ulp or 2^-21 absolute near 1) and run on
// the fast special-function units, so they are used directly. Everything else in
// `special.wgsl` is written in terms of these two.

fn sf_exp(x: f32) -> f32 {
    return exp(x);
}

fn sf_log(x: f32) -> f32 {
    return log(x);
}
