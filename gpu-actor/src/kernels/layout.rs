//! The NUTS and fused kernels' memory layout on the CPU side: the same numbers as
//! `shaders/nuts_state.wgsl` and `shaders/fused.wgsl` (a unit test compares them with the
//! text), the uniform blocks as `bytemuck` structs, and buffer sizes.

use bytemuck::{Pod, Zeroable};

/// `NsParams` of nuts_state.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct NsParams {
    pub n_chains: u32,
    pub max_depth: u32,
    pub iter_end: u32,
    pub capacity: u32,
    pub step_budget: u32,
    pub with_grad: u32,
    pub flags: u32,
    pub seed_lo: u32,
    pub seed_hi: u32,
    pub da_final_iter: u32,
    pub late_from_iter: u32,
    pub search_kind: u32,
    /// Step-size search tries per dispatch (0: no limit); see nuts_search.wgsl.
    pub search_budget: u32,
    pub pad: [u32; 3],
}

/// `NmParams` of nuts_moments.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct NmParams {
    pub n_chains: u32,
    pub width: u32,
    pub capacity: u32,
    pub block_start: u32,
    pub bins: u32,
    pub usable_only: u32,
    /// 1 where the output slots are chain-major ([`NsSizes::chain_major`]).
    pub chain_major: u32,
    /// The bits of the f32 log density below which draws are left out (`lp_floor`).
    pub lp_floor_bits: u32,
}

/// Chains per workgroup of nuts_moments.wgsl (`NM_CHUNK`): a fixed size, so that the order in
/// which the moments are summed, and so the metric, does not depend on the device.
pub(crate) const NM_CHUNK: usize = 256;

/// `FuParams` of fused.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct FuParams {
    pub n_chains: u32,
    pub n_steps: u32,
    pub pad: [u32; 2],
}

pub(crate) const NS_FLAG_ADAPT: u32 = 1;
pub(crate) const NS_FLAG_SEARCH_MU: u32 = 2;
pub(crate) const NS_FLAG_SEARCH_CONTINUE: u32 = 4;

pub(crate) const NS_C_MAX_ENERGY_ERROR: usize = 0;
pub(crate) const NS_C_JITTER: usize = 1;
pub(crate) const NS_C_DA_TARGET: usize = 2;
pub(crate) const NS_C_DA_GAMMA: usize = 3;
pub(crate) const NS_C_DA_T0: usize = 4;
pub(crate) const NS_C_DA_KAPPA: usize = 5;
pub(crate) const NS_C_DA_MAX_LOG_STEP: usize = 6;
pub(crate) const NS_C_SEARCH_MU: usize = 7;
pub(crate) const NS_C_COUNT: usize = 16;

pub(crate) const NS_V_QSAMP: usize = 8;
pub(crate) const NS_V_GSAMP: usize = 9;
pub(crate) const NS_V_COUNT: usize = 14;
pub(crate) const NS_K_COUNT: usize = 3;

pub(crate) const NS_S_LOGP_SAMP: usize = 4;
pub(crate) const NS_S_STEP: usize = 11;
#[cfg(test)] // Mirrored for the layout test only.
pub(crate) const NS_S_DA_XBAR: usize = 17;
pub(crate) const NS_S_COUNT: usize = 18;

#[cfg(test)] // Mirrored for the layout test only.
pub(crate) const NS_U_PHASE: usize = 0;
#[cfg(test)] // Mirrored for the layout test only.
pub(crate) const NS_U_ITER: usize = 1;
pub(crate) const NS_U_DRAWS: usize = 11;
pub(crate) const NS_U_STEPS: usize = 12;
pub(crate) const NS_U_ERROR: usize = 13;
pub(crate) const NS_U_SEARCH_EVALS: usize = 14;
pub(crate) const NS_U_SEARCH_DIR: usize = 16;
pub(crate) const NS_U_COUNT: usize = 17;

pub(crate) const NS_O_LP: usize = 0;
pub(crate) const NS_O_ACCEPT: usize = 1;
#[cfg(test)] // Mirrored for the layout test only.
pub(crate) const NS_O_ACCEPT_SYM: usize = 2;
pub(crate) const NS_O_STEP: usize = 3;
pub(crate) const NS_O_ENERGY: usize = 4;
pub(crate) const NS_O_COUNT: usize = 5;

pub(crate) const NS_OU_DEPTH: usize = 0;
pub(crate) const NS_OU_NLEAP: usize = 1;
pub(crate) const NS_OU_DIVERGENT: usize = 2;
#[cfg(test)] // Mirrored for the layout test only.
pub(crate) const NS_OU_INDEX: usize = 3;
pub(crate) const NS_OU_COUNT: usize = 4;

pub(crate) const NS_ERROR_STEP_TOO_LARGE: u32 = 1;
pub(crate) const NS_ERROR_STEP_ZERO: u32 = 2;

