//! Matrices that depend on parameters: grids of scalar IR expressions (row-major), with
//! products and sums written out element by element, and the Cholesky factorisation and
//! triangular solves unrolled. Every computed factor or solution element is bound to a hidden
//! value (`Lowerer::share`), so expression trees stay small: O(n^3) instructions for an
//! n x n factorisation, refused above [`MAX_UNROLLED`].

use sampler::{BinaryOp as Op, DataValue, Expr as Ir, UnaryOp as Un};

use super::expr::{describe, position_text};
use super::sym::{self, Repr, Sym, Val, add, bin, c, div, elem, mul, sub, un};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::{BinaryOp, Expr, Span};
use crate::value::Value;

/// Largest size of an unrolled factorisation or triangular solve (the work grows as n^3).
pub(crate) const MAX_UNROLLED: usize = 48;

/// A matrix as scalar expressions, row-major.
#[derive(Debug, Clone)]
pub(crate) struct Grid {
    pub rows: usize,
    pub cols: usize,
    pub elems: Vec<Ir>,
}

impl Grid {
    pub fn at(&self, i: usize, j: usize) -> &Ir {
        &self.elems[i * self.cols + j]
    }

    fn from_fn(rows: usize, cols: usize, mut f: impl FnMut(usize, usize) -> Ir) -> Grid {
        let mut elems = Vec::with_capacity(rows * cols);
        for i in 0..rows {
            for j in 0..cols {
                elems.push(f(i, j));
            }
        }
        Grid { rows, cols, elems }
    }

    pub fn transposed(&self) -> Grid {
        Grid::from_fn(self.cols, self.rows, |i, j| self.at(j, i).clone())
    }

    /// The matrix as a value of shape `[rows, cols]`.
    pub fn into_val(self) -> Val {
        Val::Sym(Sym {
            dims: vec![self.rows, self.cols],
            repr: Repr::Elems(self.elems.into_iter().map(Some).collect()),
        })
    }

    /// The elements as a value of shape `[rows * cols]` (a vector).
    fn into_vector(self) -> Val {
        Val::Sym(Sym {
            dims: vec![self.rows * self.cols],
            repr: Repr::Elems(self.elems.into_iter().map(Some).collect()),
        })
    }

    pub fn diagonal(&self) -> Vec<Ir> {
        (0..self.rows.min(self.cols))
            .map(|i| self.at(i, i).clone())
            .collect()
    }
}

pub(crate) fn is_zero(ir: &Ir) -> bool {
    matches!(ir, Ir::Const(x) if *x == 0.0)
}

/// Scalars joined into one vector; runs of consecutive elements of one name become slices.
pub(crate) fn joined(parts: Vec<Ir>) -> Ir {
    let mut out: Vec<Ir> = Vec::with_capacity(parts.len());
    // (name, start, len) of the run being collected.
    let mut run: Option<(String, u32, u32)> = None;
    let flush = |run: &mut Option<(String, u32, u32)>, out: &mut Vec<Ir>| {
        if let Some((name, start, len)) = run.take() {
            out.push(if len == 1 {
                Ir::Elem(Box::new(Ir::Ref(name)), start)
            } else {
                Ir::Slice(Box::new(Ir::Ref(name)), start, len)
            });
        }
    };
    for part in parts {
        if let Ir::Elem(inner, k) = &part
            && let Ir::Ref(name) = &**inner
        {
            if let Some((run_name, start, len)) = &mut run
                && run_name == name
                && *start + *len == *k
            {
                *len += 1;
                continue;
            }
            flush(&mut run, &mut out);
            run = Some((name.clone(), *k, 1));
            continue;
        }
        flush(&mut run, &mut out);
        out.push(part);
    }
    flush(&mut run, &mut out);
    if out.len() == 1 && matches!(out[0], Ir::Slice(..)) {
        return out.pop().expect("one part");
    }
    Ir::Concat(out)
}

