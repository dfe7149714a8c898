//! Log-density parity with real Stan: each fixture in `tests/parity/` holds a Stan program, its
//! data and, at 5 unconstrained points, Stan's log density (with the Jacobian), its gradient
//! and the constrained values, written by `bench/stan_parity/make_fixtures.py` (the Stan version
//! is in each fixture). The front end's model must agree at every point.
//!
//! Stan's `log_prob` drops the constant terms of `~` statements and our IR keeps or drops
//! constants its own way, so log densities are compared as differences from the first point.
//!
//! `tests/parity/SUPPORTED` names the fixtures that must match today. Every other fixture must
//! still fail to lower with a "not supported" error (or be refused by the IR check with "not
//! lowered yet"): a program that starts to lower makes this
//! test fail until its name is added to `SUPPORTED`, so nothing passes unchecked.
//! `tests/parity/KNOWN_BUGS` names fixtures that fail in another way today (a wrong error, a
//! wrong value); they must keep failing until fixed, then leave that list.
//!
//! Unconstrained order: ours is the parameters in declaration order, each flattened row-major
//! with array indices slowest. Stan's is the same except that a `matrix` is column-major, so the
//! test transposes Stan's `matrix` blocks. The constrained types (`cholesky_factor_corr`, ...)
//! use Stan's own unconstrained layout, which the IR must follow as it is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sampler::{CheckedModel, Limits, LogDensity};
use serde_json::Value as Json;
use stan::ast::{BaseType, BinaryOp, BlockKind, ExprKind, Program, SizedType, StmtKind};

/// Relative tolerance on log-density differences, scaled by the log densities' magnitude.
const LP_RELATIVE: f64 = 1e-8;
/// Gradient tolerance: absolute plus relative to Stan's value.
const GRAD_ABSOLUTE: f64 = 1e-8;
const GRAD_RELATIVE: f64 = 1e-6;
/// Constrained values: absolute plus relative.
const VALUE_ABSOLUTE: f64 = 1e-10;
const VALUE_RELATIVE: f64 = 1e-8;

fn parity_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parity")
}

struct Point {
    theta: Vec<f64>,
    lp: f64,
    grad: Vec<f64>,
    constrained: Vec<f64>,
}

struct Fixture {
    name: String,
    program_file: String,
    source: String,
    data: Json,
    unconstrained_dim: usize,
    constrained_names: Vec<String>,
    points: Vec<Point>,
}

fn numbers(value: &Json, what: &str) -> Vec<f64> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("{what} is not a list"))
        .iter()
        .map(|x| {
            x.as_f64()
                .unwrap_or_else(|| panic!("{what}: {x} is not a number"))
        })
        .collect()
}

fn read_fixture(path: &Path) -> Fixture {
    let text = std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{path:?}: {err}"));
    let json: Json = serde_json::from_str(&text).unwrap_or_else(|err| panic!("{path:?}: {err}"));
    let string = |key: &str| -> String {
        json[key]
            .as_str()
            .unwrap_or_else(|| panic!("{path:?}: no string `{key}`"))
            .to_owned()
    };
    let program_file = string("program_file");
    let source = std::fs::read_to_string(parity_dir().join(&program_file))
        .unwrap_or_else(|err| panic!("{program_file}: {err}"));
    assert_eq!(
        source,
        string("program"),
        "{program_file} changed since its fixture was made: rerun make_fixtures.py"
    );
    let points = json["points"]
        .as_array()
        .unwrap_or_else(|| panic!("{path:?}: no points"))
        .iter()
        .map(|point| Point {
            theta: numbers(&point["theta"], "theta"),
            lp: point["lp"].as_f64().expect("lp is a number"),
            grad: numbers(&point["grad"], "grad"),
            constrained: numbers(&point["constrained"], "constrained"),
        })
        .collect();
    Fixture {
        name: string("name"),
        program_file,
        source,
        data: json["data"].clone(),
        unconstrained_dim: json["unconstrained_dim"].as_u64().expect("dim") as usize,
        constrained_names: json["constrained_names"]
            .as_array()
            .expect("constrained_names")
            .iter()
            .map(|name| name.as_str().expect("a name").to_owned())
            .collect(),
        points,
    }
}

