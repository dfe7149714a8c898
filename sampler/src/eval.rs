//! The CPU evaluator: log density and reverse-mode gradient of a [`Program`], in f64.
//!
//! A forward sweep writes every slot of the tape; densities add their partial derivatives to
//! the adjoint tape as they go (their output feeds only the log density). A backward sweep over
//! the slot-writing instructions, in reverse, then carries adjoints down to the unconstrained
//! parameters. The tape and adjoint buffers are allocated once per [`Evaluator`]; an evaluation
//! allocates nothing.

use std::sync::Arc;

use crate::dist::{self, Arg};
use crate::linalg::{self, matvec, matvec_transpose_add};
use crate::program::{Inst, MapOp, Operand, Program, Slot, StatementId, Transform, ZipOp};
use crate::special::{digamma, lgamma, log_phi, log_phi_slope, logistic, softplus};

mod plan;

pub(crate) use plan::Plan;

/// A log density with gradient: what the sampler needs from a model.
///
/// Implementations own their scratch space, so each chain holds its own.
pub trait LogDensity {
    /// Length of the unconstrained parameter vector.
    fn dim(&self) -> usize;

    /// Returns `log p(theta)` (up to a constant) and writes its gradient into `grad`.
    ///
    /// A non-finite value means the point is outside the support (or the computation
    /// overflowed); the sampler treats it as a divergence, not an error.
    fn logp_grad(&mut self, theta: &[f64], grad: &mut [f64]) -> f64;

    /// Number of values reported per draw.
    fn n_outputs(&self) -> usize {
        self.dim()
    }

    /// Writes the values reported for the draw at `theta` (by default `theta` itself).
    fn write_outputs(&mut self, theta: &[f64], out: &mut [f64]) {
        out.copy_from_slice(theta);
    }

    /// Says, in words, why the log density or its gradient is not finite at `theta`.
    fn explain(&mut self, _theta: &[f64]) -> Option<String> {
        None
    }
}

/// Evaluates one [`Program`]. Cheap to create; one per chain.
#[derive(Clone, Debug)]
pub struct Evaluator {
    program: Arc<Program>,
    plan: Arc<Plan>,
    /// The tape, then the plan's pool.
    tape: Vec<f64>,
    adj: Vec<f64>,
}

impl Evaluator {
    /// An evaluator with its own scratch buffers. It decodes the program; chains of one
    /// model share one decoding through [`crate::CheckedModel::evaluator`].
    pub fn new(program: Arc<Program>) -> Evaluator {
        let plan = Arc::new(Plan::new(&program));
        Evaluator::with_plan(program, plan)
    }

    /// An evaluator of `program` running `plan`, decoded from it.
    pub(crate) fn with_plan(program: Arc<Program>, plan: Arc<Plan>) -> Evaluator {
        let mut tape = vec![0.0; program.tape_len + plan.pool.len()];
        tape[program.tape_len..].copy_from_slice(&plan.pool);
        let adj = vec![0.0; tape.len()];
        Evaluator {
            program,
            plan,
            tape,
            adj,
        }
    }

    /// [`LogDensity::logp_grad`] one instruction at a time, without the decoded steps: what
    /// the fast path must equal bit for bit. For tests, and for tracking down a difference.
    pub fn logp_grad_per_instruction(&mut self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let program = &*self.program;
        grad.fill(0.0);
        self.adj.fill(0.0);
        let lp = forward(
            program,
            theta,
            &mut self.tape,
            Some(&mut self.adj),
            Some(grad),
        );
        for inst in program.insts.iter().rev() {
            backward(program, inst, &self.tape, &mut self.adj, grad);
        }
        lp
    }

    /// The program evaluated.
    pub fn program(&self) -> &Arc<Program> {
        &self.program
    }

    /// Log density only (the gradient is computed and discarded).
    pub fn logp(&mut self, theta: &[f64]) -> f64 {
        let mut grad = vec![0.0; self.program.dim];
        self.logp_grad(theta, &mut grad)
    }
}

