// special.wgsl: special functions for both precisions, written for `alias T = f32 | f64`
// in terms of `sf_exp` and `sf_log` (math_f32.wgsl or math_f64.wgsl).
//
// Each mirrors the CPU function of the same name in `sampler` (special.rs, and the inline
// helpers of dist.rs and eval.rs) branch for branch, so that the GPU computes the same
// function as the CPU up to rounding. Literals are abstract and take the type `T` from context;
// every `let` that would otherwise default to f32 is typed.

// Infinities and NaN cannot be written as WGSL literals, and naga folds constant expressions,
// so they are made at run time from a variable's bits.
fn sf_inf() -> T {
    var bits: u32 = 0x7f800000u;
    return T(bitcast<f32>(bits));
}

fn sf_neg_inf() -> T {
    return -sf_inf();
}

fn sf_nan() -> T {
    var bits: u32 = 0x7fc00000u;
    return T(bitcast<f32>(bits));
}

// sign(a) * (a != 0), as the CPU's `a.signum() * (a != 0)`: 0 at 0, NaN stays NaN.
fn sf_sign_or_zero(a: T) -> T {
    if (a > 0.0) {
        return 1.0;
    }
    if (a < 0.0) {
        return -1.0;
    }
    if (a == 0.0) {
        return 0.0;
    }
    return a;
}

// msun's e_exp.c: c(r) = r - (P1 r^2 + ... + P5 r^10), so that
// exp(r) = 1 + r + r c(r) / (2 - c(r)) for |r| <= ln2 / 2.
const SF_EXP_P1: T = 1.66666666666666019037e-01;
const SF_EXP_P2: T = -2.77777777770155933842e-03;
const SF_EXP_P3: T = 6.61375632143793436117e-05;
const SF_EXP_P4: T = -1.65339022054652515390e-06;
const SF_EXP_P5: T = 4.13813679705723846039e-08;

fn sf_exp_c(r: T) -> T {
    let rr = r * r;
    return r - rr * (SF_EXP_P1 + rr * (SF_EXP_P2 + rr * (SF_EXP_P3 + rr * (SF_EXP_P4 + rr * SF_EXP_P5))));
}

// msun's e_log.c: R(s) with ln(1 + f) = f - hfsq + s (hfsq + R(s)), s = f / (2 + f),
// hfsq = f^2 / 2, for 1 + f in [sqrt(1/2), sqrt(2)).
const SF_LG1: T = 6.666666666666735130e-01;
const SF_LG2: T = 3.999999999940941908e-01;
const SF_LG3: T = 2.857142874366239149e-01;
const SF_LG4: T = 2.222219843214978396e-01;
const SF_LG5: T = 1.818357216161805012e-01;
const SF_LG6: T = 1.531383769920937332e-01;
const SF_LG7: T = 1.479819860511658591e-01;

fn sf_log_r(s: T) -> T {
    let z = s * s;
    let w = z * z;
    let t1 = w * (SF_LG2 + w * (SF_LG4 + w * SF_LG6));
    let t2 = z * (SF_LG1 + w * (SF_LG3 + w * (SF_LG5 + w * SF_LG7)));
    return t2 + t1;
}

// ln(1 + x): the log kernel straight on x where 1 + x is within [sqrt(1/2), sqrt(2)), so that
// small x keep their relative precision; elsewhere ln(1 + x) loses nothing.
fn sf_log1p(x: T) -> T {
    if (x > -0.29289321881345248 && x < 0.41421356237309505) {
        let hfsq = 0.5 * x * x;
        let s = x / (2.0 + x);
        return s * (hfsq + sf_log_r(s)) - hfsq + x;
    }
    return sf_log(1.0 + x);
}

// exp(x) - 1: the exp kernel straight on x where no reduction is needed, so that small x keep
// their relative precision; elsewhere |exp(x) - 1| >= 0.29 and the subtraction loses nothing.
fn sf_expm1(x: T) -> T {
    if (abs(x) < 0.34657359027997264) {
        let c = sf_exp_c(x);
        return x + x * c / (2.0 - c);
    }
    return sf_exp(x) - 1.0;
}

// ln(1 + exp(x)) without overflow (sampler::softplus).
fn sf_softplus(x: T) -> T {
    if (x > 0.0) {
        return x + sf_log1p(sf_exp(-x));
    }
    return sf_log1p(sf_exp(x));
}

// 1 / (1 + exp(-x)) without overflow (sampler::logistic).
fn sf_logistic(x: T) -> T {
    if (x >= 0.0) {
        return 1.0 / (1.0 + sf_exp(-x));
    }
    let e = sf_exp(x);
    return e / (1.0 + e);
}

struct SfSoftplusLogistic {
    softplus: T,
    logistic: T,
}

