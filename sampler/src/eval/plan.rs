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
    /// `dst = sum_i a[i] b[i]` over `len` values.
    Dot {
        a: u32,
        b: u32,
        len: u32,
        dst: u32,
        grad_a: bool,
        grad_b: bool,
    },
    /// `dst = log(sum_i exp(a[i]))` over `len` tape values.
    LogSumExp { a: u32, len: u32, dst: u32 },
    /// `dst[k] = a[program.index[idx + k]]` for `k < len`, from a tape slot.
    Gather {
        a: u32,
        idx: u32,
        len: u32,
        dst: u32,
    },
    /// A `Concat`: the runs `plan.runs[first..first + count]` copied one after another.
    Concat { first: u32, count: u32 },
    /// A `Map` of a tape slot of `len > 1` values.
    MapVec {
        op: MapOp,
        a: u32,
        len: u32,
        dst: u32,
    },
    /// A `Zip` of `len > 1` values: `plan.zips[i]`.
    ZipVec(u32),
    /// Instruction `i` of the program, through the per-instruction path.
    Inst(u32),
}

/// A run copied by a [`Step::Concat`]: `len` values from `a` to `dst`; `grad` when `a` is
/// on the tape (else the pool).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Run {
    a: u32,
    len: u32,
    dst: u32,
    grad: bool,
}

/// The operands of a [`Step::ZipVec`]: runs of `a_len` and `b_len` values (each 1, a
/// broadcast scalar, or `len`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ZipVec {
    op: ZipOp,
    a: u32,
    a_len: u32,
    b: u32,
    b_len: u32,
    dst: u32,
    len: u32,
    grad_a: bool,
    grad_b: bool,
}

/// The decoded program and the pool its steps read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    pub(super) steps: Vec<Step>,
    pub(super) runs: Vec<Run>,
    pub(super) zips: Vec<ZipVec>,
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
            runs: Vec::new(),
            zips: Vec::new(),
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
            runs: builder.runs,
            zips: builder.zips,
            pool: builder.pool,
        }
    }
}

struct Builder<'a> {
    program: &'a Program,
    pool: Vec<f64>,
    /// Pool position by the value's bits.
    pooled: HashMap<u64, u32>,
    runs: Vec<Run>,
    zips: Vec<ZipVec>,
}

/// Data runs longer than this stay in the data buffer (their instruction is not decoded).
const MAX_POOLED_RUN: u32 = 64;

