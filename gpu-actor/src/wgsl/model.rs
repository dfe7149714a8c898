//! The generated model function `g_logp_grad`: the CPU evaluator's forward and backward sweeps
//! (sampler's eval.rs), instruction by instruction, as WGSL.
//!
//! Each instruction becomes one braced block (so that its locals can reuse names), with one
//! loop per vector operation. The forward sweep writes the value tape and adds densities'
//! partial derivatives to the adjoint tape; the backward sweep walks the slot-writing
//! instructions in reverse, and each `Constrain` writes its coordinates of the gradient once,
//! its log-Jacobian derivative included.

use sampler::{Inst, MapOp, MatrixRef, Operand, Program, SlotId, Transform, ZipOp};

use super::ast::{Builtin, Expr, Function, Global, Hook, Ident, Stmt, Ty};
use super::density;
use super::library::LibFn;
use super::tape::{Accumulator, Arg, Sum, Tape};
use super::unroll;

/// `g_logp_grad() -> T` for `program`, which has passed [`super::check`].
pub(crate) fn logp_grad_function(program: &Program, tape: &Tape) -> Function {
    let lp = Ident::new("lp");
    let mut body = vec![Stmt::zero(&lp)];
    body.extend(tape.declarations());
    body.push(Stmt::Comment("forward sweep".into()));
    // Fused, the split instructions run in one loop after the others (nothing else reads
    // what they write; `split.rs`); a split density's broadcast terms stay here.
    let fused = |k: usize| tape.fused() && tape.inst_split(k);
    for (k, inst) in program.insts.iter().enumerate() {
        if fused(k) && !matches!(inst, Inst::Density { .. }) {
            continue;
        }
        push_inst(&mut body, k, inst, forward(program, tape, &lp, k, inst));
    }
    if tape.fused() {
        body.push(Stmt::Comment("split instructions, fused".into()));
        body.extend(fused_loop(program, tape, &lp));
    }
    body.push(Stmt::Comment("backward sweep".into()));
    for (k, inst) in program.insts.iter().enumerate().rev() {
        if !fused(k) {
            push_inst(&mut body, k, inst, backward(program, tape, k, inst));
        }
    }
    body.push(Stmt::Return(Expr::local(&lp)));
    Function {
        name: Hook::LogpGrad,
        params: Vec::new(),
        ret: Some(Ty::Real),
        body,
    }
}

/// Appends instruction `k`'s block, if it has one, after a comment naming it.
fn push_inst(body: &mut Vec<Stmt>, k: usize, inst: &Inst, block: Vec<Stmt>) {
    if !block.is_empty() {
        body.push(Stmt::Comment(format!(
            "instruction {k}: {}",
            inst_name(inst)
        )));
        body.push(Stmt::Block(block));
    }
}

/// A fused plan's split instructions: one trip per element of each lane, which runs their
/// forward sweep and then their backward sweep on that element (its values and adjoints are
/// one position each on the tape). The lane's parts of `lp` and of the adjoints of replicated
/// operands are summed over the lanes once, after the loop.
fn fused_loop(program: &Program, tape: &Tape, lp: &Ident) -> Vec<Stmt> {
    let inside = tape.inside_fused_loop();
    let lane_lp = Ident::new("lane_lp");
    let split: Vec<(usize, &Inst)> = program
        .insts
        .iter()
        .enumerate()
        .filter(|&(k, _)| tape.inst_split(k))
        .collect();
    let mut trip = Vec::new();
    // The matrix rows that a product's forward sweep loads and its backward sweep reads again.
    for &(k, inst) in &split {
        if let Some((row, cols)) = row_cache(program, &inside, k, inst) {
            trip.push(Stmt::Var(row, Ty::RealArray(cols), None));
        }
    }
    // Adjoints of the element's split values start at 0 on each trip.
    for (id, slot) in program.slots.iter().enumerate() {
        let local = tape.slot(SlotId(id as u32));
        if local.split && slot.len > 0 {
            trip.push(Stmt::Assign(
                tape.adjoint(Expr::U32(local.offset)),
                Expr::Real(0.0),
            ));
        }
    }
    for &(k, inst) in &split {
        push_inst(
            &mut trip,
            k,
            inst,
            forward(program, &inside, &lane_lp, k, inst),
        );
    }
    for &(k, inst) in split.iter().rev() {
        push_inst(&mut trip, k, inst, backward(program, &inside, k, inst));
    }
    let mut out = vec![Stmt::zero(&lane_lp), tape.fused_loop(trip)];
    // The lane's parts of lp and of the adjoints of the replicated slots the loop added to,
    // each summed over the lanes and added where it belongs.
    let mut sums = vec![(Expr::local(&lane_lp), Expr::local(lp))];
    let mut replicated: Vec<SlotId> = Vec::new();
    for &(_, inst) in &split {
        for operand in program.reads(inst) {
            if let Operand::Slot(id) = operand
                && !tape.slot(id).split
                && !replicated.contains(&id)
            {
                replicated.push(id);
            }
        }
    }
    for id in replicated {
        let local = tape.slot(id);
        for j in 0..local.len {
            let at = Expr::U32(local.offset + j);
            sums.push((tape.partial_adjoint(at.clone()), tape.adjoint(at)));
        }
    }
    out.extend(lane_sums(tape.lanes(), &sums));
    out
}

