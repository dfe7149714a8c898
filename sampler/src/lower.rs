//! Lowering: a declaration-checked [`Model`] becomes a [`Program`], with shape, domain and
//! support checks that name the offending node.
//!
//! Expressions that involve no parameter are evaluated here, once ("constant folding"), and
//! stored as data; statements whose every operand is constant are dropped (they add a
//! constant to the log density).

mod gaussian;
mod transform;

use std::collections::HashMap;

use crate::eval::value_forward;
use crate::ir::{BinaryOp, Constraint, DataValue, Dist, Expr, Model, Statement, UnaryOp};
use crate::limits::Limits;
use crate::model_error::{ModelError, Num, Problem};
use crate::program::{
    DataRef, DensityKind, IndexRef, Inst, ListRef, MapOp, MatrixRef, Operand, Output, Program,
    Slot, SlotId, StatementId, ZipOp,
};

/// The result of lowering: the program and non-fatal remarks.
pub(crate) struct Lowered {
    pub program: Program,
    pub warnings: Vec<String>,
}

/// Lowers a model whose declarations passed [`crate::validate`]'s checks.
pub(crate) fn lower(model: &Model, limits: &Limits) -> Result<Lowered, ModelError> {
    let mut lowerer = Lowerer {
        model,
        limits,
        program: Program::default(),
        symbols: HashMap::new(),
        index_cache: HashMap::new(),
        computed: HashMap::new(),
        expr_nodes: 0,
        warnings: Vec::new(),
    };
    for name in model.data.keys() {
        lowerer.symbols.insert(name.clone(), Symbol::Data(None));
    }
    for transformed in &model.transformed {
        lowerer
            .symbols
            .insert(transformed.name.clone(), Symbol::Pending);
    }
    lowerer.parameters()?;
    lowerer.transformed()?;
    lowerer.statements()?;
    Ok(Lowered {
        program: lowerer.program,
        warnings: lowerer.warnings,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Scalar,
    Vector(usize),
    Matrix(usize, usize),
}

impl Shape {
    fn len(self) -> usize {
        match self {
            Shape::Scalar => 1,
            Shape::Vector(n) => n,
            Shape::Matrix(rows, cols) => rows * cols,
        }
    }

    fn describe(self) -> String {
        match self {
            Shape::Scalar => "a scalar".into(),
            Shape::Vector(n) => format!("a vector of length {n}"),
            Shape::Matrix(rows, cols) => format!("a {rows}x{cols} matrix"),
        }
    }
}

/// A lowered expression.
#[derive(Clone, Copy, Debug)]
struct Value {
    operand: Operand,
    shape: Shape,
    /// Every value is an exact integer (integer data or an integral constant).
    integer: bool,
}

impl Value {
    fn is_constant(&self) -> bool {
        !matches!(self.operand, Operand::Slot(_))
    }
}

enum Symbol {
    /// A data item, lowered on first use.
    Data(Option<Value>),
    /// A parameter or a defined transformed parameter.
    Value(Value),
    /// A transformed parameter not defined yet.
    Pending,
}

struct Lowerer<'a> {
    model: &'a Model,
    limits: &'a Limits,
    program: Program,
    symbols: HashMap<String, Symbol>,
    /// Index-buffer runs of integer data, by name.
    index_cache: HashMap<String, IndexRef>,
    /// The slot of each value instruction emitted so far, by what it computes: an
    /// instruction computed before is not emitted again (common subexpressions, as loops
    /// of Stan programs repeat `log(theta[j])` at every step).
    computed: HashMap<Vec<u64>, SlotId>,
    expr_nodes: usize,
    warnings: Vec<String>,
}

fn shape_error(path: &str, message: String) -> ModelError {
    ModelError::new(path, Problem::Shape(message))
}

/// What a distribution argument must be when it is constant.
#[derive(Clone, Copy)]
enum Domain {
    Real,
    Positive,
    /// A non-negative integer (a number of trials).
    Count,
    /// `>= 0`.
    NonNegative,
    /// A probability, in `[0, 1]`.
    Probability,
}

/// The support of a distribution's value.
#[derive(Clone, Copy)]
enum Support {
    Real,
    NonNegative,
    Positive,
    Unit,
    /// Between the first and second parameter.
    Bounded,
    Binary,
    Count,
    /// An integer in `0..=trials` (the first parameter).
    UpToTrials,
}

impl Support {
    fn describe(self) -> &'static str {
        match self {
            Support::Real => "any real",
            Support::NonNegative => "x >= 0",
            Support::Positive => "x > 0",
            Support::Unit => "0 < x < 1",
            Support::Bounded => "lower <= x <= upper",
            Support::Binary => "0 or 1",
            Support::Count => "an integer >= 0",
            Support::UpToTrials => "an integer in 0..=trials",
        }
    }

    fn discrete(self) -> bool {
        matches!(self, Support::Binary | Support::Count | Support::UpToTrials)
    }

    /// Whether a parameter with this constraint stays inside the support.
    fn fits(self, constraint: &Constraint) -> bool {
        let lower_at_least = |bound: f64| match *constraint {
            Constraint::Positive | Constraint::UnitInterval => bound <= 0.0,
            Constraint::Lower(lower) | Constraint::Interval { lower, .. } => bound <= lower,
            _ => false,
        };
        match self {
            Support::Real | Support::Bounded => true,
            Support::NonNegative | Support::Positive => lower_at_least(0.0),
            Support::Unit => {
                matches!(*constraint, Constraint::UnitInterval)
                    || matches!(*constraint, Constraint::Interval { lower, upper } if lower >= 0.0 && upper <= 1.0)
            }
            Support::Binary | Support::Count | Support::UpToTrials => false,
        }
    }
}