/// Squared distances between the points of `a` and `b` (rows of `dim` values), row-major.
fn squared_distances(a: &[f64], b: &[f64], dim: usize) -> Vec<f64> {
    let (n, m) = (a.len() / dim.max(1), b.len() / dim.max(1));
    let mut out = Vec::with_capacity(n * m);
    for i in 0..n {
        for j in 0..m {
            out.push(
                (0..dim)
                    .map(|d| (a[i * dim + d] - b[j * dim + d]).powi(2))
                    .sum(),
            );
        }
    }
    out
}

impl Lowerer {
    /// The elements of a value, in its (row-major) order.
    pub(super) fn elements(&mut self, v: Val, span: Span) -> Result<Vec<Ir>, LowerError> {
        match v {
            Val::Known(value, _) => Ok((0..value.len()).map(|i| c(value.real_at(i))).collect()),
            Val::Sym(s) => {
                let len = s.len();
                match s.repr {
                    Repr::Whole(ir) if s.dims.is_empty() => Ok(vec![ir]),
                    // Scalars joined: one part per element.
                    Repr::Whole(Ir::Concat(parts)) if parts.len() == len => Ok(parts),
                    Repr::Whole(ir) => {
                        let shared = self.share(ir, &s.dims);
                        Ok((0..len).map(|k| elem(shared.clone(), k)).collect())
                    }
                    Repr::Elems(elems) => elems
                        .into_iter()
                        .enumerate()
                        .map(|(p, e)| {
                            e.ok_or_else(|| {
                                LowerError::new(
                                    span,
                                    format!(
                                        "element {} is used before it is assigned",
                                        position_text(&s.dims, p)
                                    ),
                                )
                            })
                        })
                        .collect(),
                }
            }
        }
    }

    /// A matrix value as a grid; a vector is a column (`row` makes it a row).
    pub(super) fn grid(&mut self, v: Val, span: Span, row: bool) -> Result<Grid, LowerError> {
        let dims = v.dims().to_vec();
        let (rows, cols) = match dims[..] {
            [r, c] => (r, c),
            [n] if row => (1, n),
            [n] => (n, 1),
            _ => {
                return Err(LowerError::new(
                    span,
                    format!("expected a matrix, found {}", describe(&dims)),
                ));
            }
        };
        let elems = self.elements(v, span)?;
        Ok(Grid { rows, cols, elems })
    }

    /// A grid whose elements are each used several times: large ones get hidden names.
    fn shared_grid(&mut self, mut g: Grid) -> Grid {
        for e in &mut g.elems {
            if !sym::trivial(e) {
                *e = self.share(std::mem::replace(e, c(0.0)), &[]);
            }
        }
        g
    }

    /// `sum_k a_k b_k` over the pairs, zeros left out.
    pub(super) fn dot_pairs(&mut self, pairs: Vec<(Ir, Ir)>) -> Ir {
        let pairs: Vec<(Ir, Ir)> = pairs
            .into_iter()
            .filter(|(a, b)| !is_zero(a) && !is_zero(b))
            .collect();
        match pairs.len() {
            0 => c(0.0),
            1 => {
                let (a, b) = pairs.into_iter().next().expect("one pair");
                mul(a, b)
            }
            _ => {
                let (a, b): (Vec<Ir>, Vec<Ir>) = pairs.into_iter().unzip();
                bin(Op::Dot, joined(a), joined(b))
            }
        }
    }

