//! Lowering of Stan expressions and distributions to IR expressions, folding what is known
//! before sampling on the host.

use sampler::{BinaryOp as Op, DataValue, Dist, Expr as Ir, UnaryOp as Un};

use super::{LowerError, Lowerer};
use crate::ast::{BinaryOp, Expr, ExprKind, Index, Span, UnaryOp};
use crate::host;
use crate::value::{Value, Values};

/// The shape of a lowered quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Scalar,
    Vector(usize),
    Matrix(usize, usize),
}

impl Shape {
    pub fn of(value: &Value) -> Option<Shape> {
        match value.shape[..] {
            [] => Some(Shape::Scalar),
            [n] => Some(Shape::Vector(n)),
            [r, c] => Some(Shape::Matrix(r, c)),
            _ => None,
        }
    }

    fn describe(self) -> String {
        match self {
            Shape::Scalar => "a scalar".into(),
            Shape::Vector(n) => format!("a vector of {n}"),
            Shape::Matrix(r, c) => format!("a {r}x{c} matrix"),
        }
    }
}

/// A lowered expression: a host value (with its name when it is a plain variable) or an IR
/// expression over parameters.
pub enum Term {
    Host(Value, Option<String>),
    Ir(Ir, Shape),
}

fn unsupported<T>(span: Span, what: impl std::fmt::Display) -> Result<T, LowerError> {
    Err(LowerError::new(
        span,
        format!("{what} is not supported yet"),
    ))
}

impl Lowerer {
    fn only_host(&self, expr: &Expr) -> bool {
        match &expr.kind {
            ExprKind::Int(_) | ExprKind::Real(_) => true,
            ExprKind::Var(ident) => self.env.contains_key(&ident.name),
            ExprKind::Paren(e) | ExprKind::Unary { operand: e, .. } => self.only_host(e),
            ExprKind::Binary { lhs, rhs, .. } => self.only_host(lhs) && self.only_host(rhs),
            ExprKind::Call { args, .. } => args.iter().all(|a| self.only_host(a)),
            ExprKind::Index { base, indices } => {
                self.only_host(base)
                    && indices
                        .iter()
                        .all(|i| matches!(i, Index::Single(e) if self.only_host(e)))
            }
            _ => false,
        }
    }

