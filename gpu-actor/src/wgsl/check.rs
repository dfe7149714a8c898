//! Structural checks of a [`Program`] before code generation: every reference in range and
//! every length what the CPU evaluator assumes.
//!
//! A program lowered from a [`sampler::CheckedModel`] always passes; the checks exist because
//! `Program` is plain public data, and a malformed one must give a [`CodegenError`] rather than
//! a panic here or out-of-range reads on the device.

use sampler::{Inst, MapOp, Operand, Program, SlotId, ZipOp};

use super::CodegenError;
use super::model::inst_name;

/// The largest tape (values per chain) the generator accepts: offsets, including the adjoint
/// half of a storage tape, must fit in `u32` index arithmetic.
const MAX_TAPE_LEN: usize = (u32::MAX / 4) as usize;

pub(crate) fn check(program: &Program) -> Result<(), CodegenError> {
    if program.tape_len > MAX_TAPE_LEN {
        return Err(CodegenError::TooLarge {
            what: "tape length",
            value: program.tape_len,
            limit: MAX_TAPE_LEN,
        });
    }
    if program.data.len() > u32::MAX as usize || program.index.len() > u32::MAX as usize {
        return Err(CodegenError::TooLarge {
            what: "data length",
            value: program.data.len().max(program.index.len()),
            limit: u32::MAX as usize,
        });
    }
    for (k, slot) in program.slots.iter().enumerate() {
        if slot.offset as usize + slot.len as usize > program.tape_len || slot.len == 0 {
            return Err(CodegenError::Malformed {
                problem: format!(
                    "slot {k} covers {}..{} of a tape of {} values",
                    slot.offset,
                    slot.offset as usize + slot.len as usize,
                    program.tape_len
                ),
            });
        }
    }
    let mut theta_readers = vec![0usize; program.dim];
    let mut written = vec![false; program.slots.len()];
    for (k, inst) in program.insts.iter().enumerate() {
        if let Some(kind) = unsupported(inst) {
            return Err(CodegenError::Unsupported { inst: k, kind });
        }
        let check = InstCheck {
            program,
            inst: k,
            name: inst_name(inst),
        };
        check.check(inst, &mut theta_readers)?;
        check.order(inst, &mut written)?;
    }
    if let Some((coordinate, &count)) = theta_readers.iter().enumerate().find(|(_, n)| **n != 1) {
        return Err(CodegenError::ThetaCoverage { coordinate, count });
    }
    Ok(())
}

/// The IR v2 instructions the generator does not translate yet, by name. Code generation
/// refuses a program with one (the caller falls back to the CPU), so the generators below
/// never see them.
pub(crate) fn unsupported(inst: &Inst) -> Option<&'static str> {
    match *inst {
        Inst::Concat { .. } => Some("concat"),
        Inst::LogSumExp { .. } => Some("log_sum_exp"),
        Inst::Map {
            op: MapOp::Lgamma, ..
        } => Some("lgamma"),
        Inst::Zip { op: ZipOp::Max, .. } => Some("max"),
        Inst::Zip { op: ZipOp::Min, .. } => Some("min"),
        _ => None,
    }
}

struct InstCheck<'a> {
    program: &'a Program,
    inst: usize,
    name: &'static str,
}

