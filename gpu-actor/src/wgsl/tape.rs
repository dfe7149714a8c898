//! Where a chain's values live while the generated model runs: the value and adjoint tapes
//! for each [`TapePlacement`], views of instruction operands with scalar broadcasting, and
//! the loops and sums of a chain split across lanes (`split.rs`).

use sampler::{MatrixRef, Operand, Program, SlotId};

use super::ast::{Builtin, Expr, Global, Hook, Ident, ModuleConst, Stmt, Ty};
use super::library::LibFn;
use super::split::{LocalSlot, Plan};
use super::{DataPlacement, TapePlacement};

/// The value and adjoint tapes of one chain (of one lane's part of it).
#[derive(Clone, Debug)]
pub(crate) struct Tape {
    placement: TapePlacement,
    data: DataPlacement,
    plan: Plan,
    /// Matrices the device holds column-major (`layout.rs`).
    column_major: Vec<MatrixRef>,
    /// With [`DataPlacement::Workgroup`]: whether workgroup memory holds the data as `vec4`s
    /// (`g_shared_data[i / 4][i % 4]`), and the matrices it holds row-major there, a row as
    /// whole `vec4`s ([`super::shared_rows`]).
    quads: Option<Vec<MatrixRef>>,
    /// Code for the body of a fused plan's loop over each lane's elements: adjoints of
    /// replicated slots go to per-lane partial sums (`g_fadj`).
    inside: bool,
    /// Whether sums over a vector's elements are compensated ([`Sum`]): in f32.
    compensated: bool,
}

/// The function-local arrays of a private tape: values, adjoints and a fused loop's per-lane
/// partial adjoints.
pub(crate) fn private_arrays() -> [Ident; 3] {
    [Ident::new("tape"), Ident::new("adj"), partial_adjoints()]
}

/// The per-lane partial adjoints of a fused loop.
fn partial_adjoints() -> Ident {
    Ident::new("fadj")
}

/// The local index of a split loop: element `i` of a split slot is at local position `li`.
fn local_index() -> Ident {
    Ident::new("li")
}

impl Tape {
    pub(crate) fn new(
        placement: TapePlacement,
        data: DataPlacement,
        plan: Plan,
        column_major: Vec<MatrixRef>,
        quads: Option<Vec<MatrixRef>>,
        compensated: bool,
    ) -> Tape {
        Tape {
            placement,
            data,
            plan,
            column_major,
            quads: quads.filter(|_| data == DataPlacement::Workgroup),
            inside: false,
            compensated,
        }
    }

    /// This tape as the body of the fused loop sees it (see [`Tape::fused_loop`]).
    pub(crate) fn inside_fused_loop(&self) -> Tape {
        Tape {
            inside: true,
            ..self.clone()
        }
    }

    /// Whether the split instructions run fused (`split.rs`).
    pub(crate) fn fused(&self) -> bool {
        self.plan.fused
    }

    /// Whether this is the fused loop's body.
    pub(crate) fn is_inside(&self) -> bool {
        self.inside
    }

    /// A fused plan's loop over each lane's elements: `for li in 0..G_SPLIT_TRIPS { body }`.
    /// Its bound is a module constant, so the loop stays a loop (`unroll.rs` unrolls only
    /// literal bounds): one element's values at a time stay in registers.
    pub(crate) fn fused_loop(&self, body: Vec<Stmt>) -> Stmt {
        Stmt::For(local_index(), Expr::Const(ModuleConst::SplitTrips), body)
    }

    /// Where slot `id` lives on this lane's tape.
    pub(crate) fn slot(&self, id: SlotId) -> LocalSlot {
        self.plan.slot(id)
    }

    /// Whether instruction `k` runs split across the lanes.
    pub(crate) fn inst_split(&self, k: usize) -> bool {
        self.plan.insts[k]
    }