impl LogDensity for Evaluator {
    fn dim(&self) -> usize {
        self.program.dim
    }

    fn logp_grad(&mut self, theta: &[f64], grad: &mut [f64]) -> f64 {
        let program = &*self.program;
        debug_assert_eq!(theta.len(), program.dim);
        grad.fill(0.0);
        self.adj.fill(0.0);
        let lp = plan::forward(
            program,
            &self.plan,
            theta,
            &mut self.tape,
            Some(&mut self.adj),
            Some(grad),
        );
        plan::backward(program, &self.plan, &self.tape, &mut self.adj, grad);
        lp
    }

    fn n_outputs(&self) -> usize {
        self.program
            .outputs
            .iter()
            .map(|output| output.len as usize)
            .sum()
    }

    /// Writes the constrained parameters and transformed parameters at `theta`, in the order
    /// of [`Program::columns`], into `out`.
    fn write_outputs(&mut self, theta: &[f64], out: &mut [f64]) {
        let program = &*self.program;
        plan::forward(program, &self.plan, theta, &mut self.tape, None, None);
        let mut column = 0;
        for output in &program.outputs {
            let len = output.len as usize;
            let values = operand_values(program, &self.tape, &output.value);
            for i in 0..len {
                out[column + i] = values[if values.len() == 1 { 0 } else { i }];
            }
            column += len;
        }
    }

    fn explain(&mut self, theta: &[f64]) -> Option<String> {
        explain(&self.program, theta)
    }
}

#[inline(always)]
fn slot_range(slot: Slot) -> std::ops::Range<usize> {
    slot.offset as usize..(slot.offset + slot.len) as usize
}

/// The values of an operand: a tape or data run, or a one-element constant.
#[inline(always)]
fn operand_values<'a>(program: &'a Program, tape: &'a [f64], operand: &'a Operand) -> &'a [f64] {
    match operand {
        Operand::Slot(id) => &tape[slot_range(program.slot(*id))],
        Operand::Data(data) => {
            &program.data[data.offset as usize..(data.offset + data.len) as usize]
        }
        Operand::Const(value) => std::slice::from_ref(value),
    }
}

#[inline(always)]
fn adj_offset(program: &Program, operand: &Operand) -> Option<usize> {
    match operand {
        Operand::Slot(id) => Some(program.slot(*id).offset as usize),
        _ => None,
    }
}

fn arg<'a>(program: &'a Program, tape: &'a [f64], operand: &'a Operand) -> Arg<'a> {
    let vals = operand_values(program, tape, operand);
    Arg {
        vals,
        stride: usize::from(vals.len() > 1),
        adj: adj_offset(program, operand),
    }
}

/// Runs the instructions; returns the log density. With `adj` and `grad`, densities add
/// their partial derivatives (and transforms their log-Jacobian derivatives).
fn forward(
    program: &Program,
    theta: &[f64],
    tape: &mut [f64],
    mut adj: Option<&mut [f64]>,
    mut grad: Option<&mut [f64]>,
) -> f64 {
    let mut lp = 0.0;
    for inst in &program.insts {
        lp += step(
            program,
            inst,
            theta,
            tape,
            adj.as_deref_mut(),
            grad.as_deref_mut(),
        );
    }
    lp
}

