//! The language features the reference lists (blocks, declared types, constraints,
//! statements and expressions), each with probe programs for the places it can appear.

use super::probe::{Probe, Runner};
use crate::ast::BaseType;

/// One row of a feature table: what it is, and a probe per column (`None`: does not apply).
#[derive(Debug, Clone)]
pub struct Feature {
    pub name: String,
    pub probes: Vec<Option<Probe>>,
}

/// A table of features with its column titles.
#[derive(Debug, Clone)]
pub struct Table {
    pub title: &'static str,
    /// The title of the first column.
    pub label: &'static str,
    pub intro: &'static str,
    pub columns: Vec<&'static str>,
    pub rows: Vec<Feature>,
}

/// Data and parameters that statement probes use: `N` = 3, `y`, a parameter `mu` and a
/// parameter vector `v`.
const DATA_DECLS: &str = "data {\n  int N;\n  vector[3] y;\n}\n";
const DATA_JSON: &str = r#"{"N": 3, "y": [0.5, -1.0, 2.0]}"#;

/// `body` in the model block, with parameters `mu` and `v`.
fn in_model(body: &str) -> Option<Probe> {
    Some(Probe::new(
        Runner::Lowered,
        format!(
            "{DATA_DECLS}parameters {{\n  real mu;\n  vector[3] v;\n}}\nmodel {{\n  mu ~ normal(0, 1);\n  v ~ normal(0, 1);\n{body}\n}}\n"
        ),
        DATA_JSON,
    ))
}

/// `body` in transformed data, where `mu` and `v` are data.
fn on_host(body: &str) -> Option<Probe> {
    Some(Probe::new(
        Runner::Host,
        format!(
            "{DATA_DECLS}transformed data {{\n  real mu = 0.4;\n  vector[3] v = [0.1, 0.2, 0.3]';\n{body}\n}}\n"
        ),
        DATA_JSON,
    ))
}

fn row(name: &str, probes: Vec<Option<Probe>>) -> Feature {
    Feature {
        name: name.to_owned(),
        probes,
    }
}

pub fn blocks() -> Table {
    let program = |name: &str, source: &str, runner: Runner| {
        row(name, vec![Some(Probe::new(runner, source, DATA_JSON))])
    };
    let rows = vec![
        program(
            "`functions`",
            "functions {\n  real twice(real x) {\n    return 2 * x;\n  }\n}\nparameters {\n  real mu;\n}\nmodel {\n  mu ~ normal(twice(1.0), 1);\n}\n",
            Runner::Lowered,
        ),
        program(
            "`data`: read from Stan's JSON data format, sizes checked",
            &format!(
                "{DATA_DECLS}parameters {{\n  real mu;\n}}\nmodel {{\n  y ~ normal(mu, 1);\n}}\n"
            ),
            Runner::Lowered,
        ),
        program(
            "`transformed data`: run once on the host before lowering",
            &format!(
                "{DATA_DECLS}transformed data {{\n  vector[3] z = (y - mean(y)) / sd(y);\n}}\nparameters {{\n  real mu;\n}}\nmodel {{\n  z ~ normal(mu, 1);\n}}\n"
            ),
            Runner::Lowered,
        ),
        program(
            "`parameters`: IR parameters, sampled on the unconstrained scale",
            "parameters {\n  real mu;\n}\nmodel {\n  mu ~ normal(0, 1);\n}\n",
            Runner::Lowered,
        ),
        program(
            "`transformed parameters`: executed at load time into IR values, reported as columns",
            "parameters {\n  real mu;\n}\ntransformed parameters {\n  real twice = 2 * mu;\n}\nmodel {\n  twice ~ normal(0, 1);\n}\n",
            Runner::Lowered,
        ),
        program(
            "`model`: executed at load time with the data known; `~` and `target +=` become IR terms",
            "parameters {\n  real mu;\n}\nmodel {\n  target += -0.5 * square(mu);\n}\n",
            Runner::Lowered,
        ),
        program(
            "`generated quantities`: run on the host once per kept draw, with `_rng`",
            "parameters {\n  real mu;\n}\nmodel {\n  mu ~ normal(0, 1);\n}\ngenerated quantities {\n  real y_rep = normal_rng(mu, 1);\n}\n",
            Runner::Generated,
        ),
    ];
    Table {
        title: "Blocks",
        label: "block",
        intro: "Each row (and each cell below) is checked by a probe program in \
                `stan/src/reference/`.",
        columns: vec!["supported"],
        rows,
    }
}