impl InstCheck<'_> {
    fn fail(&self, problem: String) -> CodegenError {
        CodegenError::MalformedInst {
            inst: self.inst,
            kind: self.name,
            problem,
        }
    }

    fn slot_len(&self, id: SlotId) -> Result<usize, CodegenError> {
        self.program
            .slots
            .get(id.0 as usize)
            .map(|slot| slot.len as usize)
            .ok_or_else(|| {
                self.fail(format!(
                    "slot {} does not exist ({} slots)",
                    id.0,
                    self.program.slots.len()
                ))
            })
    }

    /// The operand's length, after checking that it is in range.
    fn len(&self, operand: Operand) -> Result<usize, CodegenError> {
        match operand {
            Operand::Slot(id) => self.slot_len(id),
            Operand::Data(data) => {
                let end = data.offset as usize + data.len as usize;
                if end > self.program.data.len() || data.len == 0 {
                    return Err(self.fail(format!(
                        "data run {}..{end} is outside the {} data values",
                        data.offset,
                        self.program.data.len()
                    )));
                }
                Ok(data.len as usize)
            }
            Operand::Const(_) => Ok(1),
        }
    }

    /// `operand` broadcasts to, or has, length `n`.
    fn fits(&self, operand: Operand, n: usize, what: &str) -> Result<(), CodegenError> {
        let len = self.len(operand)?;
        if len == 1 || len == n {
            Ok(())
        } else {
            Err(self.fail(format!("{what} has length {len}, expected 1 or {n}")))
        }
    }

    fn equal(&self, found: usize, expected: usize, what: &str) -> Result<(), CodegenError> {
        if found == expected {
            Ok(())
        } else {
            Err(self.fail(format!("{what} has length {found}, expected {expected}")))
        }
    }

    /// Every slot read was written by an earlier instruction, and every slot is written once
    /// (the generated code clears a storage tape's adjoints as it writes each slot).
    fn order(&self, inst: &Inst, written: &mut [bool]) -> Result<(), CodegenError> {
        let (reads, dst): (Vec<Operand>, Option<SlotId>) = match *inst {
            Inst::Constrain { dst, .. } => (Vec::new(), Some(dst)),
            Inst::Map { a, dst, .. }
            | Inst::Sum { a, dst }
            | Inst::Cumsum { a, dst }
            | Inst::Gather { a, dst, .. } => (vec![a], Some(dst)),
            Inst::Zip { a, b, dst, .. } | Inst::Dot { a, b, dst } => (vec![a, b], Some(dst)),
            Inst::Matvec { v, dst, .. } => (vec![v], Some(dst)),
            Inst::Density { x, params, .. } => (std::iter::once(x).chain(params).collect(), None),
            Inst::RandomWalk {
                x,
                sigma,
                drift,
                init_mu,
                init_sigma,
                ..
            } => (vec![x, sigma, drift, init_mu, init_sigma], None),
            Inst::Factor { a, .. } => (vec![a], None),
            // Refused by `unsupported` before this runs.
            Inst::Concat { dst, .. } => (Vec::new(), Some(dst)),
            Inst::LogSumExp { a, dst } => (vec![a], Some(dst)),
        };
        for operand in reads {
            if let Operand::Slot(id) = operand
                && !written[id.0 as usize]
            {
                return Err(self.fail(format!("slot {} is read before it is written", id.0)));
            }
        }
        if let Some(id) = dst {
            if written[id.0 as usize] {
                return Err(self.fail(format!("slot {} is written twice", id.0)));
            }
            written[id.0 as usize] = true;
        }
        Ok(())
    }

    fn check(&self, inst: &Inst, theta_readers: &mut [usize]) -> Result<(), CodegenError> {
        match *inst {
            Inst::Constrain { theta, dst, .. } => {
                let end = theta.offset as usize + theta.len as usize;
                if end > theta_readers.len() {
                    return Err(self.fail(format!(
                        "coordinates {}..{end} are outside the {} unconstrained coordinates",
                        theta.offset,
                        theta_readers.len()
                    )));
                }
                theta_readers[theta.offset as usize..end]
                    .iter_mut()
                    .for_each(|n| *n += 1);
                self.equal(self.slot_len(dst)?, theta.len as usize, "the result")
            }
            Inst::Map { a, dst, .. } | Inst::Cumsum { a, dst } => {
                self.equal(self.len(a)?, self.slot_len(dst)?, "the argument")
            }
            Inst::Zip { a, b, dst, .. } => {
                let n = self.slot_len(dst)?;
                self.fits(a, n, "the first argument")?;
                self.fits(b, n, "the second argument")?;
                self.equal(n, self.len(a)?.max(self.len(b)?), "the result")
            }
            Inst::Sum { a, dst } => {
                self.len(a)?;
                self.equal(self.slot_len(dst)?, 1, "the result")
            }
            Inst::Dot { a, b, dst } => {
                self.equal(self.len(b)?, self.len(a)?, "the second vector")?;
                self.equal(self.slot_len(dst)?, 1, "the result")
            }
            Inst::Matvec { m, v, dst } => {
                let end = m.offset as usize + m.rows as usize * m.cols as usize;
                if end > self.program.data.len() {
                    return Err(self.fail(format!(
                        "the {}x{} matrix at {} is outside the {} data values",
                        m.rows,
                        m.cols,
                        m.offset,
                        self.program.data.len()
                    )));
                }
                self.equal(self.len(v)?, m.cols as usize, "the vector")?;
                self.equal(self.slot_len(dst)?, m.rows as usize, "the result")
            }
            Inst::Gather { a, idx, dst } => {
                let len = self.len(a)?;
                let end = idx.offset as usize + idx.len as usize;
                let Some(indices) = self.program.index.get(idx.offset as usize..end) else {
                    return Err(self.fail(format!(
                        "index run {}..{end} is outside the {} indices",
                        idx.offset,
                        self.program.index.len()
                    )));
                };
                if let Some(bad) = indices.iter().find(|&&i| i as usize >= len) {
                    return Err(self.fail(format!(
                        "index {bad} is out of range for a vector of length {len}"
                    )));
                }
                self.equal(self.slot_len(dst)?, idx.len as usize, "the result")
            }
            Inst::Density {
                kind,
                x,
                params,
                len,
                ..
            } => {
                let n = len as usize;
                self.fits(x, n, "the value")?;
                for (k, &param) in params.iter().take(kind.n_params()).enumerate() {
                    self.fits(param, n, &format!("parameter {k}"))?;
                }
                Ok(())
            }
            Inst::RandomWalk {
                x,
                sigma,
                drift,
                init_mu,
                init_sigma,
                ..
            } => {
                self.len(x)?;
                for (param, what) in [
                    (sigma, "sigma"),
                    (drift, "drift"),
                    (init_mu, "init_mu"),
                    (init_sigma, "init_sigma"),
                ] {
                    self.equal(self.len(param)?, 1, what)?;
                }
                Ok(())
            }
            Inst::Factor { a, .. } => self.len(a).map(|_| ()),
            Inst::Concat { .. } | Inst::LogSumExp { .. } => {
                Err(self.fail("not supported on the GPU yet".into()))
            }
        }
    }
}
