//! Distributions over whole vectors or with integer outcomes picking terms (`categorical`,
//! `ordered_logistic`, `multi_normal` with a data covariance), written out as IR expressions
//! with the data outcomes and data matrices worked out on the host.

use std::f64::consts::PI;

use sampler::{BinaryOp as Op, DataValue, Expr as Ir, UnaryOp as Un};

use super::expr::describe;
use super::matrix::Grid;
use super::sym::{Val, add, bin, c, mul, sub, un};
use super::{LowerError, Lowerer, unsupported};
use crate::ast::{BinaryOp, Expr, ExprKind, Span};
use crate::value::{Value, Values};

/// Distributions lowered here.
pub(crate) fn handles(base: &str) -> bool {
    matches!(
        base,
        "categorical"
            | "categorical_logit"
            | "ordered_logistic"
            | "multi_normal"
            | "multi_normal_cholesky"
            | "lkj_corr_cholesky"
            | "lkj_corr"
            | "wishart"
    )
}

/// The integers of a known outcome, each checked to lie in `1..=k`.
fn outcomes(value: &Value, k: usize, base: &str, span: Span) -> Result<Vec<usize>, LowerError> {
    let Values::Int(ints) = &value.values else {
        return Err(LowerError::new(
            span,
            format!("`{base}`: the outcome must be an integer or an integer array"),
        ));
    };
    ints.iter()
        .map(|&y| {
            if y >= 1 && y as usize <= k {
                Ok(y as usize)
            } else {
                Err(LowerError::new(
                    span,
                    format!("`{base}`: the outcome {y} is not in 1..{k}"),
                ))
            }
        })
        .collect()
}

/// The inverse of the lower-triangular `n` x `n` matrix `l` (non-zero diagonal), row-major.
pub(super) fn lower_inverse(n: usize, l: &[f64]) -> Vec<f64> {
    let mut inv = vec![0.0; n * n];
    for col in 0..n {
        for i in col..n {
            let rhs = if i == col { 1.0 } else { 0.0 };
            let s: f64 = (col..i).map(|k| l[i * n + k] * inv[k * n + col]).sum();
            inv[i * n + col] = (rhs - s) / l[i * n + i];
        }
    }
    inv
}

impl Lowerer {
    /// The log density `base(y | args)` (constants included, summed) for the distributions
    /// that [`handles`] names.
    pub(super) fn multivariate_lpdf(
        &mut self,
        base: &str,
        span: Span,
        y: &Expr,
        args: &[Expr],
    ) -> Result<Ir, LowerError> {
        let wanted = if base.starts_with("categorical") || base.starts_with("lkj") {
            1
        } else {
            2
        };
        if args.len() != wanted {
            return Err(LowerError::new(
                span,
                format!("`{base}` takes {wanted} argument(s), found {}", args.len()),
            ));
        }
        match base {
            "categorical" | "categorical_logit" => self.categorical(base, y, &args[0]),
            "ordered_logistic" => self.ordered_logistic(y, &args[0], &args[1]),
            "lkj_corr_cholesky" | "lkj_corr" => self.lkj(base, y, &args[0]),
            "wishart" => self.wishart(y, &args[0], &args[1]),
            _ => self.multi_normal(base, y, &args[0], &args[1]),
        }
    }

    /// A known outcome of `base`, or "not supported".
    fn known_outcome(&mut self, base: &str, y: &Expr) -> Result<Value, LowerError> {
        match self.eval(y)? {
            Val::Known(value, _) => Ok(value),
            Val::Sym(_) => unsupported(
                y.span,
                format!("a `{base}` outcome that depends on parameters"),
            ),
        }
    }

    /// `categorical(y | theta)`: sum_k count_k log theta_k; `categorical_logit(y | beta)`:
    /// sum_k count_k beta_k - N log_sum_exp(beta).
    fn categorical(&mut self, base: &str, y: &Expr, theta: &Expr) -> Result<Ir, LowerError> {
        let outcome = self.known_outcome(base, y)?;
        let v = self.eval(theta)?;
        let (ir, dims) = self.whole(v, theta.span)?;
        let [k] = dims[..] else {
            return Err(LowerError::new(
                theta.span,
                format!("`{base}` needs a vector, found {}", describe(&dims)),
            ));
        };
        let ys = outcomes(&outcome, k, base, y.span)?;
        let mut counts = vec![0.0; k];
        for &y in &ys {
            counts[y - 1] += 1.0;
        }
        let counts = self.data_item(None, DataValue::Vector(counts));
        if base == "categorical" {
            return Ok(un(Un::Sum, mul(counts, un(Un::Log, ir))));
        }
        let beta = self.share(ir, &dims);
        Ok(sub(
            un(Un::Sum, mul(counts, beta.clone())),
            mul(c(ys.len() as f64), un(Un::LogSumExp, beta)),
        ))
    }