/// Runs one instruction; returns what it adds to the log density. Densities are skipped
/// (they add nothing) when `adj` is `None`.
fn step(
    program: &Program,
    inst: &Inst,
    theta: &[f64],
    tape: &mut [f64],
    adj: Option<&mut [f64]>,
    grad: Option<&mut [f64]>,
) -> f64 {
    match inst {
        Inst::Constrain {
            transform,
            theta: range,
            dst,
        } => {
            let coords = range.offset as usize..(range.offset + range.len) as usize;
            let out = &mut tape[slot_range(program.slot(*dst))];
            constrain(
                *transform,
                &theta[coords.clone()],
                out,
                grad.map(|g| &mut g[coords]),
            )
        }
        Inst::Map { .. }
        | Inst::Zip { .. }
        | Inst::Sum { .. }
        | Inst::Cumsum { .. }
        | Inst::Dot { .. }
        | Inst::Matvec { .. }
        | Inst::Gather { .. }
        | Inst::Concat { .. }
        | Inst::LogSumExp { .. } => {
            value_forward(program, inst, tape);
            0.0
        }
        Inst::Density {
            kind,
            x,
            params,
            len,
            ..
        } => {
            let Some(adj) = adj else { return 0.0 };
            let tape = &*tape;
            let x = arg(program, tape, x);
            let p = [
                arg(program, tape, &params[0]),
                arg(program, tape, &params[1]),
                arg(program, tape, &params[2]),
            ];
            dist::density(*kind, &x, &p, *len as usize, adj)
        }
        Inst::RandomWalk {
            x,
            sigma,
            drift,
            init_mu,
            init_sigma,
            ..
        } => {
            let Some(adj) = adj else { return 0.0 };
            let tape = &*tape;
            dist::random_walk(
                adj,
                program.len_of(*x),
                &arg(program, tape, x),
                &arg(program, tape, sigma),
                &arg(program, tape, drift),
                &arg(program, tape, init_mu),
                &arg(program, tape, init_sigma),
            )
        }
        Inst::Factor { a, .. } => {
            let Some(adj) = adj else { return 0.0 };
            let values = operand_values(program, tape, a);
            if let Some(offset) = adj_offset(program, a) {
                for g in &mut adj[offset..offset + values.len()] {
                    *g += 1.0;
                }
            }
            values.iter().sum()
        }
    }
}

/// Finds the first instruction that makes the log density non-finite and says which
/// statement or parameter it comes from.
fn explain(program: &Program, theta: &[f64]) -> Option<String> {
    let mut tape = vec![0.0; program.tape_len];
    let mut adj = vec![0.0; program.tape_len];
    let mut grad = vec![0.0; program.dim];
    for inst in &program.insts {
        let lp = step(
            program,
            inst,
            theta,
            &mut tape,
            Some(&mut adj),
            Some(&mut grad),
        );
        let (what, bad) = match inst {
            Inst::Constrain { theta: range, .. } => (
                format!(
                    "the transform of unconstrained coordinates {}..{}",
                    range.offset,
                    range.offset + range.len
                ),
                !lp.is_finite(),
            ),
            Inst::Factor { source, .. } if *source == StatementId::JACOBIAN => (
                "a parameter's transform (its log-Jacobian)".to_owned(),
                !lp.is_finite(),
            ),
            Inst::Density { source, .. }
            | Inst::RandomWalk { source, .. }
            | Inst::Factor { source, .. } => {
                (format!("statement model[{}]", source.0), !lp.is_finite())
            }
            _ => continue,
        };
        if bad {
            return Some(format!("{what} gives log density {lp}"));
        }
    }
    if let Some(i) = grad.iter().position(|g| !g.is_finite()) {
        return Some(format!(
            "the gradient is not finite in unconstrained coordinate {i}"
        ));
    }
    None
}

fn constrain(transform: Transform, u: &[f64], x: &mut [f64], grad: Option<&mut [f64]>) -> f64 {
    let mut log_jacobian = 0.0;
    match transform {
        Transform::Identity => x.copy_from_slice(u),
        Transform::Lower(lower) => {
            for (x, &u) in x.iter_mut().zip(u) {
                *x = lower + u.exp();
                log_jacobian += u;
            }
            if let Some(grad) = grad {
                grad.iter_mut().for_each(|g| *g += 1.0);
            }
        }
        Transform::Upper(upper) => {
            for (x, &u) in x.iter_mut().zip(u) {
                *x = upper - u.exp();
                log_jacobian += u;
            }
            if let Some(grad) = grad {
                grad.iter_mut().for_each(|g| *g += 1.0);
            }
        }
        Transform::Interval(lower, upper) => {
            let width = upper - lower;
            let log_width = width.ln();
            for (x, &u) in x.iter_mut().zip(u) {
                *x = lower + width * logistic(u);
                log_jacobian += log_width - softplus(-u) - softplus(u);
            }
            if let Some(grad) = grad {
                for (g, &u) in grad.iter_mut().zip(u) {
                    *g += 1.0 - 2.0 * logistic(u);
                }
            }
        }
    }
    log_jacobian
}