// softplus(eta) and logistic(eta) from one exponential (dist.rs `softplus_and_logistic`).
// No branches: a warp's lanes hold different observations, and both sides of a branch cost.
fn sf_softplus_and_logistic(eta: T) -> SfSoftplusLogistic {
    let e = sf_exp(-abs(eta));
    let r = 1.0 / (1.0 + e);
    let softplus = max(eta, 0.0) + sf_log1p_unit(e);
    let logistic = select(e * r, r, eta >= 0.0);
    return SfSoftplusLogistic(softplus, logistic);
}

// x^y with Rust's `f64::powf` conventions where they matter: x^0 = 1, 0^y, and negative x
// with an integral y. WGSL's `pow` is undefined for x < 0 and is wrong on f64.
fn sf_pow(x: T, y: T) -> T {
    if (y == 0.0) {
        return 1.0;
    }
    if (x == 0.0) {
        if (y > 0.0) {
            return 0.0;
        }
        return sf_inf();
    }
    let magnitude = sf_exp(y * sf_log(abs(x)));
    if (x > 0.0) {
        return magnitude;
    }
    if (floor(y) != y) {
        return sf_nan();
    }
    let half = 0.5 * y;
    if (floor(half) != half) {
        return -magnitude;
    }
    return magnitude;
}

const SF_HALF_LN_2PI: T = 0.91893853320467274178;

// ln Γ(x) for x > 0: shift x up to at least 10 (Γ(x) = Γ(x + n) / (x (x + 1) ... (x + n - 1))),
// then Stirling's series to z^-13, whose truncation error is below 4e-17 there.
// The densities call it only for positive arguments; anything else gives NaN.
fn sf_lgamma(x: T) -> T {
    if (!(x > 0.0)) {
        return sf_nan();
    }
    var z: T = x;
    var product: T = 1.0;
    // At most 10 steps for x > 0, written out: lavapipe counts every loop an invocation
    // passes, run or not, against one budget (wgsl/cost.rs), and the interpreter
    // (interp.wgsl) passes every density's code for every instruction.
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        product = product * z;
        z = z + 1.0;
    }
    let inv = 1.0 / z;
    let inv2 = inv * inv;
    let series = inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0
        - inv2 * (1.0 / 1188.0 - inv2 * (691.0 / 360360.0 - inv2 / 156.0))))));
    return (z - 0.5) * sf_log(z) - z + SF_HALF_LN_2PI + series - sf_log(product);
}

// ψ(x) for x > 0, exactly as sampler::digamma: shift up to at least 10 with
// ψ(x) = ψ(x + 1) - 1/x, then the asymptotic series to x^-14.
fn sf_digamma(x: T) -> T {
    if (!(x > 0.0)) {
        return sf_nan();
    }
    var z: T = x;
    var shift: T = 0.0;
    // At most 10 steps for x > 0, written out (see sf_lgamma).
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    if (z < 10.0) {
        shift = shift - 1.0 / z;
        z = z + 1.0;
    }
    let inv = 1.0 / z;
    let inv2 = inv * inv;
    let series = inv2 * (1.0 / 12.0 - inv2 * (1.0 / 120.0 - inv2 * (1.0 / 252.0 - inv2 * (1.0 / 240.0
        - inv2 * (1.0 / 132.0 - inv2 * (691.0 / 32760.0 - inv2 / 12.0))))));
    return shift + sf_log(z) - 0.5 * inv - series;
}

const SF_PI: T = 3.14159265358979323846;

// sin(π r) for |r| <= 1/2: the Taylor series of sin(t), t = π r, to t^23 (its truncation
// error is below 1e-20 there), in Horner form in t²: 1 - u/(2·3) (1 - u/(4·5) (1 - ...)).
fn sf_sinpi_reduced(r: T) -> T {
    let t = SF_PI * r;
    let u = t * t;
    var p: T = 1.0 - u / 506.0;
    p = 1.0 - u / 420.0 * p;
    p = 1.0 - u / 342.0 * p;
    p = 1.0 - u / 272.0 * p;
    p = 1.0 - u / 210.0 * p;
    p = 1.0 - u / 156.0 * p;
    p = 1.0 - u / 110.0 * p;
    p = 1.0 - u / 72.0 * p;
    p = 1.0 - u / 42.0 * p;
    p = 1.0 - u / 20.0 * p;
    p = 1.0 - u / 6.0 * p;
    return t * p;
}

// cos(π r) for |r| <= 1/2: the Taylor series of cos(t) to t^24, as sf_sinpi_reduced.
fn sf_cospi_reduced(r: T) -> T {
    let t = SF_PI * r;
    let u = t * t;
    var p: T = 1.0 - u / 552.0;
    p = 1.0 - u / 462.0 * p;
    p = 1.0 - u / 380.0 * p;
    p = 1.0 - u / 306.0 * p;
    p = 1.0 - u / 240.0 * p;
    p = 1.0 - u / 182.0 * p;
    p = 1.0 - u / 132.0 * p;
    p = 1.0 - u / 90.0 * p;
    p = 1.0 - u / 56.0 * p;
    p = 1.0 - u / 30.0 * p;
    p = 1.0 - u / 12.0 * p;
    p = 1.0 - u / 2.0 * p;
    return p;
}

