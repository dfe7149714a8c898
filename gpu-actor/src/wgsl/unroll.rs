//! Unrolling of the generated model's short loops: each iteration becomes a block with the
//! loop index replaced by a literal, so that every index into a private tape is a constant
//! and a GPU compiler can keep the tape in registers instead of per-thread memory.
//!
//! And the other side of it, [`bound`]: the loops left are unrolled by drivers too (Mesa's
//! NIR unrolls every loop of up to 32 trips that indexes a function-local array, nested loops
//! included; LLVM unrolls others), which put back the code the cap kept out: a model with two
//! 20 x 20 products compiled for minutes on lavapipe. Where that could happen, every loop
//! bound gets `g_zero` added, a zero read from a buffer that no compiler can fold, so the
//! driver compiles the loops as written.

use super::ast::{BinOp, Expr, Global, Ident, ModuleConst, Stmt};

/// Loops of at most this many iterations (a literal bound) are unrolled.
pub(crate) const MAX_TRIP: u32 = 32;

/// A function whose unrolled body would have more statements than this keeps its loops
/// (compile time, on software devices above all).
pub(crate) const MAX_STATEMENTS: usize = 4096;

/// `body` with its short loops unrolled, innermost first, or `body` itself when the result
/// would exceed [`MAX_STATEMENTS`].
pub(crate) fn unroll(body: Vec<Stmt>) -> Vec<Stmt> {
    let unrolled = unroll_all(&body);
    if count(&unrolled) <= MAX_STATEMENTS {
        unrolled
    } else {
        body
    }
}

fn unroll_all(stmts: &[Stmt]) -> Vec<Stmt> {
    stmts.iter().flat_map(unroll_one).collect()
}

fn unroll_one(stmt: &Stmt) -> Vec<Stmt> {
    match stmt {
        Stmt::For(var, Expr::U32(trips), body) if *trips <= MAX_TRIP => {
            let body = unroll_all(body);
            (0..*trips)
                .map(|k| Stmt::Block(substitute_all(&body, var, k)))
                .collect()
        }
        Stmt::For(var, end, body) => vec![Stmt::For(var.clone(), end.clone(), unroll_all(body))],
        Stmt::If(cond, then, otherwise) => vec![Stmt::If(
            cond.clone(),
            unroll_all(then),
            unroll_all(otherwise),
        )],
        Stmt::Block(body) => vec![Stmt::Block(unroll_all(body))],
        other => vec![other.clone()],
    }
}

/// `body` as [`unroll`] left it, with `+ g_zero` added to every loop bound that a driver
/// could unroll (a literal, or the fused loop's trips `split_trips`) when unrolling them all
/// would give more than [`MAX_STATEMENTS`] statements; else `body` itself. So the driver
/// compiles at most about [`MAX_STATEMENTS`] statements, or the loops as they are.
pub(crate) fn bound(body: Vec<Stmt>, split_trips: u32) -> Vec<Stmt> {
    if driver_count(&body, split_trips) <= MAX_STATEMENTS {
        body
    } else {
        opaque_all(body)
    }
}

/// The trips of a loop whose bound a compiler knows.
fn known_trips(end: &Expr, split_trips: u32) -> Option<u32> {
    match end {
        Expr::U32(trips) => Some(*trips),
        Expr::Const(ModuleConst::SplitTrips) => Some(split_trips),
        _ => None,
    }
}

/// Statements, nested ones included, with every loop of known trips unrolled.
fn driver_count(stmts: &[Stmt], split_trips: u32) -> usize {
    stmts
        .iter()
        .map(|stmt| match stmt {
            Stmt::For(_, end, body) => {
                let inner = driver_count(body, split_trips);
                let trips = known_trips(end, split_trips).map_or(1, |t| t as usize);
                1usize.saturating_add(trips.saturating_mul(inner))
            }
            Stmt::Block(body) => 1usize.saturating_add(driver_count(body, split_trips)),
            Stmt::If(_, then, otherwise) => 1usize
                .saturating_add(driver_count(then, split_trips))
                .saturating_add(driver_count(otherwise, split_trips)),
            _ => 1,
        })
        .fold(0usize, usize::saturating_add)
}

/// `body` with `+ g_zero` added to every loop bound a driver knows, whatever the size: for
/// code over a storage tape, which gains nothing from unrolling, while lavapipe took 8 s to
/// compile two 20 x 20 products that it unrolled itself (`bench/journal.md`, 2026-11-28).
pub(crate) fn opaque(body: Vec<Stmt>) -> Vec<Stmt> {
    opaque_all(body)
}

fn opaque_all(stmts: Vec<Stmt>) -> Vec<Stmt> {
    stmts.into_iter().map(opaque_one).collect()
}