/// `op(a)` for one value: the scalar case, without a call through a function pointer.
#[inline(always)]
fn map_scalar(op: MapOp, a: f64) -> f64 {
    match op {
        MapOp::Neg => -a,
        MapOp::Exp => a.exp(),
        MapOp::Log => a.ln(),
        MapOp::Log1p => a.ln_1p(),
        MapOp::Expm1 => a.exp_m1(),
        MapOp::Softplus => softplus(a),
        MapOp::Logistic => logistic(a),
        MapOp::Sqrt => a.sqrt(),
        MapOp::Abs => a.abs(),
        MapOp::Lgamma => lgamma(a),
        MapOp::LogPhi => log_phi(a),
        MapOp::LogStep => log_step(a),
    }
}

/// The derivative of `op` at `a`, where it gave `out`.
#[inline(always)]
fn map_derivative(op: MapOp, a: f64, out: f64) -> f64 {
    match op {
        MapOp::Neg => -1.0,
        MapOp::Exp => out,
        MapOp::Log => 1.0 / a,
        MapOp::Log1p => 1.0 / (1.0 + a),
        MapOp::Expm1 => out + 1.0,
        MapOp::Softplus => logistic(a),
        MapOp::Logistic => out * (1.0 - out),
        // Zero at 0, as Stan: sqrt of an underflowed exp must not turn the gradient into
        // inf * 0 = NaN.
        MapOp::Sqrt if out == 0.0 => 0.0,
        MapOp::Sqrt => 0.5 / out,
        MapOp::Abs => a.signum() * f64::from(u8::from(a != 0.0)),
        MapOp::Lgamma => digamma(a),
        MapOp::LogPhi => log_phi_slope(a, out),
        MapOp::LogStep => 0.0,
    }
}

/// `0` where `a >= 0`, `-inf` below, NaN for NaN.
#[inline(always)]
fn log_step(a: f64) -> f64 {
    match a {
        a if a >= 0.0 => 0.0,
        a if a < 0.0 => f64::NEG_INFINITY,
        nan => nan,
    }
}

/// `op(a, b)` for one pair: the scalar case, as [`zip_forward`] computes it.
#[inline(always)]
fn zip_scalar(op: ZipOp, a: f64, b: f64) -> f64 {
    match op {
        ZipOp::Add => a + b,
        ZipOp::Sub => a - b,
        ZipOp::Mul => a * b,
        ZipOp::Div => a / b,
        ZipOp::Pow if b == 2.0 => square(a),
        ZipOp::Pow => a.powf(b),
        ZipOp::Max => {
            if b > a {
                b
            } else {
                a
            }
        }
        ZipOp::Min => {
            if b < a {
                b
            } else {
                a
            }
        }
    }
}

fn map_forward(op: MapOp, a: &[f64], out: &mut [f64]) {
    if let ([a], [out]) = (a, &mut *out) {
        *out = map_scalar(op, *a);
        return;
    }
    let f: fn(f64) -> f64 = match op {
        MapOp::Neg => |a| -a,
        MapOp::Exp => f64::exp,
        MapOp::Log => f64::ln,
        MapOp::Log1p => f64::ln_1p,
        MapOp::Expm1 => f64::exp_m1,
        MapOp::Softplus => softplus,
        MapOp::Logistic => logistic,
        MapOp::Sqrt => f64::sqrt,
        MapOp::Abs => f64::abs,
        MapOp::Lgamma => lgamma,
        MapOp::LogPhi => log_phi,
        MapOp::LogStep => log_step,
    };
    for (o, &a) in out.iter_mut().zip(a) {
        *o = f(a);
    }
}

