//! An upper bound on the loop iterations of one evaluation of the generated model, for
//! devices that cap them.
//!
//! lavapipe (llvmpipe's gallivm) stops every loop of an invocation once 65,535 back edges
//! have been taken in total, counting all loops together ("Maximum iterations before loop
//! termination, shared between every loop in a TGSI shader", `LP_MAX_TGSI_LOOP_ITERATIONS`
//! in Mesa's lp_bld_limits.h); from then on loops exit early and results are silently wrong.
//! The sampling kernels loop over leapfrog steps around the model's own loops, so on such a
//! device their drivers bound the steps per dispatch by this estimate.

use sampler::{Inst, Operand, Program};

/// The loop budget of one invocation on lavapipe.
pub const SOFTWARE_LOOP_LIMIT: u64 = 65_535;

fn len(program: &Program, operand: Operand) -> u64 {
    program.len_of(operand) as u64
}

/// At least the loop iterations one call of the generated `g_logp_grad` takes: every
/// instruction's element loops (forward and backward sweeps, at most four passes over its
/// longest operand) and a matrix-vector product's rows times columns, twice.
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
        })
        .sum::<u64>()
        + 16
}