struct DistSpec {
    kind: DensityKind,
    support: Support,
    domains: [Domain; 3],
}

fn dist_spec(dist: &Dist) -> Option<DistSpec> {
    use Domain::{Count, Positive as Pos, Real};
    let spec = |kind, support, domains| {
        Some(DistSpec {
            kind,
            support,
            domains,
        })
    };
    match dist {
        Dist::Normal { .. } => spec(DensityKind::Normal, Support::Real, [Real, Pos, Real]),
        Dist::HalfNormal { .. } => spec(
            DensityKind::HalfNormal,
            Support::NonNegative,
            [Pos, Real, Real],
        ),
        Dist::Exponential { .. } => spec(
            DensityKind::Exponential,
            Support::NonNegative,
            [Pos, Real, Real],
        ),
        Dist::StudentT { .. } => spec(DensityKind::StudentT, Support::Real, [Pos, Real, Pos]),
        Dist::Cauchy { .. } => spec(DensityKind::Cauchy, Support::Real, [Real, Pos, Real]),
        Dist::HalfCauchy { .. } => spec(
            DensityKind::HalfCauchy,
            Support::NonNegative,
            [Pos, Real, Real],
        ),
        Dist::LogNormal { .. } => {
            spec(DensityKind::LogNormal, Support::Positive, [Real, Pos, Real])
        }
        Dist::Gamma { .. } => spec(DensityKind::Gamma, Support::Positive, [Pos, Pos, Real]),
        Dist::InverseGamma { .. } => spec(
            DensityKind::InverseGamma,
            Support::Positive,
            [Pos, Pos, Real],
        ),
        Dist::Beta { .. } => spec(DensityKind::Beta, Support::Unit, [Pos, Pos, Real]),
        Dist::Uniform { .. } => spec(DensityKind::Uniform, Support::Bounded, [Real, Real, Real]),
        Dist::Laplace { .. } => spec(DensityKind::Laplace, Support::Real, [Real, Pos, Real]),
        Dist::BernoulliLogit { .. } => spec(
            DensityKind::BernoulliLogit,
            Support::Binary,
            [Real, Real, Real],
        ),
        Dist::BinomialLogit { .. } => spec(
            DensityKind::BinomialLogit,
            Support::UpToTrials,
            [Count, Real, Real],
        ),
        Dist::PoissonLog { .. } => {
            spec(DensityKind::PoissonLog, Support::Count, [Real, Real, Real])
        }
        Dist::Logistic { .. } => spec(DensityKind::Logistic, Support::Real, [Real, Pos, Real]),
        Dist::Weibull { .. } => spec(DensityKind::Weibull, Support::NonNegative, [Pos, Pos, Real]),
        Dist::ChiSquare { .. } => spec(
            DensityKind::ChiSquare,
            Support::NonNegative,
            [Pos, Real, Real],
        ),
        Dist::Bernoulli { .. } => spec(
            DensityKind::Bernoulli,
            Support::Binary,
            [Domain::Probability, Real, Real],
        ),
        Dist::Binomial { .. } => spec(
            DensityKind::Binomial,
            Support::UpToTrials,
            [Count, Domain::Probability, Real],
        ),
        Dist::Poisson { .. } => spec(
            DensityKind::Poisson,
            Support::Count,
            [Domain::NonNegative, Real, Real],
        ),
        Dist::NegBinomial2 { .. } => {
            spec(DensityKind::NegBinomial2, Support::Count, [Pos, Pos, Real])
        }
        Dist::NegBinomial2Log { .. } => spec(
            DensityKind::NegBinomial2Log,
            Support::Count,
            [Real, Pos, Real],
        ),
        Dist::GaussianRandomWalk { .. } => None,
    }
}

impl<'a> Lowerer<'a> {
    fn alloc(&mut self, path: &str, len: usize) -> Result<SlotId, ModelError> {
        let id = SlotId(self.program.slots.len() as u32);
        let offset = self.program.tape_len;
        self.program.tape_len = offset.saturating_add(len);
        if self.program.tape_len > self.limits.max_tape_values {
            return Err(ModelError::new(
                path,
                Problem::Limit {
                    what: "the lowered program's tape length",
                    value: self.program.tape_len,
                    limit: self.limits.max_tape_values,
                },
            ));
        }
        self.program.slots.push(Slot {
            offset: offset as u32,
            len: len as u32,
        });
        Ok(id)
    }