/// Adds each `(part, target)`'s part, summed over the chain's `lanes` lanes, to its target,
/// with the same bits on every lane (split.rs): a butterfly of `log2(lanes)` shuffles per
/// value, or, where that takes fewer shuffles, per `lanes` values a reduce-scatter (value
/// `i` of the group ends summed on lane `i`: `lanes - 1` shuffles for a full group) and a
/// broadcast of each sum from its lane (one shuffle each). The logistic model's 22 sums on
/// 32 lanes: 53 shuffles instead of 110.
fn lane_sums(lanes: u32, sums: &[(Expr, Expr)]) -> Vec<Stmt> {
    let part = Ident::new("part");
    let butterfly = |(value, target): &(Expr, Expr)| {
        Stmt::Block(vec![
            Stmt::Var(part.clone(), Ty::Real, Some(value.clone())),
            Tape::sum_over_lanes(&part),
            Stmt::add_to(target.clone(), Expr::local(&part)),
        ])
    };
    debug_assert!(
        lanes >= 2,
        "only a fused plan, on split chains, sums over lanes"
    );
    let mut out = Vec::new();
    for group in sums.chunks(lanes as usize) {
        let stages = scatter_stages(group.len(), lanes);
        let scattered: usize = stages.iter().map(|(_, ts)| ts.len()).sum::<usize>() + group.len();
        if scattered < group.len() * lanes.ilog2() as usize {
            out.push(Stmt::Block(reduce_scatter(group, lanes, &stages)));
        } else {
            out.extend(group.iter().map(butterfly));
        }
    }
    out
}

/// The shuffles of a reduce-scatter of `n` values over `lanes` lanes: per stage its mask `m`
/// (`lanes / 2` down to 1) and the positions `t < m` whose pair `(t, t + m)` holds a value
/// (the others are zero on every lane and need no shuffle).
pub(crate) fn scatter_stages(n: usize, lanes: u32) -> Vec<(u32, Vec<u32>)> {
    let mut live: Vec<bool> = (0..lanes as usize).map(|x| x < n).collect();
    let mut stages = Vec::new();
    let mut m = lanes / 2;
    while m >= 1 {
        let ts: Vec<u32> = (0..m)
            .filter(|&t| live[t as usize] || live[(t + m) as usize])
            .collect();
        for &t in &ts {
            live[t as usize] = true;
        }
        stages.push((m, ts));
        m /= 2;
    }
    stages
}

/// One group's reduce-scatter and broadcast (`lane_sums`). Position `x` of the lane's vector
/// is `rs{x}` (value `x` to start with). At the stage of mask `m`, a lane keeps the positions
/// whose bit `m` is its own lane's, and adds what its partner `lane ^ m` holds there: for each
/// pair `(t, t + m)`, it sends the one it does not keep. At the end lane `i` holds the sum of
/// value `i` at position 0, and every lane reads each sum from its lane.
fn reduce_scatter(group: &[(Expr, Expr)], lanes: u32, stages: &[(u32, Vec<u32>)]) -> Vec<Stmt> {
    let rs = |x: u32| Ident::numbered("rs", x as usize);
    // Positions past the group's values start at zero (constants the compiler folds).
    let mut out: Vec<Stmt> = (0..lanes)
        .map(|x| {
            let value = group
                .get(x as usize)
                .map_or(Expr::Real(0.0), |(v, _)| v.clone());
            Stmt::Var(rs(x), Ty::Real, Some(value))
        })
        .collect();
    let (bit, send, keep) = (Ident::new("bit"), Ident::new("send"), Ident::new("keep"));
    for (m, ts) in stages {
        let mut stage = vec![Stmt::let_(
            &bit,
            ((Expr::Global(Global::Lane) / Expr::U32(*m)) % Expr::U32(2)).ne(Expr::U32(0)),
        )];
        for &t in ts {
            let (low, high) = (Expr::local(&rs(t)), Expr::local(&rs(t + m)));
            let pick = |if_false: Expr, if_true: Expr| {
                Expr::builtin(Builtin::Select, vec![if_false, if_true, Expr::local(&bit)])
            };
            let mut pair = vec![
                Stmt::let_(&send, pick(high.clone(), low.clone())),
                Stmt::let_(&keep, pick(low, high)),
            ];
            let received = Expr::builtin(
                Builtin::SubgroupShuffleXor,
                vec![Expr::local(&send), Expr::U32(*m)],
            );
            pair.push(Stmt::Assign(
                Expr::local(&rs(t)),
                Expr::local(&keep) + received,
            ));
            stage.push(Stmt::Block(pair));
        }
        out.push(Stmt::Block(stage));
    }
    for (i, (_, target)) in group.iter().enumerate() {
        out.push(Stmt::add_to(
            target.clone(),
            Expr::hook(
                Hook::LaneGet,
                vec![Expr::local(&rs(0)), Expr::U32(i as u32)],
            ),
        ));
    }
    out
}

