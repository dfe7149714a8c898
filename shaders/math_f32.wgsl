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

// log(1 + e) for e in [0, 1] (softplus's term): the GPU's log of 1 + e. Where 1 + e rounds e
// away (e < 2^-24) the absolute error is under 6e-8; log's own is 2^-21 on [1, 2]; both far
// under the 1e-4 target. It spares `sf_log1p`'s branch and polynomial, which a warp of mixed
// observations runs both sides of: 8% of the logistic model's NUTS kernel time on the H100.
fn sf_log1p_unit(e: f32) -> f32 {
    return log(1.0 + e);
}

// The largest finite value: `abs(x) <= SF_MAX_FINITE` is false for infinities and NaN.
const SF_MAX_FINITE: f32 = 3.40282346638528859812e+38;

// A uniform draw from [0, 1) from the high 24 bits of `hi` (24 bits: every value is exact in
// f32 and the result can never round up to 1). `lo` is for the f64 version's extra bits.
fn sf_uniform(hi: u32, lo: u32) -> f32 {
    return f32(hi >> 8u) * 5.9604644775390625e-8;
}

// Neumaier's compensated summation (Neumaier 1974, "Rundungsfehleranalyse einiger Verfahren
// zur Summation endlicher Summen"): `acc.x` is the running sum, `acc.y` the rounding errors
// its additions dropped, each recovered exactly by a TwoSum whose order depends on which
// operand is larger; the sum is `sf_sum_total(acc)`. The error of n terms is then about one
// rounding of the total plus n eps^2 times the sum of magnitudes, instead of n eps times it:
// what f32 needs where large terms cancel (a gradient over many data points at the mode).
// WGSL has no fast-math, so no compiler may reassociate these additions away. f64 needs no
// compensation (math_f64.wgsl's versions are plain sums, so the interpreter compiles as before).
fn sf_sum_add(acc: vec2<T>, x: T) -> vec2<T> {
    let t = acc.x + x;
    let e = select((x - t) + acc.x, (acc.x - t) + x, abs(acc.x) >= abs(x));
    return vec2<T>(t, acc.y + e);
}

// The compensated sum of `sf_sum_add`; an infinite or NaN running sum as it is (its error
// term is then NaN).
fn sf_sum_total(acc: vec2<T>) -> T {
    return select(acc.x, acc.x + acc.y, sf_inf() > abs(acc.x));
}