fn zip_forward(op: ZipOp, a: &[f64], b: &[f64], out: &mut [f64]) {
    if let ([a], [b], [out]) = (a, b, &mut *out) {
        *out = zip_scalar(op, *a, *b);
        return;
    }
    if op == ZipOp::Pow && b == [2.0] {
        out.iter_mut().zip(a).for_each(|(o, &a)| *o = square(a));
        return;
    }
    // One loop per operation, so that the compiler inlines (and vectorises) it.
    match op {
        ZipOp::Add => zip_with(a, b, out, |a, b| a + b),
        ZipOp::Sub => zip_with(a, b, out, |a, b| a - b),
        ZipOp::Mul => zip_with(a, b, out, |a, b| a * b),
        ZipOp::Div => zip_with(a, b, out, |a, b| a / b),
        ZipOp::Pow => zip_with(a, b, out, f64::powf),
        ZipOp::Max => zip_with(a, b, out, |a, b| if b > a { b } else { a }),
        ZipOp::Min => zip_with(a, b, out, |a, b| if b < a { b } else { a }),
    }
}

/// `out[i] = f(a[i], b[i])`, a one-value operand broadcasting.
#[inline(always)]
fn zip_with(a: &[f64], b: &[f64], out: &mut [f64], f: impl Fn(f64, f64) -> f64) {
    match (a.len(), b.len()) {
        (1, 1) => out[0] = f(a[0], b[0]),
        (1, _) => out.iter_mut().zip(b).for_each(|(o, &b)| *o = f(a[0], b)),
        (_, 1) => out.iter_mut().zip(a).for_each(|(o, &a)| *o = f(a, b[0])),
        _ => out
            .iter_mut()
            .zip(a.iter().zip(b))
            .for_each(|(o, (&a, &b))| *o = f(a, b)),
    }
}

/// `a^2` as `a * a`, the correctly rounded square: what Stan's `square` computes and what
/// its `pow(x, 2)` of a parameter does (it calls `square`); glibc's `pow` can be 0.52 ULP off.
#[inline(always)]
fn square(a: f64) -> f64 {
    a * a
}

/// Forward step of the instructions that only read operands and write their slot.
/// Shared with constant folding in [`crate::lower`], which runs it on a scratch program.
pub(crate) fn value_forward(program: &Program, inst: &Inst, tape: &mut [f64]) {
    // `Constrain` reads theta, not operands.
    let Some(dst) = inst
        .writes()
        .filter(|_| !matches!(inst, Inst::Constrain { .. }))
    else {
        return;
    };
    let slot = program.slot(dst);
    let (before, after) = tape.split_at_mut(slot.offset as usize);
    let out = &mut after[..slot.len as usize];
    let before = &*before;
    macro_rules! values {
        ($operand:expr) => {
            operand_values(program, before, $operand)
        };
    }
    // A source that is itself a slot is always earlier on the tape than the destination.
    match inst {
        Inst::Map { op, a, .. } => map_forward(*op, values!(a), out),
        Inst::Zip { op, a, b, .. } => zip_forward(*op, values!(a), values!(b), out),
        Inst::Sum { a, .. } => out[0] = values!(a).iter().sum(),
        Inst::Cumsum { a, .. } => {
            let mut running = 0.0;
            for (o, &a) in out.iter_mut().zip(values!(a)) {
                running += a;
                *o = running;
            }
        }
        Inst::Dot { a, b, .. } => {
            out[0] = values!(a).iter().zip(values!(b)).map(|(a, b)| a * b).sum()
        }
        Inst::Matvec { m, v, .. } => {
            let v = values!(v);
            let cols = m.cols as usize;
            let matrix =
                &program.data[m.offset as usize..m.offset as usize + m.rows as usize * cols];
            matvec(matrix, cols, v, out);
        }
        Inst::Gather { a, idx, .. } => {
            let a = values!(a);
            let index = &program.index[idx.offset as usize..(idx.offset + idx.len) as usize];
            for (o, &i) in out.iter_mut().zip(index) {
                *o = a[i as usize];
            }
        }
        Inst::Concat { parts, .. } => {
            let mut at = 0;
            for part in program.list(*parts) {
                let values = values!(part);
                out[at..at + values.len()].copy_from_slice(values);
                at += values.len();
            }
        }
        Inst::LogSumExp { a, .. } => out[0] = log_sum_exp_all(values!(a)),
        _ => {}
    }
}