/// In a fused loop, a split product whose backward sweep runs keeps the element's row of the
/// matrix in a local array (`row{k}` with the matrix's columns), loaded once for both sweeps,
/// when the loop over the columns unrolls (so that the array stays in registers).
fn row_cache(program: &Program, tape: &Tape, k: usize, inst: &Inst) -> Option<(Ident, u32)> {
    match *inst {
        Inst::Matvec { m, v, .. }
            if tape.is_inside()
                && m.cols <= unroll::MAX_TRIP
                && Arg::new(program, tape, v).is_param() =>
        {
            Some((Ident::numbered("row", k), m.cols))
        }
        _ => None,
    }
}

pub(crate) fn inst_name(inst: &Inst) -> &'static str {
    match inst {
        Inst::Constrain { .. } => "constrain",
        Inst::Map { .. } => "map",
        Inst::Zip { .. } => "zip",
        Inst::Sum { .. } => "sum",
        Inst::Cumsum { .. } => "cumsum",
        Inst::Dot { .. } => "dot",
        Inst::Matvec { .. } => "matvec",
        Inst::Gather { .. } => "gather",
        Inst::Density { .. } => "density",
        Inst::RandomWalk { .. } => "random_walk",
        Inst::Factor { .. } => "factor",
        Inst::Concat { .. } => "concat",
        Inst::LogSumExp { .. } => "log_sum_exp",
    }
}

fn i() -> Ident {
    Ident::new("i")
}

fn ie() -> Expr {
    Expr::local(&i())
}

fn slot_arg(program: &Program, tape: &Tape, dst: SlotId) -> Arg {
    Arg::new(program, tape, Operand::Slot(dst))
}

