//! Upper bounds on the loop iterations of the generated kernels, for devices that cap them.
//!
//! lavapipe (llvmpipe's gallivm) stops every loop of an invocation once 65,535 back edges
//! have been taken in total, counting all loops together ("Maximum iterations before loop
//! termination, shared between every loop in a TGSI shader", `LP_MAX_TGSI_LOOP_ITERATIONS`
//! in Mesa's lp_bld_limits.h, applied by `lp_exec_endloop` to NIR loops as well); from then
//! on every loop exits after its current iteration and results are silently wrong. A model
//! whose one gradient evaluation takes more than that (a 178 x 178 matrix-vector product,
//! forward and backward, is nearly all of it) cannot run there at all; the sampling kernels
//! loop over leapfrog steps and step-size tries around the model's own loops, so on such a
//! device their drivers bound both per dispatch ([`LoopBudget`]).

use sampler::{Inst, Operand, Program};

/// The loop budget of one invocation on lavapipe.
pub const SOFTWARE_LOOP_LIMIT: u64 = 65_535;

fn len(program: &Program, operand: Operand) -> u64 {
    program.len_of(operand) as u64
}

/// At least the loop iterations one call of the generated `g_logp_grad` takes: every
/// instruction's element loops (forward and backward sweeps, at most four passes over its
/// longest operand) and a matrix-vector product's rows times columns, twice; and for the
/// interpreter of a storage tape (`shaders/interp.wgsl`), four more per instruction: lavapipe
/// counts a loop's exit as an iteration, and the interpreter passes one loop over the
/// instructions and one over each instruction's elements in each sweep. The special
/// functions (`sf_lgamma`, `sf_digamma`) have no loops: their shifts are written out.
pub fn model_loop_iterations(program: &Program) -> u64 {
    let slot_len = |id: sampler::SlotId| u64::from(program.slot(id).len);
    program
        .insts
        .iter()
        .map(|inst| match *inst {
            Inst::Constrain { theta, .. } => 4 * u64::from(theta.len),
            Inst::Map { a, dst, .. } => 4 * len(program, a).max(slot_len(dst)),
            Inst::Zip { a, b, dst, .. } => {
                4 * len(program, a).max(len(program, b)).max(slot_len(dst))
            }
            Inst::Sum { a, .. } | Inst::Cumsum { a, .. } | Inst::Factor { a, .. } => {
                4 * len(program, a)
            }
            Inst::Dot { a, b, .. } => 4 * len(program, a).max(len(program, b)),
            Inst::Matvec { m, .. } => {
                let (rows, cols) = (u64::from(m.rows), u64::from(m.cols));
                2 * rows * cols + 4 * rows + 4 * cols
            }
            Inst::Gather { idx, .. } => 4 * u64::from(idx.len),
            Inst::Density { x, len: n, .. } => 4 * len(program, x).max(u64::from(n)),
            Inst::RandomWalk { x, .. } => 4 * len(program, x),
            Inst::Concat { dst, .. } => 4 * slot_len(dst),
            Inst::LogSumExp { a, .. } => 8 * len(program, a),
        })
        .sum::<u64>()
        + 4 * program.insts.len() as u64
        + 16
}

/// What one invocation of each kernel may do on a device that stops loops after `limit`
/// iterations, keeping a quarter of it in reserve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopBudget {
    /// Leapfrog steps per dispatch of the NUTS kernel (`NsParams.step_budget`).
    pub nuts_steps: u32,
    /// Step-size search tries per dispatch (`NsParams.search_budget`).
    pub search_tries: u32,
    /// Leapfrog steps per dispatch of the fused kernel.
    pub fused_steps: u32,
}

/// A model whose one leapfrog step needs more loop iterations than a device runs per
/// invocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "one leapfrog step of this model takes about {needed} loop iterations, over the {usable} \
     that this device runs per invocation (it stops loops after {limit})"
)]
pub struct LoopLimitExceeded {
    /// The estimate for one leapfrog step of the NUTS kernel.
    pub needed: u64,
    /// Three quarters of the limit: what a dispatch may use.
    pub usable: u64,
    /// The device's limit.
    pub limit: u64,
}

impl LoopBudget {
    /// The budget of `program` (NUTS trees up to `max_depth`) under `limit`, or why one
    /// leapfrog step does not fit: a leaf costs the model's loops plus the kernel's own passes
    /// over the coordinates (leapfrog, kicks, checkpoints, merges up to the tree depth, a
    /// transition's start and end); a search try the model, a momentum draw and a leapfrog
    /// step; a fused step the model and a few passes over the coordinates.
    pub fn of(
        program: &Program,
        max_depth: u32,
        limit: u64,
    ) -> Result<LoopBudget, LoopLimitExceeded> {
        let dim = program.dim as u64;
        let model = model_loop_iterations(program);
        let per_leaf = model + (25 + u64::from(max_depth)) * dim + 300;
        let per_try = model + 30 * dim + 300;
        let per_fused = model + 4 * dim + 32;
        let usable = limit * 3 / 4;
        let needed = per_leaf.max(per_try);
        if needed > usable {
            return Err(LoopLimitExceeded {
                needed,
                usable,
                limit,
            });
        }
        let fit = |cost: u64| (usable / cost).min(u64::from(u32::MAX)) as u32;
        Ok(LoopBudget {
            nuts_steps: fit(per_leaf),
            search_tries: fit(per_try),
            fused_steps: fit(per_fused),
        })
    }

    /// Whether one evaluation of the model's log density and gradient (the `logp_grad`
    /// kernel) fits under `limit`.
    pub fn check_logp_grad(program: &Program, limit: u64) -> Result<(), LoopLimitExceeded> {
        let needed = model_loop_iterations(program) + 4 * program.dim as u64 + 32;
        let usable = limit * 3 / 4;
        if needed > usable {
            return Err(LoopLimitExceeded {
                needed,
                usable,
                limit,
            });
        }
        Ok(())
    }
}