/// `log(sum(exp(values)))`, shifted by the maximum so that it neither overflows nor
/// underflows to `-inf` early. A NaN gives NaN; an infinite maximum gives itself.
fn log_sum_exp_all(values: &[f64]) -> f64 {
    let mut max = f64::NEG_INFINITY;
    for &v in values {
        if v.is_nan() {
            return f64::NAN;
        }
        max = max.max(v);
    }
    if max.is_infinite() {
        return max;
    }
    max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// Carries the adjoint of what `inst` writes back to its operands (run last instruction
/// first).
fn backward(program: &Program, inst: &Inst, tape: &[f64], adj: &mut [f64], grad: &mut [f64]) {
    {
        match inst {
            Inst::Constrain {
                transform,
                theta: range,
                dst,
            } => {
                let slot = slot_range(program.slot(*dst));
                let x = &tape[slot.clone()];
                let x_adj = &adj[slot];
                let g = &mut grad[range.offset as usize..(range.offset + range.len) as usize];
                match *transform {
                    Transform::Identity => {
                        g.iter_mut().zip(x_adj).for_each(|(g, a)| *g += a);
                    }
                    Transform::Lower(lower) => {
                        for ((g, a), x) in g.iter_mut().zip(x_adj).zip(x) {
                            *g += a * (x - lower);
                        }
                    }
                    Transform::Upper(upper) => {
                        for ((g, a), x) in g.iter_mut().zip(x_adj).zip(x) {
                            *g -= a * (upper - x);
                        }
                    }
                    Transform::Interval(lower, upper) => {
                        let width = upper - lower;
                        for ((g, a), x) in g.iter_mut().zip(x_adj).zip(x) {
                            let s = (x - lower) / width;
                            *g += a * width * s * (1.0 - s);
                        }
                    }
                }
            }
            Inst::Map { op, a, dst } => {
                let Some(a_off) = adj_offset(program, a) else {
                    return;
                };
                let slot = slot_range(program.slot(*dst));
                let a_vals = operand_values(program, tape, a);
                for (i, out_i) in slot.clone().enumerate() {
                    let out_adj = adj[out_i];
                    if out_adj == 0.0 {
                        continue;
                    }
                    adj[a_off + i] += out_adj * map_derivative(*op, a_vals[i], tape[out_i]);
                }
            }
            Inst::Zip { op, a, b, dst } => {
                let slot = program.slot(*dst);
                if slot.len == 1 {
                    zip_backward_scalar(program, tape, adj, *op, a, b, slot.offset as usize);
                    return;
                }
                zip_backward(
                    *op,
                    operand_values(program, tape, a),
                    operand_values(program, tape, b),
                    &tape[slot_range(slot)],
                    adj,
                    slot.offset as usize,
                    adj_offset(program, a),
                    adj_offset(program, b),
                );
            }
            Inst::Sum { a, dst } => {
                if let Some(off) = adj_offset(program, a) {
                    let out_adj = adj[program.slot(*dst).offset as usize];
                    let len = program.len_of(*a);
                    adj[off..off + len].iter_mut().for_each(|g| *g += out_adj);
                }
            }
            Inst::Cumsum { a, dst } => {
                if let Some(off) = adj_offset(program, a) {
                    let slot = program.slot(*dst);
                    let mut running = 0.0;
                    for i in (0..slot.len as usize).rev() {
                        running += adj[slot.offset as usize + i];
                        adj[off + i] += running;
                    }
                }
            }
            Inst::Dot { a, b, dst } => {
                let out_adj = adj[program.slot(*dst).offset as usize];
                let a_vals = operand_values(program, tape, a);
                let b_vals = operand_values(program, tape, b);
                if let Some(off) = adj_offset(program, a) {
                    for (i, &y) in b_vals.iter().enumerate() {
                        adj[off + i] += out_adj * y;
                    }
                }
                if let Some(off) = adj_offset(program, b) {
                    for (i, &x) in a_vals.iter().enumerate() {
                        adj[off + i] += out_adj * x;
                    }
                }
            }
            Inst::Matvec { m, v, dst } => {
                let Some(off) = adj_offset(program, v) else {
                    return;
                };
                let cols = m.cols as usize;
                let slot = program.slot(*dst);
                let matrix =
                    &program.data[m.offset as usize..m.offset as usize + m.rows as usize * cols];
                let (head, tail) = adj.split_at_mut(slot.offset as usize);
                let out_adj = &tail[..slot.len as usize];
                // v's slot is earlier on the tape than dst's.
                let v_adj = &mut head[off..off + cols];
                matvec_transpose_add(matrix, cols, out_adj, v_adj);
            }
            Inst::Gather { a, idx, dst } => {
                if let Some(off) = adj_offset(program, a) {
                    let slot = program.slot(*dst);
                    let index =
                        &program.index[idx.offset as usize..(idx.offset + idx.len) as usize];
                    for (k, &i) in index.iter().enumerate() {
                        adj[off + i as usize] += adj[slot.offset as usize + k];
                    }
                }
            }
            Inst::Concat { parts, dst } => {
                let slot = program.slot(*dst);
                // Every part slot is earlier on the tape than dst.
                let (head, tail) = adj.split_at_mut(slot.offset as usize);
                let out_adj = &tail[..slot.len as usize];
                let mut at = 0;
                for part in program.list(*parts) {
                    let len = program.len_of(*part);
                    if let Some(off) = adj_offset(program, part) {
                        for (t, &g) in head[off..off + len].iter_mut().zip(&out_adj[at..at + len]) {
                            *t += g;
                        }
                    }
                    at += len;
                }
            }
            Inst::LogSumExp { a, dst } => {
                if let Some(off) = adj_offset(program, a) {
                    let out_i = program.slot(*dst).offset as usize;
                    let (out, out_adj) = (tape[out_i], adj[out_i]);
                    if out_adj != 0.0 && out.is_finite() {
                        let a_vals = operand_values(program, tape, a);
                        for (i, &x) in a_vals.iter().enumerate() {
                            adj[off + i] += out_adj * (x - out).exp();
                        }
                    }
                }
            }
            Inst::Density { .. } | Inst::RandomWalk { .. } | Inst::Factor { .. } => {}
        }
    }
}

/// The backward step of a `Zip` with several outputs `out` at tape position `dst`: adds to
/// the adjoints of operands at `a_off` and `b_off` (on the tape before `dst`).
#[allow(clippy::too_many_arguments)]
fn zip_backward(
    op: ZipOp,
    a_vals: &[f64],
    b_vals: &[f64],
    out: &[f64],
    adj: &mut [f64],
    dst: usize,
    a_off: Option<usize>,
    b_off: Option<usize>,
) {
    let a_stride = usize::from(a_vals.len() > 1);
    let b_stride = usize::from(b_vals.len() > 1);
    let (x, y) = (
        |i: usize| a_vals[i * a_stride],
        |i: usize| b_vals[i * b_stride],
    );
    // Operand slots come before the slot they feed on the tape.
    let (head, tail) = adj.split_at_mut(dst);
    let out_adj = &tail[..out.len()];
    if let Some(off) = a_off {
        let target = &mut head[off..off + a_vals.len()];
        match op {
            ZipOp::Add | ZipOp::Sub => pull(target, out_adj, |_| 1.0),
            ZipOp::Mul => pull(target, out_adj, y),
            ZipOp::Div => pull(target, out_adj, |i| 1.0 / y(i)),
            // `x^1` is `x` exactly (within 0.52 ULP of a double is that double).
            ZipOp::Pow if b_vals == [2.0] => pull(target, out_adj, |i| 2.0 * x(i)),
            ZipOp::Pow => pull(target, out_adj, |i| y(i) * x(i).powf(y(i) - 1.0)),
            ZipOp::Max => pull(target, out_adj, |i| f64::from(u8::from(!(y(i) > x(i))))),
            ZipOp::Min => pull(target, out_adj, |i| f64::from(u8::from(!(y(i) < x(i))))),
        }
    }
    if let Some(off) = b_off {
        let target = &mut head[off..off + b_vals.len()];
        match op {
            ZipOp::Add => pull(target, out_adj, |_| 1.0),
            ZipOp::Sub => pull(target, out_adj, |_| -1.0),
            ZipOp::Mul => pull(target, out_adj, x),
            ZipOp::Div => pull(target, out_adj, |i| -out[i] / y(i)),
            ZipOp::Pow => pull(target, out_adj, |i| out[i] * x(i).ln()),
            ZipOp::Max => pull(target, out_adj, |i| f64::from(u8::from(y(i) > x(i)))),
            ZipOp::Min => pull(target, out_adj, |i| f64::from(u8::from(y(i) < x(i)))),
        }
    }
}

/// The backward step of a `Zip` with one output (so scalar operands): what the general case
/// computes, in the same order and with the same roundings.
#[inline(always)]
fn zip_backward_scalar(
    program: &Program,
    tape: &[f64],
    adj: &mut [f64],
    op: ZipOp,
    a: &Operand,
    b: &Operand,
    out_i: usize,
) {
    let x = operand_values(program, tape, a)[0];
    let y = operand_values(program, tape, b)[0];
    let (out, g) = (tape[out_i], adj[out_i]);
    if let Some(off) = adj_offset(program, a) {
        adj[off] += g * zip_derivative_a(op, x, y);
    }
    if let Some(off) = adj_offset(program, b) {
        adj[off] += g * zip_derivative_b(op, x, y, out);
    }
}

/// The derivative of `op(x, y)` in `x`.
#[inline(always)]
fn zip_derivative_a(op: ZipOp, x: f64, y: f64) -> f64 {
    match op {
        ZipOp::Add | ZipOp::Sub => 1.0,
        ZipOp::Mul => y,
        ZipOp::Div => 1.0 / y,
        ZipOp::Pow if y == 2.0 => 2.0 * x,
        ZipOp::Pow => y * x.powf(y - 1.0),
        ZipOp::Max => f64::from(u8::from(!(y > x))),
        ZipOp::Min => f64::from(u8::from(!(y < x))),
    }
}

/// The derivative of `op(x, y)` in `y`, where it gave `out`.
#[inline(always)]
fn zip_derivative_b(op: ZipOp, x: f64, y: f64, out: f64) -> f64 {
    match op {
        ZipOp::Add => 1.0,
        ZipOp::Sub => -1.0,
        ZipOp::Mul => x,
        ZipOp::Div => -out / y,
        ZipOp::Pow => out * x.ln(),
        ZipOp::Max => f64::from(u8::from(y > x)),
        ZipOp::Min => f64::from(u8::from(y < x)),
    }
}

#[cfg(test)]
mod tests;

/// Adds `out_adj[i] * d(i)` to the adjoint of an operand of an elementwise instruction: to
/// `target[i]`, or to its one element when the operand was broadcast.
#[inline(always)]
fn pull(target: &mut [f64], out_adj: &[f64], d: impl Fn(usize) -> f64) {
    if let [broadcast] = target
        && out_adj.len() > 1
    {
        *broadcast += linalg::sum_lanes(out_adj.len(), |i| out_adj[i] * d(i));
    } else {
        for (i, (t, &g)) in target.iter_mut().zip(out_adj).enumerate() {
            *t += g * d(i);
        }
    }
}