    pub fn term(&mut self, expr: &Expr) -> Result<Term, LowerError> {
        if let ExprKind::Var(ident) = &expr.kind {
            if let Some(value) = self.env.get(&ident.name) {
                return Ok(Term::Host(value.clone(), Some(ident.name.clone())));
            }
            if let Some((ir, shape)) = self.syms.get(&ident.name) {
                return Ok(Term::Ir(ir.clone(), *shape));
            }
            return Err(LowerError::new(
                expr.span,
                format!("unknown name `{}`", ident.name),
            ));
        }
        if self.only_host(expr) {
            let value = host::eval(expr, &self.env).map_err(LowerError::from)?;
            return Ok(Term::Host(value, None));
        }
        let span = expr.span;
        match &expr.kind {
            ExprKind::Paren(inner) => self.term(inner),
            ExprKind::Unary { op, operand } => {
                let (ir, shape) = self.ir(operand)?;
                match op {
                    UnaryOp::Plus => Ok(Term::Ir(ir, shape)),
                    UnaryOp::Neg => Ok(Term::Ir(Ir::Unary(Un::Neg, Box::new(ir)), shape)),
                    UnaryOp::Not => unsupported(span, "`!` on parameters"),
                }
            }
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, span),
            ExprKind::Call { name, args } => self.call(&name.name, args, span),
            ExprKind::Index { base, indices } => {
                let [Index::Single(index)] = &indices[..] else {
                    return unsupported(span, "indexing other than `x[i]`");
                };
                let (ir, shape) = self.ir(base)?;
                let Shape::Vector(n) = shape else {
                    return unsupported(span, format!("indexing {}", shape.describe()));
                };
                if !self.only_host(index) {
                    return unsupported(index.span, "an index that depends on parameters");
                }
                let i = host::eval(index, &self.env)
                    .map_err(LowerError::from)?
                    .as_int()
                    .ok_or_else(|| LowerError::new(index.span, "an index must be an integer"))?;
                if i < 1 || i as u64 > n as u64 {
                    return Err(LowerError::new(
                        index.span,
                        format!("index {i} out of range 1..={n}"),
                    ));
                }
                // One element as a scalar: the sum of a one-element gather (0-based index).
                let idx = self.data_item(None, DataValue::IntVector(vec![i - 1]));
                let gather = Ir::Binary(Op::Gather, Box::new(ir), Box::new(idx));
                Ok(Term::Ir(
                    Ir::Unary(Un::Sum, Box::new(gather)),
                    Shape::Scalar,
                ))
            }
            ExprKind::CondCall { name, .. } => unsupported(
                span,
                format!("`{}` outside `target += {}(...)`", name.name, name.name),
            ),
            _ => unsupported(span, "this expression"),
        }
    }

    /// Lowers to an IR expression, registering host vectors and matrices as data items.
    pub fn ir(&mut self, expr: &Expr) -> Result<(Ir, Shape), LowerError> {
        let term = self.term(expr)?;
        self.lower_term(term, expr.span)
    }

    pub fn lower_term(&mut self, term: Term, span: Span) -> Result<(Ir, Shape), LowerError> {
        match term {
            Term::Ir(ir, shape) => Ok((ir, shape)),
            Term::Host(value, name) => {
                let Some(shape) = Shape::of(&value) else {
                    return unsupported(span, "a multi-dimensional array in the model");
                };
                if let Shape::Scalar = shape {
                    return Ok((Ir::Const(value.real_at(0)), shape));
                }
                let item = match (shape, &value.values) {
                    (Shape::Vector(_), Values::Int(v)) => DataValue::IntVector(v.clone()),
                    (Shape::Vector(_), Values::Real(v)) => DataValue::Vector(v.clone()),
                    (Shape::Matrix(_, c), _) => {
                        let reals = value.reals();
                        DataValue::Matrix(reals.chunks(c.max(1)).map(<[f64]>::to_vec).collect())
                    }
                    (Shape::Scalar, _) => unreachable!("handled above"),
                };
                Ok((self.data_item(name, item), shape))
            }
        }
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
    ) -> Result<Term, LowerError> {
        let (a, sa) = self.ir(lhs)?;
        let (b, sb) = self.ir(rhs)?;
        let ir_op = match op {
            BinaryOp::Add => Op::Add,
            BinaryOp::Sub => Op::Sub,
            BinaryOp::EltMul => Op::Mul,
            BinaryOp::EltDiv | BinaryOp::Div => Op::Div,
            BinaryOp::Pow | BinaryOp::EltPow => Op::Pow,
            BinaryOp::Mul => match (sa, sb) {
                (Shape::Matrix(r, c), Shape::Vector(n)) if c == n => {
                    if !matches!(a, Ir::Ref(_)) {
                        return unsupported(lhs.span, "a matrix that depends on parameters");
                    }
                    return Ok(Term::Ir(
                        Ir::Binary(Op::Matvec, Box::new(a), Box::new(b)),
                        Shape::Vector(r),
                    ));
                }
                (Shape::Scalar, _) | (_, Shape::Scalar) => Op::Mul,
                _ => {
                    return unsupported(
                        span,
                        format!("`*` of {} and {}", sa.describe(), sb.describe()),
                    );
                }
            },
            other => return unsupported(span, format!("`{}` on parameters", other.as_str())),
        };
        let shape = match (sa, sb) {
            (Shape::Scalar, s) | (s, Shape::Scalar) => s,
            (x, y) if x == y => x,
            (x, y) => {
                return Err(LowerError::new(
                    span,
                    format!(
                        "`{}` of {} and {}: sizes do not match",
                        op.as_str(),
                        x.describe(),
                        y.describe()
                    ),
                ));
            }
        };
        if let Shape::Matrix(..) = shape {
            return unsupported(span, "matrix arithmetic on parameters");
        }
        Ok(Term::Ir(Ir::Binary(ir_op, Box::new(a), Box::new(b)), shape))
    }

    fn call(&mut self, name: &str, args: &[Expr], span: Span) -> Result<Term, LowerError> {
        let unary = match name {
            "exp" => Some(Un::Exp),
            "log" => Some(Un::Log),
            "log1p" => Some(Un::Log1p),
            "expm1" => Some(Un::Expm1),
            "log1p_exp" => Some(Un::Softplus),
            "inv_logit" => Some(Un::Logistic),
            "sqrt" => Some(Un::Sqrt),
            "fabs" | "abs" => Some(Un::Abs),
            "sum" => Some(Un::Sum),
            "cumulative_sum" => Some(Un::Cumsum),
            _ => None,
        };
        match (unary, name, args) {
            (Some(op), _, [x]) => {
                let (ir, shape) = self.ir(x)?;
                let shape = if op == Un::Sum { Shape::Scalar } else { shape };
                Ok(Term::Ir(Ir::Unary(op, Box::new(ir)), shape))
            }
            (None, "square", [x]) => {
                let (ir, shape) = self.ir(x)?;
                Ok(Term::Ir(
                    Ir::Binary(Op::Pow, Box::new(ir), Box::new(Ir::Const(2.0))),
                    shape,
                ))
            }
            (None, "pow", [a, b]) => self.binary(BinaryOp::Pow, a, b, span),
            (None, "dot_product", [a, b]) => {
                let ((a, sa), (b, sb)) = (self.ir(a)?, self.ir(b)?);
                match (sa, sb) {
                    (Shape::Vector(x), Shape::Vector(y)) if x == y => Ok(Term::Ir(
                        Ir::Binary(Op::Dot, Box::new(a), Box::new(b)),
                        Shape::Scalar,
                    )),
                    _ => Err(LowerError::new(
                        span,
                        "`dot_product` takes two vectors of equal length",
                    )),
                }
            }
            _ => unsupported(
                span,
                format!(
                    "the function `{name}` with {} argument(s) on parameters",
                    args.len()
                ),
            ),
        }
    }

    /// `name(args)` as an IR distribution; `name` may carry `_lpdf`, `_lpmf` or `_lupdf`.
    pub fn dist(&mut self, name: &str, args: &[Expr], span: Span) -> Result<Dist, LowerError> {
        let base = ["_lpdf", "_lupdf", "_lpmf", "_lupmf"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        let mut lowered = Vec::with_capacity(args.len());
        for arg in args {
            lowered.push(self.ir(arg)?.0);
        }
        let arity = |n: usize| -> Result<(), LowerError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(LowerError::new(
                    span,
                    format!("`{base}` takes {n} argument(s), found {}", args.len()),
                ))
            }
        };
        let mut it = lowered.into_iter();
        let mut next = || it.next().unwrap_or(Ir::Const(f64::NAN));
        Ok(match base {
            "normal" => {
                arity(2)?;
                Dist::normal(next(), next())
            }
            "cauchy" => {
                arity(2)?;
                Dist::cauchy(next(), next())
            }
            "student_t" => {
                arity(3)?;
                Dist::student_t(next(), next(), next())
            }
            "exponential" => {
                arity(1)?;
                Dist::exponential(next())
            }
            "gamma" => {
                arity(2)?;
                Dist::gamma(next(), next())
            }
            "inv_gamma" => {
                arity(2)?;
                Dist::inverse_gamma(next(), next())
            }
            "lognormal" => {
                arity(2)?;
                Dist::log_normal(next(), next())
            }
            "beta" => {
                arity(2)?;
                Dist::beta(next(), next())
            }
            "uniform" => {
                arity(2)?;
                Dist::uniform(next(), next())
            }
            "double_exponential" => {
                arity(2)?;
                Dist::laplace(next(), next())
            }
            "bernoulli_logit" => {
                arity(1)?;
                Dist::bernoulli_logit(next())
            }
            "binomial_logit" => {
                arity(2)?;
                Dist::binomial_logit(next(), next())
            }
            "poisson_log" => {
                arity(1)?;
                Dist::poisson_log(next())
            }
            _ => return unsupported(span, format!("the distribution `{base}`")),
        })
    }
}
