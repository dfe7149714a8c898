//! The values reported per draw (constrained parameters and transformed parameters, in the
//! order of `Program::columns`), computed on the CPU from the unconstrained draws the GPU
//! returns, with the sampler's own evaluator run on the part of the program they need.
//!
//! A draw's outputs rarely need the likelihood: the logistic model's 500 x 20 matrix-vector
//! product feeds a density, not an output. So the program is cut down to the instructions
//! whose slots an output reads, directly or through other slots; densities and factors go.

use std::sync::Arc;

use sampler::{Evaluator, LogDensity, Operand, Program};

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
        if let Some(dst) = inst.writes()
            && needed[dst.0 as usize]
        {
            keep[k] = true;
            for operand in inst.reads() {
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
