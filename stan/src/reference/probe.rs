//! Probes: tiny Stan programs run through the front end (parse, data, lowering to the IR and
//! one log density evaluation, or the host interpreter), whose outcomes fill the reference.

use std::collections::BTreeMap;

use sampler::{CheckedModel, Limits, LogDensity};

/// What a probe found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It ran: parsed, lowered and evaluated to a finite log density and gradient, or ran on
    /// the host.
    Works,
    /// Refused with the code's own "... not supported ..." message: a gap, reported as such.
    NotYet(String),
    /// Failed in any other way: the probe or the code is wrong (the tests fail on it).
    Broken(String),
}

impl Outcome {
    pub fn works(&self) -> bool {
        matches!(self, Outcome::Works)
    }

    fn failed(message: String) -> Outcome {
        if message.contains("not supported") {
            Outcome::NotYet(message)
        } else {
            Outcome::Broken(message)
        }
    }
}

/// Where a probe program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// Lowered to the IR (what the CPU and GPU back ends run) and evaluated once.
    Lowered,
    /// `transformed data` on the host.
    Host,
    /// `generated quantities` on the host, for one draw of `real mu` = 0.3.
    Generated,
}

/// A program with its data (Stan's JSON), and where it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub runner: Runner,
    pub source: String,
    pub data: String,
}

impl Probe {
    pub fn new(runner: Runner, source: impl Into<String>, data: impl Into<String>) -> Probe {
        Probe {
            runner,
            source: source.into(),
            data: data.into(),
        }
    }

    pub fn run(&self) -> Outcome {
        match self.try_run() {
            Ok(()) => Outcome::Works,
            Err(message) => Outcome::failed(message),
        }
    }

    fn try_run(&self) -> Result<(), String> {
        let program = crate::parse(&self.source).map_err(|e| format!("parse error: {e}"))?;
        let data = crate::read_data(&program, &self.data).map_err(|e| e.to_string())?;
        match self.runner {
            Runner::Lowered => {
                let model = crate::lower(&program, &data, "probe").map_err(|e| e.message)?;
                let model = CheckedModel::new(model, &Limits::default())
                    .map_err(|e| format!("the IR refuses the lowered model: {e}"))?;
                let theta = vec![0.1; model.dim()];
                let mut grad = vec![0.0; theta.len()];
                let lp = model.evaluator().logp_grad(&theta, &mut grad);
                if !lp.is_finite() || !grad.iter().all(|g| g.is_finite()) {
                    return Err(format!("log density {lp}, gradient {grad:?}"));
                }
            }
            Runner::Host => {
                crate::transformed_data(&program, &data).map_err(|e| e.message)?;
            }
            Runner::Generated => {
                let gq = crate::GeneratedQuantities::new(&program, &data).map_err(|e| e.message)?;
                let inputs = BTreeMap::from([("mu".to_owned(), vec![0.3])]);
                gq.run_draw(&inputs, 1, 0, 0).map_err(|e| e.message)?;
            }
        }
        Ok(())
    }
}

/// An argument of a function or distribution in a probe: its Stan type, value and domain.
/// `int` arguments are data in every probe; the others are parameters in the probes of use
/// with parameters (matrices also as data, in a second probe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    Real,
    Positive,
    /// In (0, 1).
    Unit,
    Negative,
    /// Above 1.
    AboveOne,
    /// 2.
    Int,
    /// 1, an outcome of `bernoulli`.
    Binary,
    Vector,
    PositiveVector,
    Simplex,
    /// Two ascending values (cut points).
    Ordered,
    RowVector,
    /// `array[3] real`.
    Reals,
    /// `array[3] int` in 1..3.
    Categories,
    Matrix,
    /// Symmetric positive definite.
    Cov,
    /// A lower-triangular Cholesky factor.
    CholeskyCov,
    /// A correlation matrix.
    Corr,
    /// The Cholesky factor of a correlation matrix.
    CholeskyCorr,
    /// A literal written into the call, such as a size.
    Lit(&'static str),
}

