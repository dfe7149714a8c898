//! Where a chain's values live while the generated model runs: the value and adjoint tapes
//! for each [`TapePlacement`], and views of instruction operands with scalar broadcasting.

use sampler::{Operand, Program};

use super::ast::{Expr, Global, Ident, ModuleConst, Stmt, Ty};
use super::{DataPlacement, TapePlacement};

/// The value and adjoint tapes of one chain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tape {
    placement: TapePlacement,
    tape_len: u32,
    data: DataPlacement,
}

impl Tape {
    pub(crate) fn new(placement: TapePlacement, tape_len: u32, data: DataPlacement) -> Tape {
        Tape {
            placement,
            tape_len,
            data,
        }
    }

    /// Element `index` of the model's real data, from wherever the kernel keeps it.
    pub(crate) fn data(&self, index: Expr) -> Expr {
        let global = match self.data {
            DataPlacement::Storage => Global::Data,
            DataPlacement::Workgroup => Global::SharedData,
        };
        Expr::Global(global).index(index)
    }

    pub(crate) fn placement(&self) -> TapePlacement {
        self.placement
    }

    /// The value at tape position `index`.
    pub(crate) fn value(&self, index: Expr) -> Expr {
        match self.placement {
            TapePlacement::Private => Expr::local(&Ident::new("tape")).index(index),
            TapePlacement::Storage => self.scratch(index),
        }
    }

    /// The adjoint of tape position `index`.
    pub(crate) fn adjoint(&self, index: Expr) -> Expr {
        match self.placement {
            TapePlacement::Private => Expr::local(&Ident::new("adj")).index(index),
            TapePlacement::Storage => self.scratch(index.plus_u32(self.tape_len)),
        }
    }

    /// Storage placement: value `k` of the chain's `2 * tape_len` scratch values, at
    /// `base + k * G_TAPE_BLOCK` (see [`super::TAPE_BLOCK`]).
    fn scratch(&self, k: Expr) -> Expr {
        let offset = k * Expr::Const(ModuleConst::TapeBlock);
        Expr::Global(Global::Scratch).index(Expr::local(&Ident::new("tape_base")) + offset)
    }

    /// Declarations at the top of the model function: function-local arrays (zeroed by WGSL),
    /// or the chain's base position in the scratch buffer (whose adjoints are cleared as each
    /// slot is written: see `model.rs`).
    pub(crate) fn declarations(&self) -> Vec<Stmt> {
        match self.placement {
            TapePlacement::Private => vec![
                Stmt::Var(Ident::new("tape"), Ty::TapeArray, None),
                Stmt::Var(Ident::new("adj"), Ty::TapeArray, None),
            ],
            TapePlacement::Storage => {
                let chain = || Expr::Global(Global::Chain);
                let block = || Expr::Const(ModuleConst::TapeBlock);
                let block_values = Expr::U32(2) * Expr::Const(ModuleConst::TapeLen) * block();
                let base = (chain() / block()) * block_values + chain() % block();
                vec![Stmt::let_(&Ident::new("tape_base"), base)]
            }
        }
    }
}

/// An instruction operand as the generated code reads it.
#[derive(Clone, Debug)]
pub(crate) struct Arg {
    operand: Operand,
    offset: u32,
    len: u32,
    /// A local holding the value of a scalar operand, read once before a loop.
    hoisted: Option<Ident>,
}

impl Arg {
    pub(crate) fn new(program: &Program, operand: Operand) -> Arg {
        let (offset, len) = match operand {
            Operand::Slot(id) => {
                let slot = program.slot(id);
                (slot.offset, slot.len)
            }
            Operand::Data(data) => (data.offset, data.len),
            Operand::Const(_) => (0, 1),
        };
        Arg {
            operand,
            offset,
            len,
            hoisted: None,
        }
    }

    /// Whether it depends on parameters (only slots carry adjoints).
    pub(crate) fn is_param(&self) -> bool {
        matches!(self.operand, Operand::Slot(_))
    }