fn forward(program: &Program, tape: &Tape, lp: &Ident, k: usize, inst: &Inst) -> Vec<Stmt> {
    let split = tape.inst_split(k);
    // `for i in 0..len { body }`, over this lane's elements when the instruction is split.
    let each = |len: u32, body: Vec<Stmt>| tape.each(split, &i(), len, body);
    match *inst {
        Inst::Constrain {
            transform,
            theta,
            dst,
        } => {
            let dst = slot_arg(program, tape, dst);
            let u = Ident::new("u");
            let ue = || Expr::local(&u);
            let (value, log_jacobian) = match transform {
                Transform::Identity => (ue(), None),
                Transform::Lower(lower) => (
                    Expr::Real(lower) + Expr::lib(LibFn::Exp, vec![ue()]),
                    Some(ue()),
                ),
                Transform::Upper(upper) => (
                    Expr::Real(upper) - Expr::lib(LibFn::Exp, vec![ue()]),
                    Some(ue()),
                ),
                Transform::Interval(lower, upper) => {
                    // Width and its log are constants: computed here, in f64, as the CPU does.
                    let width = upper - lower;
                    let value = Expr::Real(lower)
                        + Expr::Real(width) * Expr::lib(LibFn::Logistic, vec![ue()]);
                    let log_jacobian = Expr::Real(width.ln())
                        - Expr::lib(LibFn::Softplus, vec![-ue()])
                        - Expr::lib(LibFn::Softplus, vec![ue()]);
                    (value, Some(log_jacobian))
                }
            };
            let lj = Ident::new("lj");
            // Split, every lane reads its coordinate before the bound check (a shuffle).
            let read_u = Stmt::let_(&u, theta_at(split, theta.offset));
            let mut body = set(tape, &dst, &ie(), value);
            if let Some(log_jacobian) = &log_jacobian {
                body.push(Stmt::add_to(Expr::local(&lj), log_jacobian.clone()));
            }
            let each_u = if split {
                tape.each_split(&i(), theta.len, vec![read_u], body, Vec::new())
            } else {
                each(theta.len, [read_u].into_iter().chain(body).collect())
            };
            if log_jacobian.is_none() {
                return vec![each_u];
            }
            let mut out = vec![Stmt::zero(&lj), each_u];
            out.extend(tape.lane_sum(split, &lj));
            out.push(Stmt::add_to(Expr::local(lp), Expr::local(&lj)));
            out
        }
        Inst::Map { op, a, dst } => {
            let dst = slot_arg(program, tape, dst);
            let mut a = Arg::new(program, tape, a);
            let mut out = Vec::new();
            out.extend(a.hoist(tape, Ident::new("a")));
            let x = a.at(tape, &ie());
            let value = match op {
                MapOp::Neg => -x,
                MapOp::Exp => Expr::lib(LibFn::Exp, vec![x]),
                MapOp::Log => Expr::lib(LibFn::Log, vec![x]),
                MapOp::Log1p => Expr::lib(LibFn::Log1p, vec![x]),
                MapOp::Expm1 => Expr::lib(LibFn::Expm1, vec![x]),
                MapOp::Softplus => Expr::lib(LibFn::Softplus, vec![x]),
                MapOp::Logistic => Expr::lib(LibFn::Logistic, vec![x]),
                MapOp::Sqrt => Expr::builtin(Builtin::Sqrt, vec![x]),
                MapOp::Abs => Expr::builtin(Builtin::Abs, vec![x]),
                MapOp::Lgamma => Expr::lib(LibFn::Lgamma, vec![x]),
                MapOp::LogPhi => Expr::lib(LibFn::LogPhi, vec![x]),
                MapOp::LogStep => Expr::lib(LibFn::LogStep, vec![x]),
            };
            out.push(each(dst.len(), set(tape, &dst, &ie(), value)));
            out
        }
        Inst::Zip { op, a, b, dst } => {
            let dst = slot_arg(program, tape, dst);
            let mut a = Arg::new(program, tape, a);
            let mut b = Arg::new(program, tape, b);
            let mut out = Vec::new();
            out.extend(a.hoist(tape, Ident::new("a")));
            out.extend(b.hoist(tape, Ident::new("b")));
            let (x, y) = (a.at(tape, &ie()), b.at(tape, &ie()));
            let value = match op {
                ZipOp::Add => x + y,
                ZipOp::Sub => x - y,
                ZipOp::Mul => x * y,
                ZipOp::Div => x / y,
                ZipOp::Pow => Expr::lib(LibFn::Pow, vec![x, y]),
                // As the CPU: `b` where it is strictly larger (smaller), else `a`.
                ZipOp::Max => select(x.clone(), y.clone(), y.gt(x)),
                ZipOp::Min => select(x.clone(), y.clone(), x.gt(y)),
            };
            out.push(each(dst.len(), set(tape, &dst, &ie(), value)));
            out
        }
        Inst::Sum { a, dst } => {
            let dst = slot_arg(program, tape, dst);
            let a = Arg::new(program, tape, a);
            let s = Sum::new(tape, split, "s");
            let mut out = vec![s.init(), each(a.len(), vec![s.add(a.at(tape, &ie()))])];
            let (finish, total) = s.finish(tape, split);
            out.extend(finish);
            out.extend(set(tape, &dst, &Expr::U32(0), total));
            out
        }
        Inst::Cumsum { a, dst } => {
            let dst = slot_arg(program, tape, dst);
            let a = Arg::new(program, tape, a);
            let s = Ident::new("s");
            vec![
                Stmt::zero(&s),
                each(
                    dst.len(),
                    [Stmt::add_to(Expr::local(&s), a.at(tape, &ie()))]
                        .into_iter()
                        .chain(set(tape, &dst, &ie(), Expr::local(&s)))
                        .collect(),
                ),
            ]
        }
        Inst::Dot { a, b, dst } => {
            let dst = slot_arg(program, tape, dst);
            let (a, b) = (Arg::new(program, tape, a), Arg::new(program, tape, b));
            let s = Sum::new(tape, split, "s");
            let mut out = vec![
                s.init(),
                each(a.len(), vec![s.add(a.at(tape, &ie()) * b.at(tape, &ie()))]),
            ];
            let (finish, total) = s.finish(tape, split);
            out.extend(finish);
            out.extend(set(tape, &dst, &Expr::U32(0), total));
            out
        }
        Inst::Matvec { m, v, dst } => {
            let row = row_cache(program, tape, k, inst);
            let dst = slot_arg(program, tape, dst);
            let v = Arg::new(program, tape, v);
            let (r, c, s) = (Ident::new("r"), Ident::new("c"), Ident::new("s"));
            if let Some((row, cols)) = &row {
                return vec![tape.each(
                    split,
                    &r,
                    m.rows,
                    cached_row_dot(tape, m, &v, &dst, (&r, row), *cols),
                )];
            }
            let column = vec![Stmt::add_to(
                Expr::local(&s),
                matrix_at(tape, m, &r, &c) * v.at(tape, &Expr::local(&c)),
            )];
            vec![
                tape.each(
                    split,
                    &r,
                    m.rows,
                    [Stmt::zero(&s), Stmt::for_(&c, Expr::U32(m.cols), column)]
                        .into_iter()
                        .chain(set(tape, &dst, &Expr::local(&r), Expr::local(&s)))
                        .collect(),
                ),
            ]
        }
        Inst::Gather { a, idx, dst } => {
            let dst = slot_arg(program, tape, dst);
            let a = Arg::new(program, tape, a);
            let j = Ident::new("j");
            vec![each(
                idx.len,
                [Stmt::let_(
                    &j,
                    Expr::Global(Global::Index).index(ie().plus_u32(idx.offset)),
                )]
                .into_iter()
                .chain(set(tape, &dst, &ie(), a.at_dynamic(tape, Expr::local(&j))))
                .collect(),
            )]
        }
        Inst::Density {
            kind,
            x,
            params,
            len,
            ..
        } => density::density(program, tape, split, lp, kind, x, params, len),
        Inst::RandomWalk {
            x,
            sigma,
            drift,
            init_mu,
            init_sigma,
            ..
        } => density::random_walk(program, tape, lp, x, [sigma, drift, init_mu, init_sigma]),
        Inst::Factor { a, .. } => {
            let a = Arg::new(program, tape, a);
            let s = Sum::new(tape, split, "s");
            let mut body = vec![s.add(a.at(tape, &ie()))];
            if a.is_param() {
                body.push(Stmt::add_to(a.adjoint_at(tape, &ie()), Expr::Real(1.0)));
            }
            let mut out = vec![s.init(), tape.each_term(split, &i(), a.len(), body)];
            let (finish, total) = s.finish(tape, split);
            out.extend(finish);
            out.push(Stmt::add_to(Expr::local(lp), total));
            out
        }
        Inst::Concat { parts, dst } => {
            // Never split (split.rs): one loop per part, into its run of `dst`.
            let dst = slot_arg(program, tape, dst);
            let mut out = Vec::new();
            let mut at = 0;
            for &part in program.list(parts) {
                let part = Arg::new(program, tape, part);
                let len = part.len();
                out.push(Stmt::Block(vec![each(
                    len,
                    set(tape, &dst, &ie().plus_u32(at), part.at(tape, &ie())),
                )]));
                at += len;
            }
            out
        }
        Inst::LogSumExp { a, dst } => {
            let dst = slot_arg(program, tape, dst);
            let a = Arg::new(program, tape, a);
            log_sum_exp_forward(tape, &a, &dst)
        }
    }
}

