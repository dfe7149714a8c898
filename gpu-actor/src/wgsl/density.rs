//! Densities and the Gaussian random walk: the structure of sampler's dist.rs as WGSL.
//!
//! dist.rs writes each density as a sum of parts: `term1` (one parameter), `term2` (two) and a
//! per-element `kernel`. A part whose operands all are data or constants is dropped (Stan's `~`
//! semantics, so the log density has the same constant as the CPU's); a part whose operands
//! all are scalars is computed once and multiplied by the length. [`parts`] lists each
//! distribution's parts exactly as `dist::density` does; the formulas are in
//! `shaders/density.wgsl`.

use sampler::{DensityKind, Operand, Program};

use super::ast::{Expr, Field, Global, Hook, Ident, Stmt, Ty};
use super::library::{LibFn, TermFn};
use super::tape::{Accumulator, Arg, Sum, Tape, accumulate};

/// Which operand a part reads.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pos {
    X,
    P0,
    P1,
    P2,
}

/// One part of a density.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Part {
    One(Pos, TermFn),
    Two(Pos, Pos, TermFn),
    Kernel,
}

/// The parts of each density, in dist.rs's order.
pub(crate) fn parts(kind: DensityKind) -> &'static [Part] {
    use Part::{Kernel, One, Two};
    use Pos::{P0, P1, P2, X};
    use TermFn::*;
    match kind {
        DensityKind::Normal => &[One(P1, NegLogScale), Kernel],
        DensityKind::HalfNormal => &[One(P0, NegLogScale), Kernel],
        DensityKind::Exponential => &[One(P0, LogRate), Kernel],
        DensityKind::StudentT => &[One(P0, StudentTNu), One(P2, NegLogScale), Kernel],
        DensityKind::Cauchy => &[One(P1, NegLogScale), Kernel],
        DensityKind::HalfCauchy => &[One(P0, NegLogScale), Kernel],
        DensityKind::LogNormal => &[One(X, NegLogX), One(P1, NegLogScale), Kernel],
        DensityKind::Gamma | DensityKind::InverseGamma => {
            &[One(P0, NegLgamma), Two(P0, P1, ShapeLogRate), Kernel]
        }
        DensityKind::Beta => &[Two(P0, P1, BetaNorm), Kernel],
        DensityKind::Uniform => &[Two(P0, P1, UniformNorm), Kernel],
        DensityKind::Laplace => &[One(P1, NegLogScale), Kernel],
        DensityKind::BernoulliLogit
        | DensityKind::BinomialLogit
        | DensityKind::PoissonLog
        | DensityKind::Bernoulli
        | DensityKind::Binomial
        | DensityKind::Poisson => &[Kernel],
        DensityKind::Logistic => &[One(P1, NegLogScale), Kernel],
        DensityKind::Weibull => &[One(P0, LogRate), Two(P0, P1, NegShapeLogScale), Kernel],
        DensityKind::ChiSquare => &[One(P0, ChiSquareNu), Kernel, One(X, NegHalfX)],
        DensityKind::NegBinomial2 => &[
            Two(X, P1, NegBinomialChoose),
            Two(X, P0, MultiplyLog),
            Kernel,
        ],
        DensityKind::NegBinomial2Log => &[Two(X, P1, NegBinomialChoose), Kernel],
    }
}

/// Every term function some density uses, for tests.
#[cfg(test)]
pub(crate) fn used_terms() -> Vec<TermFn> {
    DensityKind::ALL
        .iter()
        .flat_map(|&kind| parts(kind))
        .filter_map(|part| match *part {
            Part::One(_, term) | Part::Two(_, _, term) => Some(term),
            Part::Kernel => None,
        })
        .collect()
}

fn i() -> Ident {
    Ident::new("i")
}

fn ie() -> Expr {
    Expr::local(&i())
}