    /// `a b` of grids, every element written out.
    pub(super) fn product(&mut self, a: Grid, b: Grid, span: Span) -> Result<Grid, LowerError> {
        if a.cols != b.rows {
            return Err(LowerError::new(
                span,
                format!(
                    "a product of a {}x{} and a {}x{} matrix",
                    a.rows, a.cols, b.rows, b.cols
                ),
            ));
        }
        let a = if b.cols > 1 { self.shared_grid(a) } else { a };
        let b = if a.rows > 1 { self.shared_grid(b) } else { b };
        let mut elems = Vec::with_capacity(a.rows * b.cols);
        for i in 0..a.rows {
            for j in 0..b.cols {
                let pairs = (0..a.cols)
                    .map(|k| (a.at(i, k).clone(), b.at(k, j).clone()))
                    .collect();
                elems.push(self.dot_pairs(pairs));
            }
        }
        Ok(Grid {
            rows: a.rows,
            cols: b.cols,
            elems,
        })
    }

    fn check_unrolled(&self, what: &str, n: usize, span: Span) -> Result<(), LowerError> {
        if n > MAX_UNROLLED {
            return unsupported(
                span,
                format!(
                    "{what} of a {n}x{n} matrix that depends on parameters (the limit is \
                     {MAX_UNROLLED}x{MAX_UNROLLED})"
                ),
            );
        }
        Ok(())
    }

    fn square(&self, g: &Grid, what: &str, span: Span) -> Result<usize, LowerError> {
        if g.rows != g.cols {
            return Err(LowerError::new(
                span,
                format!("{what} needs a square matrix, found {}x{}", g.rows, g.cols),
            ));
        }
        Ok(g.rows)
    }

    /// The lower Cholesky factor of the symmetric positive-definite `a` (its lower triangle is
    /// read), each element a hidden value. A matrix that is not positive definite gives a NaN
    /// log density, which the sampler treats as a divergence (Stan rejects the proposal).
    pub(super) fn cholesky(&mut self, a: Grid, span: Span) -> Result<Grid, LowerError> {
        let n = self.square(&a, "`cholesky_decompose`", span)?;
        self.check_unrolled("`cholesky_decompose`", n, span)?;
        let mut l = Grid {
            rows: n,
            cols: n,
            elems: vec![c(0.0); n * n],
        };
        for j in 0..n {
            let pairs = (0..j)
                .map(|k| (l.at(j, k).clone(), l.at(j, k).clone()))
                .collect();
            let s = self.dot_pairs(pairs);
            let d = self.share(un(Un::Sqrt, sub(a.at(j, j).clone(), s)), &[]);
            l.elems[j * n + j] = d.clone();
            for i in j + 1..n {
                let pairs = (0..j)
                    .map(|k| (l.at(i, k).clone(), l.at(j, k).clone()))
                    .collect();
                let s = self.dot_pairs(pairs);
                let numerator = sub(a.at(i, j).clone(), s);
                if !is_zero(&numerator) {
                    l.elems[i * n + j] = self.share(div(numerator, d.clone()), &[]);
                }
            }
        }
        Ok(l)
    }

    /// `L^{-1} b` for lower-triangular `l` (its lower triangle is read), by forward
    /// substitution, column by column of `b`.
    pub(super) fn solve_lower(
        &mut self,
        l: &Grid,
        b: &Grid,
        span: Span,
    ) -> Result<Grid, LowerError> {
        let n = self.square(l, "`mdivide_left_tri_low`", span)?;
        self.check_unrolled("a triangular solve", n, span)?;
        if b.rows != n {
            return Err(LowerError::new(
                span,
                format!(
                    "a triangular solve of a {n}x{n} matrix with {} rows",
                    b.rows
                ),
            ));
        }
        let mut x = Grid {
            rows: n,
            cols: b.cols,
            elems: vec![c(0.0); n * b.cols],
        };
        for col in 0..b.cols {
            for i in 0..n {
                let pairs = (0..i)
                    .map(|k| (l.at(i, k).clone(), x.at(k, col).clone()))
                    .collect();
                let s = self.dot_pairs(pairs);
                let numerator = sub(b.at(i, col).clone(), s);
                if !is_zero(&numerator) {
                    x.elems[i * b.cols + col] = self.share(div(numerator, l.at(i, i).clone()), &[]);
                }
            }
        }
        Ok(x)
    }