/// Every base type, so that a new one cannot be left out of the reference.
const BASE_TYPES: [BaseType; 13] = [
    BaseType::Int,
    BaseType::Real,
    BaseType::Vector,
    BaseType::RowVector,
    BaseType::Matrix,
    BaseType::Ordered,
    BaseType::PositiveOrdered,
    BaseType::Simplex,
    BaseType::UnitVector,
    BaseType::CholeskyFactorCorr,
    BaseType::CholeskyFactorCov,
    BaseType::CorrMatrix,
    BaseType::CovMatrix,
];

/// A declaration of `base` and a JSON value for it; the match fails to compile when a base
/// type is added, until it is listed in [`BASE_TYPES`] and here.
fn sized(base: BaseType) -> (&'static str, &'static str) {
    match base {
        BaseType::Int => ("int", "2"),
        BaseType::Real => ("real", "0.5"),
        BaseType::Vector => ("vector[3]", "[0.5, -1, 2]"),
        BaseType::RowVector => ("row_vector[3]", "[0.5, -1, 2]"),
        BaseType::Matrix => ("matrix[2, 2]", "[[1, 0.5], [0.2, 2]]"),
        BaseType::Ordered => ("ordered[3]", "[-1, 0.5, 2]"),
        BaseType::PositiveOrdered => ("positive_ordered[3]", "[0.5, 1, 2]"),
        BaseType::Simplex => ("simplex[3]", "[0.2, 0.3, 0.5]"),
        BaseType::UnitVector => ("unit_vector[2]", "[0.6, 0.8]"),
        BaseType::CholeskyFactorCorr => ("cholesky_factor_corr[2]", "[[1, 0], [0.6, 0.8]]"),
        BaseType::CholeskyFactorCov => ("cholesky_factor_cov[2]", "[[1.5, 0], [0.3, 0.8]]"),
        BaseType::CorrMatrix => ("corr_matrix[2]", "[[1, 0.3], [0.3, 1]]"),
        BaseType::CovMatrix => ("cov_matrix[2]", "[[2, 0.3], [0.3, 1]]"),
    }
}

/// `decl x;` as data (with `json`) and as a parameter (`None` for `int`).
fn declared(decl: &str, json: &str, parameter: bool) -> Vec<Option<Probe>> {
    let model = "model {\n  zz ~ normal(0, 1);\n}\n";
    let data = Probe::new(
        Runner::Lowered,
        format!("data {{\n  {decl} x;\n}}\nparameters {{\n  real zz;\n}}\n{model}"),
        format!("{{\"x\": {json}}}"),
    );
    let param = Probe::new(
        Runner::Lowered,
        format!("parameters {{\n  {decl} x;\n  real zz;\n}}\n{model}"),
        "{}",
    );
    vec![Some(data), parameter.then_some(param)]
}

pub fn types() -> Table {
    let mut rows: Vec<Feature> = BASE_TYPES
        .iter()
        .map(|&base| {
            let (decl, json) = sized(base);
            row(
                &format!("`{decl}`"),
                declared(decl, json, base != BaseType::Int),
            )
        })
        .collect();
    rows.push(row(
        "`array[2] real`",
        declared("array[2] real", "[0.5, 1]", true),
    ));
    rows.push(row(
        "`array[2] vector[3]`",
        declared("array[2] vector[3]", "[[0.5, -1, 2], [1, 2, 3]]", true),
    ));
    rows.push(row(
        "`array[2] simplex[3]`",
        declared(
            "array[2] simplex[3]",
            "[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]",
            true,
        ),
    ));
    rows.push(row(
        "`array[2, 2] int`",
        declared("array[2, 2] int", "[[1, 2], [3, 4]]", false),
    ));
    Table {
        title: "Declared types",
        label: "type",
        intro: "As `data` (read from JSON) and as `parameters` (Stan's constraining transforms \
                and log-Jacobians in the IR). Locals of every type work in every block; `int` \
                parameters do not exist in Stan.",
        columns: vec!["data", "parameters"],
        rows,
    }
}