/// `select(if_false, if_true, condition)`.
fn select(if_false: Expr, if_true: Expr, condition: Expr) -> Expr {
    Expr::builtin(Builtin::Select, vec![if_false, if_true, condition])
}

/// Whether `x` is finite (false for NaN).
fn is_finite(x: Expr) -> Expr {
    Expr::lib(LibFn::Inf, Vec::new()).gt(Expr::builtin(Builtin::Abs, vec![x]))
}

/// `dst = log(sum_i exp(a[i]))` as sampler's eval.rs computes it: shifted by the maximum; NaN
/// if an element is NaN; the maximum itself when it is infinite (all `-inf`, or one `+inf`).
fn log_sum_exp_forward(tape: &Tape, a: &Arg, dst: &Arg) -> Vec<Stmt> {
    let (m, nan, v, s, r) = (
        Ident::new("m"),
        Ident::new("nan"),
        Ident::new("v"),
        Ident::new("s"),
        Ident::new("r"),
    );
    let local = Expr::local;
    let neg_inf = || -Expr::lib(LibFn::Inf, Vec::new());
    let each = |body: Vec<Stmt>| Stmt::for_(&i(), Expr::U32(a.len()), body);
    vec![
        Stmt::Var(m.clone(), Ty::Real, Some(neg_inf())),
        // 1 once a NaN is seen.
        Stmt::zero(&nan),
        each(vec![
            Stmt::let_(&v, a.at(tape, &ie())),
            Stmt::If(
                local(&v).ne(local(&v)),
                vec![Stmt::Assign(local(&nan), Expr::Real(1.0))],
                Vec::new(),
            ),
            Stmt::If(
                local(&v).gt(local(&m)),
                vec![Stmt::Assign(local(&m), local(&v))],
                Vec::new(),
            ),
        ]),
        Stmt::Var(r.clone(), Ty::Real, Some(local(&m))),
        Stmt::If(
            local(&nan).ne(Expr::Real(0.0)),
            vec![Stmt::Assign(local(&r), Expr::lib(LibFn::Nan, Vec::new()))],
            vec![Stmt::If(
                is_finite(local(&m)),
                vec![
                    Stmt::zero(&s),
                    each(vec![Stmt::add_to(
                        local(&s),
                        Expr::lib(LibFn::Exp, vec![a.at(tape, &ie()) - local(&m)]),
                    )]),
                    Stmt::Assign(
                        local(&r),
                        local(&m) + Expr::lib(LibFn::Log, vec![local(&s)]),
                    ),
                ],
                Vec::new(),
            )],
        ),
    ]
    .into_iter()
    .chain(set(tape, dst, &Expr::U32(0), local(&r)))
    .collect()
}

/// Writes element `i` of a slot. A storage tape also clears the element's adjoint here, in
/// the same loop: each slot is written once, before anything adds to its adjoint (`check`
/// verifies it), so no separate pass over the whole adjoint tape is needed. Private arrays are
/// zeroed by WGSL.
fn set(tape: &Tape, dst: &Arg, i: &Expr, value: Expr) -> Vec<Stmt> {
    let mut out = vec![Stmt::Assign(dst.at(tape, i), value)];
    if tape.placement().in_storage() {
        out.push(Stmt::Assign(dst.adjoint_at(tape, i), Expr::Real(0.0)));
    }
    out
}

/// Element `(r, c)` of a data matrix.
fn matrix_at(tape: &Tape, m: MatrixRef, r: &Ident, c: &Ident) -> Expr {
    tape.matrix(m, Expr::local(r), Expr::local(c))
}

/// Independent partial sums of a cached row's dot product: a chain of `cols` dependent
/// multiply-adds would leave the GPU waiting on each one's latency.
const DOT_PARTS: u32 = 4;