    /// `b L^{-1}` for lower-triangular `l`: `x L = b` row by row, by back substitution.
    fn solve_right_lower(&mut self, b: &Grid, l: &Grid, span: Span) -> Result<Grid, LowerError> {
        let n = self.square(l, "`mdivide_right_tri_low`", span)?;
        self.check_unrolled("a triangular solve", n, span)?;
        if b.cols != n {
            return Err(LowerError::new(
                span,
                format!(
                    "a triangular solve of a {n}x{n} matrix with {} columns",
                    b.cols
                ),
            ));
        }
        let mut x = Grid {
            rows: b.rows,
            cols: n,
            elems: vec![c(0.0); n * b.rows],
        };
        for row in 0..b.rows {
            for j in (0..n).rev() {
                let pairs = (j + 1..n)
                    .map(|i| (x.at(row, i).clone(), l.at(i, j).clone()))
                    .collect();
                let s = self.dot_pairs(pairs);
                let numerator = sub(b.at(row, j).clone(), s);
                if !is_zero(&numerator) {
                    x.elems[row * n + j] = self.share(div(numerator, l.at(j, j).clone()), &[]);
                }
            }
        }
        Ok(x)
    }

    /// `sum log diag(l)`, the log determinant of a triangular factor.
    pub(super) fn sum_log_diagonal(&mut self, l: &Grid) -> Ir {
        let diag = l.diagonal();
        match diag.len() {
            0 => c(0.0),
            1 => un(Un::Log, diag.into_iter().next().expect("one")),
            _ => un(Un::Sum, un(Un::Log, joined(diag))),
        }
    }