pub fn constraints() -> Table {
    let rows = vec![
        row("`<lower=a>`", declared("real<lower=0>", "0.5", true)),
        row("`<upper=b>`", declared("real<upper=1>", "0.5", true)),
        row(
            "`<lower=a, upper=b>`",
            declared("real<lower=0, upper=1>", "0.5", true),
        ),
        row(
            "`<offset=m, multiplier=s>`",
            declared("real<offset=1, multiplier=3>", "0.5", true),
        ),
        row(
            "bounds on a vector: `vector<lower=0>[3]`",
            declared("vector<lower=0>[3]", "[0.5, 1, 2]", true),
        ),
        row(
            "a vector of bounds: `vector<lower=lb>[2]`",
            vec![
                None,
                Some(Probe::new(
                    Runner::Lowered,
                    "data {\n  vector[2] lb;\n}\nparameters {\n  vector<lower=lb>[2] x;\n}\nmodel {\n  x ~ normal(0, 1);\n}\n",
                    r#"{"lb": [-1, 0.5]}"#,
                )),
            ],
        ),
        row(
            "a bound on an earlier parameter: `real<upper=a> b`",
            vec![
                None,
                Some(Probe::new(
                    Runner::Lowered,
                    "parameters {\n  real<lower=0> a;\n  real<upper=a> b;\n}\nmodel {\n  a ~ normal(0, 1);\n  b ~ normal(0, 1);\n}\n",
                    "{}",
                )),
            ],
        ),
    ];
    Table {
        title: "Constraints",
        label: "constraint",
        intro: "Bounds of data are checked when the data are read; bounds of parameters are \
                Stan's transforms.",
        columns: vec!["data", "parameters"],
        rows,
    }
}