fn opaque_one(stmt: Stmt) -> Stmt {
    match stmt {
        Stmt::For(var, end, body) => {
            let end = if known_trips(&end, 0).is_some() {
                end + Expr::Global(Global::Zero)
            } else {
                end
            };
            Stmt::For(var, end, opaque_all(body))
        }
        Stmt::If(cond, then, otherwise) => Stmt::If(cond, opaque_all(then), opaque_all(otherwise)),
        Stmt::Block(body) => Stmt::Block(opaque_all(body)),
        other => other,
    }
}

/// Whether `stmts` index one of `arrays` with anything but a literal: a private array that a
/// GPU compiler must keep in memory (per-thread local memory on NVIDIA), and that lavapipe
/// turns into a chain of selects for every such access (slow to compile).
pub(crate) fn indexes_dynamically(stmts: &[Stmt], arrays: &[Ident]) -> bool {
    fn expr(e: &Expr, arrays: &[Ident]) -> bool {
        match e {
            Expr::Index(base, index) => {
                let dynamic = matches!(&**base, Expr::Local(name) if arrays.contains(name))
                    && !matches!(**index, Expr::U32(_));
                dynamic || expr(base, arrays) || expr(index, arrays)
            }
            Expr::Field(base, _) | Expr::Neg(base) | Expr::Not(base) => expr(base, arrays),
            Expr::Binary(_, a, b) => expr(a, arrays) || expr(b, arrays),
            Expr::Call(_, args) => args.iter().any(|a| expr(a, arrays)),
            _ => false,
        }
    }
    stmts.iter().any(|stmt| match stmt {
        Stmt::Let(_, value) | Stmt::Return(value) | Stmt::Call(value) => expr(value, arrays),
        Stmt::Var(_, _, init) => init.as_ref().is_some_and(|e| expr(e, arrays)),
        Stmt::Assign(place, value) | Stmt::AddAssign(place, value) => {
            expr(place, arrays) || expr(value, arrays)
        }
        Stmt::If(cond, then, otherwise) => {
            expr(cond, arrays)
                || indexes_dynamically(then, arrays)
                || indexes_dynamically(otherwise, arrays)
        }
        Stmt::For(_, end, body) => expr(end, arrays) || indexes_dynamically(body, arrays),
        Stmt::Block(body) => indexes_dynamically(body, arrays),
        Stmt::Comment(_) => false,
    })
}

/// Statements, nested ones included.
fn count(stmts: &[Stmt]) -> usize {
    stmts
        .iter()
        .map(|stmt| {
            1 + match stmt {
                Stmt::For(_, _, body) | Stmt::Block(body) => count(body),
                Stmt::If(_, then, otherwise) => count(then) + count(otherwise),
                _ => 0,
            }
        })
        .sum()
}

/// `stmts` with the local `var` replaced by the literal `k`, up to a declaration that
/// shadows it.
fn substitute_all(stmts: &[Stmt], var: &Ident, k: u32) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(stmts.len());
    let mut shadowed = false;
    for stmt in stmts {
        if shadowed {
            out.push(stmt.clone());
            continue;
        }
        let sub = |e: &Expr| substitute(e, var, k);
        out.push(match stmt {
            Stmt::Let(name, value) => {
                shadowed = name == var;
                Stmt::Let(name.clone(), sub(value))
            }
            Stmt::Var(name, ty, init) => {
                shadowed = name == var;
                Stmt::Var(name.clone(), *ty, init.as_ref().map(sub))
            }
            Stmt::Assign(place, value) => Stmt::Assign(sub(place), sub(value)),
            Stmt::AddAssign(place, value) => Stmt::AddAssign(sub(place), sub(value)),
            Stmt::If(cond, then, otherwise) => Stmt::If(
                sub(cond),
                substitute_all(then, var, k),
                substitute_all(otherwise, var, k),
            ),
            Stmt::For(inner, end, body) if inner == var => {
                Stmt::For(inner.clone(), sub(end), body.clone())
            }
            Stmt::For(inner, end, body) => {
                Stmt::For(inner.clone(), sub(end), substitute_all(body, var, k))
            }
            Stmt::Return(value) => Stmt::Return(sub(value)),
            Stmt::Call(call) => Stmt::Call(sub(call)),
            Stmt::Block(body) => Stmt::Block(substitute_all(body, var, k)),
            Stmt::Comment(text) => Stmt::Comment(text.clone()),
        });
    }
    out
}

