//! The evaluator's pre-decoded instruction stream: scalar instructions with their operands
//! resolved to positions, the rest left to the per-instruction path.
//!
//! Programs lowered from Stan's loops (recursions, hidden Markov models) are thousands of
//! one-value instructions, where decoding an [`Inst`] costs more than its arithmetic. A
//! [`Plan`] decodes each such instruction once, when the evaluator is made, into a small
//! [`Step`] over one buffer: the tape followed by a *pool* of the constants and scalar data
//! the steps read. Adjoints use the same positions; what lands on the pool's adjoints is
//! never read. A step computes exactly what the per-instruction path computes, in the same
//! order, so the two agree bit for bit (tested).

use std::collections::HashMap;

use crate::program::{Inst, MapOp, Operand, Program, ZipOp};

/// A decoded instruction. Positions index the tape-and-pool buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Step {
    /// `dst = a + b`
    Add { a: u32, b: u32, dst: u32 },
    /// `dst = a - b`
    Sub { a: u32, b: u32, dst: u32 },
    /// `dst = a * b`
    Mul { a: u32, b: u32, dst: u32 },
    /// `dst = a / b`
    Div { a: u32, b: u32, dst: u32 },
    /// `dst = a^2`
    Square { a: u32, dst: u32 },
    /// Any other scalar `Zip`; `grad_a`, `grad_b` when the operand carries a gradient
    /// (a derivative can be costly: `pow`, `ln`).
    Zip {
        op: ZipOp,
        a: u32,
        b: u32,
        dst: u32,
        grad_a: bool,
        grad_b: bool,
    },
    /// A scalar `Map` of a tape value.
    Map { op: MapOp, a: u32, dst: u32 },
    /// `dst = a`: a one-element `Gather`.
    Copy { a: u32, dst: u32 },
    /// Instruction `i` of the program, through the per-instruction path.
    Inst(u32),
}

/// The decoded program and the pool its steps read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    pub(super) steps: Vec<Step>,
    /// Values placed after the tape, at `program.tape_len`.
    pub(super) pool: Vec<f64>,
}

impl Plan {
    /// Decodes `program`. Instructions that are not scalar (or whose positions do not fit
    /// in `u32`) stay [`Step::Inst`].
    pub(crate) fn new(program: &Program) -> Plan {
        let mut builder = Builder {
            program,
            pool: Vec::new(),
            pooled: HashMap::new(),
        };
        let steps = program
            .insts
            .iter()
            .enumerate()
            .map(|(i, inst)| {
                builder.decode(inst).unwrap_or(Step::Inst(
                    u32::try_from(i).expect("instruction count fits u32"),
                ))
            })
            .collect();
        Plan {
            steps,
            pool: builder.pool,
        }
    }
}

struct Builder<'a> {
    program: &'a Program,
    pool: Vec<f64>,
    /// Pool position by the value's bits.
    pooled: HashMap<u64, u32>,
}

impl Builder<'_> {
    fn decode(&mut self, inst: &Inst) -> Option<Step> {
        let program = self.program;
        let dst = inst.writes()?;
        let dst_slot = program.slot(dst);
        if dst_slot.len != 1 {
            return None;
        }
        let dst = dst_slot.offset;
        Some(match *inst {
            Inst::Zip { op, a, b, .. } => {
                let (pa, pb) = (self.scalar(a)?, self.scalar(b)?);
                match op {
                    ZipOp::Add => Step::Add { a: pa, b: pb, dst },
                    ZipOp::Sub => Step::Sub { a: pa, b: pb, dst },
                    ZipOp::Mul => Step::Mul { a: pa, b: pb, dst },
                    ZipOp::Div => Step::Div { a: pa, b: pb, dst },
                    ZipOp::Pow if b == Operand::Const(2.0) => Step::Square { a: pa, dst },
                    _ => Step::Zip {
                        op,
                        a: pa,
                        b: pb,
                        dst,
                        grad_a: matches!(a, Operand::Slot(_)),
                        grad_b: matches!(b, Operand::Slot(_)),
                    },
                }
            }
            Inst::Map {
                op,
                a: a @ Operand::Slot(_),
                ..
            } => Step::Map {
                op,
                a: self.scalar(a)?,
                dst,
            },
            Inst::Gather {
                a: Operand::Slot(a),
                idx,
                ..
            } => {
                let i = *program.index.get(idx.offset as usize)?;
                let source = program.slot(a);
                if i >= source.len {
                    return None;
                }
                Step::Copy {
                    a: source.offset.checked_add(i)?,
                    dst,
                }
            }
            _ => return None,
        })
    }

    /// The position of a one-value operand: its tape slot, or a pool entry for a constant
    /// or a one-value data run.
    fn scalar(&mut self, operand: Operand) -> Option<u32> {
        let value = match operand {
            Operand::Slot(id) => {
                let slot = self.program.slot(id);
                return (slot.len == 1).then_some(slot.offset);
            }
            Operand::Data(data) if data.len == 1 => *self.program.data.get(data.offset as usize)?,
            Operand::Data(_) => return None,
            Operand::Const(value) => value,
        };
        if let Some(&at) = self.pooled.get(&value.to_bits()) {
            return Some(at);
        }
        let at = u32::try_from(self.program.tape_len + self.pool.len()).ok()?;
        self.pool.push(value);
        self.pooled.insert(value.to_bits(), at);
        Some(at)
    }
}

