//! Values during symbolic execution: known on the host, or symbolic IR expressions of a shape,
//! whole or one expression per element.

use sampler::{BinaryOp as Op, Expr as Ir, UnaryOp as Un};

use crate::value::{Value, Values};

/// The value of a Stan expression or variable at load time.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// Known before sampling; the name when it is a data or transformed-data variable (so the
    /// IR can refer to it by that name).
    Known(Value, Option<String>),
    /// Depends on parameters.
    Sym(Sym),
}

/// A symbolic value: `dims` are array dimensions then vector sizes (empty for a scalar),
/// row-major.
#[derive(Debug, Clone)]
pub(crate) struct Sym {
    pub dims: Vec<usize>,
    pub repr: Repr,
}

#[derive(Debug, Clone)]
pub(crate) enum Repr {
    /// One IR expression of length `product(dims)` (a scalar when `dims` is empty).
    Whole(Ir),
    /// One scalar IR expression per element, `None` before the element is assigned.
    Elems(Vec<Option<Ir>>),
}

impl Sym {
    pub fn whole(ir: Ir, dims: Vec<usize>) -> Sym {
        Sym {
            dims,
            repr: Repr::Whole(ir),
        }
    }

    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }
}

impl Val {
    pub fn dims(&self) -> &[usize] {
        match self {
            Val::Known(v, _) => &v.shape,
            Val::Sym(s) => &s.dims,
        }
    }

    pub fn scalar(ir: Ir) -> Val {
        Val::Sym(Sym::whole(ir, Vec::new()))
    }
}

/// Number of nodes of an IR expression.
pub(crate) fn size(ir: &Ir) -> usize {
    match ir {
        Ir::Const(_) | Ir::Ref(_) => 1,
        Ir::Unary(_, a) | Ir::Elem(a, _) | Ir::Slice(a, _, _) => 1 + size(a),
        Ir::Binary(_, a, b) => 1 + size(a) + size(b),
        Ir::Concat(parts) => 1 + parts.iter().map(size).sum::<usize>(),
    }
}

/// Cheap to repeat: a constant, a name, or an element of a name.
pub(crate) fn trivial(ir: &Ir) -> bool {
    match ir {
        Ir::Const(_) | Ir::Ref(_) => true,
        Ir::Elem(a, _) => matches!(**a, Ir::Ref(_)),
        Ir::Unary(Un::Neg, a) => matches!(**a, Ir::Const(_) | Ir::Ref(_)),
        _ => false,
    }
}

pub(crate) fn un(op: Un, a: Ir) -> Ir {
    match (op, &a) {
        (Un::Neg, Ir::Const(x)) => Ir::Const(-x),
        _ => Ir::Unary(op, Box::new(a)),
    }
}

pub(crate) fn bin(op: Op, a: Ir, b: Ir) -> Ir {
    match (op, &a, &b) {
        (Op::Add, Ir::Const(x), _) if *x == 0.0 => b,
        (Op::Add | Op::Sub, _, Ir::Const(y)) if *y == 0.0 => a,
        (Op::Mul, Ir::Const(x), _) if *x == 1.0 => b,
        (Op::Mul | Op::Div, _, Ir::Const(y)) if *y == 1.0 => a,
        (Op::Add, Ir::Const(x), Ir::Const(y)) => Ir::Const(x + y),
        (Op::Sub, Ir::Const(x), Ir::Const(y)) => Ir::Const(x - y),
        (Op::Mul, Ir::Const(x), Ir::Const(y)) => Ir::Const(x * y),
        (Op::Div, Ir::Const(x), Ir::Const(y)) => Ir::Const(x / y),
        _ => Ir::Binary(op, Box::new(a), Box::new(b)),
    }
}

pub(crate) fn add(a: Ir, b: Ir) -> Ir {
    bin(Op::Add, a, b)
}

pub(crate) fn sub(a: Ir, b: Ir) -> Ir {
    bin(Op::Sub, a, b)
}

pub(crate) fn mul(a: Ir, b: Ir) -> Ir {
    bin(Op::Mul, a, b)
}

pub(crate) fn div(a: Ir, b: Ir) -> Ir {
    bin(Op::Div, a, b)
}

pub(crate) fn c(x: f64) -> Ir {
    Ir::Const(x)
}

/// Element `k` (0-based) of a vector expression; pushed through `Slice`.
pub(crate) fn elem(ir: Ir, k: usize) -> Ir {
    match ir {
        Ir::Const(x) => Ir::Const(x),
        Ir::Slice(inner, start, _) => elem(*inner, start as usize + k),
        other => Ir::Elem(Box::new(other), k as u32),
    }
}

/// A host value's element `i` as an IR constant.
pub(crate) fn known_elem(value: &Value, i: usize) -> Ir {
    Ir::Const(value.real_at(i))
}

/// A host value with its elements at `positions` (flat, 0-based) and shape `dims`.
pub(crate) fn pick(value: &Value, positions: &[usize], dims: Vec<usize>) -> Value {
    let values = match &value.values {
        Values::Int(v) => Values::Int(positions.iter().map(|&p| v[p]).collect()),
        Values::Real(v) => Values::Real(positions.iter().map(|&p| v[p]).collect()),
    };
    Value {
        shape: dims,
        values,
    }
}
