//! Vectorisation of unrolled loops: scalar log-density terms of one structure (one loop body
//! run for each `n`) become one elementwise expression over vectors, so the evaluator runs a
//! few vector instructions instead of thousands of scalar ones.
//!
//! The terms are anti-unified: parts equal in every term stay scalars (broadcast), constants
//! that differ become a data vector, `x[k]` with `k` varying becomes a slice or gather of `x`,
//! and anything else that differs is joined with `Concat`, which is always correct.

use sampler::{BinaryOp as Op, DataValue, Expr as Ir, UnaryOp as Un};

use super::Lowerer;
use super::sym::{add, bin, un};

/// A string that is equal for terms that [`Lowerer::vectorize`] can join well: the tree with
/// constants, element positions and hidden names left out.
pub(crate) fn skeleton(ir: &Ir) -> String {
    let mut out = String::new();
    write_skeleton(ir, &mut out);
    out
}

fn write_skeleton(ir: &Ir, out: &mut String) {
    match ir {
        Ir::Const(_) => out.push('c'),
        Ir::Ref(name) if name.starts_with('_') => out.push('r'),
        Ir::Ref(name) => {
            out.push('\'');
            out.push_str(name);
        }
        Ir::Unary(op, a) => {
            out.push_str(op.name());
            out.push('(');
            write_skeleton(a, out);
            out.push(')');
        }
        Ir::Binary(op, a, b) => {
            out.push_str(op.name());
            out.push('(');
            write_skeleton(a, out);
            out.push(',');
            write_skeleton(b, out);
            out.push(')');
        }
        Ir::Elem(a, _) => {
            out.push_str("elem(");
            write_skeleton(a, out);
            out.push(')');
        }
        Ir::Slice(a, start, len) => {
            out.push_str(&format!("slice{start}:{len}("));
            write_skeleton(a, out);
            out.push(')');
        }
        Ir::Concat(parts) => {
            out.push_str("concat(");
            for p in parts {
                write_skeleton(p, out);
                out.push(',');
            }
            out.push(')');
        }
    }
}

fn elementwise_unary(op: Un) -> bool {
    !matches!(op, Un::Sum | Un::Cumsum | Un::LogSumExp)
}

fn elementwise_binary(op: Op) -> bool {
    matches!(
        op,
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Pow | Op::Max | Op::Min
    )
}

impl Lowerer {
    /// Scalar trees as one vector tree whose element `i` equals `trees[i]`.
    pub(super) fn vectorize(&mut self, trees: &[Ir]) -> Ir {
        let first = &trees[0];
        if trees.iter().all(|t| t == first) {
            return first.clone();
        }
        if let Some(values) = trees
            .iter()
            .map(|t| match t {
                Ir::Const(x) => Some(*x),
                _ => None,
            })
            .collect::<Option<Vec<f64>>>()
        {
            return self.data_item(None, DataValue::Vector(values));
        }
        match first {
            Ir::Elem(base, _) if matches!(**base, Ir::Ref(_)) => {
                let positions: Option<Vec<u32>> = trees
                    .iter()
                    .map(|t| match t {
                        Ir::Elem(b, k) if b == base => Some(*k),
                        _ => None,
                    })
                    .collect();
                if let Some(positions) = positions {
                    let start = positions[0];
                    if positions
                        .iter()
                        .enumerate()
                        .all(|(i, &k)| k as usize == start as usize + i)
                    {
                        return Ir::Slice(base.clone(), start, positions.len() as u32);
                    }
                    let index = self.data_item(
                        None,
                        DataValue::IntVector(positions.iter().map(|&k| i64::from(k)).collect()),
                    );
                    return Ir::Binary(Op::Gather, base.clone(), Box::new(index));
                }
            }
            Ir::Unary(op, _) if elementwise_unary(*op) => {
                let inner: Option<Vec<Ir>> = trees
                    .iter()
                    .map(|t| match t {
                        Ir::Unary(o, a) if o == op => Some((**a).clone()),
                        _ => None,
                    })
                    .collect();
                if let Some(inner) = inner {
                    let v = self.vectorize(&inner);
                    return un(*op, v);
                }
            }
            Ir::Binary(op, _, _) if elementwise_binary(*op) => {
                let pairs: Option<Vec<(Ir, Ir)>> = trees
                    .iter()
                    .map(|t| match t {
                        Ir::Binary(o, a, b) if o == op => Some(((**a).clone(), (**b).clone())),
                        _ => None,
                    })
                    .collect();
                if let Some(pairs) = pairs {
                    let (lhs, rhs): (Vec<Ir>, Vec<Ir>) = pairs.into_iter().unzip();
                    let a = self.vectorize(&lhs);
                    let b = self.vectorize(&rhs);
                    return bin(*op, a, b);
                }
            }
            // log_sum_exp of two scalars, elementwise: max(a, b) + log1p(exp(-|a - b|)).
            Ir::Unary(Un::LogSumExp, _) => {
                let pairs: Option<Vec<(Ir, Ir)>> = trees
                    .iter()
                    .map(|t| match t {
                        Ir::Unary(Un::LogSumExp, inner) => match &**inner {
                            Ir::Concat(parts) if parts.len() == 2 => {
                                Some((parts[0].clone(), parts[1].clone()))
                            }
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                if let Some(pairs) = pairs {
                    let (lhs, rhs): (Vec<Ir>, Vec<Ir>) = pairs.into_iter().unzip();
                    let n = trees.len();
                    let a = self.vectorize(&lhs);
                    let a = self.share(a, &[n]);
                    let b = self.vectorize(&rhs);
                    let b = self.share(b, &[n]);
                    let gap = un(Un::Abs, bin(Op::Sub, a.clone(), b.clone()));
                    return add(
                        bin(Op::Max, a, b),
                        un(Un::Log1p, un(Un::Exp, un(Un::Neg, gap))),
                    );
                }
            }
            _ => {}
        }
        Ir::Concat(trees.to_vec())
    }
}
