//! The program as a table for the interpreter of `shaders/interp.wgsl`, which computes the log
//! density and gradient of kernels whose tape lives in storage ([`super::TapePlacement::Storage`]).
//!
//! Generated code grows with the program, and drivers compile straight-line code that reads
//! and writes a storage tape in time that grows faster than its length: each access is a
//! per-invocation gather, and lavapipe's LLVM spent minutes on a few hundred instructions
//! (`bench/journal.md`, 2026-11-28). The interpreter is the same WGSL for every program; the
//! program is data, one record of [`RECORD`] words per instruction, appended to the index
//! buffer after a zero word (see [`device_indices`]), and the constants it needs (constant
//! operands, the bounds of constrained parameters) are appended to the real data
//! ([`device_data`]). Every loop bound of the interpreter is read from the table, so no
//! driver unrolls anything: the driver compiles a fixed amount of code whatever the model.
//!
//! A record (`u32` words; `shaders/interp.wgsl` reads the same layout):
//!
//! | word | meaning |
//! | --- | --- |
//! | 0 | the instruction's kind ([`Op`]) |
//! | 1 | its operation: map, zip or density kind, or transform, in enum order |
//! | 2, 3 | the written slot's tape offset and length (0, 0 for none) |
//! | 4 | bit `k` set: operand `k` is in the real data, not on the tape (no adjoint) |
//! | 5..15 | operands 0..4, each its offset and length (1: a broadcast scalar) |
//! | 15..20 | what else the kind needs (below) |
//!
//! A `Concat` takes one record per part (kind `Copy`): the part is operand 0, and the written
//! run is the part's own run of the concatenation's slot, so a part's record is a copy.
//!
//! Operands: `Map`, `Sum`, `Cumsum`, `Factor`, `LogSumExp`, `Copy`: `a`; `Zip`, `Dot`: `a`, `b`; `Matvec`: `v`;
//! `Gather`: `a`; `Density`: `x` and the three parameters (those the distribution does not
//! read are the constant 0); `RandomWalk`: `x`, `sigma`, `drift`, `init_mu`, `init_sigma`.
//! Extras: `Constrain`: the coordinates' offset and length and where its constants `lower`,
//! `upper`, `upper - lower`, `ln(upper - lower)` are in the data; `Matvec`: the matrix's
//! offset, rows, columns and 1 where the device holds it column-major (`layout.rs`);
//! `Gather`: the indices' offset and length; `Density`: its length and its parts (below).
//!
//! A density's parts are decided here exactly as `wgsl/density.rs` decides them (dist.rs's
//! rules: a part of data and constants only is dropped); each is one word, `kind | a << 4 |
//! b << 8 | term << 12`, where `kind` is [`Part`], `a` and `b` the operands it reads (0 for
//! `x`, 1 to 3 for the parameters) and `term` the [`TermFn`] in its enum order; 0 ends the
//! list. A density without parts adds nothing to the log density.

use std::collections::HashMap;

use sampler::{DensityKind, Inst, MapOp, Operand, Program, Transform, ZipOp};

use super::density::{self, Pos};
use super::layout;
use super::library::TermFn;

/// Words per instruction.
pub(crate) const RECORD: u32 = 20;

/// Operands a record holds.
const OPERANDS: usize = 5;

/// First word of the extras.
const EXTRA: usize = 5 + 2 * OPERANDS;

/// Instruction kinds (word 0), as `shaders/interp.wgsl` names them (`IT_CONSTRAIN`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Op {
    Constrain = 0,
    Map = 1,
    Zip = 2,
    Sum = 3,
    Cumsum = 4,
    Dot = 5,
    Matvec = 6,
    Gather = 7,
    Density = 8,
    RandomWalk = 9,
    Factor = 10,
    LogSumExp = 11,
    /// One part of a `Concat`: its operand copied to a run of the written slot.
    Copy = 12,
}

/// Kinds of a density's part (`IT_PART_*`); 0 ends the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Part {
    One = 1,
    Two = 2,
    Kernel = 3,
}

