//! The values reported per draw (constrained parameters and transformed parameters, in the
//! order of `Program::columns`), written from its unconstrained position with the evaluator
//! run on the part of the program they need: where the GPU's draws come back, and where a
//! stream of positions arrives (a cluster client that has the model).
//!
//! A draw's outputs rarely need the likelihood: the logistic model's 500 x 20 matrix-vector
//! product feeds a density, not an output. So the program is cut down to the instructions
//! whose slots an output reads, directly or through other slots; densities and factors go.
//! Where what is left only copies coordinates (parameters on the real line), a draw's values
//! are copied without the evaluator.

use std::sync::Arc;

use crate::{Evaluator, Inst, LogDensity, Operand, Program, SlotId, ThetaRef, Transform};

/// `program` without the instructions no output needs.
fn outputs_program(program: &Program) -> Program {
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
            // `Program::reads`: a `Concat`'s operands are in the program's list buffer.
            for operand in program.reads(inst) {
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

/// Where each output column is in the unconstrained position, when every output is a
/// parameter on an identity transform (the logistic model's coefficients): the values are
/// then a copy, and the evaluator is not run for each of thousands of chains' draws.
fn identity_columns(outputs: &Program) -> Option<Vec<usize>> {
    let mut thetas: Vec<(SlotId, ThetaRef)> = Vec::new();
    for inst in &outputs.insts {
        match *inst {
            Inst::Constrain {
                transform: Transform::Identity,
                theta,
                dst,
            } => thetas.push((dst, theta)),
            _ => return None,
        }
    }
    let mut columns = Vec::new();
    for output in &outputs.outputs {
        let Operand::Slot(id) = output.value else {
            return None;
        };
        let &(_, theta) = thetas.iter().find(|(slot, _)| *slot == id)?;
        if output.len != theta.len {
            return None;
        }
        columns.extend(theta.offset as usize..(theta.offset + theta.len) as usize);
    }
    Some(columns)
}

/// Writes a draw's reported values from its unconstrained position. Clone one per thread:
/// writing uses the evaluator's scratch.
#[derive(Clone, Debug)]
pub struct OutputWriter {
    evaluator: Evaluator,
    /// Coordinates of a position.
    dim: usize,
    /// [`identity_columns`] of the outputs' program.
    identity: Option<Arc<[usize]>>,
}

impl OutputWriter {
    /// The writer of `program`'s outputs.
    pub fn new(program: &Program) -> OutputWriter {
        let outputs = outputs_program(program);
        OutputWriter {
            dim: program.dim,
            identity: identity_columns(&outputs).map(Arc::from),
            evaluator: Evaluator::new(Arc::new(outputs)),
        }
    }

    /// Values per draw.
    pub fn n_columns(&self) -> usize {
        self.evaluator.n_outputs()
    }

    /// Coordinates of the positions it reads.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether a draw's values are its position itself (every output a parameter on the
    /// real line, in the position's order): there is nothing to write.
    pub fn values_are_positions(&self) -> bool {
        self.identity.as_deref().is_some_and(|columns| {
            columns.len() == self.dim && columns.iter().enumerate().all(|(i, &k)| i == k)
        })
    }

    /// Writes the values of the draw at position `q` (`dim` coordinates) to `out`
    /// (`n_columns`).
    pub fn write(&mut self, q: &[f64], out: &mut [f64]) {
        match &self.identity {
            Some(columns) => {
                for (out, &k) in out.iter_mut().zip(columns.iter()) {
                    *out = q[k];
                }
            }
            None => self.evaluator.write_outputs(q, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> crate::CheckedModel {
        let path = format!("{}/../models/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
        crate::CheckedModel::from_json(&text, &crate::Limits::default()).unwrap()
    }

    #[test]
    fn the_copy_for_identity_outputs_writes_what_the_evaluator_writes() {
        for (name, identity) in [
            ("logistic", true),
            ("eight_schools_noncentered", false),
            ("sv", false),
        ] {
            let model = model(name);
            let program = model.program();
            let mut writer = OutputWriter::new(program);
            assert_eq!(writer.identity.is_some(), identity, "{name}");
            assert_eq!(writer.values_are_positions(), identity, "{name}");
            let mut evaluator = Evaluator::new(model.program().clone());
            let q: Vec<f64> = (0..program.dim)
                .map(|k| (k as f64 * 0.37).sin() * 2.0)
                .collect();
            let mut fast = vec![f64::NAN; writer.n_columns()];
            let mut full = vec![f64::NAN; evaluator.n_outputs()];
            writer.write(&q, &mut fast);
            evaluator.write_outputs(&q, &mut full);
            assert_eq!(fast, full, "{name}");
        }
    }
}