/// Runs the plan forward (as [`super::forward`] runs the instructions); returns the log
/// density. `tape` holds the tape and then the pool.
pub(super) fn forward(
    program: &Program,
    plan: &Plan,
    theta: &[f64],
    tape: &mut [f64],
    mut adj: Option<&mut [f64]>,
    mut grad: Option<&mut [f64]>,
) -> f64 {
    let mut lp = 0.0;
    for step in &plan.steps {
        match *step {
            Step::Add { a, b, dst } => tape[dst as usize] = tape[a as usize] + tape[b as usize],
            Step::Sub { a, b, dst } => tape[dst as usize] = tape[a as usize] - tape[b as usize],
            Step::Mul { a, b, dst } => tape[dst as usize] = tape[a as usize] * tape[b as usize],
            Step::Div { a, b, dst } => tape[dst as usize] = tape[a as usize] / tape[b as usize],
            Step::Square { a, dst } => tape[dst as usize] = super::square(tape[a as usize]),
            Step::Zip { op, a, b, dst, .. } => {
                tape[dst as usize] = super::zip_scalar(op, tape[a as usize], tape[b as usize]);
            }
            Step::Map { op, a, dst } => {
                tape[dst as usize] = super::map_scalar(op, tape[a as usize]);
            }
            Step::Copy { a, dst } => tape[dst as usize] = tape[a as usize],
            Step::Inst(i) => {
                lp += super::step(
                    program,
                    &program.insts[i as usize],
                    theta,
                    tape,
                    adj.as_deref_mut(),
                    grad.as_deref_mut(),
                );
            }
        }
    }
    lp
}

/// Carries adjoints back through the plan, last step first (as [`super::backward`] per
/// instruction).
pub(super) fn backward(
    program: &Program,
    plan: &Plan,
    tape: &[f64],
    adj: &mut [f64],
    grad: &mut [f64],
) {
    for step in plan.steps.iter().rev() {
        match *step {
            Step::Add { a, b, dst } => {
                let g = adj[dst as usize];
                adj[a as usize] += g;
                adj[b as usize] += g;
            }
            Step::Sub { a, b, dst } => {
                let g = adj[dst as usize];
                adj[a as usize] += g;
                adj[b as usize] += -g;
            }
            Step::Mul { a, b, dst } => {
                let g = adj[dst as usize];
                let (x, y) = (tape[a as usize], tape[b as usize]);
                adj[a as usize] += g * y;
                adj[b as usize] += g * x;
            }
            Step::Div { a, b, dst } => {
                let (g, out) = (adj[dst as usize], tape[dst as usize]);
                let y = tape[b as usize];
                adj[a as usize] += g * (1.0 / y);
                adj[b as usize] += g * (-out / y);
            }
            Step::Square { a, dst } => {
                let g = adj[dst as usize];
                adj[a as usize] += g * (2.0 * tape[a as usize]);
            }
            Step::Zip {
                op,
                a,
                b,
                dst,
                grad_a,
                grad_b,
            } => {
                let (g, out) = (adj[dst as usize], tape[dst as usize]);
                let (x, y) = (tape[a as usize], tape[b as usize]);
                if grad_a {
                    adj[a as usize] += g * super::zip_derivative_a(op, x, y);
                }
                if grad_b {
                    adj[b as usize] += g * super::zip_derivative_b(op, x, y, out);
                }
            }
            Step::Map { op, a, dst } => {
                let g = adj[dst as usize];
                if g != 0.0 {
                    let d = super::map_derivative(op, tape[a as usize], tape[dst as usize]);
                    adj[a as usize] += g * d;
                }
            }
            Step::Copy { a, dst } => adj[a as usize] += adj[dst as usize],
            Step::Inst(i) => super::backward(program, &program.insts[i as usize], tape, adj, grad),
        }
    }
}