    /// `for i in 0..len { body }`, or with `split`, the loop over this lane's elements:
    /// `for li in 0..ceil(len / L) { let i = li * L + g_lane; if i < len { body } }`. `body`
    /// reads element `i` of data and element `li` of split slots (see [`Arg::position`]).
    ///
    /// In a fused plan's loop, `body` is the element of the enclosing trip `li`, with no
    /// branch: a lane past the end runs it on the last element (`i = min(li * L + g_lane,
    /// len - 1)`), which adds nothing because the terms that start every adjoint and add to
    /// the log density are gated ([`Tape::each_term`]). A branch around every instruction cut
    /// the trip into blocks the compiler could not schedule across (logistic's NUTS kernel
    /// was slower with them; measurements in `bench/journal.md`).
    pub(crate) fn each(&self, split: bool, var: &Ident, len: u32, body: Vec<Stmt>) -> Stmt {
        if !split {
            return Stmt::for_(var, Expr::U32(len), body);
        }
        if self.plan.fused {
            debug_assert!(self.inside, "a fused split loop outside the fused loop");
            let element = if self.every_trip_whole(len) {
                self.trip_element()
            } else {
                Expr::builtin(Builtin::Min, vec![self.trip_element(), Expr::U32(len - 1)])
            };
            return Stmt::Block([Stmt::let_(var, element)].into_iter().chain(body).collect());
        }
        self.each_split(var, len, Vec::new(), body, Vec::new())
    }

    /// [`Tape::each`] over the elements of a term of the log density (a density's part, a
    /// factor), whose `body` only binds values and adds to accumulators (`+=`): in a fused
    /// plan's loop, a lane past the end adds zeros (`select`, so that nothing depends on the
    /// repeated element's values being finite). The adjoints that start here are then zero
    /// on that lane, and so is everything the backward sweep adds from them.
    pub(crate) fn each_term(&self, split: bool, var: &Ident, len: u32, body: Vec<Stmt>) -> Stmt {
        if !(split && self.plan.fused) || self.every_trip_whole(len) {
            return self.each(split, var, len, body);
        }
        let keep = Ident::new("keep");
        let gated = body
            .into_iter()
            .map(|stmt| match stmt {
                Stmt::AddAssign(place, value) => Stmt::AddAssign(
                    place,
                    Expr::builtin(
                        Builtin::Select,
                        vec![Expr::Real(0.0), value, Expr::local(&keep)],
                    ),
                ),
                stmt @ Stmt::Let(..) => stmt,
                other => unreachable!("a term's body binds and adds, not {other:?}"),
            })
            .collect::<Vec<_>>();
        let mut inner = vec![Stmt::let_(&keep, Expr::U32(len).gt(self.trip_element()))];
        inner.extend(gated);
        self.each(split, var, len, inner)
    }

    /// Whether every lane has an element of a split vector of `len` on every trip of the
    /// fused loop.
    fn every_trip_whole(&self, len: u32) -> bool {
        len == self.plan.trips * self.plan.lanes
    }

    /// This lane's element of the fused loop's trip `li`: `li * L + g_lane`.
    fn trip_element(&self) -> Expr {
        Expr::local(&local_index()) * Expr::U32(self.plan.lanes) + Expr::Global(Global::Lane)
    }

    /// The loop over this lane's elements of a split vector of `len` elements whose trips
    /// also run statements every lane of the chain must run together (shuffles): on each trip
    /// `li`, `before` on every lane, then `body` for this lane's element `var` if it exists
    /// (as [`Tape::each`]), then `after` on every lane. Not for fused plans.
    pub(crate) fn each_split(
        &self,
        var: &Ident,
        len: u32,
        before: Vec<Stmt>,
        body: Vec<Stmt>,
        after: Vec<Stmt>,
    ) -> Stmt {
        debug_assert!(!self.plan.fused, "a uniform split loop in a fused plan");
        let lanes = self.plan.lanes;
        let global = Tape::local_index() * Expr::U32(lanes) + Expr::Global(Global::Lane);
        let mut trip = before;
        trip.push(Stmt::let_(var, global));
        if len.is_multiple_of(lanes) {
            trip.extend(body);
        } else {
            trip.push(Stmt::If(
                Expr::U32(len).gt(Expr::local(var)),
                body,
                Vec::new(),
            ));
        }
        trip.extend(after);
        Stmt::for_(&local_index(), Expr::U32(len.div_ceil(lanes)), trip)
    }

    /// The trip `li` of a split loop ([`Tape::each`], [`Tape::each_split`]).
    pub(crate) fn local_index() -> Expr {
        Expr::local(&local_index())
    }

    /// Invocations per chain.
    pub(crate) fn lanes(&self) -> u32 {
        self.plan.lanes
    }

    /// `name = g_lane_sum(name)` (the sum over the chain's lanes, the same bits on every
    /// lane), when `split` and not fused (a fused loop sums its parts once, after it).
    pub(crate) fn lane_sum(&self, split: bool, name: &Ident) -> Vec<Stmt> {
        if !split || self.plan.fused {
            return Vec::new();
        }
        vec![Tape::sum_over_lanes(name)]
    }