pub fn statements() -> Table {
    let both = |name: &str, body: &str, host: &str| row(name, vec![in_model(body), on_host(host)]);
    let model_only = |name: &str, body: &str| row(name, vec![in_model(body), None]);
    let rows = vec![
        both(
            "local declaration with initial value",
            "  vector[3] w = v * 2;\n  target += -dot_self(w);",
            "  vector[3] w = v * 2;",
        ),
        both(
            "`=` assignment",
            "  real a;\n  a = mu * 2;\n  target += -square(a);",
            "  real a;\n  a = mu * 2;",
        ),
        both(
            "`+=`, `-=`, `*=`, `/=`",
            "  real a = mu;\n  a += 1;\n  a -= 0.5;\n  a *= 2;\n  a /= 3;\n  target += -square(a);",
            "  real a = mu;\n  a += 1;\n  a -= 0.5;\n  a *= 2;\n  a /= 3;",
        ),
        both(
            "`.*=`, `./=`",
            "  vector[3] w = v;\n  w .*= y;\n  w ./= y;\n  target += -dot_self(w);",
            "  vector[3] w = v;\n  w .*= y;\n  w ./= y;",
        ),
        both(
            "indexed and sliced assignment `w[i] = ...`, `w[2:3] = ...`",
            "  vector[3] w = v;\n  w[1] = mu;\n  w[2:3] = v[1:2];\n  target += -dot_self(w);",
            "  vector[3] w = v;\n  w[1] = mu;\n  w[2:3] = v[1:2];",
        ),
        both(
            "`for (i in a:b)` (bounds known before sampling)",
            "  for (i in 1:N) target += -square(v[i]);",
            "  real s = 0;\n  for (i in 1:N) s += v[i];",
        ),
        both(
            "`for (x in container)`",
            "  for (x in y) target += -square(x - mu);",
            "  real s = 0;\n  for (x in y) s += x;",
        ),
        both(
            "`while` (condition known before sampling)",
            "  int i = 0;\n  while (i < N) {\n    i += 1;\n    target += -square(mu);\n  }",
            "  int i = 0;\n  while (i < N) i += 1;",
        ),
        both(
            "`if` / `else` on data",
            "  if (N > 2) target += -square(mu);\n  else target += -mu;",
            "  real a;\n  if (N > 2) a = 1;\n  else a = 2;",
        ),
        both(
            "`break`, `continue`",
            "  for (i in 1:N) {\n    if (i == 2) continue;\n    if (i == 3) break;\n    target += -square(v[i]);\n  }",
            "  real s = 0;\n  for (i in 1:N) {\n    if (i == 2) continue;\n    if (i == 3) break;\n    s += v[i];\n  }",
        ),
        both(
            "nested block `{ ... }`",
            "  {\n    real a = mu;\n    target += -square(a);\n  }",
            "  {\n    real a = mu;\n  }",
        ),
        both(
            "`print(...)` (accepted; in `model` it prints nothing)",
            "  print(\"mu = \", mu);",
            "  print(\"mu = \", mu);",
        ),
        both(
            "`reject(...)`, `fatal_error(...)` (in a branch not taken)",
            "  if (N < 0) reject(\"N is \", N);\n  if (N < 0) fatal_error(\"N is \", N);",
            "  if (N < 0) reject(\"N is \", N);\n  if (N < 0) fatal_error(\"N is \", N);",
        ),
        model_only("`y ~ dist(...)`", "  y ~ normal(mu, 1);"),
        model_only("`target += ...`", "  target += normal_lpdf(y | mu, 1);"),
        model_only(
            "`~` with truncation `T[a, b]`, `T[a, ]`, `T[, b]`: normal, lognormal, logistic, \
             weibull, exponential, uniform, and poisson and binomial with known bounds",
            "  mu ~ normal(0, 1) T[-5, 5];\n  v[1] ~ logistic(mu, 1) T[, 5];",
        ),
        model_only(
            "truncation of any other family with arguments and bounds known before sampling \
             (`sigma ~ cauchy(0, 2.5) T[0, ]`)",
            "  mu ~ student_t(3, 0, 1) T[-5, 5];\n  v[1] ~ gamma(2, 0.5) T[0, ];\n  \
             v[2] ~ cauchy(0, 2.5) T[, 5];",
        ),
        model_only(
            "truncation of `cauchy`, `student_t` or `gamma` with parameter arguments or bounds",
            "  y[1] ~ cauchy(mu, 1) T[-5, 5];",
        ),
        model_only(
            "`if` on a value that depends on parameters",
            "  if (mu > 0) target += -mu;",
        ),
        model_only(
            "`target()` in `model` and `transformed parameters`: the sum so far with the \
             parameters' log-Jacobians (not \
             for `simplex`, `unit_vector` and matrix types), and with the normalising \
             constants that Stan's `~` drops (so Stan's value up to a constant)",
            "  target += -0.01 * square(target());",
        ),
        both(
            "arithmetic `+ - * / ^ %/% %`, elementwise `.* ./ .^`, transpose `'`",
            "  target += -dot_self(v .* y ./ 2) - mu ^ 2 + v' * y - (N %/% 2) - (N % 2);",
            "  real a = sum(v .* y ./ 2) + mu ^ 2 + v' * y + N %/% 2 + N % 2;",
        ),
        both(
            "comparisons, `&&`, `\\|\\|`, `!`, and `c ? a : b`",
            "  target += (N > 1 && !(N == 2) || N <= 0) ? -square(mu) : -mu;",
            "  real a = (N > 1 && !(N == 2) || N <= 0) ? mu : -mu;",
        ),
        both(
            "indexing: `x[i]`, `x[i:j]`, `x[:j]`, `x[i:]`, `x[idxs]`",
            "  array[2] int idx = {3, 1};\n  target += -v[1] - sum(v[2:3]) - sum(v[:2]) - sum(v[2:]) - sum(v[idx]);",
            "  array[2] int idx = {3, 1};\n  real a = v[1] + sum(v[2:3]) + sum(v[:2]) + sum(v[2:]) + sum(v[idx]);",
        ),
        both(
            "literals: `{a, b}` arrays, `[a, b]` row vectors",
            "  array[2] real a = {mu, 1.0};\n  row_vector[2] r = [mu, 2];\n  target += -square(a[1]) - sum(r);",
            "  array[2] real a = {mu, 1.0};\n  row_vector[2] r = [mu, 2];",
        ),
    ];
    Table {
        title: "Statements and expressions",
        label: "statement or expression",
        intro: "In `model` and `transformed parameters` a program is executed at load time with \
                the data known: loops unroll, conditions on data are decided, and what depends \
                on parameters becomes IR. `transformed data` and `generated quantities` run on \
                the host interpreter.",
        columns: vec![
            "`model`, `transformed parameters`",
            "`transformed data`, `generated quantities`",
        ],
        rows,
    }
}