    /// `op` on two matrices of which one is held element by element (others are handled as
    /// whole vectors by `expr`), and products involving a matrix that depends on parameters.
    pub(super) fn matrix_binary(
        &mut self,
        op: BinaryOp,
        a: &Val,
        b: &Val,
        span: Span,
        lhs_transposed: bool,
    ) -> Result<Option<Val>, LowerError> {
        if lhs_transposed && a.dims().len() <= 1 {
            // `x' * y` of vectors: a dot product (see `expr`).
            return Ok(None);
        }
        let (da, db) = (a.dims().to_vec(), b.dims().to_vec());
        let by_elems = |v: &Val| {
            matches!(
                v,
                Val::Sym(Sym {
                    repr: Repr::Elems(_),
                    ..
                })
            )
        };
        match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::EltMul | BinaryOp::EltDiv
                if da.len() == 2 && da == db && (by_elems(a) || by_elems(b)) =>
            {
                let ir_op = match op {
                    BinaryOp::Add => Op::Add,
                    BinaryOp::Sub => Op::Sub,
                    BinaryOp::EltMul => Op::Mul,
                    _ => Op::Div,
                };
                let ga = self.grid(a.clone(), span, false)?;
                let gb = self.grid(b.clone(), span, false)?;
                let elems = ga
                    .elems
                    .into_iter()
                    .zip(gb.elems)
                    .map(|(x, y)| match (ir_op, is_zero(&x), is_zero(&y)) {
                        (Op::Mul, true, _) | (Op::Mul, _, true) => c(0.0),
                        (Op::Div, true, _) => c(0.0),
                        (Op::Add, true, _) => y,
                        _ => bin(ir_op, x, y),
                    })
                    .collect();
                Ok(Some(
                    Grid {
                        rows: da[0],
                        cols: da[1],
                        elems,
                    }
                    .into_val(),
                ))
            }
            BinaryOp::Mul => {
                let known_a = matches!(a, Val::Known(..));
                let shapes = match (&da[..], &db[..]) {
                    // A data matrix times a vector is one `Matvec` (see `expr`).
                    ([_, _], [_]) if known_a => return Ok(None),
                    ([_, k], [n]) if k == n => (false, false),
                    ([n], [k, _]) if n == k => (true, false),
                    ([_, k], [n, _]) if k == n => (false, false),
                    _ => return Ok(None),
                };
                let ga = self.grid(a.clone(), span, shapes.0)?;
                let gb = self.grid(b.clone(), span, shapes.1)?;
                let p = self.product(ga, gb, span)?;
                Ok(Some(match (&da[..], &db[..]) {
                    ([_, _], [_, _]) => p.into_val(),
                    _ => p.into_vector(),
                }))
            }
            _ => Ok(None),
        }
    }

    /// `x'` of a matrix that depends on parameters.
    pub(super) fn transpose(&mut self, v: Val, span: Span) -> Result<Val, LowerError> {
        let g = self.grid(v, span, false)?;
        Ok(g.transposed().into_val())
    }

    /// Matrix functions of values that depend on parameters; `None` for other functions.
    pub(super) fn matrix_call(
        &mut self,
        name: &str,
        vals: &[Val],
        args: &[Expr],
        span: Span,
    ) -> Result<Option<Val>, LowerError> {
        let arg_span = |i: usize| args.get(i).map_or(span, |a| a.span);
        let out = match (name, vals) {
            ("gp_exp_quad_cov" | "cov_exp_quad", [x, alpha, rho]) => {
                self.exp_quad_cov(x, x, alpha, rho, span)?
            }
            ("gp_exp_quad_cov" | "cov_exp_quad", [x1, x2, alpha, rho]) => {
                self.exp_quad_cov(x1, x2, alpha, rho, span)?
            }
            ("diag_matrix", [v]) => {
                let d = self.elements(v.clone(), arg_span(0))?;
                let n = d.len();
                let mut g = Grid::from_fn(n, n, |_, _| c(0.0));
                for (i, x) in d.into_iter().enumerate() {
                    g.elems[i * n + i] = x;
                }
                g.into_val()
            }
            ("add_diag", [m, d]) => {
                let mut g = self.grid(m.clone(), arg_span(0), false)?;
                let n = g.rows.min(g.cols);
                let d = if d.dims().is_empty() {
                    let (x, _) = self.whole(d.clone(), arg_span(1))?;
                    let x = self.share(x, &[]);
                    vec![x; n]
                } else {
                    self.elements(d.clone(), arg_span(1))?
                };
                if d.len() != n {
                    return Err(LowerError::new(
                        span,
                        format!("`add_diag` of {} to a diagonal of {n}", d.len()),
                    ));
                }
                let cols = g.cols;
                for (i, x) in d.into_iter().enumerate() {
                    let e = std::mem::replace(&mut g.elems[i * cols + i], c(0.0));
                    g.elems[i * cols + i] = add(e, x);
                }
                g.into_val()
            }
            ("diagonal", [m]) => {
                let g = self.grid(m.clone(), arg_span(0), false)?;
                let d = g.diagonal();
                Val::Sym(Sym {
                    dims: vec![d.len()],
                    repr: Repr::Elems(d.into_iter().map(Some).collect()),
                })
            }
            ("cholesky_decompose", [m]) => {
                let g = self.grid(m.clone(), arg_span(0), false)?;
                self.cholesky(g, span)?.into_val()
            }
            ("mdivide_left_tri_low", [l, b]) => {
                let vector = b.dims().len() == 1;
                if let Val::Known(lv, _) = l
                    && vector
                {
                    return self.known_lower_solve(lv, b.clone(), args, span).map(Some);
                }
                let l = self.grid(l.clone(), arg_span(0), false)?;
                let b = self.grid(b.clone(), arg_span(1), false)?;
                let x = self.solve_lower(&l, &b, span)?;
                if vector {
                    x.into_vector()
                } else {
                    x.into_val()
                }
            }
            ("mdivide_right_tri_low", [b, l]) => {
                let vector = b.dims().len() == 1;
                let b = self.grid(b.clone(), arg_span(0), true)?;
                let l = self.grid(l.clone(), arg_span(1), false)?;
                let x = self.solve_right_lower(&b, &l, span)?;
                if vector {
                    x.into_vector()
                } else {
                    x.into_val()
                }
            }
            ("multiply_lower_tri_self_transpose", [m]) => {
                let g = self.grid(m.clone(), arg_span(0), false)?;
                let lower = Grid::from_fn(g.rows, g.cols, |i, j| {
                    if j <= i { g.at(i, j).clone() } else { c(0.0) }
                });
                let t = lower.transposed();
                self.product(lower, t, span)?.into_val()
            }
            ("crossprod" | "tcrossprod", [m]) => {
                let g = self.grid(m.clone(), arg_span(0), false)?;
                let g = self.shared_grid(g);
                let t = g.transposed();
                let p = if name == "crossprod" {
                    self.product(t, g, span)?
                } else {
                    self.product(g, t, span)?
                };
                p.into_val()
            }
            ("quad_form" | "quad_form_sym", [a, b]) => {
                let vector = b.dims().len() == 1;
                let ga = self.grid(a.clone(), arg_span(0), false)?;
                let gb = self.grid(b.clone(), arg_span(1), false)?;
                let gb = self.shared_grid(gb);
                let bt = gb.transposed();
                let ab = self.product(ga, gb, span)?;
                let p = self.product(bt, ab, span)?;
                if vector {
                    Val::scalar(p.elems.into_iter().next().expect("1x1"))
                } else {
                    p.into_val()
                }
            }
            ("diag_pre_multiply" | "diag_post_multiply", [x, y]) => {
                let (v, m, vi, mi) = if name == "diag_pre_multiply" {
                    (x, y, 0, 1)
                } else {
                    (y, x, 1, 0)
                };
                let d = self.elements(v.clone(), arg_span(vi))?;
                let d: Vec<Ir> = d
                    .into_iter()
                    .map(|e| {
                        if sym::trivial(&e) {
                            e
                        } else {
                            self.share(e, &[])
                        }
                    })
                    .collect();
                let g = self.grid(m.clone(), arg_span(mi), false)?;
                let want = if name == "diag_pre_multiply" {
                    g.rows
                } else {
                    g.cols
                };
                if d.len() != want {
                    return Err(LowerError::new(
                        span,
                        format!(
                            "`{name}` of a vector of {} and a {}x{} matrix",
                            d.len(),
                            g.rows,
                            g.cols
                        ),
                    ));
                }
                let pre = name == "diag_pre_multiply";
                Grid::from_fn(g.rows, g.cols, |i, j| {
                    let e = g.at(i, j).clone();
                    if is_zero(&e) {
                        e
                    } else {
                        mul(if pre { d[i].clone() } else { d[j].clone() }, e)
                    }
                })
                .into_val()
            }
            ("columns_dot_product" | "rows_dot_product", [x, y]) => {
                let ga = self.grid(x.clone(), arg_span(0), false)?;
                let gb = self.grid(y.clone(), arg_span(1), false)?;
                if (ga.rows, ga.cols) != (gb.rows, gb.cols) {
                    return Err(LowerError::new(
                        span,
                        format!("`{name}` of matrices of different shapes"),
                    ));
                }
                let (ga, gb) = if name == "columns_dot_product" {
                    (ga.transposed(), gb.transposed())
                } else {
                    (ga, gb)
                };
                let mut out = Vec::with_capacity(ga.rows);
                for i in 0..ga.rows {
                    let pairs = (0..ga.cols)
                        .map(|k| (ga.at(i, k).clone(), gb.at(i, k).clone()))
                        .collect();
                    out.push(Some(self.dot_pairs(pairs)));
                }
                Val::Sym(Sym {
                    dims: vec![out.len()],
                    repr: Repr::Elems(out),
                })
            }
            ("trace", [m]) => {
                let g = self.grid(m.clone(), arg_span(0), false)?;
                let (x, _) = self.whole(
                    Val::Sym(Sym {
                        dims: vec![g.rows.min(g.cols)],
                        repr: Repr::Elems(g.diagonal().into_iter().map(Some).collect()),
                    }),
                    span,
                )?;
                Val::scalar(un(Un::Sum, x))
            }
            ("to_vector", [m]) if m.dims().len() == 2 => {
                // Stan flattens matrices column-major (`to_array_1d` of a 2-D array is
                // row-major, and the two look alike here, so it is left to `call`).
                let g = self.grid(m.clone(), arg_span(0), false)?;
                g.transposed().into_vector()
            }
            ("transpose", [m]) if m.dims().len() == 2 => self.transpose(m.clone(), span)?,
            _ => return Ok(None),
        };
        Ok(Some(out))
    }

    /// `L^{-1} b` with a data factor: one data matrix (the inverse) times `b`.
    fn known_lower_solve(
        &mut self,
        l: &Value,
        b: Val,
        args: &[Expr],
        span: Span,
    ) -> Result<Val, LowerError> {
        let n = l.shape.first().copied().unwrap_or(0);
        if l.shape != [n, n] || b.dims() != [n] {
            return Err(LowerError::new(
                span,
                format!(
                    "`mdivide_left_tri_low` of {} and {}",
                    describe(&l.shape),
                    describe(b.dims())
                ),
            ));
        }
        let inverse = super::multivariate::lower_inverse(n, &l.reals());
        let item = self.data_item(
            None,
            DataValue::Matrix(inverse.chunks(n.max(1)).map(<[f64]>::to_vec).collect()),
        );
        let (x, _) = self.whole(b, args.get(1).map_or(span, |a| a.span))?;
        Ok(Val::Sym(Sym::whole(bin(Op::Matvec, item, x), vec![n])))
    }

    /// `alpha^2 exp(-|x1_i - x2_j|^2 / (2 rho^2))` for data points: one vector expression over
    /// the squared distances, worked out on the host.
    fn exp_quad_cov(
        &mut self,
        x1: &Val,
        x2: &Val,
        alpha: &Val,
        rho: &Val,
        span: Span,
    ) -> Result<Val, LowerError> {
        let (Val::Known(a, _), Val::Known(b, _)) = (x1, x2) else {
            return unsupported(
                span,
                "`gp_exp_quad_cov` of points that depend on parameters",
            );
        };
        let points = |v: &Value| -> (usize, usize) {
            match v.shape[..] {
                [n] => (n, 1),
                [n, d] => (n, d),
                _ => (v.len(), 1),
            }
        };
        let ((n, da), (m, db)) = (points(a), points(b));
        if da != db {
            return Err(LowerError::new(
                span,
                format!("`gp_exp_quad_cov` of points of {da} and {db} dimensions"),
            ));
        }
        let d2 = squared_distances(&a.reals(), &b.reals(), da);
        let scalar = |this: &mut Self, v: &Val| -> Result<Ir, LowerError> {
            let (ir, dims) = this.whole(v.clone(), span)?;
            if !dims.is_empty() {
                return Err(LowerError::new(
                    span,
                    "`gp_exp_quad_cov`: alpha and rho must be scalars",
                ));
            }
            Ok(ir)
        };
        let alpha = scalar(self, alpha)?;
        let rho = scalar(self, rho)?;
        let alpha_sq = self.share(bin(Op::Pow, alpha, c(2.0)), &[]);
        let scale = self.share(div(c(-0.5), bin(Op::Pow, rho, c(2.0))), &[]);
        let d2 = self.data_item(None, DataValue::Vector(d2));
        let ir = mul(alpha_sq, un(Un::Exp, mul(d2, scale)));
        Ok(Val::Sym(Sym::whole(ir, vec![n, m])))
    }
}

#[cfg(test)]
mod tests;