    /// Whether it has one value, broadcast to any length (the CPU's `stride == 0`).
    pub(crate) fn is_scalar(&self) -> bool {
        self.len == 1
    }

    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// Tape position of element `i`, broadcasting a scalar.
    pub(crate) fn position(&self, i: &Expr) -> Expr {
        if self.is_scalar() {
            Expr::U32(self.offset)
        } else {
            i.clone().plus_u32(self.offset)
        }
    }

    /// Element `i`, broadcasting a scalar.
    pub(crate) fn at(&self, tape: &Tape, i: &Expr) -> Expr {
        if let Some(local) = &self.hoisted {
            return Expr::local(local);
        }
        match self.operand {
            Operand::Slot(_) => tape.value(self.position(i)),
            Operand::Data(_) => tape.data(self.position(i)),
            Operand::Const(value) => Expr::Real(value),
        }
    }

    /// Element `j` of a vector read at a computed position (`Gather`): no broadcasting, as the
    /// CPU indexes the operand's values directly.
    pub(crate) fn at_dynamic(&self, tape: &Tape, j: Expr) -> Expr {
        match self.operand {
            Operand::Slot(_) => tape.value(j.plus_u32(self.offset)),
            Operand::Data(_) => tape.data(j.plus_u32(self.offset)),
            Operand::Const(value) => Expr::Real(value),
        }
    }

    /// The adjoint of element `i` (broadcasting a scalar). Only for parameter operands.
    pub(crate) fn adjoint_at(&self, tape: &Tape, i: &Expr) -> Expr {
        debug_assert!(self.is_param());
        tape.adjoint(self.position(i))
    }

    /// The adjoint of element `j` at a computed position (`Gather`).
    pub(crate) fn adjoint_dynamic(&self, tape: &Tape, j: Expr) -> Expr {
        debug_assert!(self.is_param());
        tape.adjoint(j.plus_u32(self.offset))
    }

    /// Reads a scalar tape or data operand once into `name`, so that a loop does not reload it
    /// (a storage-buffer read the compiler cannot hoist past the loop's stores).
    pub(crate) fn hoist(&mut self, tape: &Tape, name: Ident) -> Option<Stmt> {
        if !self.is_scalar() || matches!(self.operand, Operand::Const(_)) {
            return None;
        }
        let value = self.at(tape, &Expr::U32(0));
        let stmt = Stmt::let_(&name, value);
        self.hoisted = Some(name);
        Some(stmt)
    }
}

/// Where the partial derivatives of one operand go inside a loop over elements: straight into
/// the adjoint tape for a vector, into a local that is flushed once after the loop for a
/// broadcast scalar (as dist.rs's `kernel` does).
#[derive(Clone, Debug)]
pub(crate) struct Accumulator {
    arg: Arg,
    local: Option<Ident>,
}

impl Accumulator {
    /// `None` when the operand carries no adjoint.
    pub(crate) fn new(arg: &Arg, name: Ident) -> Option<Accumulator> {
        if !arg.is_param() {
            return None;
        }
        Some(Accumulator {
            arg: arg.clone(),
            local: arg.is_scalar().then_some(name),
        })
    }

    pub(crate) fn init(&self) -> Vec<Stmt> {
        self.local.iter().map(Stmt::zero).collect()
    }

    pub(crate) fn add(&self, tape: &Tape, i: &Expr, value: Expr) -> Stmt {
        match &self.local {
            Some(local) => Stmt::add_to(Expr::local(local), value),
            None => Stmt::add_to(self.arg.adjoint_at(tape, i), value),
        }
    }

    pub(crate) fn flush(&self, tape: &Tape) -> Vec<Stmt> {
        self.local
            .iter()
            .map(|local| Stmt::add_to(self.arg.adjoint_at(tape, &Expr::U32(0)), Expr::local(local)))
            .collect()
    }
}

/// Adds `value` to the adjoint of element `i` of `arg` if it has one (dist.rs's `acc`).
pub(crate) fn accumulate(tape: &Tape, arg: &Arg, i: &Expr, value: Expr) -> Vec<Stmt> {
    if arg.is_param() {
        vec![Stmt::add_to(arg.adjoint_at(tape, i), value)]
    } else {
        Vec::new()
    }
}