/// `lp += sum_i log p(x_i | params_i)` with partial derivatives into the adjoint tape.
#[allow(clippy::too_many_arguments)]
pub(crate) fn density(
    program: &Program,
    tape: &Tape,
    split: bool,
    lp: &Ident,
    kind: DensityKind,
    x: Operand,
    params: [Operand; 3],
    len: u32,
) -> Vec<Stmt> {
    let args = [
        Arg::new(program, tape, x),
        Arg::new(program, tape, params[0]),
        Arg::new(program, tape, params[1]),
        Arg::new(program, tape, params[2]),
    ];
    let arg = |pos: Pos| -> &Arg {
        match pos {
            Pos::X => &args[0],
            Pos::P0 => &args[1],
            Pos::P1 => &args[2],
            Pos::P2 => &args[3],
        }
    };
    // A fused loop (`split.rs`) runs the parts over elements; the parts whose arguments are
    // all broadcast scalars (`n` times one term) run once, outside it.
    let whole = |part: &Part| match *part {
        Part::One(a, _) => arg(a).is_scalar(),
        Part::Two(a, b, _) => arg(a).is_scalar() && arg(b).is_scalar(),
        Part::Kernel => false,
    };
    let fused = split && tape.fused();
    let dens = Ident::new("dens");
    let mut body = vec![Stmt::zero(&dens)];
    for part in parts(kind) {
        if fused && whole(part) == tape.is_inside() {
            continue;
        }
        let stmts = match *part {
            Part::One(a, term) => term1(tape, split, len, arg(a), term, &dens),
            Part::Two(a, b, term) => term2(tape, split, len, arg(a), arg(b), term, &dens),
            Part::Kernel => kernel(tape, split, len, kind, &args, &dens),
        };
        if !stmts.is_empty() {
            body.push(Stmt::Block(stmts));
        }
    }
    if body.len() == 1 {
        return Vec::new();
    }
    body.push(Stmt::add_to(Expr::local(lp), Expr::local(&dens)));
    body
}

/// dist.rs's `term1`.
fn term1(tape: &Tape, split: bool, n: u32, a: &Arg, term: TermFn, dens: &Ident) -> Vec<Stmt> {
    if !a.is_param() {
        return Vec::new();
    }
    let r = Ident::new("r");
    let re = || Expr::local(&r);
    let n_real = Expr::Real(f64::from(n));
    if a.is_scalar() {
        let zero = Expr::U32(0);
        return vec![
            Stmt::let_(&r, Expr::lib(LibFn::Term(term), vec![a.at(tape, &zero)])),
            Stmt::add_to(
                a.adjoint_at(tape, &zero),
                n_real.clone() * re().field(Field::D),
            ),
            Stmt::add_to(Expr::local(dens), n_real * re().field(Field::Value)),
        ];
    }
    let t = Sum::new(tape, split, "t");
    let mut out = vec![
        t.init(),
        tape.each_term(
            split,
            &i(),
            n,
            vec![
                Stmt::let_(&r, Expr::lib(LibFn::Term(term), vec![a.at(tape, &ie())])),
                Stmt::add_to(a.adjoint_at(tape, &ie()), re().field(Field::D)),
                t.add(re().field(Field::Value)),
            ],
        ),
    ];
    let (finish, total) = t.finish(tape, split);
    out.extend(finish);
    out.push(Stmt::add_to(Expr::local(dens), total));
    out
}

/// dist.rs's `term2`.
fn term2(
    tape: &Tape,
    split: bool,
    n: u32,
    a: &Arg,
    b: &Arg,
    term: TermFn,
    dens: &Ident,
) -> Vec<Stmt> {
    if !a.is_param() && !b.is_param() {
        return Vec::new();
    }
    let r = Ident::new("r");
    let re = || Expr::local(&r);
    if a.is_scalar() && b.is_scalar() {
        let zero = Expr::U32(0);
        let n_real = || Expr::Real(f64::from(n));
        let mut out = vec![Stmt::let_(
            &r,
            Expr::lib(
                LibFn::Term(term),
                vec![a.at(tape, &zero), b.at(tape, &zero)],
            ),
        )];
        out.extend(accumulate(tape, a, &zero, n_real() * re().field(Field::Da)));
        out.extend(accumulate(tape, b, &zero, n_real() * re().field(Field::Db)));
        out.push(Stmt::add_to(
            Expr::local(dens),
            n_real() * re().field(Field::Value),
        ));
        return out;
    }
    let t = Sum::new(tape, split, "t");
    let acc_a = Accumulator::new(tape, split, a, "acc_a");
    let acc_b = Accumulator::new(tape, split, b, "acc_b");
    let mut out = vec![t.init()];
    for acc in acc_a.iter().chain(&acc_b) {
        out.extend(acc.init());
    }
    let mut body = vec![Stmt::let_(
        &r,
        Expr::lib(
            LibFn::Term(term),
            vec![a.at(tape, &ie()), b.at(tape, &ie())],
        ),
    )];
    if let Some(acc) = &acc_a {
        body.push(acc.add(tape, &ie(), re().field(Field::Da)));
    }
    if let Some(acc) = &acc_b {
        body.push(acc.add(tape, &ie(), re().field(Field::Db)));
    }
    body.push(t.add(re().field(Field::Value)));
    out.push(tape.each_term(split, &i(), n, body));
    for acc in acc_a.iter().chain(&acc_b) {
        out.extend(acc.flush(tape, split));
    }
    let (finish, total) = t.finish(tape, split);
    out.extend(finish);
    out.push(Stmt::add_to(Expr::local(dens), total));
    out
}