fn fixtures() -> Vec<Fixture> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(parity_dir())
        .expect("tests/parity exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths.iter().map(|path| read_fixture(path)).collect()
}

/// The names in a manifest (`SUPPORTED`, `KNOWN_BUGS`): one a line, `#` comments.
fn manifest(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(parity_dir().join(file))
        .unwrap_or_else(|err| panic!("tests/parity/{file}: {err}"));
    text.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parses, reads the data, lowers and checks the IR; `Err` carries the rendered error.
fn lower(fixture: &Fixture) -> Result<CheckedModel, String> {
    let file = &fixture.program_file;
    let source = &fixture.source;
    let program = stan::parse(source).map_err(|err| err.render(file, source))?;
    let data = stan::read_data(&program, &fixture.data.to_string())
        .map_err(|err| format!("{file}: data: {err}"))?;
    let model =
        stan::lower(&program, &data, &fixture.name).map_err(|err| err.render(file, source))?;
    CheckedModel::new(model, &Limits::default())
        .map_err(|err| format!("{file}: the IR refuses the lowered model: {err}"))
}

/// Whether an error says that a construct is not supported yet (by the front end, or by the
/// IR's lowering to the tape), as opposed to a wrong program or a bug.
fn is_unsupported(err: &str) -> bool {
    err.contains("not supported") || err.contains("not lowered yet")
}

/// A size in a declaration: integer literals, data integers and `+ - *` of them.
fn size(expr: &stan::ast::Expr, data: &Json) -> usize {
    fn eval(expr: &stan::ast::Expr, data: &Json) -> i64 {
        match &expr.kind {
            ExprKind::Int(value) => *value,
            ExprKind::Var(ident) => data[&ident.name]
                .as_i64()
                .unwrap_or_else(|| panic!("size `{}` is not an integer datum", ident.name)),
            ExprKind::Paren(inner) => eval(inner, data),
            ExprKind::Binary { op, lhs, rhs } => {
                let (a, b) = (eval(lhs, data), eval(rhs, data));
                match op {
                    BinaryOp::Add => a + b,
                    BinaryOp::Sub => a - b,
                    BinaryOp::Mul => a * b,
                    other => panic!("size with operator {other:?}"),
                }
            }
            other => panic!("size expression {other:?}"),
        }
    }
    usize::try_from(eval(expr, data)).expect("a non-negative size")
}

/// Stan's unconstrained length of one element of `ty` (without array dimensions), and for a
/// `matrix` its rows and columns (Stan stores those column-major).
fn element_layout(ty: &SizedType, data: &Json) -> (usize, Option<(usize, usize)>) {
    let sizes: Vec<usize> = ty.sizes.iter().map(|e| size(e, data)).collect();
    match ty.base {
        BaseType::Int => panic!("an `int` parameter"),
        BaseType::Real => (1, None),
        BaseType::Vector
        | BaseType::RowVector
        | BaseType::Ordered
        | BaseType::PositiveOrdered
        | BaseType::UnitVector => (sizes[0], None),
        BaseType::Simplex => (sizes[0] - 1, None),
        BaseType::Matrix => (sizes[0] * sizes[1], Some((sizes[0], sizes[1]))),
        BaseType::CholeskyFactorCorr | BaseType::CorrMatrix => {
            (sizes[0] * (sizes[0] - 1) / 2, None)
        }
        BaseType::CovMatrix => (sizes[0] * (sizes[0] + 1) / 2, None),
        BaseType::CholeskyFactorCov => {
            let (rows, cols) = (sizes[0], *sizes.get(1).unwrap_or(&sizes[0]));
            (cols * (cols + 1) / 2 + (rows - cols) * cols, None)
        }
    }
}

/// `order[j]` is the position in Stan's unconstrained vector of our coordinate `j`.
fn stan_order(program: &Program, data: &Json) -> Vec<usize> {
    let mut order = Vec::new();
    let Some(block) = &program.parameters else {
        return order;
    };
    assert_eq!(block.kind, BlockKind::Parameters);
    for stmt in &block.stmts {
        let StmtKind::Decl { ty, vars } = &stmt.kind else {
            panic!("a statement in `parameters`");
        };
        let (element_len, matrix) = element_layout(ty, data);
        let n_elements: usize = ty.array_dims.iter().map(|e| size(e, data)).product();
        for _ in vars {
            for _ in 0..n_elements {
                let start = order.len();
                match matrix {
                    // Our row-major (i, j) is Stan's column-major j * rows + i.
                    Some((rows, cols)) => {
                        for i in 0..rows {
                            for j in 0..cols {
                                order.push(start + j * rows + i);
                            }
                        }
                    }
                    None => order.extend(start..start + element_len),
                }
            }
        }
    }
    order
}

/// `M.2.1` (Stan's output name) as our column's `M[2,1]`.
fn column_name(stan_name: &str) -> String {
    let mut parts = stan_name.split('.');
    let base = parts.next().unwrap_or_default();
    let indices: Vec<&str> = parts.collect();
    if indices.is_empty() {
        base.to_owned()
    } else {
        format!("{base}[{}]", indices.join(","))
    }
}

fn close(ours: f64, expected: f64, absolute: f64, relative: f64) -> bool {
    (ours - expected).abs() <= absolute + relative * expected.abs()
}

/// Compares a lowered model with Stan at every point; returns the disagreements.
fn compare(fixture: &Fixture, checked: CheckedModel) -> Vec<String> {
    let name = &fixture.name;
    let program = stan::parse(&fixture.source).expect("parsed before");
    let order = stan_order(&program, &fixture.data);
    if order.len() != fixture.unconstrained_dim {
        return vec![format!(
            "{name}: the test's layout has {} coordinates, Stan's {}",
            order.len(),
            fixture.unconstrained_dim
        )];
    }
    if checked.dim() != fixture.unconstrained_dim {
        return vec![format!(
            "{name}: {} unconstrained coordinates, Stan has {}",
            checked.dim(),
            fixture.unconstrained_dim
        )];
    }
    let columns: Vec<String> = checked.columns().iter().map(|c| c.to_string()).collect();
    let stan_columns: BTreeMap<String, usize> = fixture
        .constrained_names
        .iter()
        .enumerate()
        .map(|(k, stan_name)| (column_name(stan_name), k))
        .collect();
    let mut failures = Vec::new();
    // The front end's hidden shared values must not be output columns: ours must equal Stan's.
    let ours_sorted: std::collections::BTreeSet<&String> = columns.iter().collect();
    let stan_sorted: std::collections::BTreeSet<&String> = stan_columns.keys().collect();
    if ours_sorted != stan_sorted {
        failures.push(format!(
            "{name}: output columns {ours_sorted:?}, Stan's {stan_sorted:?}"
        ));
    }
    let mut evaluator = checked.evaluator();
    let ours_at = |evaluator: &mut sampler::Evaluator, point: &Point| {
        let theta: Vec<f64> = order.iter().map(|&k| point.theta[k]).collect();
        let mut grad = vec![0.0; theta.len()];
        let lp = evaluator.logp_grad(&theta, &mut grad);
        (theta, lp, grad)
    };
    let (_, lp0, _) = ours_at(&mut evaluator, &fixture.points[0]);
    let stan_lp0 = fixture.points[0].lp;
    for (i, point) in fixture.points.iter().enumerate() {
        let (theta, lp, grad) = ours_at(&mut evaluator, point);
        let at = format!("{name}: point {i} (Stan's theta {:?})", point.theta);
        if !lp.is_finite() {
            failures.push(format!(
                "{at}: our log density is {lp}, Stan's {}",
                point.lp
            ));
            continue;
        }
        let ours_diff = lp - lp0;
        let stan_diff = point.lp - stan_lp0;
        let scale = 1.0_f64
            .max(lp.abs())
            .max(lp0.abs())
            .max(point.lp.abs())
            .max(stan_lp0.abs());
        if (ours_diff - stan_diff).abs() > LP_RELATIVE * scale {
            failures.push(format!(
                "{at}: lp - lp(point 0) is {ours_diff:.12e}, Stan's {stan_diff:.12e} \
                 (ours {lp}, {lp0}; Stan's {}, {stan_lp0})",
                point.lp
            ));
        }
        for (j, &k) in order.iter().enumerate() {
            if !close(grad[j], point.grad[k], GRAD_ABSOLUTE, GRAD_RELATIVE) {
                failures.push(format!(
                    "{at}: gradient coordinate {j} (Stan's {k}) is {:.12e}, Stan's {:.12e}",
                    grad[j], point.grad[k]
                ));
            }
        }
        let mut outputs = vec![0.0; evaluator.n_outputs()];
        evaluator.write_outputs(&theta, &mut outputs);
        for (column, value) in columns.iter().zip(&outputs) {
            let Some(&k) = stan_columns.get(column) else {
                continue;
            };
            let expected = point.constrained[k];
            if !close(*value, expected, VALUE_ABSOLUTE, VALUE_RELATIVE) {
                failures.push(format!(
                    "{at}: {column} is {value:.12e}, Stan's {expected:.12e}"
                ));
            }
        }
    }
    failures
}

/// What one fixture gives against its manifest entry: `Ok(None)` matches Stan, `Ok(Some(why))`
/// is refused as not supported yet, `Err` is a failure to report.
fn check(fixture: &Fixture, must_pass: bool) -> Result<Option<String>, Vec<String>> {
    let name = &fixture.name;
    match (lower(fixture), must_pass) {
        (Ok(model), true) => {
            let failures = compare(fixture, model);
            if failures.is_empty() {
                Ok(None)
            } else {
                Err(failures)
            }
        }
        (Err(err), true) => Err(vec![format!("{name}: does not lower:\n{err}")]),
        (Ok(_), false) => Err(vec![format!(
            "{name}: now lowers; add it to tests/parity/SUPPORTED so that it is checked"
        )]),
        (Err(err), false) if is_unsupported(&err) => Ok(Some(err)),
        (Err(err), false) => Err(vec![format!(
            "{name}: expected \"not supported\", got:\n{err}"
        )]),
    }
}

#[test]
fn parity_supported_fixtures_match_stan_and_others_are_refused() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 25, "only {} fixtures", fixtures.len());
    let supported = manifest("SUPPORTED");
    let known_bugs = manifest("KNOWN_BUGS");
    let names: Vec<&str> = fixtures.iter().map(|f| f.name.as_str()).collect();
    for listed in supported.iter().chain(&known_bugs) {
        assert!(
            names.contains(&listed.as_str()),
            "a manifest names `{listed}`, which has no fixture"
        );
        assert!(
            !(supported.contains(listed) && known_bugs.contains(listed)),
            "`{listed}` is both in SUPPORTED and in KNOWN_BUGS"
        );
    }
    let mut failures = Vec::new();
    for fixture in &fixtures {
        assert_eq!(fixture.points.len(), 5, "{}: points", fixture.name);
        let known_bug = known_bugs.contains(&fixture.name);
        let outcome = check(fixture, known_bug || supported.contains(&fixture.name));
        // The status table, seen with `--nocapture`.
        let status = match &outcome {
            Ok(None) => "matches Stan".to_owned(),
            Ok(Some(why)) => format!("unsupported: {}", why.lines().next().unwrap_or("")),
            Err(found) => format!("FAILS: {}", found[0].lines().next().unwrap_or("")),
        };
        println!("{:<32} {status}", fixture.name);
        if known_bug {
            // A known bug must still show, so that its fix moves the name out of KNOWN_BUGS.
            if outcome.is_ok() {
                failures.push(format!(
                    "{}: listed in KNOWN_BUGS but no longer fails; remove it there",
                    fixture.name
                ));
            }
        } else if let Err(found) = outcome {
            failures.extend(found);
        }
    }
    assert!(
        failures.is_empty(),
        "{} disagreement(s) with Stan:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn parity_column_names_follow_stan() {
    assert_eq!(column_name("sigma"), "sigma");
    assert_eq!(column_name("theta.3"), "theta[3]");
    assert_eq!(column_name("M.2.1"), "M[2,1]");
}

#[test]
fn parity_matrix_blocks_are_transposed() {
    let program = stan::parse(
        "data { int K; } parameters { real a; matrix[2, K] M; array[2] vector[K - 1] z; }",
    )
    .unwrap();
    let data: Json = serde_json::json!({"K": 3});
    // a; M row-major (0,0) (0,1) (0,2) (1,0) ... = Stan's 1 + {0, 2, 4, 1, 3, 5}; z as is.
    assert_eq!(
        stan_order(&program, &data),
        [0, 1, 3, 5, 2, 4, 6, 7, 8, 9, 10]
    );
}
