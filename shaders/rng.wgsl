// rng.wgsl: counter-based random numbers for the sampling kernels.
//
// Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as 1, 2,
// 3", SC'11; the generator of cuRAND, JAX and Random123): a keyed bijection of a 128-bit
// counter, ten rounds of two 32x32->64 multiplications. The key is the run's 64-bit seed; the
// counter names the number: (chain, iteration, purpose, index), so every random number of a
// run is a pure function of (seed, chain, iteration, what it is for). Nothing is carried
// between draws or dispatches: the same seed gives the same draws however chains are
// scheduled and however many transitions a dispatch runs. gpu-actor's `kernels/philox.rs` is
// the same function on the CPU, checked against Random123's known answers and against this
// file on the device.
//
// Uniforms come from `sf_uniform` of the math file of the precision (24 random bits in f32,
// 53 in f64); normals from Box-Muller. The angle's cosine and sine are computed in f32 in both
// precisions: WGSL's f64 trigonometry is as unreliable as its f64 exp/log (see math_f64.wgsl),
// and a relative error of 1e-7 in a momentum is far below anything a sampler can resolve.

const RNG_M0: u32 = 0xD2511F53u;
const RNG_M1: u32 = 0xCD9E8D57u;
const RNG_W0: u32 = 0x9E3779B9u;
const RNG_W1: u32 = 0xBB67AE85u;

// (high, low) words of the 64-bit product a * b, from 16-bit halves (WGSL has no 64-bit
// integers without SHADER_INT64).
fn rng_mulhilo(a: u32, b: u32) -> vec2<u32> {
    let a_lo = a & 0xffffu;
    let a_hi = a >> 16u;
    let b_lo = b & 0xffffu;
    let b_hi = b >> 16u;
    let ll = a_lo * b_lo;
    let lh = a_lo * b_hi;
    let hl = a_hi * b_lo;
    let hh = a_hi * b_hi;
    let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
    let hi = hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
    return vec2<u32>(hi, a * b);
}

// Philox4x32 with 10 rounds: Random123's philox4x32_R(10, counter, key).
fn rng_philox(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
    var c = counter;
    var k = key;
    for (var round = 0u; round < 10u; round = round + 1u) {
        let p0 = rng_mulhilo(RNG_M0, c.x);
        let p1 = rng_mulhilo(RNG_M1, c.z);
        c = vec4<u32>(p1.x ^ c.y ^ k.x, p1.y, p0.x ^ c.w ^ k.y, p0.y);
        k = k + vec2<u32>(RNG_W0, RNG_W1);
    }
    return c;
}

// One uniform draw from [0, 1).
fn rng_uniform(counter: vec4<u32>, key: vec2<u32>) -> T {
    let bits = rng_philox(counter, key);
    return sf_uniform(bits.x, bits.y);
}

struct RngPair {
    a: T,
    b: T,
}

// Two independent standard normal draws (Box-Muller on the block's two uniforms).
fn rng_normal2(counter: vec4<u32>, key: vec2<u32>) -> RngPair {
    let bits = rng_philox(counter, key);
    // 1 - u is in (0, 1]: the logarithm is finite.
    let u1: T = 1.0 - sf_uniform(bits.x, bits.y);
    let u2: T = sf_uniform(bits.z, bits.w);
    let radius: T = sqrt(-2.0 * sf_log(u1));
    let angle: f32 = 6.28318530717958647692 * f32(u2);
    return RngPair(radius * T(cos(angle)), radius * T(sin(angle)));
}