/// dist.rs's `kernel`: the per-element part, over `x` and the distribution's parameters.
fn kernel(
    tape: &Tape,
    split: bool,
    n: u32,
    kind: DensityKind,
    args: &[Arg; 4],
    dens: &Ident,
) -> Vec<Stmt> {
    let n_args = 1 + kind.n_params();
    let mut used: Vec<Arg> = args[..n_args].to_vec();
    if used.iter().all(|arg| !arg.is_param()) {
        return Vec::new();
    }
    let derivative_fields = [Field::Dx, Field::D0, Field::D1, Field::D2];
    let accumulators: Vec<Option<Accumulator>> = used
        .iter()
        .enumerate()
        .map(|(k, arg)| Accumulator::new(tape, split, arg, &format!("acc{k}")))
        .collect();
    let t = Sum::new(tape, split, "t");
    let r = Ident::new("r");
    let mut out = vec![t.init()];
    for (k, arg) in used.iter_mut().enumerate() {
        out.extend(arg.hoist(tape, Ident::numbered("arg", k)));
    }
    for acc in accumulators.iter().flatten() {
        out.extend(acc.init());
    }
    let mut call_args: Vec<Expr> = used.iter().map(|arg| arg.at(tape, &ie())).collect();
    call_args.resize(4, Expr::Real(0.0));
    let mut body = vec![
        Stmt::let_(&r, Expr::lib(LibFn::Kernel(kind), call_args)),
        t.add(Expr::local(&r).field(Field::Value)),
    ];
    for (acc, field) in accumulators.iter().zip(derivative_fields) {
        if let Some(acc) = acc {
            body.push(acc.add(tape, &ie(), Expr::local(&r).field(field)));
        }
    }
    out.push(tape.each_term(split, &i(), n, body));
    for acc in accumulators.iter().flatten() {
        out.extend(acc.flush(tape, split));
    }
    let (finish, total) = t.finish(tape, split);
    out.extend(finish);
    out.push(Stmt::add_to(Expr::local(dens), total));
    out
}