    /// Element `(r, c)` of a data matrix, where the kernel reads it: row-major where
    /// workgroup memory holds its rows as `vec4`s, else as the device holds it (`layout.rs`).
    pub(crate) fn matrix(&self, m: MatrixRef, r: Expr, c: Expr) -> Expr {
        let index = if self.quad_rows(m) || !self.column_major.contains(&m) {
            r * Expr::U32(m.cols) + c
        } else {
            c * Expr::U32(m.rows) + r
        };
        self.data(index.plus_u32(m.offset))
    }

    /// Whether workgroup memory holds matrix `m` row-major, a row as `m.cols / 4` `vec4`s.
    pub(crate) fn quad_rows(&self, m: MatrixRef) -> bool {
        self.quads.as_ref().is_some_and(|rows| rows.contains(&m))
    }

    /// Columns `4 k` to `4 k + 3` of row `r` of a matrix that [`Tape::quad_rows`], one `vec4`.
    pub(crate) fn matrix_quad(&self, m: MatrixRef, r: Expr, k: u32) -> Expr {
        debug_assert!(self.quad_rows(m));
        let at = r * Expr::U32(m.cols / 4);
        Expr::Global(Global::SharedData).index(at.plus_u32(m.offset / 4 + k))
    }

    /// Element `index` of the model's real data, from wherever the kernel keeps it.
    pub(crate) fn data(&self, index: Expr) -> Expr {
        match (self.data, &self.quads) {
            (DataPlacement::Storage, _) => Expr::Global(Global::Data).index(index),
            (DataPlacement::Workgroup, None) => Expr::Global(Global::SharedData).index(index),
            (DataPlacement::Workgroup, Some(_)) => Expr::Global(Global::SharedData)
                .index(index.clone() / Expr::U32(4))
                .index(index % Expr::U32(4)),
        }
    }

    pub(crate) fn placement(&self) -> TapePlacement {
        self.placement
    }

    /// The value at tape position `index`.
    pub(crate) fn value(&self, index: Expr) -> Expr {
        match self.placement {
            TapePlacement::Private => Expr::local(&Ident::new("tape")).index(index),
            TapePlacement::Storage | TapePlacement::Interpreted => self.scratch(index),
        }
    }

    /// The adjoint of tape position `index`.
    pub(crate) fn adjoint(&self, index: Expr) -> Expr {
        match self.placement {
            TapePlacement::Private => Expr::local(&Ident::new("adj")).index(index),
            TapePlacement::Storage | TapePlacement::Interpreted => {
                self.scratch(index.plus_u32(self.plan.tape_len))
            }
        }
    }

    /// `name = g_lane_sum(name)`, whatever the plan.
    pub(crate) fn sum_over_lanes(name: &Ident) -> Stmt {
        Stmt::Assign(
            Expr::local(name),
            Expr::hook(Hook::LaneSum, vec![Expr::local(name)]),
        )
    }