impl Arg {
    /// How a signature shows it.
    pub fn type_name(self) -> &'static str {
        match self {
            Arg::Real | Arg::Positive | Arg::Unit | Arg::Negative | Arg::AboveOne => "real",
            Arg::Int | Arg::Binary => "int",
            Arg::Vector | Arg::PositiveVector | Arg::Simplex | Arg::Ordered => "vector",
            Arg::RowVector => "row_vector",
            Arg::Reals => "array[] real",
            Arg::Categories => "array[] int",
            Arg::Matrix | Arg::Cov | Arg::CholeskyCov | Arg::Corr | Arg::CholeskyCorr => "matrix",
            Arg::Lit(text) => text,
        }
    }

    /// The declaration of a data variable holding it, and its JSON.
    fn data(self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            Arg::Real => ("real", "0.7"),
            Arg::Positive => ("real", "1.3"),
            Arg::Unit => ("real", "0.3"),
            Arg::Negative => ("real", "-0.7"),
            Arg::AboveOne => ("real", "1.6"),
            Arg::Int => ("int", "2"),
            Arg::Binary => ("int", "1"),
            Arg::Vector => ("vector[3]", "[0.2, -0.5, 1.1]"),
            Arg::PositiveVector => ("vector[3]", "[0.5, 1.5, 2.0]"),
            Arg::Simplex => ("vector[3]", "[0.2, 0.3, 0.5]"),
            Arg::Ordered => ("vector[2]", "[-0.5, 0.8]"),
            Arg::RowVector => ("row_vector[3]", "[0.4, -0.3, 0.9]"),
            Arg::Reals => ("array[3] real", "[0.1, 0.4, 0.9]"),
            Arg::Categories => ("array[3] int", "[1, 3, 2]"),
            Arg::Matrix => (
                "matrix[3, 3]",
                "[[1.0, 0.5, -0.3], [0.2, -0.8, 1.5], [0.7, 0.1, 0.4]]",
            ),
            Arg::Cov => (
                "matrix[3, 3]",
                "[[2.0, 0.5, 0.1], [0.5, 1.5, 0.2], [0.1, 0.2, 1.0]]",
            ),
            Arg::CholeskyCov => (
                "matrix[3, 3]",
                "[[1.2, 0.0, 0.0], [0.3, 0.9, 0.0], [-0.2, 0.4, 1.1]]",
            ),
            Arg::Corr => (
                "matrix[3, 3]",
                "[[1.0, 0.3, -0.2], [0.3, 1.0, 0.4], [-0.2, 0.4, 1.0]]",
            ),
            Arg::CholeskyCorr => (
                "matrix[3, 3]",
                "[[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8]]",
            ),
            Arg::Lit(_) => return None,
        })
    }

    /// The vector of the same domain, for probes of elementwise functions on vectors.
    pub fn vector(self) -> Option<Arg> {
        match self {
            Arg::Real => Some(Arg::Vector),
            Arg::Positive => Some(Arg::PositiveVector),
            Arg::Unit => Some(Arg::Simplex),
            _ => None,
        }
    }

    fn is_matrix(self) -> bool {
        matches!(
            self,
            Arg::Matrix | Arg::Cov | Arg::CholeskyCov | Arg::Corr | Arg::CholeskyCorr
        )
    }

    /// The declaration of a parameter holding it; `None` for data-only arguments.
    fn parameter(self) -> Option<&'static str> {
        Some(match self {
            Arg::Real => "real",
            Arg::Positive => "real<lower=0>",
            Arg::Unit => "real<lower=0, upper=1>",
            Arg::Negative => "real<upper=0>",
            Arg::AboveOne => "real<lower=1>",
            Arg::Vector => "vector[3]",
            Arg::PositiveVector => "vector<lower=0>[3]",
            Arg::Simplex => "simplex[3]",
            Arg::Ordered => "ordered[2]",
            Arg::RowVector => "row_vector[3]",
            Arg::Reals => "array[3] real",
            Arg::Matrix => "matrix[3, 3]",
            Arg::Cov => "cov_matrix[3]",
            Arg::CholeskyCov => "cholesky_factor_cov[3]",
            Arg::Corr => "corr_matrix[3]",
            Arg::CholeskyCorr => "cholesky_factor_corr[3]",
            Arg::Int | Arg::Binary | Arg::Categories | Arg::Lit(_) => return None,
        })
    }
}