impl Builder<'_> {
    fn decode(&mut self, inst: &Inst) -> Option<Step> {
        let program = self.program;
        let dst = inst.writes()?;
        let dst_slot = program.slot(dst);
        let dst = dst_slot.offset;
        match *inst {
            Inst::Dot { a, b, .. } => {
                let ((pa, len, grad_a), (pb, _, grad_b)) = (self.run(a)?, self.run(b)?);
                return Some(Step::Dot {
                    a: pa,
                    b: pb,
                    len,
                    dst,
                    grad_a,
                    grad_b,
                });
            }
            Inst::LogSumExp {
                a: a @ Operand::Slot(_),
                ..
            } => {
                let (a, len, _) = self.run(a)?;
                return Some(Step::LogSumExp { a, len, dst });
            }
            Inst::Gather {
                a: Operand::Slot(a),
                idx,
                ..
            } if idx.len > 1 => {
                return Some(Step::Gather {
                    a: program.slot(a).offset,
                    idx: idx.offset,
                    len: idx.len,
                    dst,
                });
            }
            Inst::Concat { parts, .. } => {
                let first = u32::try_from(self.runs.len()).ok()?;
                let mut at = dst;
                for &part in program.list(parts) {
                    let Some((a, len, grad)) = self.run(part) else {
                        self.runs.truncate(first as usize);
                        return None;
                    };
                    self.runs.push(Run {
                        a,
                        len,
                        dst: at,
                        grad,
                    });
                    at += len;
                }
                return Some(Step::Concat {
                    first,
                    count: parts.len,
                });
            }
            Inst::Map {
                op,
                a: Operand::Slot(a),
                ..
            } if dst_slot.len > 1 => {
                return Some(Step::MapVec {
                    op,
                    a: program.slot(a).offset,
                    len: dst_slot.len,
                    dst,
                });
            }
            // A vector `pow` with a vector exponent rounds otherwise than per value.
            Inst::Zip { op, a, b, .. } if dst_slot.len > 1 && op != ZipOp::Pow => {
                let ((a, a_len, grad_a), (b, b_len, grad_b)) = (self.run(a)?, self.run(b)?);
                let i = u32::try_from(self.zips.len()).ok()?;
                self.zips.push(ZipVec {
                    op,
                    a,
                    a_len,
                    b,
                    b_len,
                    dst,
                    len: dst_slot.len,
                    grad_a,
                    grad_b,
                });
                return Some(Step::ZipVec(i));
            }
            _ => {}
        }
        if dst_slot.len != 1 {
            return None;
        }
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

    /// The position and length of an operand, and whether it is on the tape: its slot, or
    /// pool entries for a constant or a short data run.
    fn run(&mut self, operand: Operand) -> Option<(u32, u32, bool)> {
        match operand {
            Operand::Slot(id) => {
                let slot = self.program.slot(id);
                Some((slot.offset, slot.len, true))
            }
            Operand::Data(data) if data.len > 1 => {
                if data.len > MAX_POOLED_RUN {
                    return None;
                }
                let values = self
                    .program
                    .data
                    .get(data.offset as usize..(data.offset + data.len) as usize)?;
                let at = u32::try_from(self.program.tape_len + self.pool.len()).ok()?;
                self.pool.extend_from_slice(values);
                Some((at, data.len, false))
            }
            _ => Some((self.scalar(operand)?, 1, false)),
        }
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
            Step::Dot { a, b, len, dst, .. } => {
                let (a, b) = (run(tape, a, len), run(tape, b, len));
                tape[dst as usize] = a.iter().zip(b).map(|(a, b)| a * b).sum();
            }
            Step::LogSumExp { a, len, dst } => {
                tape[dst as usize] = super::log_sum_exp_all(run(tape, a, len));
            }
            Step::Gather { a, idx, len, dst } => {
                let index = &program.index[idx as usize..(idx + len) as usize];
                for (k, &i) in index.iter().enumerate() {
                    tape[dst as usize + k] = tape[a as usize + i as usize];
                }
            }
            Step::Concat { first, count } => {
                for r in &plan.runs[first as usize..(first + count) as usize] {
                    let (a, dst) = (r.a as usize, r.dst as usize);
                    if r.len == 1 {
                        tape[dst] = tape[a];
                    } else {
                        tape.copy_within(a..a + r.len as usize, dst);
                    }
                }
            }
            Step::MapVec { op, a, len, dst } => {
                let (head, tail) = tape.split_at_mut(dst as usize);
                super::map_forward(op, run(head, a, len), &mut tail[..len as usize]);
            }
            Step::ZipVec(i) => {
                let z = &plan.zips[i as usize];
                let (head, tail) = tape.split_at_mut(z.dst as usize);
                let (out, pool) = tail.split_at_mut(z.len as usize);
                // An operand is a slot before `dst` or pool entries after the tape.
                let operand = |at: u32, len: u32| {
                    if at < z.dst {
                        run(head, at, len)
                    } else {
                        run(pool, at - z.dst - z.len, len)
                    }
                };
                super::zip_forward(z.op, operand(z.a, z.a_len), operand(z.b, z.b_len), out);
            }
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
            Step::Dot {
                a,
                b,
                len,
                dst,
                grad_a,
                grad_b,
            } => {
                let g = adj[dst as usize];
                if grad_a {
                    for i in 0..len as usize {
                        adj[a as usize + i] += g * tape[b as usize + i];
                    }
                }
                if grad_b {
                    for i in 0..len as usize {
                        adj[b as usize + i] += g * tape[a as usize + i];
                    }
                }
            }
            Step::LogSumExp { a, len, dst } => {
                let (out, g) = (tape[dst as usize], adj[dst as usize]);
                if g != 0.0 && out.is_finite() {
                    for i in 0..len as usize {
                        adj[a as usize + i] += g * (tape[a as usize + i] - out).exp();
                    }
                }
            }
            Step::Gather { a, idx, len, dst } => {
                let index = &program.index[idx as usize..(idx + len) as usize];
                for (k, &i) in index.iter().enumerate() {
                    adj[a as usize + i as usize] += adj[dst as usize + k];
                }
            }
            Step::MapVec { op, a, len, dst } => {
                for i in 0..len as usize {
                    let g = adj[dst as usize + i];
                    if g != 0.0 {
                        let (x, out) = (tape[a as usize + i], tape[dst as usize + i]);
                        adj[a as usize + i] += g * super::map_derivative(op, x, out);
                    }
                }
            }
            Step::ZipVec(i) => {
                let z = &plan.zips[i as usize];
                super::zip_backward(
                    z.op,
                    run(tape, z.a, z.a_len),
                    run(tape, z.b, z.b_len),
                    run(tape, z.dst, z.len),
                    adj,
                    z.dst as usize,
                    z.grad_a.then_some(z.a as usize),
                    z.grad_b.then_some(z.b as usize),
                );
            }
            Step::Concat { first, count } => {
                for r in &plan.runs[first as usize..(first + count) as usize] {
                    if r.grad {
                        for i in 0..r.len as usize {
                            adj[r.a as usize + i] += adj[r.dst as usize + i];
                        }
                    }
                }
            }
            Step::Inst(i) => super::backward(program, &program.insts[i as usize], tape, adj, grad),
        }
    }
}

/// `len` values of the tape-and-pool buffer from `at`.
#[inline(always)]
fn run(tape: &[f64], at: u32, len: u32) -> &[f64] {
    &tape[at as usize..(at + len) as usize]
}
