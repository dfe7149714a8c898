//! Philox4x32-10 on the CPU (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as
//! easy as 1, 2, 3"): the same counter-based generator as `shaders/rng.wgsl`, so that the CPU
//! tree builder of the fused kernel draws the same numbers as the NUTS kernel, and tests can
//! compare the device's generator with this one (itself checked against Random123's known
//! answers).
//!
//! A number is named by `(seed, chain, iteration, purpose, index)`: the key is the seed, the
//! counter `(chain, iteration, purpose, index)`; see [`Purpose`].

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with 10 rounds: Random123's `philox4x32_R(10, counter, key)`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for _ in 0..10 {
        let p0 = u64::from(M0) * u64::from(c[0]);
        let p1 = u64::from(M1) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    c
}

/// What a random number is for: the counter's third word (`NS_RNG_*` in
/// `shaders/nuts_state.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Purpose {
    /// The momentum of a transition (index: block of two coordinates).
    Momentum = 0,
    /// The direction of a doubling (index: depth).
    Direction = 1,
    /// The multinomial choice of a leaf (index: leapfrog count).
    Leaf = 2,
    /// The top-level merge (index: depth after the merge).
    Top = 3,
    /// The step-size jitter (index 0).
    Jitter = 4,
    /// A step-size search's momentum (index: block; attempt in the purpose word's high bits).
    Search = 5,
}

/// A uniform draw from `[0, 1)` with 53 bits from two words (`sf_uniform` of math_f64.wgsl).
pub fn uniform53(hi: u32, lo: u32) -> f64 {
    (f64::from(hi >> 5) * 67_108_864.0 + f64::from(lo >> 6)) * (1.0 / 9_007_199_254_740_992.0)
}

/// A uniform draw from `[0, 1)` with 24 bits (`sf_uniform` of math_f32.wgsl).
pub fn uniform24(hi: u32) -> f32 {
    (hi >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Two standard normals from one block, as `rng_normal2` computes them: Box-Muller with the
/// radius in f64 and the angle's cosine and sine in f32.
pub fn normal_pair(bits: [u32; 4]) -> (f64, f64) {
    let u1 = 1.0 - uniform53(bits[0], bits[1]);
    let u2 = uniform53(bits[2], bits[3]);
    let radius = (-2.0 * u1.ln()).sqrt();
    let angle = std::f32::consts::TAU * u2 as f32;
    (
        radius * f64::from(angle.cos()),
        radius * f64::from(angle.sin()),
    )
}

/// The random numbers of one chain of a run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChainStream {
    key: [u32; 2],
    chain: u32,
}

impl ChainStream {
    pub(crate) fn new(seed: u64, chain: u32) -> ChainStream {
        ChainStream {
            key: [seed as u32, (seed >> 32) as u32],
            chain,
        }
    }

    fn bits(&self, iteration: u32, purpose: Purpose, index: u32) -> [u32; 4] {
        philox4x32_10([self.chain, iteration, purpose as u32, index], self.key)
    }

    /// A uniform draw from `[0, 1)`.
    pub(crate) fn uniform(&self, iteration: u32, purpose: Purpose, index: u32) -> f64 {
        let bits = self.bits(iteration, purpose, index);
        uniform53(bits[0], bits[1])
    }

    /// Momentum coordinates `2 block` and `2 block + 1` of a transition, before scaling.
    pub(crate) fn momentum_pair(&self, iteration: u32, block: u32) -> (f64, f64) {
        normal_pair(self.bits(iteration, Purpose::Momentum, block))
    }

    /// Momentum coordinates `2 block`, `2 block + 1` of try `attempt` of a step-size search
    /// at `iteration`, before scaling (`ns_search_purpose` of nuts_search.wgsl).
    pub(crate) fn search_pair(&self, iteration: u32, attempt: u32, block: u32) -> (f64, f64) {
        let purpose = Purpose::Search as u32 + 256 * attempt;
        normal_pair(philox4x32_10(
            [self.chain, iteration, purpose, block],
            self.key,
        ))
    }
}