    fn push_data(&mut self, path: &str, values: &[f64]) -> Result<DataRef, ModelError> {
        let offset = self.program.data.len();
        let end = offset.saturating_add(values.len());
        if end > u32::MAX as usize || end > self.limits.max_data_values.saturating_mul(2) {
            return Err(ModelError::new(
                path,
                Problem::Limit {
                    what: "the lowered program's data length",
                    value: end,
                    limit: self.limits.max_data_values.saturating_mul(2),
                },
            ));
        }
        self.program.data.extend_from_slice(values);
        Ok(DataRef {
            offset: offset as u32,
            len: values.len() as u32,
        })
    }

    fn transformed(&mut self) -> Result<(), ModelError> {
        for (i, transformed) in self.model.transformed.iter().enumerate() {
            let path = format!("transformed[{i}].value");
            let value = self.expr(&transformed.value, &path)?;
            if let Shape::Matrix(..) = value.shape {
                return Err(shape_error(
                    &path,
                    "a transformed parameter cannot be a matrix".into(),
                ));
            }
            if !transformed.dims.is_empty()
                && crate::ir::dims_product(&transformed.dims) != Some(value.shape.len())
            {
                return Err(shape_error(
                    &format!("transformed[{i}].dims"),
                    format!(
                        "dims {:?} do not multiply to the value's length {} (it is {})",
                        transformed.dims,
                        value.shape.len(),
                        value.shape.describe()
                    ),
                ));
            }
            self.symbols
                .insert(transformed.name.clone(), Symbol::Value(value));
            if transformed.hidden {
                continue;
            }
            self.program.outputs.push(Output {
                name: transformed.name.clone(),
                is_parameter: false,
                value: value.operand,
                len: value.shape.len() as u32,
                scalar: value.shape == Shape::Scalar,
                dims: transformed.dims.clone(),
            });
        }
        Ok(())
    }

