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

// The largest finite value: `abs(x) <= SF_MAX_FINITE` is false for infinities and NaN.
const SF_MAX_FINITE: f32 = 3.40282346638528859812e+38;

// A uniform draw from [0, 1) from the high 24 bits of `hi` (24 bits: every value is exact in
// f32 and the result can never round up to 1). `lo` is for the f64 version's extra bits.
fn sf_uniform(hi: u32, lo: u32) -> f32 {
    return f32(hi >> 8u) * 5.9604644775390625e-8;
}