/// Every constant above with its WGSL name, for the test against the shader text.
#[cfg(test)]
pub(crate) fn wgsl_constants() -> Vec<(&'static str, usize)> {
    vec![
        ("NS_FLAG_ADAPT", NS_FLAG_ADAPT as usize),
        ("NS_FLAG_SEARCH_MU", NS_FLAG_SEARCH_MU as usize),
        ("NS_FLAG_SEARCH_CONTINUE", NS_FLAG_SEARCH_CONTINUE as usize),
        ("NS_C_MAX_ENERGY_ERROR", NS_C_MAX_ENERGY_ERROR),
        ("NS_C_JITTER", NS_C_JITTER),
        ("NS_C_DA_TARGET", NS_C_DA_TARGET),
        ("NS_C_DA_GAMMA", NS_C_DA_GAMMA),
        ("NS_C_DA_T0", NS_C_DA_T0),
        ("NS_C_DA_KAPPA", NS_C_DA_KAPPA),
        ("NS_C_DA_MAX_LOG_STEP", NS_C_DA_MAX_LOG_STEP),
        ("NS_C_SEARCH_MU", NS_C_SEARCH_MU),
        ("NS_C_COUNT", NS_C_COUNT),
        ("NS_V_QSAMP", NS_V_QSAMP),
        ("NS_V_GSAMP", NS_V_GSAMP),
        ("NS_V_COUNT", NS_V_COUNT),
        ("NS_K_COUNT", NS_K_COUNT),
        ("NS_S_LOGP_SAMP", NS_S_LOGP_SAMP),
        ("NS_S_STEP", NS_S_STEP),
        ("NS_S_DA_XBAR", NS_S_DA_XBAR),
        ("NS_S_COUNT", NS_S_COUNT),
        ("NS_U_PHASE", NS_U_PHASE),
        ("NS_U_ITER", NS_U_ITER),
        ("NS_U_DRAWS", NS_U_DRAWS),
        ("NS_U_STEPS", NS_U_STEPS),
        ("NS_U_ERROR", NS_U_ERROR),
        ("NS_U_SEARCH_EVALS", NS_U_SEARCH_EVALS),
        ("NS_U_SEARCH_DIR", NS_U_SEARCH_DIR),
        ("NS_U_COUNT", NS_U_COUNT),
        ("NS_O_LP", NS_O_LP),
        ("NS_O_ACCEPT", NS_O_ACCEPT),
        ("NS_O_ACCEPT_SYM", NS_O_ACCEPT_SYM),
        ("NS_O_STEP", NS_O_STEP),
        ("NS_O_ENERGY", NS_O_ENERGY),
        ("NS_O_COUNT", NS_O_COUNT),
        ("NS_OU_DEPTH", NS_OU_DEPTH),
        ("NS_OU_NLEAP", NS_OU_NLEAP),
        ("NS_OU_DIVERGENT", NS_OU_DIVERGENT),
        ("NS_OU_INDEX", NS_OU_INDEX),
        ("NS_OU_COUNT", NS_OU_COUNT),
        ("NS_ERROR_STEP_TOO_LARGE", NS_ERROR_STEP_TOO_LARGE as usize),
        ("NS_ERROR_STEP_ZERO", NS_ERROR_STEP_ZERO as usize),
    ]
}

/// Sizes, in values, of the NUTS kernels' buffers for `n` chains of dimension `dim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NsSizes {
    pub n: usize,
    pub dim: usize,
    pub max_depth: usize,
    pub capacity: usize,
    pub with_grad: bool,
    /// Most slots of a dispatch that records gradients (`with_grad`): a session's output
    /// slots and moments hold its largest dispatch with gradients or without (nutpie's warmup
    /// blocks record them in fewer slots than sampling dispatches fill). For one dispatch's
    /// sizes, its `capacity`.
    pub grad_capacity: usize,
    /// Whether a vector role's block is chain-major (chains split across lanes) rather than
    /// dim-major (one invocation per chain); `ns_in_block` of nuts_state.wgsl.
    pub chain_major: bool,
}

impl NsSizes {
    /// Values per draw in the output slots.
    pub(crate) fn width(&self) -> usize {
        self.dim * if self.with_grad { 2 } else { 1 }
    }

    pub(crate) fn consts(&self) -> usize {
        NS_C_COUNT + self.dim
    }

    pub(crate) fn vec(&self) -> usize {
        (NS_V_COUNT * self.dim + NS_S_COUNT) * self.n
    }

    /// max_depth + 1 slots: popcount of a leaf index below 2^(max_depth - 1) is below max_depth.
    pub(crate) fn ckpt(&self) -> usize {
        (self.max_depth + 1) * NS_K_COUNT * self.dim * self.n
    }

    pub(crate) fn uint(&self) -> usize {
        (NS_U_COUNT + self.capacity * NS_OU_COUNT) * self.n
    }

    /// The draws of every slot, then their real statistics.
    pub(crate) fn out(&self) -> usize {
        self.capacity * (self.width() + NS_O_COUNT) * self.n
    }