    fn statements(&mut self) -> Result<(), ModelError> {
        for (i, statement) in self.model.model.iter().enumerate() {
            let source = StatementId(i as u32);
            match statement {
                Statement::Sample { value, dist } => {
                    let path = format!("model[{i}].sample");
                    self.sample(&path, source, value, dist)?;
                }
                Statement::Factor { value } => {
                    let path = format!("model[{i}].factor.value");
                    let value = self.expr(value, &path)?;
                    if let Shape::Matrix(..) = value.shape {
                        return Err(shape_error(&path, "a factor cannot be a matrix".into()));
                    }
                    if !value.is_constant() {
                        self.program.insts.push(Inst::Factor {
                            a: value.operand,
                            source,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    fn sample(
        &mut self,
        path: &str,
        source: StatementId,
        value_expr: &Expr,
        dist: &Dist,
    ) -> Result<(), ModelError> {
        let value_path = format!("{path}.value");
        let value = self.expr(value_expr, &value_path)?;
        if let Dist::Normal { mu, sigma } = dist
            && self.gaussian_linear(path, source, &value, mu, sigma)?
        {
            return Ok(());
        }
        let dist_path = format!("{path}.dist.{}", dist.name());
        let mut args = Vec::new();
        for (name, expr) in dist.args() {
            let arg_path = format!("{dist_path}.{name}");
            let arg = self.expr(expr, &arg_path)?;
            args.push((name, arg_path, arg));
        }

        let Some(spec) = dist_spec(dist) else {
            return self.random_walk(path, source, value, &value_path, dist, &args);
        };

        // Shapes: the value is a scalar or vector; every argument a scalar or a vector as long.
        let n = match value.shape {
            Shape::Scalar => 1,
            Shape::Vector(n) => n,
            Shape::Matrix(..) => {
                return Err(shape_error(
                    &value_path,
                    "a sampled value cannot be a matrix".into(),
                ));
            }
        };
        for (_, arg_path, arg) in &args {
            match arg.shape {
                Shape::Scalar => {}
                Shape::Vector(m) if value.shape == Shape::Vector(m) => {}
                other => {
                    return Err(shape_error(
                        arg_path,
                        format!(
                            "is {}, but the sampled value is {}; an argument is a scalar or has the value's shape",
                            other.describe(),
                            value.shape.describe()
                        ),
                    ));
                }
            }
        }

        // Discrete distributions need observed integer data.
        if spec.support.discrete() && !value.is_constant() {
            return Err(ModelError::new(
                &value_path,
                Problem::Invalid(format!(
                    "{} is a distribution over integers: its value must be observed data, not a parameter",
                    dist.name()
                )),
            ));
        }

        // Constant arguments inside their domains.
        for (k, (name, arg_path, arg)) in args.iter().enumerate() {
            if arg.is_constant() {
                self.check_domain(arg_path, name, arg, spec.domains[k])?;
            }
        }
        if let (DensityKind::Uniform, Some((_, lower_path, lower)), Some((_, _, upper))) =
            (spec.kind, args.first(), args.get(1))
            && lower.is_constant()
            && upper.is_constant()
        {
            let (lo, hi) = (self.values(lower), self.values(upper));
            for i in 0..n {
                let (l, h) = (lo[i.min(lo.len() - 1)], hi[i.min(hi.len() - 1)]);
                if l >= h {
                    return Err(ModelError::new(
                        lower_path,
                        Problem::Invalid(format!(
                            "lower bound {} must be below upper bound {} (element {i})",
                            Num(l),
                            Num(h)
                        )),
                    ));
                }
            }
        }

        // Observed data inside the support.
        if value.is_constant() {
            self.check_support(&value_path, dist.name(), spec.support, &value, &args, n)?;
        } else if let Some(param) = self.parameter_named(value_expr)
            && let Some(constraint) = transform::support_constraint(param)
            && !spec.support.fits(&constraint)
        {
            self.warnings.push(format!(
                "{value_path}: parameter `{}` has constraint {} but {} needs {}; draws outside the support are rejected as divergences",
                param.name,
                serde_json::to_string(&constraint).unwrap_or_default(),
                dist.name(),
                spec.support.describe()
            ));
        }

        if value.is_constant() && args.iter().all(|(_, _, arg)| arg.is_constant()) {
            return Ok(()); // a constant term
        }
        let mut params = [Operand::Const(0.0); 3];
        for (k, (_, _, arg)) in args.iter().enumerate() {
            params[k] = arg.operand;
        }
        self.program.insts.push(Inst::Density {
            kind: spec.kind,
            x: value.operand,
            params,
            len: n as u32,
            source,
        });
        Ok(())
    }

    fn random_walk(
        &mut self,
        path: &str,
        source: StatementId,
        value: Value,
        value_path: &str,
        dist: &Dist,
        args: &[(&'static str, String, Value)],
    ) -> Result<(), ModelError> {
        let Shape::Vector(_) = value.shape else {
            return Err(shape_error(
                value_path,
                format!(
                    "a gaussian_random_walk is over a vector, found {}",
                    value.shape.describe()
                ),
            ));
        };
        for (name, arg_path, arg) in args {
            if arg.shape != Shape::Scalar {
                return Err(shape_error(
                    arg_path,
                    format!("must be a scalar, found {}", arg.shape.describe()),
                ));
            }
            if arg.is_constant() {
                let domain = if name.ends_with("sigma") {
                    Domain::Positive
                } else {
                    Domain::Real
                };
                self.check_domain(arg_path, name, arg, domain)?;
            }
        }
        if value.is_constant() && args.iter().all(|(_, _, arg)| arg.is_constant()) {
            return Ok(());
        }
        let find = |wanted: &str| {
            args.iter()
                .find(|(name, _, _)| *name == wanted)
                .map(|(_, _, v)| v.operand)
        };
        let sigma = find("sigma").ok_or_else(|| {
            ModelError::new(
                path,
                Problem::Invalid(format!("{} needs sigma", dist.name())),
            )
        })?;
        self.program.insts.push(Inst::RandomWalk {
            x: value.operand,
            sigma,
            drift: find("drift").unwrap_or(Operand::Const(0.0)),
            init_mu: find("init_mu").unwrap_or(Operand::Const(0.0)),
            init_sigma: find("init_sigma").unwrap_or(sigma),
            source,
        });
        Ok(())
    }

    /// The parameter an expression names directly, if it does.
    fn parameter_named(&self, expr: &Expr) -> Option<&'a crate::ir::Parameter> {
        let Expr::Ref(name) = expr else { return None };
        self.model.parameters.iter().find(|p| &p.name == name)
    }

    /// The values of a constant operand.
    fn values<'v>(&'v self, value: &'v Value) -> &'v [f64] {
        match &value.operand {
            Operand::Data(data) => {
                &self.program.data[data.offset as usize..(data.offset + data.len) as usize]
            }
            Operand::Const(c) => std::slice::from_ref(c),
            Operand::Slot(_) => &[],
        }
    }

    fn check_domain(
        &self,
        path: &str,
        name: &str,
        arg: &Value,
        domain: Domain,
    ) -> Result<(), ModelError> {
        let (ok, requirement): (fn(f64) -> bool, _) = match domain {
            Domain::Real => return Ok(()),
            Domain::Positive => (|v| v > 0.0, "> 0"),
            Domain::Count => (|v| v >= 0.0 && v.fract() == 0.0, "a non-negative integer"),
            Domain::NonNegative => (|v| v >= 0.0, ">= 0"),
            Domain::Probability => (|v| (0.0..=1.0).contains(&v), "in [0, 1]"),
        };
        match self.values(arg).iter().find(|v| !ok(**v)) {
            Some(&value) => Err(ModelError::new(
                path,
                Problem::ArgumentDomain {
                    arg: name.to_owned(),
                    requirement,
                    value,
                },
            )),
            None => Ok(()),
        }
    }

    fn check_support(
        &self,
        path: &str,
        dist: &'static str,
        support: Support,
        value: &Value,
        args: &[(&'static str, String, Value)],
        n: usize,
    ) -> Result<(), ModelError> {
        let values = self.values(value);
        let param = |k: usize, i: usize| -> Option<f64> {
            let arg = &args.get(k)?.2;
            if !arg.is_constant() {
                return None;
            }
            let vals = self.values(arg);
            Some(vals[i.min(vals.len() - 1)])
        };
        for i in 0..n {
            let x = values[i.min(values.len() - 1)];
            let ok = match support {
                Support::Real => true,
                Support::NonNegative => x >= 0.0,
                Support::Positive => x > 0.0,
                Support::Unit => x > 0.0 && x < 1.0,
                Support::Bounded => {
                    param(0, i).is_none_or(|lower| x >= lower)
                        && param(1, i).is_none_or(|upper| x <= upper)
                }
                Support::Binary => x == 0.0 || x == 1.0,
                Support::Count => x >= 0.0 && x.fract() == 0.0,
                Support::UpToTrials => {
                    x >= 0.0 && x.fract() == 0.0 && param(0, i).is_none_or(|trials| x <= trials)
                }
            };
            if !ok {
                return Err(ModelError::new(
                    path,
                    Problem::Support {
                        dist,
                        index: i,
                        value: x,
                        support: support.describe(),
                    },
                ));
            }
        }
        Ok(())
    }

    fn count_node(&mut self, path: &str) -> Result<(), ModelError> {
        self.expr_nodes += 1;
        if self.expr_nodes > self.limits.max_expr_nodes {
            return Err(ModelError::new(
                path,
                Problem::Limit {
                    what: "the number of expression nodes",
                    value: self.expr_nodes,
                    limit: self.limits.max_expr_nodes,
                },
            ));
        }
        Ok(())
    }

    fn expr(&mut self, expr: &Expr, path: &str) -> Result<Value, ModelError> {
        self.count_node(path)?;
        match expr {
            Expr::Const(c) => {
                if !c.is_finite() {
                    return Err(ModelError::new(
                        path,
                        Problem::NonFinite {
                            index: 0,
                            value: *c,
                        },
                    ));
                }
                Ok(Value {
                    operand: Operand::Const(*c),
                    shape: Shape::Scalar,
                    integer: c.fract() == 0.0,
                })
            }
            Expr::Ref(name) => self.reference(name, path),
            Expr::Unary(op, arg) => {
                let arg_path = format!("{path}.{}", op.name());
                let arg = self.expr(arg, &arg_path)?;
                self.unary(*op, arg, &arg_path)
            }
            Expr::Binary(op, lhs, rhs) => {
                let lhs_path = format!("{path}.{}[0]", op.name());
                let rhs_path = format!("{path}.{}[1]", op.name());
                let lhs_value = self.expr(lhs, &lhs_path)?;
                let rhs_value = self.expr(rhs, &rhs_path)?;
                self.binary(*op, (lhs_value, &lhs_path), (rhs_value, &rhs_path), rhs)
            }
            Expr::Concat(parts) => {
                let mut values = Vec::with_capacity(parts.len());
                for (k, part) in parts.iter().enumerate() {
                    let part_path = format!("{path}.concat[{k}]");
                    values.push((self.expr(part, &part_path)?, part_path));
                }
                self.concat(&values, path)
            }
            Expr::Elem(arg, k) => {
                let arg_path = format!("{path}.elem[0]");
                let value = self.expr(arg, &arg_path)?;
                let n = self.vector_len(&value, "elem", &arg_path)?;
                if *k as usize >= n {
                    return Err(shape_error(
                        &format!("{path}.elem[1]"),
                        format!(
                            "element {k} is out of range for a vector of length {n} (positions are 0-based)"
                        ),
                    ));
                }
                self.take(value, *k as usize, 1, Shape::Scalar, path)
            }
            Expr::Slice(arg, start, len) => {
                let arg_path = format!("{path}.slice[0]");
                let value = self.expr(arg, &arg_path)?;
                let n = self.vector_len(&value, "slice", &arg_path)?;
                let (start, len) = (*start as usize, *len as usize);
                if len == 0 || start + len > n {
                    return Err(shape_error(
                        &format!("{path}.slice[1]"),
                        format!(
                            "slice {start}..{} (start {start}, length {len}) is not a non-empty range inside a vector of length {n}",
                            start + len
                        ),
                    ));
                }
                if start == 0 && len == n {
                    return Ok(value);
                }
                self.take(value, start, len, Shape::Vector(len), path)
            }
        }
    }

    /// The length of a vector operand of `op`, or an error naming what it is instead.
    fn vector_len(&self, value: &Value, op: &str, path: &str) -> Result<usize, ModelError> {
        match value.shape {
            Shape::Vector(n) => Ok(n),
            other => Err(shape_error(
                path,
                format!("`{op}` reads from a vector, found {}", other.describe()),
            )),
        }
    }

    /// `value[start..start + len]` as a `Gather` over a new run of the index buffer.
    fn take(
        &mut self,
        value: Value,
        start: usize,
        len: usize,
        shape: Shape,
        path: &str,
    ) -> Result<Value, ModelError> {
        let index_len = self.program.index.len();
        let idx = IndexRef {
            offset: index_len as u32,
            len: len as u32,
        };
        self.program
            .index
            .extend((start..start + len).map(|i| i as u32));
        let a = value.operand;
        let result = self.emit(
            path,
            shape,
            value.integer,
            value.is_constant(),
            Box::new(move |dst| Inst::Gather { a, idx, dst }),
        );
        if value.is_constant() {
            // Folded: the run is not referenced.
            self.program.index.truncate(index_len);
        }
        result
    }

    /// Scalars and vectors joined into one vector.
    fn concat(&mut self, parts: &[(Value, String)], path: &str) -> Result<Value, ModelError> {
        if parts.is_empty() {
            return Err(shape_error(path, "`concat` needs at least one part".into()));
        }
        let mut total = 0usize;
        for (value, part_path) in parts {
            match value.shape {
                Shape::Scalar => total += 1,
                Shape::Vector(n) => total += n,
                Shape::Matrix(..) => {
                    return Err(shape_error(
                        part_path,
                        "`concat` joins scalars and vectors, found a matrix".into(),
                    ));
                }
            }
        }
        let constant = parts.iter().all(|(value, _)| value.is_constant());
        let integer = parts.iter().all(|(value, _)| value.integer);
        let lists_len = self.program.lists.len();
        let list = ListRef {
            offset: lists_len as u32,
            len: parts.len() as u32,
        };
        self.program
            .lists
            .extend(parts.iter().map(|(value, _)| value.operand));
        let result = self.emit(
            path,
            Shape::Vector(total),
            integer,
            constant,
            Box::new(move |dst| Inst::Concat { parts: list, dst }),
        );
        if constant {
            self.program.lists.truncate(lists_len);
        }
        result
    }

    fn reference(&mut self, name: &str, path: &str) -> Result<Value, ModelError> {
        match self.symbols.get(name) {
            Some(Symbol::Value(value)) => Ok(*value),
            Some(Symbol::Data(Some(value))) => Ok(*value),
            Some(Symbol::Data(None)) => {
                let value = self.lower_data(name, path)?;
                self.symbols
                    .insert(name.to_owned(), Symbol::Data(Some(value)));
                Ok(value)
            }
            Some(Symbol::Pending) => Err(ModelError::new(
                path,
                Problem::UsedBeforeDefinition {
                    name: name.to_owned(),
                },
            )),
            None => {
                let hint = self
                    .symbols
                    .keys()
                    .filter(|known| similar(known, name))
                    .min()
                    .map(|known| format!(" (did you mean `{known}`?)"))
                    .unwrap_or_default();
                Err(ModelError::new(
                    path,
                    Problem::Unknown {
                        name: name.to_owned(),
                        hint,
                    },
                ))
            }
        }
    }

    fn lower_data(&mut self, name: &str, path: &str) -> Result<Value, ModelError> {
        let data = &self.model.data[name];
        let (values, shape, integer): (Vec<f64>, Shape, bool) = match data {
            DataValue::Real(v) => (vec![*v], Shape::Scalar, v.fract() == 0.0),
            DataValue::Int(v) => (vec![*v as f64], Shape::Scalar, true),
            DataValue::Vector(v) => (v.clone(), Shape::Vector(v.len()), false),
            DataValue::IntVector(v) => (
                v.iter().map(|&i| i as f64).collect(),
                Shape::Vector(v.len()),
                true,
            ),
            DataValue::Matrix(rows) => (
                rows.iter().flatten().copied().collect(),
                Shape::Matrix(rows.len(), rows[0].len()),
                false,
            ),
        };
        let data_ref = self.push_data(path, &values)?;
        Ok(Value {
            operand: if shape == Shape::Scalar {
                Operand::Const(values[0])
            } else {
                Operand::Data(data_ref)
            },
            shape,
            integer,
        })
    }

    fn unary(&mut self, op: UnaryOp, arg: Value, path: &str) -> Result<Value, ModelError> {
        if let Shape::Matrix(..) = arg.shape {
            return Err(shape_error(
                path,
                format!("`{}` needs a scalar or vector, found a matrix", op.name()),
            ));
        }
        let (shape, make): (Shape, Box<dyn Fn(SlotId) -> Inst>) = match op {
            UnaryOp::LogSumExp => (
                Shape::Scalar,
                Box::new(move |dst| Inst::LogSumExp {
                    a: arg.operand,
                    dst,
                }),
            ),
            UnaryOp::Sum => (
                Shape::Scalar,
                Box::new(move |dst| Inst::Sum {
                    a: arg.operand,
                    dst,
                }),
            ),
            UnaryOp::Cumsum => (
                arg.shape,
                Box::new(move |dst| Inst::Cumsum {
                    a: arg.operand,
                    dst,
                }),
            ),
            _ => {
                let map_op = match op {
                    UnaryOp::Neg => MapOp::Neg,
                    UnaryOp::Exp => MapOp::Exp,
                    UnaryOp::Log => MapOp::Log,
                    UnaryOp::Log1p => MapOp::Log1p,
                    UnaryOp::Expm1 => MapOp::Expm1,
                    UnaryOp::Softplus => MapOp::Softplus,
                    UnaryOp::Logistic => MapOp::Logistic,
                    UnaryOp::Sqrt => MapOp::Sqrt,
                    UnaryOp::Abs => MapOp::Abs,
                    UnaryOp::Lgamma => MapOp::Lgamma,
                    UnaryOp::LogPhi => MapOp::LogPhi,
                    UnaryOp::LogStep => MapOp::LogStep,
                    UnaryOp::Sum | UnaryOp::Cumsum | UnaryOp::LogSumExp => {
                        unreachable!("handled above")
                    }
                };
                (
                    arg.shape,
                    Box::new(move |dst| Inst::Map {
                        op: map_op,
                        a: arg.operand,
                        dst,
                    }),
                )
            }
        };
        let integer = arg.integer
            && matches!(
                op,
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sum | UnaryOp::Cumsum
            );
        self.emit(path, shape, integer, arg.is_constant(), make)
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        (lhs, lhs_path): (Value, &str),
        (rhs, rhs_path): (Value, &str),
        rhs_expr: &Expr,
    ) -> Result<Value, ModelError> {
        let constant = lhs.is_constant() && rhs.is_constant();
        match op {
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Pow
            | BinaryOp::Max
            | BinaryOp::Min => {
                let shape = match (lhs.shape, rhs.shape) {
                    (Shape::Matrix(..), _) => {
                        return Err(shape_error(
                            lhs_path,
                            "elementwise operations take scalars and vectors, found a matrix"
                                .into(),
                        ));
                    }
                    (_, Shape::Matrix(..)) => {
                        return Err(shape_error(
                            rhs_path,
                            "elementwise operations take scalars and vectors, found a matrix"
                                .into(),
                        ));
                    }
                    (Shape::Scalar, other) | (other, Shape::Scalar) => other,
                    (Shape::Vector(a), Shape::Vector(b)) if a == b => Shape::Vector(a),
                    (Shape::Vector(a), Shape::Vector(b)) => {
                        return Err(shape_error(
                            rhs_path,
                            format!(
                                "`{}` of vectors of different lengths ({a} and {b})",
                                op.name()
                            ),
                        ));
                    }
                };
                let zip_op = match op {
                    BinaryOp::Add => ZipOp::Add,
                    BinaryOp::Sub => ZipOp::Sub,
                    BinaryOp::Mul => ZipOp::Mul,
                    BinaryOp::Div => ZipOp::Div,
                    BinaryOp::Max => ZipOp::Max,
                    BinaryOp::Min => ZipOp::Min,
                    _ => ZipOp::Pow,
                };
                let integer = lhs.integer
                    && rhs.integer
                    && matches!(
                        op,
                        BinaryOp::Add
                            | BinaryOp::Sub
                            | BinaryOp::Mul
                            | BinaryOp::Max
                            | BinaryOp::Min
                    );
                let (a, b) = (lhs.operand, rhs.operand);
                self.emit(
                    rhs_path,
                    shape,
                    integer,
                    constant,
                    Box::new(move |dst| Inst::Zip {
                        op: zip_op,
                        a,
                        b,
                        dst,
                    }),
                )
            }
            BinaryOp::Dot => {
                match (lhs.shape, rhs.shape) {
                    (Shape::Vector(a), Shape::Vector(b)) if a == b => {}
                    (l, r) => {
                        return Err(shape_error(
                            rhs_path,
                            format!(
                                "`dot` takes two vectors of equal length, found {} and {}",
                                l.describe(),
                                r.describe()
                            ),
                        ));
                    }
                }
                let (a, b) = (lhs.operand, rhs.operand);
                self.emit(
                    rhs_path,
                    Shape::Scalar,
                    false,
                    constant,
                    Box::new(move |dst| Inst::Dot { a, b, dst }),
                )
            }
            BinaryOp::Matvec => {
                let (Shape::Matrix(rows, cols), Operand::Data(data)) = (lhs.shape, lhs.operand)
                else {
                    return Err(shape_error(
                        lhs_path,
                        format!(
                            "`matvec` needs a data matrix first, found {}",
                            lhs.shape.describe()
                        ),
                    ));
                };
                if rhs.shape != Shape::Vector(cols) {
                    return Err(shape_error(
                        rhs_path,
                        format!(
                            "`matvec` of a {rows}x{cols} matrix needs a vector of length {cols}, found {}",
                            rhs.shape.describe()
                        ),
                    ));
                }
                let m = MatrixRef {
                    offset: data.offset,
                    rows: rows as u32,
                    cols: cols as u32,
                };
                let v = rhs.operand;
                self.emit(
                    rhs_path,
                    Shape::Vector(rows),
                    false,
                    constant,
                    Box::new(move |dst| Inst::Matvec { m, v, dst }),
                )
            }
            BinaryOp::Gather => {
                let Shape::Vector(source_len) = lhs.shape else {
                    return Err(shape_error(
                        lhs_path,
                        format!(
                            "`gather` reads from a vector, found {}",
                            lhs.shape.describe()
                        ),
                    ));
                };
                let idx = self.index_run(rhs, rhs_path, rhs_expr, source_len)?;
                let a = lhs.operand;
                self.emit(
                    rhs_path,
                    Shape::Vector(idx.len as usize),
                    lhs.integer,
                    lhs.is_constant(),
                    Box::new(move |dst| Inst::Gather { a, idx, dst }),
                )
            }
        }
    }

    /// The index-buffer run for a gather index: integer data, each in `0..source_len`.
    fn index_run(
        &mut self,
        index: Value,
        path: &str,
        expr: &Expr,
        source_len: usize,
    ) -> Result<IndexRef, ModelError> {
        if !(index.integer && index.is_constant() && matches!(index.shape, Shape::Vector(_))) {
            return Err(shape_error(
                path,
                "a `gather` index must be an integer data vector".into(),
            ));
        }
        let values = self.values(&index).to_vec();
        if let Some((i, &bad)) = values
            .iter()
            .enumerate()
            .find(|(_, v)| !(**v >= 0.0 && (**v as usize) < source_len))
        {
            return Err(ModelError::new(
                path,
                Problem::Invalid(format!(
                    "index {} at position {i} is out of range for a vector of length {source_len} (indices are 0-based)",
                    Num(bad)
                )),
            ));
        }
        let cache_key = match expr {
            Expr::Ref(name) => Some(name.clone()),
            _ => None,
        };
        if let Some(run) = cache_key
            .as_ref()
            .and_then(|name| self.index_cache.get(name))
        {
            return Ok(*run);
        }
        let run = IndexRef {
            offset: self.program.index.len() as u32,
            len: values.len() as u32,
        };
        self.program.index.extend(values.iter().map(|&v| v as u32));
        if let Some(name) = cache_key {
            self.index_cache.insert(name, run);
        }
        Ok(run)
    }

    /// Emits an instruction writing a new slot, or evaluates it now when its inputs are constant.
    fn emit(
        &mut self,
        path: &str,
        shape: Shape,
        integer: bool,
        constant: bool,
        make: Box<dyn Fn(SlotId) -> Inst + '_>,
    ) -> Result<Value, ModelError> {
        let len = shape.len();
        if !constant {
            let key = computation_key(&self.program, &make(SlotId(u32::MAX)));
            let dst = match key.as_ref().and_then(|key| self.computed.get(key)) {
                Some(&dst) if self.program.slot(dst).len as usize == len => dst,
                _ => {
                    let dst = self.alloc(path, len)?;
                    self.program.insts.push(make(dst));
                    if let Some(key) = key {
                        self.computed.insert(key, dst);
                    }
                    dst
                }
            };
            return Ok(Value {
                operand: Operand::Slot(dst),
                shape,
                integer: false,
            });
        }
        // Fold: run the instruction once on a scratch slot at tape offset 0. Its inputs are data
        // and constants, which live outside the tape.
        let scratch = SlotId(self.program.slots.len() as u32);
        self.program.slots.push(Slot {
            offset: 0,
            len: len as u32,
        });
        let mut tape = vec![0.0; len];
        value_forward(&self.program, &make(scratch), &mut tape);
        self.program.slots.pop();
        if let Some((index, &value)) = tape.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(ModelError::new(
                path,
                Problem::Invalid(format!(
                    "this constant expression evaluates to {} at position {index}",
                    Num(value)
                )),
            ));
        }
        let operand = if shape == Shape::Scalar {
            Operand::Const(tape[0])
        } else {
            Operand::Data(self.push_data(path, &tape)?)
        };
        Ok(Value {
            operand,
            shape,
            integer: integer && tape.iter().all(|v| v.fract() == 0.0),
        })
    }
}

/// What a value instruction computes, as a key equal for two instructions that compute the
/// same values from the same operands; `None` for instructions not worth the lookup.
fn computation_key(program: &Program, inst: &Inst) -> Option<Vec<u64>> {
    /// Runs of indices or operands longer than this are not compared.
    const MAX_RUN: u32 = 64;
    fn operand(key: &mut Vec<u64>, operand: Operand) {
        match operand {
            Operand::Slot(id) => key.extend([0, u64::from(id.0)]),
            Operand::Data(data) => key.extend([1, u64::from(data.offset), u64::from(data.len)]),
            Operand::Const(value) => key.extend([2, value.to_bits()]),
        }
    }
    let mut key = Vec::with_capacity(8);
    match *inst {
        Inst::Map { op, a, .. } => {
            key.extend([1, op as u64]);
            operand(&mut key, a);
        }
        Inst::Zip { op, a, b, .. } => {
            key.extend([2, op as u64]);
            operand(&mut key, a);
            operand(&mut key, b);
        }
        Inst::Sum { a, .. } => {
            key.push(3);
            operand(&mut key, a);
        }
        Inst::Cumsum { a, .. } => {
            key.push(4);
            operand(&mut key, a);
        }
        Inst::Dot { a, b, .. } => {
            key.push(5);
            operand(&mut key, a);
            operand(&mut key, b);
        }
        Inst::LogSumExp { a, .. } => {
            key.push(6);
            operand(&mut key, a);
        }
        Inst::Gather { a, idx, .. } if idx.len <= MAX_RUN => {
            key.push(7);
            operand(&mut key, a);
            let run = &program.index[idx.offset as usize..(idx.offset + idx.len) as usize];
            key.extend(run.iter().map(|&i| u64::from(i)));
        }
        Inst::Concat { parts, .. } if parts.len <= MAX_RUN => {
            key.push(8);
            for &part in program.list(parts) {
                operand(&mut key, part);
            }
        }
        _ => return None,
    }
    Some(key)
}

/// Whether two names are one edit apart (for "did you mean" hints).
fn similar(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    a.len().max(b.len()) - prefix - suffix <= 1
}