// ln |Γ(x)| for any real x, as sampler's lgamma (libm): sf_lgamma for x > 0, +inf at the poles
// (0, -1, -2, ...), and the reflection ln Γ(x) = ln(π / |sin(π x)|) - ln Γ(1 - x) elsewhere.
// sin(π x) is computed from x minus its nearest integer, without a built-in sin (wrong for
// f64 on lavapipe).
fn sf_lgamma_real(x: T) -> T {
    if (x > 0.0) {
        return sf_lgamma(x);
    }
    if (x == floor(x)) {
        return sf_inf();
    }
    let r = x - floor(x + 0.5);
    return sf_log(SF_PI / abs(sf_sinpi_reduced(r))) - sf_lgamma(1.0 - x);
}

// ψ(x) for any real x, as sampler::digamma: NaN at the poles and for -inf, the reflection
// ψ(x) = ψ(1 - x) - π cot(π x) for negative x.
fn sf_digamma_real(x: T) -> T {
    if (x > 0.0) {
        return sf_digamma(x);
    }
    if (x == floor(x)) {
        return sf_nan();
    }
    let r = x - floor(x + 0.5);
    return sf_digamma(1.0 - x) - SF_PI * sf_cospi_reduced(r) / sf_sinpi_reduced(r);
}

// c(t) of ln erfc(z) = ln t - z^2 + c(t), t = 2 / (2 + z), z >= 0, exactly as sampler's
// `erfc_correction`: Numerical Recipes' Chebyshev fit. The recurrence is written out (see
// sf_lgamma on loops).
fn sf_erfc_correction(t: T) -> T {
    let ty: T = 4.0 * t - 2.0;
    var d: T = 0.0;
    var dd: T = 0.0;
    var tmp: T = 0.0;
    tmp = d;
    d = ty * d - dd + -2.8e-17;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 1.21e-16;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -9.4e-17;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -1.523e-15;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 7.106e-15;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 3.81e-16;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -1.12708e-13;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 3.13092e-13;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 8.94487e-13;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -6.886027e-12;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 2.394038e-12;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 9.6467911e-11;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -2.27365122e-10;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -9.91364156e-10;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 5.059343495e-9;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 6.529054439e-9;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -8.5238095915e-8;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 1.5626441722e-8;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 1.303655835580e-6;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -1.624290004647e-6;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -2.0278578112534e-5;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 4.2523324806907e-5;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 3.66839497852761e-4;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -9.46595344482036e-4;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + -9.561514786808631e-3;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 1.9476473204185836e-2;
    dd = tmp;
    tmp = d;
    d = ty * d - dd + 6.4196979235649026e-1;
    dd = tmp;
    return 0.5 * (-1.3026537197817094 + ty * d) - dd;
}

// ln erfc(z) for z >= 0, as sampler's `log_erfc_nonnegative`; never underflows.
fn sf_log_erfc_nonnegative(z: T) -> T {
    let t: T = 2.0 / (2.0 + z);
    return sf_log(t) - z * z + sf_erfc_correction(t);
}

// ln Φ(x), as sampler's `log_phi`.
fn sf_log_phi(x: T) -> T {
    if (x != x) {
        return x;
    }
    let z: T = x * 0.70710678118654752440;
    if (x > 0.0) {
        return sf_log1p(-0.5 * sf_exp(sf_log_erfc_nonnegative(z)));
    }
    return sf_log_erfc_nonnegative(-z) - 0.69314718055994530942;
}

// φ(x) / Φ(x) from out = ln Φ(x), as sampler's `log_phi_slope` (below 0 without the
// cancelling exp(-x^2 / 2)).
fn sf_log_phi_slope(x: T, out: T) -> T {
    if (x > 0.0) {
        return sf_exp(-0.5 * x * x - 0.91893853320467274178 - out);
    }
    let t: T = 2.0 / (2.0 - x * 0.70710678118654752440);
    return 2.0 / (2.50662827463100050242 * t * sf_exp(sf_erfc_correction(t)));
}

// The derivative of sqrt from out = sqrt(x): 0 at 0, as sampler's eval.rs.
fn sf_sqrt_slope(out: T) -> T {
    if (out == 0.0) {
        return 0.0;
    }
    return 0.5 / out;
}

// ln step(x): 0 where x >= 0, -inf where x < 0, NaN stays NaN.
fn sf_log_step(x: T) -> T {
    if (x >= 0.0) {
        return 0.0;
    }
    if (x < 0.0) {
        return sf_neg_inf();
    }
    return x;
}