    /// Values in the warmup moments buffer: per chunk of [`NM_CHUNK`] chains and per slot, a
    /// count, then a mean and a sum of squared deviations per draw value.
    pub(crate) fn moments(&self) -> usize {
        self.n.div_ceil(NM_CHUNK) * self.capacity * (1 + 2 * self.width())
    }

    /// Values a session's output slots need: room for its largest dispatch, of `capacity`
    /// slots without gradients or of `grad_capacity` slots with them.
    pub(crate) fn out_room(&self) -> usize {
        self.largest(NsSizes::out)
    }

    /// Values a session's moments buffer needs, as [`NsSizes::out_room`].
    pub(crate) fn moments_room(&self) -> usize {
        self.largest(NsSizes::moments)
    }

    fn largest(&self, values: impl Fn(&NsSizes) -> usize) -> usize {
        let plain = values(&NsSizes {
            with_grad: false,
            ..*self
        });
        if self.with_grad {
            plain.max(values(&NsSizes {
                capacity: self.grad_capacity,
                ..*self
            }))
        } else {
            plain
        }
    }

    /// Index of vector role `role`, coordinate `j`, chain `c` in the vec buffer.
    pub(crate) fn vec_at(&self, role: usize, j: usize, c: usize) -> usize {
        let block = role * self.dim * self.n;
        if self.chain_major {
            block + c * self.dim + j
        } else {
            block + j * self.n + c
        }
    }

    /// One vector role's block (`dim * n` values, [`NsSizes::vec_at`]'s order) of the
    /// chain-major `values` (chain `c`'s coordinate `j` at `c * dim + j`).
    pub(crate) fn role_block(&self, values: &[f64]) -> Vec<f64> {
        if self.chain_major {
            values.to_vec()
        } else {
            transposed(values, self.n, self.dim)
        }
    }

    /// The chain-major values of one vector role's `block` (inverse of
    /// [`NsSizes::role_block`]).
    pub(crate) fn chains_of_block(&self, block: &[f64]) -> Vec<f64> {
        if self.chain_major {
            block.to_vec()
        } else {
            transposed(block, self.dim, self.n)
        }
    }

    /// Index of scalar role `role` of chain `c` in the vec buffer.
    pub(crate) fn scalar_at(&self, role: usize, c: usize) -> usize {
        (NS_V_COUNT * self.dim + role) * self.n + c
    }

    /// Index of draw value `k` of output slot `slot`, chain `c`, in the out buffer: chain
    /// after chain within a slot where [`NsSizes::chain_major`], else value after value
    /// (`ns_out_at` of nuts_state.wgsl).
    pub(crate) fn out_at(&self, slot: usize, k: usize, c: usize) -> usize {
        if self.chain_major {
            (slot * self.n + c) * self.width() + k
        } else {
            (slot * self.width() + k) * self.n + c
        }
    }

    /// Index of real statistic `k` of output slot `slot`, chain `c`, in the out buffer, in
    /// [`NsSizes::out_at`]'s order after every slot's draws.
    pub(crate) fn out_stat_at(&self, slot: usize, k: usize, c: usize) -> usize {
        let stats = self.capacity * self.width() * self.n;
        if self.chain_major {
            stats + (slot * self.n + c) * NS_O_COUNT + k
        } else {
            stats + (slot * NS_O_COUNT + k) * self.n + c
        }
    }

    /// Values between one chain's neighbouring draw values (or statistics) of a slot in the
    /// out buffer: 1 where the slots are chain-major, else `n`.
    pub(crate) fn out_value_stride(&self) -> usize {
        if self.chain_major { 1 } else { self.n }
    }

    /// Values between neighbouring chains of one draw value or statistic in the out buffer:
    /// the stride of a row of [`NsSizes::out_at`] (`statistic`: of [`NsSizes::out_stat_at`]).
    pub(crate) fn out_chain_stride(&self, statistic: bool) -> usize {
        match (self.chain_major, statistic) {
            (false, _) => 1,
            (true, false) => self.width(),
            (true, true) => NS_O_COUNT,
        }
    }

    /// Index of integer statistic `k` of output slot `slot`, chain `c`, in the uint buffer.
    pub(crate) fn out_uint_at(&self, slot: usize, k: usize, c: usize) -> usize {
        NS_U_COUNT * self.n + (slot * NS_OU_COUNT + k) * self.n + c
    }
}

/// `values`, `rows` rows of `cols` values row after row, transposed (column after column),
/// for many short rows (chains' points). Rows are taken in blocks that stay in the cache:
/// column by column, each read would land `cols` values after the last, a cache miss per
/// value for thousands of points.
pub(crate) fn transposed(values: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    const BLOCK: usize = 64;
    debug_assert_eq!(values.len(), rows * cols);
    let mut out = vec![0.0; values.len()];
    for first in (0..rows).step_by(BLOCK) {
        let last = (first + BLOCK).min(rows);
        for col in 0..cols {
            let column = &mut out[col * rows + first..col * rows + last];
            for (row, out) in (first..last).zip(column) {
                *out = values[row * cols + col];
            }
        }
    }
    out
}