/// The forward sweep of a row-cached product for the row whose index is the local `r`
/// (`row_cache`): loads the row into the local array `row` and writes its dot product with
/// `v` to `dst[r]`, column `c` adding to partial sum `c % DOT_PARTS` (written out column by
/// column, so that every index is a literal).
fn cached_row_dot(
    tape: &Tape,
    m: MatrixRef,
    v: &Arg,
    dst: &Arg,
    (r, row): (&Ident, &Ident),
    cols: u32,
) -> Vec<Stmt> {
    let parts = DOT_PARTS.min(cols).max(1);
    let part = |j: u32| Ident::numbered("s", j as usize);
    let mut out: Vec<Stmt> = (0..parts).map(|j| Stmt::zero(&part(j))).collect();
    // A row that workgroup memory holds as `vec4`s is loaded four columns at a time.
    let quad = |k: u32| Ident::numbered("quad", k as usize);
    if tape.quad_rows(m) {
        for k in 0..cols / 4 {
            out.push(Stmt::let_(&quad(k), tape.matrix_quad(m, Expr::local(r), k)));
        }
    }
    for c in 0..cols {
        let at = Expr::local(row).index(Expr::U32(c));
        let value = if tape.quad_rows(m) {
            Expr::local(&quad(c / 4)).index(Expr::U32(c % 4))
        } else {
            tape.matrix(m, Expr::local(r), Expr::U32(c))
        };
        out.push(Stmt::Assign(at.clone(), value));
        out.push(Stmt::add_to(
            Expr::local(&part(c % parts)),
            at * v.at(tape, &Expr::U32(c)),
        ));
    }
    // Pairwise: ((s0 + s1) + (s2 + s3)).
    let mut sums: Vec<Expr> = (0..parts).map(|j| Expr::local(&part(j))).collect();
    while sums.len() > 1 {
        sums = sums
            .chunks(2)
            .map(|pair| match pair {
                [a, b] => a.clone() + b.clone(),
                [a] => a.clone(),
                _ => unreachable!("chunks of two"),
            })
            .collect();
    }
    let total = sums.pop().expect("at least one part");
    out.extend(set(tape, dst, &Expr::local(r), total));
    out
}