/// `expr` with the local `var` replaced by `k`, `u32` arithmetic on literals folded (with
/// WGSL's wrapping semantics).
fn substitute(expr: &Expr, var: &Ident, k: u32) -> Expr {
    let sub = |e: &Expr| substitute(e, var, k);
    match expr {
        Expr::Local(name) if name == var => Expr::U32(k),
        Expr::Index(base, index) => sub(base).index(sub(index)),
        Expr::Field(base, field) => sub(base).field(*field),
        Expr::Neg(a) => Expr::Neg(Box::new(sub(a))),
        Expr::Not(a) => Expr::Not(Box::new(sub(a))),
        Expr::Binary(op, a, b) => match (*op, sub(a), sub(b)) {
            (BinOp::Add, Expr::U32(a), Expr::U32(b)) => Expr::U32(a.wrapping_add(b)),
            (BinOp::Sub, Expr::U32(a), Expr::U32(b)) => Expr::U32(a.wrapping_sub(b)),
            (BinOp::Mul, Expr::U32(a), Expr::U32(b)) => Expr::U32(a.wrapping_mul(b)),
            (BinOp::Div, Expr::U32(a), Expr::U32(b)) if b != 0 => Expr::U32(a / b),
            (BinOp::Rem, Expr::U32(a), Expr::U32(b)) if b != 0 => Expr::U32(a % b),
            (op, a, b) => Expr::binary(op, a, b),
        },
        Expr::Call(callee, args) => Expr::Call(*callee, args.iter().map(sub).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgsl::ast::Global;

    fn i() -> Ident {
        Ident::new("i")
    }

    /// `data[i + 3]` added to `s`, in a loop of `trips`.
    fn loop_of(trips: u32) -> Stmt {
        let s = Ident::new("s");
        Stmt::for_(
            &i(),
            Expr::U32(trips),
            vec![Stmt::add_to(
                Expr::local(&s),
                Expr::Global(Global::Data).index(Expr::local(&i()).plus_u32(3) * Expr::U32(2)),
            )],
        )
    }

    #[test]
    fn short_loops_become_blocks_with_literal_indices() {
        let out = unroll(vec![loop_of(3)]);
        assert_eq!(out.len(), 3);
        for (k, stmt) in out.iter().enumerate() {
            let Stmt::Block(body) = stmt else {
                panic!("iteration {k} is not a block: {stmt:?}");
            };
            let Stmt::AddAssign(_, Expr::Index(_, index)) = &body[0] else {
                panic!("unexpected body {body:?}");
            };
            assert_eq!(**index, Expr::U32((k as u32 + 3) * 2));
        }
    }

    #[test]
    fn long_loops_and_dynamic_bounds_stay_loops() {
        let long = loop_of(MAX_TRIP + 1);
        assert_eq!(unroll(vec![long.clone()]), vec![long]);
        let dynamic = Stmt::For(i(), Expr::local(&Ident::new("n")), Vec::new());
        assert_eq!(unroll(vec![dynamic.clone()]), vec![dynamic]);
    }

    #[test]
    fn a_shadowing_declaration_ends_the_substitution() {
        let x = Ident::new("x");
        let body = vec![
            Stmt::let_(&x, Expr::local(&i())),
            Stmt::let_(&i(), Expr::U32(7)),
            Stmt::let_(&x, Expr::local(&i())),
        ];
        let out = substitute_all(&body, &i(), 5);
        assert_eq!(out[0], Stmt::let_(&x, Expr::U32(5)));
        assert_eq!(out[2], Stmt::let_(&x, Expr::local(&i())));
    }

    #[test]
    fn loops_that_would_unroll_past_the_cap_get_opaque_bounds() {
        let zero = || Expr::Global(Global::Zero);
        // 20 x 300 trips of one statement: over the cap once unrolled, so every literal bound
        // gets g_zero; a bound already opaque is left alone.
        let inner = Stmt::for_(&Ident::new("c"), Expr::U32(20), vec![loop_of(300)]);
        let dynamic = Stmt::For(i(), Expr::local(&Ident::new("n")), Vec::new());
        let out = bound(vec![inner, dynamic.clone()], 0);
        let Stmt::For(_, end, body) = &out[0] else {
            panic!("not a loop: {:?}", out[0]);
        };
        assert_eq!(*end, Expr::U32(20) + zero());
        let Stmt::For(_, end, _) = &body[0] else {
            panic!("not a loop: {body:?}");
        };
        assert_eq!(*end, Expr::U32(300) + zero());
        assert_eq!(out[1], dynamic);
        // Small enough to unroll whole: left to the driver.
        let small = vec![loop_of(40)];
        assert_eq!(bound(small.clone(), 0), small);
        // The fused loop's trips count too.
        let fused = vec![Stmt::For(
            i(),
            Expr::Const(ModuleConst::SplitTrips),
            vec![loop_of(100)],
        )];
        assert_eq!(bound(fused.clone(), 2), fused);
        assert_ne!(bound(fused.clone(), 100), fused);
    }

    #[test]
    fn bodies_past_the_statement_cap_keep_their_loops() {
        let inner = loop_of(MAX_TRIP);
        let nested: Vec<Stmt> = (0..MAX_STATEMENTS / (MAX_TRIP as usize * 2) + 1)
            .map(|_| Stmt::for_(&Ident::new("j"), Expr::U32(MAX_TRIP), vec![inner.clone()]))
            .collect();
        assert_eq!(unroll(nested.clone()), nested);
    }
}