/// dist.rs's `random_walk`: `lp += log p(x)` for a Gaussian random walk whose parameters
/// (`[sigma, drift, init_mu, init_sigma]`) are scalars.
pub(crate) fn random_walk(
    program: &Program,
    tape: &Tape,
    lp: &Ident,
    x: Operand,
    params: [Operand; 4],
) -> Vec<Stmt> {
    let x = Arg::new(program, tape, x);
    let [sigma, drift, init_mu, init_sigma] = params.map(|p| Arg::new(program, tape, p));
    let zero = Expr::U32(0);
    let names = ["s", "d", "m0", "s0"].map(Ident::new);
    let [s, d, m0, s0] = names.clone().map(|name| move || Expr::local(&name));
    let mut out: Vec<Stmt> = [&sigma, &drift, &init_mu, &init_sigma]
        .iter()
        .zip(&names)
        .map(|(arg, name)| Stmt::let_(name, arg.at(tape, &zero)))
        .collect();

    let (z0, total) = (Ident::new("z0"), Ident::new("total"));
    let (z0e, totale) = (|| Expr::local(&z0), || Expr::local(&total));
    // Split, element 0 is lane 0's first; every lane reads it.
    let x0 = if x.is_split() {
        let first = tape.value(Expr::U32(x.offset()));
        Expr::hook(Hook::LaneGet, vec![first, Expr::U32(0)])
    } else {
        x.at(tape, &zero)
    };
    let mut inside = vec![
        Stmt::let_(&z0, (x0 - m0()) / s0()),
        Stmt::Var(
            total.clone(),
            Ty::Real,
            Some(Expr::Real(-0.5) * z0e() * z0e()),
        ),
    ];
    if x.is_split() {
        let lane0 = Expr::Global(Global::Lane).equals(Expr::U32(0));
        let first = tape.adjoint(Expr::U32(x.offset()));
        inside.push(Stmt::If(
            lane0,
            vec![Stmt::add_to(first, -z0e() / s0())],
            Vec::new(),
        ));
    } else {
        inside.extend(accumulate(tape, &x, &zero, -z0e() / s0()));
    }
    inside.extend(accumulate(tape, &init_mu, &zero, z0e() / s0()));
    inside.extend(accumulate(tape, &init_sigma, &zero, z0e() * z0e() / s0()));
    if init_sigma.is_param() {
        inside.push(Stmt::Assign(
            totale(),
            totale() - Expr::lib(LibFn::Log, vec![s0()]),
        ));
        inside.extend(accumulate(
            tape,
            &init_sigma,
            &zero,
            Expr::Real(-1.0) / s0(),
        ));
    }

    let steps = x.len() - 1;
    let (inv_s, sum_z2, sum_dz, prev) = (
        Ident::new("inv_s"),
        Ident::new("sum_z2"),
        Ident::new("sum_dz"),
        Ident::new("prev"),
    );
    let (k, cur, z, g) = (
        Ident::new("k"),
        Ident::new("cur"),
        Ident::new("z"),
        Ident::new("g"),
    );
    let ke = || Expr::local(&k);
    let next = || ke().plus_u32(1);
    inside.push(Stmt::let_(&inv_s, Expr::Real(1.0) / s()));
    inside.push(Stmt::zero(&sum_z2));
    inside.push(Stmt::zero(&sum_dz));
    let z_of = |cur: Expr, prev: Expr| (cur - prev - d()) * Expr::local(&inv_s);
    if x.is_split() {
        inside.push(split_walk_steps(tape, &x, z_of, [&sum_z2, &sum_dz, &inv_s]));
    } else {
        inside.push(Stmt::Var(prev.clone(), Ty::Real, Some(x.at(tape, &zero))));
        let mut step = vec![
            Stmt::let_(&cur, x.at(tape, &next())),
            Stmt::let_(&z, z_of(Expr::local(&cur), Expr::local(&prev))),
            Stmt::add_to(Expr::local(&sum_z2), Expr::local(&z) * Expr::local(&z)),
            Stmt::add_to(Expr::local(&sum_dz), Expr::local(&z)),
            Stmt::let_(&g, Expr::local(&z) * Expr::local(&inv_s)),
        ];
        step.extend(accumulate(tape, &x, &next(), -Expr::local(&g)));
        step.extend(accumulate(tape, &x, &ke(), Expr::local(&g)));
        step.push(Stmt::Assign(Expr::local(&prev), Expr::local(&cur)));
        inside.push(Stmt::for_(&k, Expr::U32(steps), step));
    }
    inside.push(Stmt::Assign(
        totale(),
        totale() - Expr::Real(0.5) * Expr::local(&sum_z2),
    ));
    inside.extend(accumulate(
        tape,
        &drift,
        &zero,
        Expr::local(&sum_dz) * Expr::local(&inv_s),
    ));
    inside.extend(accumulate(
        tape,
        &sigma,
        &zero,
        Expr::local(&sum_z2) * Expr::local(&inv_s),
    ));
    if sigma.is_param() {
        let steps_real = f64::from(steps);
        inside.push(Stmt::Assign(
            totale(),
            totale() - Expr::Real(steps_real) * Expr::lib(LibFn::Log, vec![s()]),
        ));
        inside.extend(accumulate(
            tape,
            &sigma,
            &zero,
            Expr::Real(-steps_real) * Expr::local(&inv_s),
        ));
    }
    inside.push(Stmt::add_to(Expr::local(lp), totale()));

    // Outside the domain the CPU returns -inf and leaves the adjoints alone.
    let in_domain = s().gt(Expr::Real(0.0)).and(s0().gt(Expr::Real(0.0)));
    out.push(Stmt::If(
        in_domain.not(),
        vec![Stmt::add_to(
            Expr::local(lp),
            -Expr::lib(LibFn::Inf, Vec::new()),
        )],
        inside,
    ));
    out
}