/// Which arguments of a probe are parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parameters {
    /// None: every argument is data (host probes).
    None,
    /// Every argument that can be one.
    All,
    /// Every argument that can be one, except matrices.
    NotMatrices,
}

impl Parameters {
    fn allows(self, arg: Arg) -> bool {
        match self {
            Parameters::None => false,
            Parameters::All => true,
            Parameters::NotMatrices => !arg.is_matrix(),
        }
    }
}

/// Whether some argument is a matrix (so that a probe with data matrices says more).
pub fn has_matrix(args: &[Arg]) -> bool {
    args.iter().any(|a| a.is_matrix())
}

/// Names and declarations of the arguments of a probe: parameters `p0, p1, ...` where
/// `parameters` allows and the argument can be one, data `d0, d1, ...` otherwise.
struct Operands {
    names: Vec<String>,
    data_decls: String,
    data_json: Vec<String>,
    parameter_decls: String,
    n_parameters: usize,
}

fn operands(args: &[Arg], parameters: Parameters) -> Operands {
    let mut out = Operands {
        names: Vec::new(),
        data_decls: String::new(),
        data_json: Vec::new(),
        parameter_decls: String::new(),
        n_parameters: 0,
    };
    for (i, &arg) in args.iter().enumerate() {
        if let Arg::Lit(text) = arg {
            out.names.push(text.to_owned());
            continue;
        }
        match arg.parameter().filter(|_| parameters.allows(arg)) {
            Some(decl) => {
                out.names.push(format!("p{i}"));
                out.parameter_decls.push_str(&format!("  {decl} p{i};\n"));
                out.n_parameters += 1;
            }
            None => {
                let (decl, json) = arg.data().expect("not a literal");
                out.names.push(format!("d{i}"));
                out.data_decls.push_str(&format!("  {decl} d{i};\n"));
                out.data_json.push(format!("\"d{i}\": {json}"));
            }
        }
    }
    out
}

/// A probe of `expr(names)` used in the model with `parameters` (`target += ...`), or on the
/// host over data (`real probe = ...` in `transformed data`, when `parameters` is `None`),
/// inside `sum(...)` when `sum` (for values that are not scalars); `None` for the model when
/// no argument is a parameter.
pub fn call_probe(
    parameters: Parameters,
    args: &[Arg],
    sum: bool,
    expr: impl Fn(&[String]) -> String,
) -> Option<Probe> {
    let lowered = parameters != Parameters::None;
    let ops = operands(args, parameters);
    if lowered && ops.n_parameters == 0 {
        return None;
    }
    let call = expr(&ops.names);
    let call = if sum { format!("sum({call})") } else { call };
    let data = format!("{{{}}}", ops.data_json.join(", "));
    let source = if lowered {
        format!(
            "data {{\n{}}}\nparameters {{\n{}}}\nmodel {{\n  target += {call};\n}}\n",
            ops.data_decls, ops.parameter_decls
        )
    } else {
        format!(
            "data {{\n{}}}\ntransformed data {{\n  real probe = {call};\n}}\n",
            ops.data_decls
        )
    };
    let runner = if lowered {
        Runner::Lowered
    } else {
        Runner::Host
    };
    Some(Probe::new(runner, source, data))
}

/// A probe of the statement `y ~ family(args);` with `parameters`.
pub fn tilde_probe(family: &str, outcome: Arg, args: &[Arg], parameters: Parameters) -> Probe {
    let all: Vec<Arg> = std::iter::once(outcome)
        .chain(args.iter().copied())
        .collect();
    let ops = operands(&all, parameters);
    let source = format!(
        "data {{\n{}}}\nparameters {{\n{}  real zz;\n}}\nmodel {{\n  zz ~ normal(0, 1);\n  {} ~ {family}({});\n}}\n",
        ops.data_decls,
        ops.parameter_decls,
        ops.names[0],
        ops.names[1..].join(", ")
    );
    Probe::new(
        Runner::Lowered,
        source,
        format!("{{{}}}", ops.data_json.join(", ")),
    )
}
