//! Random numbers for `_rng` functions: a ChaCha8 stream per (seed, chain, draw), and the
//! samplers of Stan's distributions written out (Marsaglia and Tsang's gamma, Hörmann's PTRS
//! Poisson, Knuth's beta-splitting binomial).
//!
//! The key is derived from the three numbers with SplitMix64 under a constant of its own, so
//! the streams are independent of the sampler's (`sampler::ChainRng` keys ChaCha8 with the
//! seed alone) and the same (seed, chain, draw) always gives the same numbers.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};

use super::math::lgamma;

/// Separates the generated-quantities streams from every other use of the seed.
const GQ_DOMAIN: u64 = 0x6751_2d67_7172_6e67;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A random stream on the host.
#[derive(Clone, Debug)]
pub struct HostRng {
    inner: ChaCha8Rng,
}

impl HostRng {
    /// The stream of draw `draw` of chain `chain` in a run seeded with `seed`.
    pub fn for_draw(seed: u64, chain: u32, draw: u64) -> HostRng {
        let mut state = GQ_DOMAIN ^ seed;
        let mut key = [0u8; 32];
        let words = [
            splitmix64(&mut state),
            splitmix64(&mut state) ^ u64::from(chain),
            splitmix64(&mut state) ^ draw,
        ];
        let mut mix = words[0];
        for (i, chunk) in key.chunks_mut(8).enumerate() {
            mix ^= words[i % 3].rotate_left(17 * i as u32);
            let word = splitmix64(&mut mix);
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        HostRng {
            inner: ChaCha8Rng::from_seed(key),
        }
    }

    /// A uniform draw from the open interval (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.inner.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal draw (Box–Muller; no cached pair, so streams stay simple).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// A gamma draw with shape `alpha` and scale 1 (Marsaglia and Tsang, 2000).
    pub fn gamma(&mut self, alpha: f64) -> f64 {
        if alpha < 1.0 {
            // Boost: Gamma(a) = Gamma(a + 1) U^(1/a).
            let u = self.uniform();
            return self.gamma(alpha + 1.0) * u.powf(1.0 / alpha);
        }
        let d = alpha - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.uniform();
            if u < 1.0 - 0.0331 * x * x * x * x || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
                return d * v;
            }
        }
    }

    /// A beta draw from two gammas.
    pub fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        let y = self.gamma(b);
        x / (x + y)
    }

    /// A Poisson draw: multiplication of uniforms for small means, Hörmann's transformed
    /// rejection (PTRS, 1993) otherwise.
    pub fn poisson(&mut self, lambda: f64) -> i64 {
        if lambda <= 0.0 {
            return 0;
        }
        if lambda < 10.0 {
            let limit = (-lambda).exp();
            let mut k = 0;
            let mut p = self.uniform();
            while p > limit {
                k += 1;
                p *= self.uniform();
            }
            return k;
        }
        let slam = lambda.sqrt();
        let loglam = lambda.ln();
        let b = 0.931 + 2.53 * slam;
        let a = -0.059 + 0.02483 * b;
        let invalpha = 1.1239 + 1.1328 / (b - 3.4);
        let vr = 0.9277 - 3.6224 / (b - 2.0);
        loop {
            let u = self.uniform() - 0.5;
            let v = self.uniform();
            let us = 0.5 - u.abs();
            let k = ((2.0 * a / us + b) * u + lambda + 0.43).floor();
            if us >= 0.07 && v <= vr {
                return k as i64;
            }
            if k < 0.0 || (us < 0.013 && v > us) {
                continue;
            }
            if v.ln() + invalpha.ln() - (a / (us * us) + b).ln()
                <= -lambda + k * loglam - lgamma(k + 1.0)
            {
                return k as i64;
            }
        }
    }

    /// A binomial draw: Bernoulli counts for small `n`, Knuth's beta splitting above.
    pub fn binomial(&mut self, n: i64, p: f64) -> i64 {
        if n <= 0 || p <= 0.0 {
            return 0;
        }
        if p >= 1.0 {
            return n;
        }
        if n < 64 {
            return (0..n).filter(|_| self.uniform() < p).count() as i64;
        }
        let a = 1 + n / 2;
        let b = n + 1 - a;
        let x = self.beta(a as f64, b as f64);
        if x >= p {
            self.binomial(a - 1, p / x)
        } else {
            a + self.binomial(b - 1, (p - x) / (1.0 - x))
        }
    }
}