    /// Elements `positions` (0-based) of `ir` of `dims`; a scalar stays itself (broadcast).
    fn gather(&mut self, ir: &Ir, dims: &[usize], positions: &[usize]) -> Ir {
        if dims.is_empty() {
            return ir.clone();
        }
        let index = self.data_item(
            None,
            DataValue::IntVector(positions.iter().map(|&p| p as i64).collect()),
        );
        bin(Op::Gather, ir.clone(), index)
    }

    /// `ordered_logistic(y | eta, c)` with known `y`: per observation, log(1 - inv_logit(eta -
    /// c_1)), log(inv_logit(eta - c_{k-1}) - inv_logit(eta - c_k)) or log inv_logit(eta -
    /// c_{K-1}), the observations grouped by which of the three applies.
    fn ordered_logistic(&mut self, y: &Expr, eta: &Expr, cuts: &Expr) -> Result<Ir, LowerError> {
        let base = "ordered_logistic";
        let outcome = self.known_outcome(base, y)?;
        let v = self.eval(eta)?;
        let (eta_ir, eta_dims) = self.whole(v, eta.span)?;
        let v = self.eval(cuts)?;
        let (cut_ir, cut_dims) = self.whole(v, cuts.span)?;
        let [m] = cut_dims[..] else {
            return Err(LowerError::new(
                cuts.span,
                format!(
                    "`{base}`: the cut points must be a vector, found {}",
                    describe(&cut_dims)
                ),
            ));
        };
        let k = m + 1;
        let ys = outcomes(&outcome, k, base, y.span)?;
        let n_eta: usize = eta_dims.iter().product();
        if eta_dims.len() > 1 || (!eta_dims.is_empty() && n_eta != ys.len()) {
            return Err(LowerError::new(
                eta.span,
                format!(
                    "`{base}`: {} does not match {} outcome(s)",
                    describe(&eta_dims),
                    ys.len()
                ),
            ));
        }
        let eta_ir = self.share(eta_ir, &eta_dims);
        let cut_ir = self.share(cut_ir, &cut_dims);
        let (mut first, mut last, mut middle) = (Vec::new(), Vec::new(), Vec::new());
        for (n, &y) in ys.iter().enumerate() {
            match y {
                1 => first.push(n),
                _ if y == k => last.push(n),
                _ => middle.push(n),
            }
        }
        let mut terms = Vec::new();
        if !first.is_empty() {
            // log(1 - inv_logit(eta - c_1)) = -softplus(eta - c_1)
            let e = self.gather(&eta_ir, &eta_dims, &first);
            let cut = self.gather(&cut_ir, &cut_dims, &vec![0; first.len()]);
            terms.push(un(Un::Neg, un(Un::Softplus, sub(e, cut))));
        }
        if !last.is_empty() {
            // log inv_logit(eta - c_{K-1}) = -softplus(c_{K-1} - eta)
            let e = self.gather(&eta_ir, &eta_dims, &last);
            let cut = self.gather(&cut_ir, &cut_dims, &vec![m - 1; last.len()]);
            terms.push(un(Un::Neg, un(Un::Softplus, sub(cut, e))));
        }
        if !middle.is_empty() {
            // With a = eta - c_{y-1} > b = eta - c_y: inv_logit(a) - inv_logit(b) =
            // inv_logit(a) inv_logit(-b) (1 - exp(b - a)).
            let e = self.gather(&eta_ir, &eta_dims, &middle);
            let e = self.share(e, &[middle.len()]);
            let lower: Vec<usize> = middle.iter().map(|&n| ys[n] - 2).collect();
            let upper: Vec<usize> = middle.iter().map(|&n| ys[n] - 1).collect();
            let c_lo = self.gather(&cut_ir, &cut_dims, &lower);
            let c_lo = self.share(c_lo, &[middle.len()]);
            let c_hi = self.gather(&cut_ir, &cut_dims, &upper);
            let c_hi = self.share(c_hi, &[middle.len()]);
            let a = sub(e.clone(), c_lo.clone());
            let b = sub(e, c_hi.clone());
            terms.push(add(
                sub(
                    un(Un::Neg, un(Un::Softplus, un(Un::Neg, a))),
                    un(Un::Softplus, b),
                ),
                un(Un::Log1p, un(Un::Neg, un(Un::Exp, sub(c_lo, c_hi)))),
            ));
        }
        let mut total: Option<Ir> = None;
        for t in terms {
            let s = un(Un::Sum, t);
            total = Some(match total {
                Some(acc) => add(acc, s),
                None => s,
            });
        }
        Ok(total.unwrap_or_else(|| c(0.0)))
    }

