//! The values reported per draw (constrained parameters and transformed parameters, in the
//! order of `Program::columns`), computed on the CPU from the unconstrained draws the GPU
//! returns, with the sampler's own evaluator run on the part of the program they need.
//!
//! A draw's outputs rarely need the likelihood: the logistic model's 500 x 20 matrix-vector
//! product feeds a density, not an output. So the program is cut down to the instructions
//! whose slots an output reads, directly or through other slots; densities and factors go.

use std::sync::Arc;

use sampler::{Evaluator, Inst, LogDensity, Operand, Program, SlotId};

/// The slot an instruction writes, if any.
fn destination(inst: &Inst) -> Option<SlotId> {
    match *inst {
        Inst::Constrain { dst, .. }
        | Inst::Map { dst, .. }
        | Inst::Zip { dst, .. }
        | Inst::Sum { dst, .. }
        | Inst::Cumsum { dst, .. }
        | Inst::Dot { dst, .. }
        | Inst::Matvec { dst, .. }
        | Inst::Gather { dst, .. } => Some(dst),
        Inst::Density { .. } | Inst::RandomWalk { .. } | Inst::Factor { .. } => None,
    }
}

/// The operands an instruction reads.
fn reads(inst: &Inst) -> Vec<Operand> {
    match *inst {
        Inst::Constrain { .. } => Vec::new(),
        Inst::Map { a, .. }
        | Inst::Sum { a, .. }
        | Inst::Cumsum { a, .. }
        | Inst::Gather { a, .. }
        | Inst::Factor { a, .. } => vec![a],
        Inst::Zip { a, b, .. } | Inst::Dot { a, b, .. } => vec![a, b],
        Inst::Matvec { v, .. } => vec![v],
        Inst::Density { x, params, .. } => {
            let mut operands = vec![x];
            operands.extend(params);
            operands
        }
        Inst::RandomWalk {
            x,
            sigma,
            drift,
            init_mu,
            init_sigma,
            ..
        } => vec![x, sigma, drift, init_mu, init_sigma],
    }
}

/// `program` without the instructions no output needs.
pub(crate) fn outputs_program(program: &Program) -> Program {
    let mut needed = vec![false; program.slots.len()];
    let mark = |operand: &Operand, needed: &mut Vec<bool>| {
        if let Operand::Slot(id) = operand {
            needed[id.0 as usize] = true;
        }
    };
    for output in &program.outputs {
        mark(&output.value, &mut needed);
    }
    let mut keep = vec![false; program.insts.len()];
    for (k, inst) in program.insts.iter().enumerate().rev() {
        if let Some(dst) = destination(inst)
            && needed[dst.0 as usize]
        {
            keep[k] = true;
            for operand in reads(inst) {
                mark(&operand, &mut needed);
            }
        }
    }
    let mut pruned = program.clone();
    pruned.insts = program
        .insts
        .iter()
        .zip(&keep)
        .filter(|(_, keep)| **keep)
        .map(|(inst, _)| *inst)
        .collect();
    pruned
}

/// Writes a draw's reported values from its unconstrained position.
#[derive(Clone, Debug)]
pub(crate) struct OutputWriter {
    evaluator: Evaluator,
}

impl OutputWriter {
    pub(crate) fn new(program: &Program) -> OutputWriter {
        OutputWriter {
            evaluator: Evaluator::new(Arc::new(outputs_program(program))),
        }
    }

    /// Values per draw.
    pub(crate) fn n_columns(&self) -> usize {
        self.evaluator.n_outputs()
    }

    pub(crate) fn write(&mut self, q: &[f64], out: &mut [f64]) {
        self.evaluator.write_outputs(q, out);
    }
}