/// The table of a program: the records and the real constants they point to.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    /// [`RECORD`] words per instruction.
    pub words: Vec<u32>,
    /// Constants, to be placed after the program's data (their positions count from
    /// `program.data.len()`).
    pub reals: Vec<f64>,
}

/// The constants of a table, each stored once.
struct Constants {
    base: u32,
    reals: Vec<f64>,
    positions: HashMap<u64, u32>,
    bounds: HashMap<(u64, u64), u32>,
}

impl Constants {
    /// The data position of `value`.
    fn at(&mut self, value: f64) -> u32 {
        let next = self.base + self.reals.len() as u32;
        *self.positions.entry(value.to_bits()).or_insert_with(|| {
            self.reals.push(value);
            next
        })
    }

    /// The data position of a transform's `lower`, `upper`, `upper - lower` and
    /// `ln(upper - lower)`, consecutive.
    fn bounds(&mut self, lower: f64, upper: f64) -> u32 {
        let next = self.base + self.reals.len() as u32;
        *self
            .bounds
            .entry((lower.to_bits(), upper.to_bits()))
            .or_insert_with(|| {
                let width = upper - lower;
                self.reals.extend([lower, upper, width, width.ln()]);
                next
            })
    }
}

/// One record being filled.
struct Record {
    words: [u32; RECORD as usize],
}

impl Record {
    fn new(op: Op, sub: u32) -> Record {
        let mut words = [0; RECORD as usize];
        words[0] = op as u32;
        words[1] = sub;
        Record { words }
    }

    fn dst(mut self, program: &Program, dst: sampler::SlotId) -> Record {
        let slot = program.slot(dst);
        self.words[2] = slot.offset;
        self.words[3] = slot.len;
        self
    }

    fn operand(
        mut self,
        k: usize,
        program: &Program,
        constants: &mut Constants,
        operand: Operand,
    ) -> Record {
        let (offset, len, data) = match operand {
            Operand::Slot(id) => {
                let slot = program.slot(id);
                (slot.offset, slot.len, false)
            }
            Operand::Data(data) => (data.offset, data.len, true),
            Operand::Const(value) => (constants.at(value), 1, true),
        };
        if data {
            self.words[4] |= 1 << k;
        }
        self.words[5 + 2 * k] = offset;
        self.words[6 + 2 * k] = len;
        self
    }

    fn extra(mut self, values: &[u32]) -> Record {
        self.words[EXTRA..EXTRA + values.len()].copy_from_slice(values);
        self
    }
}

/// Records of `program`'s table: one per instruction, a `Concat` one per part.
pub(crate) fn records(program: &Program) -> usize {
    program
        .insts
        .iter()
        .map(|inst| match *inst {
            Inst::Concat { parts, .. } => parts.len as usize,
            _ => 1,
        })
        .sum()
}