fn backward(program: &Program, tape: &Tape, k: usize, inst: &Inst) -> Vec<Stmt> {
    let split = tape.inst_split(k);
    let each = |len: u32, body: Vec<Stmt>| tape.each(split, &i(), len, body);
    match *inst {
        Inst::Constrain {
            transform,
            theta,
            dst,
        } => {
            let dst = slot_arg(program, tape, dst);
            let (u, a, x) = (Ident::new("u"), Ident::new("a"), Ident::new("x"));
            let (ue, ae, xe) = (|| Expr::local(&u), || Expr::local(&a), || Expr::local(&x));
            let mut lets = vec![Stmt::let_(&a, dst.adjoint_at(tape, &ie()))];
            if !matches!(transform, Transform::Identity) {
                lets.push(Stmt::let_(&x, dst.at(tape, &ie())));
            }
            // The CPU adds the log-Jacobian's derivative in the forward sweep and the adjoint
            // term here, to a gradient that starts at 0; this is the same sum.
            let grad = match transform {
                Transform::Identity => ae(),
                Transform::Lower(lower) => Expr::Real(1.0) + ae() * (xe() - Expr::Real(lower)),
                Transform::Upper(upper) => Expr::Real(1.0) - ae() * (Expr::Real(upper) - xe()),
                Transform::Interval(lower, upper) => {
                    let width = upper - lower;
                    let s = Ident::new("s");
                    lets.push(Stmt::let_(
                        &s,
                        (xe() - Expr::Real(lower)) / Expr::Real(width),
                    ));
                    let se = || Expr::local(&s);
                    let jacobian =
                        Expr::Real(1.0) - Expr::Real(2.0) * Expr::lib(LibFn::Logistic, vec![ue()]);
                    jacobian + ae() * Expr::Real(width) * se() * (Expr::Real(1.0) - se())
                }
            };
            let read_u = matches!(transform, Transform::Interval(..))
                .then(|| Stmt::let_(&u, theta_at(split, theta.offset)));
            if !split {
                let mut body: Vec<Stmt> = read_u.into_iter().chain(lets).collect();
                body.push(Stmt::Call(Expr::hook(
                    Hook::SetGrad,
                    vec![ie().plus_u32(theta.offset), grad],
                )));
                return vec![each(theta.len, body)];
            }
            // Split: every lane reads its coordinate and passes its gradient (0 past the
            // vector's end) to the lane that holds the coordinate.
            let gr = Ident::new("gr");
            let mut before: Vec<Stmt> = read_u.into_iter().collect();
            before.push(Stmt::zero(&gr));
            lets.push(Stmt::Assign(Expr::local(&gr), grad));
            let after = vec![Stmt::Call(Expr::hook(
                Hook::SetGradSplit,
                vec![
                    Tape::local_index(),
                    Expr::U32(theta.offset),
                    Expr::U32(theta.len),
                    Expr::local(&gr),
                ],
            ))];
            vec![tape.each_split(&i(), theta.len, before, lets, after)]
        }
        Inst::Map { op, a, dst } => {
            let a = Arg::new(program, tape, a);
            if !a.is_param() {
                return Vec::new();
            }
            let dst = slot_arg(program, tape, dst);
            let (g, x, out) = (Ident::new("g"), Ident::new("x"), Ident::new("out"));
            let (xe, oe) = (|| Expr::local(&x), || Expr::local(&out));
            let derivative = match op {
                MapOp::Neg => Expr::Real(-1.0),
                MapOp::Exp => oe(),
                MapOp::Log => Expr::Real(1.0) / xe(),
                MapOp::Log1p => Expr::Real(1.0) / (Expr::Real(1.0) + xe()),
                MapOp::Expm1 => oe() + Expr::Real(1.0),
                MapOp::Softplus => Expr::lib(LibFn::Logistic, vec![xe()]),
                MapOp::Logistic => oe() * (Expr::Real(1.0) - oe()),
                MapOp::Sqrt => Expr::lib(LibFn::SqrtSlope, vec![oe()]),
                MapOp::Abs => Expr::lib(LibFn::SignOrZero, vec![xe()]),
                MapOp::Lgamma => Expr::lib(LibFn::Digamma, vec![xe()]),
                MapOp::LogPhi => Expr::lib(LibFn::LogPhiSlope, vec![xe(), oe()]),
                MapOp::LogStep => Expr::Real(0.0),
            };
            // The CPU skips elements whose adjoint is 0 (so that 0 * inf stays 0).
            vec![each(
                dst.len(),
                vec![
                    Stmt::let_(&g, dst.adjoint_at(tape, &ie())),
                    Stmt::If(
                        Expr::local(&g).ne(Expr::Real(0.0)),
                        vec![
                            Stmt::let_(&x, a.at(tape, &ie())),
                            Stmt::let_(&out, dst.at(tape, &ie())),
                            Stmt::add_to(a.adjoint_at(tape, &ie()), Expr::local(&g) * derivative),
                        ],
                        Vec::new(),
                    ),
                ],
            )]
        }
        Inst::Zip { op, a, b, dst } => {
            let mut a = Arg::new(program, tape, a);
            let mut b = Arg::new(program, tape, b);
            if !a.is_param() && !b.is_param() {
                return Vec::new();
            }
            let dst = slot_arg(program, tape, dst);
            let mut out = Vec::new();
            let acc_a = Accumulator::new(tape, split, &a, "acc_a");
            let acc_b = Accumulator::new(tape, split, &b, "acc_b");
            out.extend(a.hoist(tape, Ident::new("a")));
            out.extend(b.hoist(tape, Ident::new("b")));
            for acc in acc_a.iter().chain(&acc_b) {
                out.extend(acc.init());
            }
            let (g, x, y) = (Ident::new("g"), Ident::new("x"), Ident::new("y"));
            let (xe, ye, ge) = (|| Expr::local(&x), || Expr::local(&y), || Expr::local(&g));
            let out_value = || dst.at(tape, &ie());
            let (da, db) = match op {
                ZipOp::Add => (Expr::Real(1.0), Expr::Real(1.0)),
                ZipOp::Sub => (Expr::Real(1.0), Expr::Real(-1.0)),
                ZipOp::Mul => (ye(), xe()),
                ZipOp::Div => (Expr::Real(1.0) / ye(), -out_value() / ye()),
                ZipOp::Pow => (
                    ye() * Expr::lib(LibFn::Pow, vec![xe(), ye() - Expr::Real(1.0)]),
                    out_value() * Expr::lib(LibFn::Log, vec![xe()]),
                ),
                // The gradient goes to the selected argument, `a` on a tie (eval.rs).
                ZipOp::Max => (
                    select(Expr::Real(1.0), Expr::Real(0.0), ye().gt(xe())),
                    select(Expr::Real(0.0), Expr::Real(1.0), ye().gt(xe())),
                ),
                ZipOp::Min => (
                    select(Expr::Real(1.0), Expr::Real(0.0), xe().gt(ye())),
                    select(Expr::Real(0.0), Expr::Real(1.0), xe().gt(ye())),
                ),
            };
            let mut body = vec![
                Stmt::let_(&g, dst.adjoint_at(tape, &ie())),
                Stmt::let_(&x, a.at(tape, &ie())),
                Stmt::let_(&y, b.at(tape, &ie())),
            ];
            if let Some(acc) = &acc_a {
                body.push(acc.add(tape, &ie(), ge() * da));
            }
            if let Some(acc) = &acc_b {
                body.push(acc.add(tape, &ie(), ge() * db));
            }
            out.push(each(dst.len(), body));
            for acc in acc_a.iter().chain(&acc_b) {
                out.extend(acc.flush(tape, split));
            }
            out
        }
        Inst::Sum { a, dst } => {
            let a = Arg::new(program, tape, a);
            if !a.is_param() {
                return Vec::new();
            }
            let dst = slot_arg(program, tape, dst);
            let g = Ident::new("g");
            vec![
                Stmt::let_(&g, dst.adjoint_at(tape, &Expr::U32(0))),
                each(
                    a.len(),
                    vec![Stmt::add_to(a.adjoint_at(tape, &ie()), Expr::local(&g))],
                ),
            ]
        }
        Inst::Cumsum { a, dst } => {
            let a = Arg::new(program, tape, a);
            if !a.is_param() {
                return Vec::new();
            }
            let dst = slot_arg(program, tape, dst);
            // Last element first: i = len - 1 - k.
            let (k, running, j) = (Ident::new("k"), Ident::new("running"), Ident::new("j"));
            let je = || Expr::local(&j);
            vec![
                Stmt::zero(&running),
                Stmt::for_(
                    &k,
                    Expr::U32(dst.len()),
                    vec![
                        Stmt::let_(&j, Expr::U32(dst.len() - 1) - Expr::local(&k)),
                        Stmt::add_to(Expr::local(&running), dst.adjoint_at(tape, &je())),
                        Stmt::add_to(a.adjoint_at(tape, &je()), Expr::local(&running)),
                    ],
                ),
            ]
        }
        Inst::Dot { a, b, dst } => {
            let (a, b) = (Arg::new(program, tape, a), Arg::new(program, tape, b));
            if !a.is_param() && !b.is_param() {
                return Vec::new();
            }
            let dst = slot_arg(program, tape, dst);
            let g = Ident::new("g");
            let mut out = vec![Stmt::let_(&g, dst.adjoint_at(tape, &Expr::U32(0)))];
            if a.is_param() {
                out.push(each(
                    a.len(),
                    vec![Stmt::add_to(
                        a.adjoint_at(tape, &ie()),
                        Expr::local(&g) * b.at(tape, &ie()),
                    )],
                ));
            }
            if b.is_param() {
                out.push(each(
                    b.len(),
                    vec![Stmt::add_to(
                        b.adjoint_at(tape, &ie()),
                        Expr::local(&g) * a.at(tape, &ie()),
                    )],
                ));
            }
            out
        }
        Inst::Matvec { m, v, dst } => {
            let row = row_cache(program, tape, k, inst);
            let v = Arg::new(program, tape, v);
            if !v.is_param() {
                return Vec::new();
            }
            let dst = slot_arg(program, tape, dst);
            let (r, c) = (Ident::new("r"), Ident::new("c"));
            if let Some((row, _)) = &row {
                // In the fused loop each column's adjoint is this lane's part (summed over the
                // lanes after the loop): one multiply-add per column, under one bound check.
                let add = Stmt::add_to(
                    v.adjoint_at(tape, &Expr::local(&c)),
                    dst.adjoint_at(tape, &Expr::local(&r))
                        * Expr::local(row).index(Expr::local(&c)),
                );
                return vec![tape.each(
                    split,
                    &r,
                    m.rows,
                    vec![Stmt::for_(&c, Expr::U32(m.cols), vec![add])],
                )];
            }
            // Column by column, so that each adjoint of v is written once (the CPU adds row by
            // row; the sum is the same up to rounding).
            let s = Sum::new(tape, split, "s");
            let mut column = vec![
                s.init(),
                tape.each(
                    split,
                    &r,
                    m.rows,
                    vec![
                        s.add(dst.adjoint_at(tape, &Expr::local(&r)) * matrix_at(tape, m, &r, &c)),
                    ],
                ),
            ];
            let (finish, total) = s.finish(tape, split);
            column.extend(finish);
            column.push(Stmt::add_to(v.adjoint_at(tape, &Expr::local(&c)), total));
            vec![Stmt::for_(&c, Expr::U32(m.cols), column)]
        }
        Inst::Gather { a, idx, dst } => {
            let a = Arg::new(program, tape, a);
            if !a.is_param() {
                return Vec::new();
            }
            let dst = slot_arg(program, tape, dst);
            let j = Ident::new("j");
            vec![each(
                idx.len,
                vec![
                    Stmt::let_(
                        &j,
                        Expr::Global(Global::Index).index(ie().plus_u32(idx.offset)),
                    ),
                    Stmt::add_to(
                        a.adjoint_dynamic(tape, Expr::local(&j)),
                        dst.adjoint_at(tape, &ie()),
                    ),
                ],
            )]
        }
        Inst::Concat { parts, dst } => {
            let dst = slot_arg(program, tape, dst);
            let mut out = Vec::new();
            let mut at = 0;
            for &part in program.list(parts) {
                let part = Arg::new(program, tape, part);
                let len = part.len();
                if part.is_param() {
                    out.push(Stmt::Block(vec![each(
                        len,
                        vec![Stmt::add_to(
                            part.adjoint_at(tape, &ie()),
                            dst.adjoint_at(tape, &ie().plus_u32(at)),
                        )],
                    )]));
                }
                at += len;
            }
            out
        }
        Inst::LogSumExp { a, dst } => {
            let a = Arg::new(program, tape, a);
            if !a.is_param() {
                return Vec::new();
            }
            let dst = slot_arg(program, tape, dst);
            let (g, r) = (Ident::new("g"), Ident::new("r"));
            let zero = Expr::U32(0);
            // The CPU skips a zero adjoint and a non-finite result.
            vec![
                Stmt::let_(&g, dst.adjoint_at(tape, &zero)),
                Stmt::let_(&r, dst.at(tape, &zero)),
                Stmt::If(
                    Expr::local(&g)
                        .ne(Expr::Real(0.0))
                        .and(is_finite(Expr::local(&r))),
                    vec![Stmt::for_(
                        &i(),
                        Expr::U32(a.len()),
                        vec![Stmt::add_to(
                            a.adjoint_at(tape, &ie()),
                            Expr::local(&g)
                                * Expr::lib(LibFn::Exp, vec![a.at(tape, &ie()) - Expr::local(&r)]),
                        )],
                    )],
                    Vec::new(),
                ),
            ]
        }
        Inst::Density { .. } | Inst::RandomWalk { .. } | Inst::Factor { .. } => Vec::new(),
    }
}

/// The unconstrained coordinate of element `i` of a parameter vector from coordinate
/// `offset`: `g_theta(i + offset)`, or split, `g_theta_split(li, offset)` (every lane).
fn theta_at(split: bool, offset: u32) -> Expr {
    if split {
        Expr::hook(
            Hook::ThetaSplit,
            vec![Tape::local_index(), Expr::U32(offset)],
        )
    } else {
        Expr::hook(Hook::Theta, vec![ie().plus_u32(offset)])
    }
}