    /// This lane's part of the adjoint of replicated tape position `index`, added in a fused
    /// loop (summed over the lanes after it).
    pub(crate) fn partial_adjoint(&self, index: Expr) -> Expr {
        Expr::local(&partial_adjoints()).index(index)
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
            TapePlacement::Private => {
                let mut out = vec![
                    Stmt::Var(Ident::new("tape"), Ty::TapeArray, None),
                    Stmt::Var(Ident::new("adj"), Ty::TapeArray, None),
                ];
                if self.plan.fused {
                    out.push(Stmt::Var(partial_adjoints(), Ty::TapeArray, None));
                }
                out
            }
            TapePlacement::Storage | TapePlacement::Interpreted => {
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
    /// A split slot: element `i` is at local position `li` (see [`Tape::each`]), or at the
    /// slot's one position when fused.
    split: bool,
    fused: bool,
    /// A local holding the value of a scalar operand, read once before a loop.
    hoisted: Option<Ident>,
}

impl Arg {
    pub(crate) fn new(program: &Program, tape: &Tape, operand: Operand) -> Arg {
        let (offset, len, split) = match operand {
            Operand::Slot(id) => {
                let local = tape.slot(id);
                (local.offset, program.slot(id).len, local.split)
            }
            Operand::Data(data) => (data.offset, data.len, false),
            Operand::Const(_) => (0, 1, false),
        };
        Arg {
            operand,
            offset,
            len,
            split,
            fused: tape.plan.fused,
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

    /// Whether it is a split slot.
    pub(crate) fn is_split(&self) -> bool {
        self.split
    }

    /// Its first position on the tape (data: in the data).
    pub(crate) fn offset(&self) -> u32 {
        self.offset
    }

    /// Tape position of element `i`, broadcasting a scalar. A split slot is read only in a
    /// split loop, at the local index `li` of element `i`.
    pub(crate) fn position(&self, i: &Expr) -> Expr {
        if self.split && self.fused {
            Expr::U32(self.offset)
        } else if self.split {
            Expr::local(&local_index()).plus_u32(self.offset)
        } else if self.is_scalar() {
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
        if tape.inside && !self.split {
            return tape.partial_adjoint(self.position(i));
        }
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
/// The local of a broadcast scalar is a [`Sum`]: its adjoint sums the partial derivatives of
/// every element, which cancel at the mode (`alpha`'s and `beta`'s in `alpha + beta * x`).
#[derive(Clone, Debug)]
pub(crate) struct Accumulator {
    arg: Arg,
    local: Option<Sum>,
}

impl Accumulator {
    /// `None` when the operand carries no adjoint. `word` names the local; `split`: whether
    /// the loop runs split across the lanes.
    pub(crate) fn new(tape: &Tape, split: bool, arg: &Arg, word: &str) -> Option<Accumulator> {
        if !arg.is_param() {
            return None;
        }
        Some(Accumulator {
            arg: arg.clone(),
            local: arg.is_scalar().then(|| Sum::new(tape, split, word)),
        })
    }

    pub(crate) fn init(&self) -> Vec<Stmt> {
        self.local.iter().map(Sum::init).collect()
    }

    pub(crate) fn add(&self, tape: &Tape, i: &Expr, value: Expr) -> Stmt {
        match &self.local {
            Some(local) => local.add(value),
            None => Stmt::add_to(self.arg.adjoint_at(tape, i), value),
        }
    }

    /// Adds a broadcast scalar's local to its adjoint, after summing it over the lanes when
    /// the loop was `split`.
    pub(crate) fn flush(&self, tape: &Tape, split: bool) -> Vec<Stmt> {
        let Some(local) = &self.local else {
            return Vec::new();
        };
        let (mut out, total) = local.finish(tape, split);
        out.push(Stmt::add_to(
            self.arg.adjoint_at(tape, &Expr::U32(0)),
            total,
        ));
        out
    }
}

/// A running sum over the elements of a vector: plain (`s += x`), or in f32 compensated
/// (Neumaier's, `sf_sum_add` of `shaders/math_f32.wgsl`, held as a `vec2<T>`), so that a sum
/// of many terms that cancel (a gradient at the mode, a log density of many observations) is
/// as accurate as its total's rounding. A fused plan's loop keeps plain sums: each of its
/// trips sums one element, and the lanes' parts are few and summed by a butterfly.
#[derive(Clone, Debug)]
pub(crate) struct Sum {
    name: Ident,
    /// The total, summed over the lanes, when the sum is compensated and split.
    total: Ident,
    compensated: bool,
}

impl Sum {
    /// A sum in local `g_<word>` over a loop that is `split` or not.
    pub(crate) fn new(tape: &Tape, split: bool, word: &str) -> Sum {
        Sum {
            name: Ident::new(word),
            total: Ident::new(&format!("{word}_total")),
            compensated: tape.compensated && !tape.inside && !(split && tape.plan.fused),
        }
    }

    /// The local's declaration, at zero.
    pub(crate) fn init(&self) -> Stmt {
        if self.compensated {
            Stmt::Var(self.name.clone(), Ty::RealPair, None)
        } else {
            Stmt::zero(&self.name)
        }
    }

    /// Adds `value`.
    pub(crate) fn add(&self, value: Expr) -> Stmt {
        let local = Expr::local(&self.name);
        if self.compensated {
            Stmt::Assign(local.clone(), Expr::lib(LibFn::SumAdd, vec![local, value]))
        } else {
            Stmt::add_to(local, value)
        }
    }

    /// The statements that finish the sum (summed over the lanes when `split`, the same bits
    /// on every lane) and an expression of its total.
    pub(crate) fn finish(&self, tape: &Tape, split: bool) -> (Vec<Stmt>, Expr) {
        if !self.compensated {
            return (tape.lane_sum(split, &self.name), Expr::local(&self.name));
        }
        let total = Expr::lib(LibFn::SumTotal, vec![Expr::local(&self.name)]);
        if !split {
            return (Vec::new(), total);
        }
        let mut out = vec![Stmt::Var(self.total.clone(), Ty::Real, Some(total))];
        out.extend(tape.lane_sum(split, &self.total));
        (out, Expr::local(&self.total))
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