/// The table of `program`, which has passed `check`. Offsets are the program's own: the
/// interpreter runs one chain per invocation (no lanes), on a storage tape.
pub(crate) fn table(program: &Program) -> Table {
    let mut constants = Constants {
        base: program.data.len() as u32,
        reals: Vec::new(),
        positions: HashMap::new(),
        bounds: HashMap::new(),
    };
    let column_major = layout::column_major(program);
    let mut words = Vec::with_capacity(records(program) * RECORD as usize);
    for inst in &program.insts {
        let c = &mut constants;
        let record = match *inst {
            Inst::Constrain {
                transform,
                theta,
                dst,
            } => {
                let (sub, at) = match transform {
                    Transform::Identity => (0, 0),
                    Transform::Lower(lower) => (1, c.bounds(lower, 0.0)),
                    Transform::Upper(upper) => (2, c.bounds(0.0, upper)),
                    Transform::Interval(lower, upper) => (3, c.bounds(lower, upper)),
                };
                Record::new(Op::Constrain, sub).dst(program, dst).extra(&[
                    theta.offset,
                    theta.len,
                    at,
                ])
            }
            Inst::Map { op, a, dst } => Record::new(Op::Map, map_op(op))
                .dst(program, dst)
                .operand(0, program, c, a),
            Inst::Zip { op, a, b, dst } => Record::new(Op::Zip, zip_op(op))
                .dst(program, dst)
                .operand(0, program, c, a)
                .operand(1, program, c, b),
            Inst::Sum { a, dst } => Record::new(Op::Sum, 0)
                .dst(program, dst)
                .operand(0, program, c, a),
            Inst::Cumsum { a, dst } => Record::new(Op::Cumsum, 0)
                .dst(program, dst)
                .operand(0, program, c, a),
            Inst::Dot { a, b, dst } => Record::new(Op::Dot, 0)
                .dst(program, dst)
                .operand(0, program, c, a)
                .operand(1, program, c, b),
            Inst::Matvec { m, v, dst } => Record::new(Op::Matvec, 0)
                .dst(program, dst)
                .operand(0, program, c, v)
                .extra(&[
                    m.offset,
                    m.rows,
                    m.cols,
                    u32::from(column_major.contains(&m)),
                ]),
            Inst::Gather { a, idx, dst } => Record::new(Op::Gather, 0)
                .dst(program, dst)
                .operand(0, program, c, a)
                .extra(&[idx.offset, idx.len]),
            Inst::Density {
                kind,
                x,
                params,
                len,
                ..
            } => {
                let n_params = kind.n_params();
                let mut record =
                    Record::new(Op::Density, density_kind(kind)).operand(0, program, c, x);
                for (k, &param) in params.iter().enumerate() {
                    // Parameters the distribution does not have are passed as 0.
                    let param = if k < n_params {
                        param
                    } else {
                        Operand::Const(0.0)
                    };
                    record = record.operand(k + 1, program, c, param);
                }
                let operands = [x, params[0], params[1], params[2]];
                let mut extra = vec![len];
                extra.extend(parts(kind, &operands[..=n_params]));
                record.extra(&extra)
            }
            Inst::RandomWalk {
                x,
                sigma,
                drift,
                init_mu,
                init_sigma,
                ..
            } => [x, sigma, drift, init_mu, init_sigma]
                .into_iter()
                .enumerate()
                .fold(Record::new(Op::RandomWalk, 0), |record, (k, operand)| {
                    record.operand(k, program, c, operand)
                }),
            Inst::Factor { a, .. } => Record::new(Op::Factor, 0).operand(0, program, c, a),
            Inst::LogSumExp { a, dst } => Record::new(Op::LogSumExp, 0)
                .dst(program, dst)
                .operand(0, program, c, a),
            Inst::Concat { parts, dst } => {
                // One record per part, each writing its run of `dst`.
                let slot = program.slot(dst);
                let mut at = slot.offset;
                for &part in program.list(parts) {
                    let len = program.len_of(part) as u32;
                    let mut record = Record::new(Op::Copy, 0).operand(0, program, c, part);
                    record.words[2] = at;
                    record.words[3] = len;
                    words.extend(record.words);
                    at += len;
                }
                continue;
            }
        };
        words.extend(record.words);
    }
    Table {
        words,
        reals: constants.reals,
    }
}

/// The words of a density's parts that run, as `wgsl/density.rs` runs them: a part is dropped
/// when none of its operands carries an adjoint. `operands`: `x` then the parameters the
/// distribution reads.
fn parts(kind: DensityKind, operands: &[Operand]) -> Vec<u32> {
    let is_param = |pos: Pos| {
        operands
            .get(pos_index(pos) as usize)
            .is_some_and(|operand| matches!(operand, Operand::Slot(_)))
    };
    density::parts(kind)
        .iter()
        .filter_map(|part| match *part {
            density::Part::One(a, term) => {
                is_param(a).then(|| Part::One as u32 | pos_index(a) << 4 | term_index(term) << 12)
            }
            density::Part::Two(a, b, term) => (is_param(a) || is_param(b)).then(|| {
                Part::Two as u32 | pos_index(a) << 4 | pos_index(b) << 8 | term_index(term) << 12
            }),
            density::Part::Kernel => operands
                .iter()
                .any(|operand| matches!(operand, Operand::Slot(_)))
                .then_some(Part::Kernel as u32),
        })
        .collect()
}

