// math_f64.wgsl: `sf_exp` and `sf_log` for `alias T = f64`, from arithmetic only.
//
// naga lowers WGSL `exp`/`log`/`pow` on f64 to GLSL.std.450 instructions that are only defined
// for 16- and 32-bit floats; lavapipe compiles them and silently returns garbage
// (gfx-rs/wgpu#6087), and casting through f32 loses 7 digits. So f64 builds exp and log from
// +, *, /, floor, ldexp and f32's frexp, which are exact or correctly rounded in f64.
// The algorithms and coefficients are FreeBSD msun's e_exp.c and e_log.c (via musl and the
// Rust `libm` crate that the CPU path uses): both are within 1 ulp.

const SF_LN2_HI: f64 = 6.93147180369123816490e-01;
const SF_LN2_LO: f64 = 1.90821492927058770002e-10;
const SF_INV_LN2: f64 = 1.44269504088896338700e+00;

// exp(x) = 2^k exp(r), x = k ln2 + r, |r| <= ln2 / 2, with ln2 split in two so that
// k * SF_LN2_HI is exact.
fn sf_exp(x: f64) -> f64 {
    if (x != x) {
        return x;
    }
    if (x > 709.782712893383973096) {
        return sf_inf();
    }
    if (x < -745.13321910194110842) {
        return 0.0;
    }
    var k: f64 = 0.0;
    var hi: f64 = x;
    var lo: f64 = 0.0;
    if (abs(x) > 0.34657359027997264) {
        k = floor(SF_INV_LN2 * x + 0.5);
        hi = x - k * SF_LN2_HI;
        lo = k * SF_LN2_LO;
    }
    let r = hi - lo;
    let c = sf_exp_c(r);
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    // Two steps so that neither factor overflows when k is 1024 or underflows early.
    let k_int = i32(k);
    let k_half = k_int / 2;
    return ldexp(ldexp(y, k_half), k_int - k_half);
}

// ln(x) = k ln2 + ln(1 + f), x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)).
fn sf_log(x: f64) -> f64 {
    if (!(x > 0.0)) {
        if (x == 0.0) {
            return -sf_inf();
        }
        return sf_nan();
    }
    if (x > 1.7976931348623157e308) {
        return x;
    }
    var m: f64 = x;
    var k: i32 = 0;
    // naga's f64 `frexp` returns an i64 exponent (SHADER_INT64), so the exponent is found
    // another way: exact power-of-two scalings bring x into f32's normal range, where f32's
    // `frexp` (i32 exponent) gives it to within one.
    if (m >= 0x1p512) {
        m = m * 0x1p-512;
        k = k + 512;
    }
    if (m >= 0x1p256) {
        m = m * 0x1p-256;
        k = k + 256;
    }
    if (m >= 0x1p128) {
        m = m * 0x1p-128;
        k = k + 128;
    }
    if (m >= 0x1p64) {
        m = m * 0x1p-64;
        k = k + 64;
    }
    if (m < 0x1p-512) {
        m = m * 0x1p512;
        k = k - 512;
    }
    if (m < 0x1p-256) {
        m = m * 0x1p256;
        k = k - 256;
    }
    if (m < 0x1p-128) {
        m = m * 0x1p128;
        k = k - 128;
    }
    if (m < 0x1p-64) {
        m = m * 0x1p64;
        k = k - 64;
    }
    let e = frexp(f32(m)).exp;
    m = m * ldexp(f64(1.0), -e);
    k = k + e;
    // f32(m) may have rounded up to the next power of two.
    if (m < 0.5) {
        m = m * 2.0;
        k = k - 1;
    }
    if (m < 0.70710678118654752440) {
        m = m * 2.0;
        k = k - 1;
    }
    // Exact (Sterbenz): m is within a factor 2 of 1.
    let f = m - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let dk = f64(k);
    return s * (hfsq + sf_log_r(s)) + dk * SF_LN2_LO - hfsq + f + dk * SF_LN2_HI;
}

// log(1 + e) for e in [0, 1] (softplus's term): `sf_log1p`, to the last bits.
fn sf_log1p_unit(e: f64) -> f64 {
    return sf_log1p(e);
}

// The largest finite value: `abs(x) <= SF_MAX_FINITE` is false for infinities and NaN.
const SF_MAX_FINITE: f64 = 1.7976931348623157e+308;

// A uniform draw from [0, 1) with 53 random bits: 27 from `hi`, 26 from `lo` (as
// `(a * 2^26 + b) / 2^53`, exact in f64, never 1).
fn sf_uniform(hi: u32, lo: u32) -> f64 {
    return (f64(hi >> 5u) * 67108864.0 + f64(lo >> 6u)) * 1.1102230246251565404236316680908203125e-16;
}

// math_f32.wgsl's compensated sum, plain: f64 keeps its sums to 1e-10 without it, and the
// interpreter, which calls these in both precisions, compiles no more code for f64 than before.
fn sf_sum_add(acc: vec2<T>, x: T) -> vec2<T> {
    return vec2<T>(acc.x + x, 0.0);
}

fn sf_sum_total(acc: vec2<T>) -> T {
    return acc.x;
}