    /// A covariance (or Cholesky factor) argument: a known matrix, or a known matrix times a
    /// scalar that depends on parameters.
    fn known_matrix_times_scalar(
        &mut self,
        base: &str,
        arg: &Expr,
    ) -> Result<(Value, Option<Ir>), LowerError> {
        let what = if base == "multi_normal" {
            "covariance"
        } else {
            "Cholesky factor"
        };
        let refuse = |span: Span| -> Result<(Value, Option<Ir>), LowerError> {
            unsupported(
                span,
                format!(
                    "a `{base}` {what} that depends on parameters (other than a data matrix \
                     times a scalar)"
                ),
            )
        };
        if let ExprKind::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } = &arg.kind
        {
            let a = self.eval(lhs)?;
            let b = self.eval(rhs)?;
            let (matrix, scalar, scalar_span) = match (a, b) {
                (Val::Known(m, _), s) if m.shape.len() == 2 => (m, s, rhs.span),
                (s, Val::Known(m, _)) if m.shape.len() == 2 => (m, s, lhs.span),
                _ => return refuse(arg.span),
            };
            let (ir, dims) = self.whole(scalar, scalar_span)?;
            if !dims.is_empty() {
                return refuse(arg.span);
            }
            return Ok((matrix, Some(ir)));
        }
        match self.eval(arg)? {
            Val::Known(m, _) => Ok((m, None)),
            Val::Sym(_) => refuse(arg.span),
        }
    }

    /// `multi_normal(y | mu, Sigma)` with `Sigma = s * S` (S data, s a scalar or 1), or
    /// `multi_normal_cholesky(y | mu, s * L)`: with L the Cholesky factor of S (or L), z =
    /// L^{-1}(y - mu) / s, a linear map of `y` and `mu` with a data matrix, and the log density
    /// -0.5 |z|^2 - N (sum log diag L + K log s) - N K log(2 pi) / 2.
    fn multi_normal(
        &mut self,
        base: &str,
        y: &Expr,
        mu: &Expr,
        cov: &Expr,
    ) -> Result<Ir, LowerError> {
        if !self.only_host(cov) && !self.is_data_matrix_times_scalar(cov) {
            return self.multi_normal_symbolic(base, y, mu, cov);
        }
        let (matrix, scale) = self.known_matrix_times_scalar(base, cov)?;
        let k = matrix.shape.first().copied().unwrap_or(0);
        if matrix.shape != [k, k] || k == 0 {
            return Err(LowerError::new(
                cov.span,
                format!(
                    "`{base}` needs a non-empty square matrix, found shape {:?}",
                    matrix.shape
                ),
            ));
        }
        let factor = if base == "multi_normal" {
            crate::host::linalg::cholesky(k, &matrix.reals()).map_err(|why| {
                LowerError::new(cov.span, format!("`{base}`: the covariance matrix: {why}"))
            })?
        } else {
            matrix.reals()
        };
        // The factor of the scaled matrix is sqrt(s) L for a covariance, s L for a factor.
        let scale = scale.map(|s| {
            if base == "multi_normal" {
                un(Un::Sqrt, s)
            } else {
                s
            }
        });
        if (0..k).any(|i| factor[i * k + i] == 0.0) {
            return Err(LowerError::new(
                cov.span,
                format!("`{base}`: the Cholesky factor has a zero on its diagonal"),
            ));
        }
        let inverse = lower_inverse(k, &factor);
        let log_det: f64 = (0..k).map(|i| factor[i * k + i].abs().ln()).sum();
        let inverse_item = self.data_item(
            None,
            DataValue::Matrix(inverse.chunks(k).map(<[f64]>::to_vec).collect()),
        );
        let vy = self.eval(y)?;
        let vmu = self.eval(mu)?;
        let rows = |v: &Val, span: Span| -> Result<usize, LowerError> {
            let dims = match v {
                Val::Known(value, _) => value.shape.clone(),
                Val::Sym(s) => s.dims.clone(),
            };
            match dims[..] {
                [m] if m == k => Ok(1),
                [n, m] if m == k => Ok(n),
                _ => Err(LowerError::new(
                    span,
                    format!(
                        "`{base}`: {} does not match a vector of {k}",
                        describe(&dims)
                    ),
                )),
            }
        };
        let (ny, nmu) = (rows(&vy, y.span)?, rows(&vmu, mu.span)?);
        if ny != nmu && ny != 1 && nmu != 1 {
            return Err(LowerError::new(
                mu.span,
                format!("`{base}`: {nmu} location(s) for {ny} outcome(s)"),
            ));
        }
        if ny == 0 || nmu == 0 {
            return Ok(c(0.0));
        }
        let n = ny.max(nmu);
        let wy = self.whitened(vy, y.span, k, n, &inverse, &inverse_item)?;
        let wmu = self.whitened(vmu, mu.span, k, n, &inverse, &inverse_item)?;
        let mut z = sub(wy, wmu);
        let nf = n as f64;
        let constant = -nf * log_det - 0.5 * nf * k as f64 * (2.0 * PI).ln();
        let mut scale_term = None;
        if let Some(s) = scale {
            let s = self.share(s, &[]);
            z = bin(Op::Div, z, s.clone());
            scale_term = Some(mul(c(-nf * k as f64), un(Un::Log, s)));
        }
        let mut lp = add(
            mul(c(-0.5), un(Un::Sum, bin(Op::Pow, z, c(2.0)))),
            c(constant),
        );
        if let Some(t) = scale_term {
            lp = add(lp, t);
        }
        Ok(lp)
    }

    /// L^{-1} x for each of the rows of `x` (vectors of `k`), repeated to `n` rows, as one
    /// vector of `n * k`: computed on the host when `x` is known, else a data matrix times
    /// vector per row.
    fn whitened(
        &mut self,
        x: Val,
        span: Span,
        k: usize,
        n: usize,
        inverse: &[f64],
        inverse_item: &Ir,
    ) -> Result<Ir, LowerError> {
        match x {
            Val::Known(value, _) => {
                let values = value.reals();
                let rows = values.len() / k;
                let mut out = Vec::with_capacity(n * k);
                for r in 0..n {
                    let row = &values[(r % rows) * k..(r % rows + 1) * k];
                    for i in 0..k {
                        out.push((0..k).map(|j| inverse[i * k + j] * row[j]).sum::<f64>());
                    }
                }
                Ok(self.data_item(None, DataValue::Vector(out)))
            }
            sym => {
                let (ir, dims) = self.whole(sym, span)?;
                let ir = self.share(ir, &dims);
                let rows = dims.iter().product::<usize>() / k;
                let mut parts = Vec::with_capacity(rows);
                for r in 0..rows {
                    let row = if rows == 1 {
                        ir.clone()
                    } else {
                        Ir::Slice(Box::new(ir.clone()), (r * k) as u32, k as u32)
                    };
                    let w = bin(Op::Matvec, inverse_item.clone(), row);
                    parts.push(self.share(w, &[k]));
                }
                if rows == n {
                    return Ok(if n == 1 {
                        parts.pop().expect("one row")
                    } else {
                        Ir::Concat(parts)
                    });
                }
                // One row for all `n` outcomes.
                let row = parts.pop().expect("one row");
                Ok(if n == 1 {
                    row
                } else {
                    Ir::Concat(vec![row; n])
                })
            }
        }
    }

    /// `M * s` or `s * M` with `M` a data matrix (the fast path of [`Self::multi_normal`]).
    fn is_data_matrix_times_scalar(&mut self, arg: &Expr) -> bool {
        let ExprKind::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } = &arg.kind
        else {
            return false;
        };
        [lhs, rhs].into_iter().any(|side| {
            self.only_host(side)
                && crate::host::eval(side, &self.env).is_ok_and(|v| v.shape.len() == 2)
        })
    }

    /// The rows (vectors of `k`) of a `multi_normal` outcome or location, as elements.
    fn mvn_rows(&mut self, base: &str, e: &Expr, k: usize) -> Result<(usize, Vec<Ir>), LowerError> {
        let v = self.eval(e)?;
        let dims = v.dims().to_vec();
        let n = match dims[..] {
            [m] if m == k => 1,
            [n, m] if m == k => n,
            _ => {
                return Err(LowerError::new(
                    e.span,
                    format!(
                        "`{base}`: {} does not match a vector of {k}",
                        describe(&dims)
                    ),
                ));
            }
        };
        let mut elems = self.elements(v, e.span)?;
        for x in &mut elems {
            if !super::sym::trivial(x) {
                *x = self.share(std::mem::replace(x, c(0.0)), &[]);
            }
        }
        Ok((n, elems))
    }

    /// `multi_normal(y | mu, Sigma)` or `multi_normal_cholesky(y | mu, L)` with a covariance
    /// or factor that depends on parameters: `Sigma` factored by the unrolled Cholesky
    /// decomposition, `z = L^{-1}(y - mu)` by forward substitution per row, and
    /// `-0.5 |z|^2 - N sum log diag L - N K log(2 pi) / 2`.
    fn multi_normal_symbolic(
        &mut self,
        base: &str,
        y: &Expr,
        mu: &Expr,
        cov: &Expr,
    ) -> Result<Ir, LowerError> {
        let l = self.cholesky_factor(base, cov, base == "multi_normal")?;
        let k = l.rows;
        let (ny, ys) = self.mvn_rows(base, y, k)?;
        let (nmu, mus) = self.mvn_rows(base, mu, k)?;
        if ny != nmu && ny != 1 && nmu != 1 {
            return Err(LowerError::new(
                mu.span,
                format!("`{base}`: {nmu} location(s) for {ny} outcome(s)"),
            ));
        }
        if ny == 0 || nmu == 0 {
            return Ok(c(0.0));
        }
        let n = ny.max(nmu);
        let mut zs = Vec::with_capacity(n * k);
        for r in 0..n {
            let (ry, rmu) = (r % ny, r % nmu);
            let residual = Grid {
                rows: k,
                cols: 1,
                elems: (0..k)
                    .map(|i| sub(ys[ry * k + i].clone(), mus[rmu * k + i].clone()))
                    .collect(),
            };
            zs.extend(self.solve_lower(&l, &residual, cov.span)?.elems);
        }
        let squares = self.dot_pairs(zs.iter().map(|z| (z.clone(), z.clone())).collect());
        let log_det = self.sum_log_diagonal(&l);
        let nf = n as f64;
        Ok(add(
            sub(mul(c(-0.5), squares), mul(c(nf), log_det)),
            c(-0.5 * nf * k as f64 * (2.0 * PI).ln()),
        ))
    }

    /// The lower Cholesky factor of `e`, a non-empty square matrix: `e` itself when it is a
    /// factor already, else its unrolled decomposition (`decompose`).
    fn cholesky_factor(
        &mut self,
        base: &str,
        e: &Expr,
        decompose: bool,
    ) -> Result<Grid, LowerError> {
        let v = self.eval(e)?;
        let g = self.grid(v, e.span, false)?;
        if g.rows != g.cols || g.rows == 0 {
            return Err(LowerError::new(
                e.span,
                format!(
                    "`{base}` needs a non-empty square matrix, found {}x{}",
                    g.rows, g.cols
                ),
            ));
        }
        if decompose {
            self.cholesky(g, e.span)
        } else {
            Ok(g)
        }
    }

    /// A scalar argument as IR (a constant when known).
    fn scalar_ir(&mut self, e: &Expr) -> Result<Ir, LowerError> {
        let v = self.eval(e)?;
        self.scalar_arg(v, e)
    }

    /// `lkj_corr_cholesky(L | eta)`: `sum_{k>=2} (K - k + 2 eta - 2) log L_kk` (1-based k);
    /// `lkj_corr(Omega | eta)`: `(eta - 1) log det Omega`, through the unrolled Cholesky
    /// factor. Both with Stan's normalising constant (Lewandowski, Kurowicka and Joe 2009,
    /// theorem 5): `(K-1) lgamma(eta + (K-1)/2) - sum_{k<K} (k/2 log pi + lgamma(eta + (K-1-k)/2))`.
    fn lkj(&mut self, base: &str, y: &Expr, eta: &Expr) -> Result<Ir, LowerError> {
        let l = self.cholesky_factor(base, y, base == "lkj_corr")?;
        let k = l.rows;
        let eta = self.scalar_ir(eta)?;
        let eta = self.share(eta, &[]);
        let km1 = (k - 1) as f64;
        let mut constant = mul(c(km1), un(Un::Lgamma, add(eta.clone(), c(0.5 * km1))));
        for i in 1..k {
            let term = add(
                c(0.5 * i as f64 * PI.ln()),
                un(Un::Lgamma, add(eta.clone(), c(0.5 * (km1 - i as f64)))),
            );
            constant = sub(constant, term);
        }
        if k == 1 {
            return Ok(constant);
        }
        let tail = Grid {
            rows: k - 1,
            cols: 1,
            elems: l.diagonal()[1..].to_vec(),
        };
        let logs = un(Un::Log, super::matrix::joined(tail.elems));
        let logs = self.share(logs, &[k - 1]);
        let kernel = if base == "lkj_corr" {
            // log det Omega = 2 sum log L_kk (L_11 = 1).
            mul(mul(c(2.0), sub(eta.clone(), c(1.0))), un(Un::Sum, logs))
        } else {
            let weights: Vec<f64> = (1..k).map(|i| (k - i) as f64 - 3.0).collect();
            let weights = self.data_item(None, DataValue::Vector(weights));
            add(
                bin(Op::Dot, weights, logs.clone()),
                mul(mul(c(2.0), eta), un(Un::Sum, logs)),
            )
        };
        Ok(add(kernel, constant))
    }

    /// `wishart(W | nu, S)` with a data scale matrix `S`:
    /// `(nu - K - 1)/2 log det W - tr(S^{-1} W)/2 - nu K/2 log 2 - nu/2 log det S
    /// - lmgamma_K(nu/2)`, `log det W` through the unrolled Cholesky factor.
    fn wishart(&mut self, w: &Expr, nu: &Expr, scale: &Expr) -> Result<Ir, LowerError> {
        let Val::Known(s, _) = self.eval(scale)? else {
            return unsupported(
                scale.span,
                "a `wishart` scale matrix that depends on parameters",
            );
        };
        let k = s.shape.first().copied().unwrap_or(0);
        if s.shape != [k, k] || k == 0 {
            return Err(LowerError::new(
                scale.span,
                format!(
                    "`wishart` needs a non-empty square scale matrix, found {:?}",
                    s.shape
                ),
            ));
        }
        let factor = crate::host::linalg::cholesky(k, &s.reals()).map_err(|why| {
            LowerError::new(scale.span, format!("`wishart`: the scale matrix: {why}"))
        })?;
        let inv_l = lower_inverse(k, &factor);
        // S^{-1} = L^{-T} L^{-1}.
        let mut s_inv = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..k {
                s_inv[i * k + j] = (0..k).map(|m| inv_l[m * k + i] * inv_l[m * k + j]).sum();
            }
        }
        let log_det_s: f64 = 2.0 * (0..k).map(|i| factor[i * k + i].ln()).sum::<f64>();
        let v = self.eval(w)?;
        let g = self.grid(v, w.span, false)?;
        if (g.rows, g.cols) != (k, k) {
            return Err(LowerError::new(
                w.span,
                format!(
                    "`wishart`: a {}x{} matrix for a {k}x{k} scale",
                    g.rows, g.cols
                ),
            ));
        }
        let trace = self.dot_pairs(
            g.elems
                .iter()
                .zip(&s_inv)
                .map(|(e, &x)| (c(x), e.clone()))
                .collect(),
        );
        let l = self.cholesky(g, w.span)?;
        let log_det_w = mul(c(2.0), self.sum_log_diagonal(&l));
        let nu = self.scalar_ir(nu)?;
        let nu = self.share(nu, &[]);
        let kf = k as f64;
        let mut lp = sub(
            mul(mul(c(0.5), sub(nu.clone(), c(kf + 1.0))), log_det_w),
            mul(c(0.5), trace),
        );
        lp = sub(
            lp,
            mul(
                nu.clone(),
                c(0.5 * kf * std::f64::consts::LN_2 + 0.5 * log_det_s),
            ),
        );
        // lmgamma_K(x) = K(K-1)/4 log pi + sum_{j=1}^{K} lgamma(x + (1 - j)/2).
        lp = sub(lp, c(0.25 * kf * (kf - 1.0) * PI.ln()));
        for j in 1..=k {
            let arg = add(mul(c(0.5), nu.clone()), c(0.5 * (1.0 - j as f64)));
            lp = sub(lp, un(Un::Lgamma, arg));
        }
        Ok(lp)
    }
}