/// The steps of a random walk over a split vector `x` (`n` elements, `T = ceil(n / L)` on each
/// lane): on trip `li`, each lane's element `i = li * L + lane` takes its predecessor from
/// the lane before (lane 0 from lane `L - 1`'s element of the trip before), adds its step's
/// terms to the lane's sums `[sum_z2, sum_dz]` (then summed over the lanes) and `-g` to its
/// own adjoint, and passes `g` back to the lane that holds its predecessor. Every lane runs
/// every trip and both shuffles; elements 0 and past the end take no step and pass 0.
/// `z_of(cur, prev)` is a step's standardised increment.
fn split_walk_steps(
    tape: &Tape,
    x: &Arg,
    z_of: impl Fn(Expr, Expr) -> Expr,
    [sum_z2, sum_dz, inv_s]: [&Ident; 3],
) -> Stmt {
    let lanes = tape.lanes();
    let n = x.len();
    let trips = n.div_ceil(lanes);
    let li = Tape::local_index;
    // Trip `li - 1` as a literal index once unrolled (`li - 1` would be an overflowing
    // constant on the first trip); it is read there only by lane 0's element 0.
    let before = || (li() + Expr::U32(trips - 1)) % Expr::U32(trips);
    let lane = || Expr::Global(Global::Lane);
    let last_lane = || lane().equals(Expr::U32(lanes - 1));
    let at = |index: Expr| tape.value(index.plus_u32(x.offset()));
    let adjoint = |index: Expr| tape.adjoint(index.plus_u32(x.offset()));
    let names = ["cur", "supply", "prev", "i", "z", "g", "gn"].map(Ident::new);
    let [cur, supply, prev, i, z, g, gn] = &names;
    let local = Expr::local;
    let step = vec![
        Stmt::let_(z, z_of(local(cur), local(prev))),
        Stmt::add_to(local(sum_z2), local(z) * local(z)),
        Stmt::add_to(local(sum_dz), local(z)),
        Stmt::Assign(local(g), local(z) * local(inv_s)),
        Stmt::add_to(adjoint(li()), -local(g)),
    ];
    // Every lane, before its element's step: the predecessor's value, and `g` at 0.
    let before_step = vec![
        Stmt::let_(cur, at(li())),
        Stmt::Var(supply.clone(), Ty::Real, Some(local(cur))),
        Stmt::If(
            last_lane(),
            vec![Stmt::Assign(local(supply), at(before()))],
            Vec::new(),
        ),
        Stmt::let_(
            prev,
            Expr::hook(
                Hook::LaneGet,
                vec![
                    local(supply),
                    (lane() + Expr::U32(lanes - 1)) % Expr::U32(lanes),
                ],
            ),
        ),
        Stmt::zero(g),
    ];
    // Element 0 takes no step.
    let body = vec![Stmt::If(local(i).gt(Expr::U32(0)), step, Vec::new())];
    // Every lane, after: `g` back to the predecessor's lane.
    let after_step = vec![
        Stmt::let_(
            gn,
            Expr::hook(
                Hook::LaneGet,
                vec![local(g), (lane() + Expr::U32(1)) % Expr::U32(lanes)],
            ),
        ),
        Stmt::If(
            last_lane(),
            vec![Stmt::add_to(adjoint(before()), local(gn))],
            vec![Stmt::add_to(adjoint(li()), local(gn))],
        ),
    ];
    let mut out = vec![tape.each_split(i, n, before_step, body, after_step)];
    out.push(Tape::sum_over_lanes(sum_z2));
    out.push(Tape::sum_over_lanes(sum_dz));
    Stmt::Block(out)
}