fn pos_index(pos: Pos) -> u32 {
    match pos {
        Pos::X => 0,
        Pos::P0 => 1,
        Pos::P1 => 2,
        Pos::P2 => 3,
    }
}

fn term_index(term: TermFn) -> u32 {
    match term {
        TermFn::NegLogScale => 0,
        TermFn::LogRate => 1,
        TermFn::NegLgamma => 2,
        TermFn::NegLogX => 3,
        TermFn::StudentTNu => 4,
        TermFn::ShapeLogRate => 5,
        TermFn::BetaNorm => 6,
        TermFn::UniformNorm => 7,
        TermFn::NegShapeLogScale => 8,
        TermFn::ChiSquareNu => 9,
        TermFn::NegHalfX => 10,
        TermFn::NegBinomialChoose => 11,
        TermFn::MultiplyLog => 12,
    }
}

fn map_op(op: MapOp) -> u32 {
    match op {
        MapOp::Neg => 0,
        MapOp::Exp => 1,
        MapOp::Log => 2,
        MapOp::Log1p => 3,
        MapOp::Expm1 => 4,
        MapOp::Softplus => 5,
        MapOp::Logistic => 6,
        MapOp::Sqrt => 7,
        MapOp::Abs => 8,
        MapOp::Lgamma => 9,
        MapOp::LogPhi => 10,
        MapOp::LogStep => 11,
    }
}

fn zip_op(op: ZipOp) -> u32 {
    match op {
        ZipOp::Add => 0,
        ZipOp::Sub => 1,
        ZipOp::Mul => 2,
        ZipOp::Div => 3,
        ZipOp::Pow => 4,
        ZipOp::Max => 5,
        ZipOp::Min => 6,
    }
}

fn density_kind(kind: DensityKind) -> u32 {
    match kind {
        DensityKind::Normal => 0,
        DensityKind::HalfNormal => 1,
        DensityKind::Exponential => 2,
        DensityKind::StudentT => 3,
        DensityKind::Cauchy => 4,
        DensityKind::HalfCauchy => 5,
        DensityKind::LogNormal => 6,
        DensityKind::Gamma => 7,
        DensityKind::InverseGamma => 8,
        DensityKind::Beta => 9,
        DensityKind::Uniform => 10,
        DensityKind::Laplace => 11,
        DensityKind::BernoulliLogit => 12,
        DensityKind::BinomialLogit => 13,
        DensityKind::PoissonLog => 14,
        DensityKind::Logistic => 15,
        DensityKind::Weibull => 16,
        DensityKind::ChiSquare => 17,
        DensityKind::Bernoulli => 18,
        DensityKind::Binomial => 19,
        DensityKind::Poisson => 20,
        DensityKind::NegBinomial2 => 21,
        DensityKind::NegBinomial2Log => 22,
    }
}

/// Position in the index buffer of the zero word the kernels read into `g_zero` (a value no
/// compiler can fold, added to loop bounds it must not unroll): right after the program's
/// `Gather` indices.
pub(crate) fn zero_at(program: &Program) -> u32 {
    program.index.len() as u32
}

/// Position in the index buffer of the table's first record.
pub(crate) fn code_at(program: &Program) -> u32 {
    zero_at(program) + 1
}

/// The index buffer as the device holds it: the program's `Gather` indices, a zero word
/// (`zero_at`), then the interpreter's table.
pub fn device_indices(program: &Program) -> Vec<u32> {
    let mut out = program.index.clone();
    out.push(0);
    out.extend(table(program).words);
    out
}

/// The real data as the device holds it: `layout::device_data` (the program's data with
/// product matrices column-major), then the interpreter's constants.
pub fn device_data(program: &Program) -> Vec<f64> {
    let mut out = layout::device_data(program);
    out.extend(table(program).reals);
    out
}

#[cfg(test)]
mod tests;
