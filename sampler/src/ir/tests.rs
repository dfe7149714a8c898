//! The IR's wire formats: JSON and rmp-serde round trips, the compact expression form, decode
//! errors, bounded nesting, and a pinned JSON rendering.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::expr_serde::MAX_EXPR_DEPTH;
use super::*;
use crate::builder::ModelBuilder;
use crate::rng::{ChainId, ChainRng, Seed};

/// Large enough for every test model; the size limit itself is tested in `validate`.
const MAX_BYTES: usize = 1 << 30;

/// Both encodings give back the same model, bit for bit (msgpack keeps `-0.0` and every f64
/// exactly, so comparing its bytes also catches values that `PartialEq` calls equal).
fn check_round_trip(what: &str, model: &Model) {
    // Floats that print and parse back to a different f64 show as a changed model; serde_json
    // parses them exactly only with its `float_roundtrip` feature.
    let json = model.to_json();
    let from_json = Model::from_json(&json)
        .unwrap_or_else(|err| panic!("{what}: own JSON does not decode: {err}\n{json}"));
    assert!(
        from_json.to_msgpack() == model.to_msgpack(),
        "{what}: the JSON round trip changed the model (is serde_json's `float_roundtrip` feature on?): {}",
        first_difference(&from_json, model)
    );
    assert_eq!(&from_json, model, "{what}: JSON round trip");
    assert_eq!(from_json.to_json(), json, "{what}: JSON text is not stable");

    let bytes = model.to_msgpack();
    let from_msgpack = Model::from_msgpack(&bytes, MAX_BYTES)
        .unwrap_or_else(|err| panic!("{what}: own msgpack does not decode: {err}"));
    assert_eq!(&from_msgpack, model, "{what}: msgpack round trip");
    assert_eq!(
        from_msgpack.to_msgpack(),
        bytes,
        "{what}: msgpack bytes are not stable"
    );
}

/// The first place where the Debug renderings of two models differ, with some context.
fn first_difference(a: &Model, b: &Model) -> String {
    let (a, b) = (format!("{a:?}"), format!("{b:?}"));
    // Equal up to `at`, so `at` is a character boundary of both.
    let at = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((at, _), _)| at);
    let start = a[..at].rfind(' ').unwrap_or(0);
    let excerpt = |s: &str| s[start..].chars().take(60).collect::<String>();
    format!("got `{}`, expected `{}`", excerpt(&a), excerpt(&b))
}

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models")
}

#[test]
fn benchmark_model_files_round_trip() {
    let mut n_files = 0;
    for entry in std::fs::read_dir(models_dir()).expect("models/ is readable") {
        let path = entry.expect("models/ entry").path();
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("model file is readable");
        let model =
            Model::from_json(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        check_round_trip(&path.display().to_string(), &model);
        n_files += 1;
    }
    assert!(n_files >= 8, "found only {n_files} model files");
}

/// Floats that printing and parsing get wrong most easily.
const AWKWARD_FLOATS: [f64; 12] = [
    0.1,
    -0.0,
    1.0 / 3.0,
    0.30000000000000004,
    1e-300,
    5e-324,
    f64::MIN_POSITIVE,
    f64::MAX,
    -f64::MAX,
    2.5e17,
    123456789.12345679,
    9007199254740993.0,
];

/// A model that uses every operation, distribution, constraint and data kind, with awkward
/// floats and a name that needs escaping. It need not be valid: only its encoding matters here.
fn all_features_model() -> Model {
    let mut rng = ChainRng::new(Seed(7), ChainId(0));
    let mut wide_floats: Vec<f64> = AWKWARD_FLOATS.to_vec();
    // Random mantissas over a wide range of exponents.
    wide_floats.extend((0..300).map(|i: i32| {
        let exponent = (i % 61) * 10 - 300;
        rng.normal() * 10f64.powi(exponent)
    }));

    let mut m = ModelBuilder::new("all \"features\" ✓ \\ \n");
    let x = m.data_matrix(
        "x",
        vec![vec![1.0, -2.5], vec![0.1, 1e-300], vec![3.0, 4.0]],
    );
    let wide = m.data_vector("wide", wide_floats);
    let outcomes = m.data_int_vector("outcomes", vec![0, 1, 1]);
    let extreme_ints = m.data_int_vector("extreme_ints", vec![i64::MIN, -1, 0, i64::MAX]);
    let group = m.data_int_vector("group", vec![0, 1, 1]);
    let trials = m.data_int("trials", 10);
    let scale = m.data_real("scale", 2.5);

    let mu = m.param("mu");
    let tau = m.param_constrained("tau", Constraint::Positive);
    let p = m.param_constrained("p", Constraint::UnitInterval);
    let lo = m.param_constrained("lo", Constraint::Lower(-1.5));
    let hi = m.param_constrained("hi", Constraint::Upper(0.1));
    let mid = m.param_constrained(
        "mid",
        Constraint::Interval {
            lower: -0.0,
            upper: 1e-300,
        },
    );
    let beta = m.vector_param("beta", 2);
    let walk = m.vector_param("walk", 3);
    // IR v2: vector constraints, expression bounds, affine transforms, dims.
    let ordered = m.param_with("ordered", Some(3), Constraint::Ordered);
    m.param_with("positive_ordered", Some(2), Constraint::PositiveOrdered);
    let simplex = m.param_with("simplex", Some(3), Constraint::Simplex);
    m.param_with("direction", Some(2), Constraint::UnitVector);
    for (name, constraint, dims) in [
        ("l_corr", Constraint::CholeskyFactorCorr, [2, 2]),
        ("l_cov", Constraint::CholeskyFactorCov, [3, 2]),
        ("corr", Constraint::CorrMatrix, [2, 2]),
        ("cov", Constraint::CovMatrix, [2, 2]),
    ] {
        m.param_decl(Parameter {
            name: name.into(),
            size: Some(dims[0] * dims[1]),
            constraint,
            dims: dims.to_vec(),
            ..Parameter::default()
        });
    }
    m.param_bounded("below_tau", Some(2), Some(-&tau), Some(tau.exp()));
    m.param_decl(Parameter {
        name: "affine".into(),
        size: Some(4),
        offset: Some(mu.clone()),
        multiplier: Some(&tau * 2.0),
        dims: vec![2, 2],
        ..Parameter::default()
    });
    m.transformed_with_dims(
        "joined",
        Expr::concat([ordered.slice(1, 2), simplex.elem(0), Expr::Const(1.5)]),
        vec![2, 2],
    );
    m.transformed(
        "reduced",
        ordered.log_sum_exp() + tau.lgamma() + mu.max(0.0) - mu.min(&tau)
            + mu.log_phi()
            + tau.log_step(),
    );

    let eta = m.transformed("eta", x.matvec(&beta) + &mu);
    let theta = m.transformed("theta", beta.gather(&group));
    let smooth = m.transformed(
        "smooth",
        (-&mu).exp() * tau.ln() - lo.ln_1p() / hi.exp_m1() + mid.softplus().logistic(),
    );
    let norms = m.transformed("norms", theta.sqrt().abs().cumsum().sum());
    m.transformed("power", eta.pow(2.0).dot(&eta) + Expr::Const(-0.0));

    m.sample(&mu, Dist::normal(0.0, &scale));
    m.sample(&tau, Dist::half_normal(0.1));
    m.sample(&tau, Dist::exponential(1e-300));
    m.sample(&mu, Dist::student_t(3.0, &smooth, 1.0 / 3.0));
    m.sample(&mu, Dist::cauchy(0.0, 2.0));
    m.sample(&tau, Dist::half_cauchy(5.0));
    m.sample(&tau, Dist::log_normal(0.0, 1.0));
    m.sample(&tau, Dist::gamma(2.0, 0.5));
    m.sample(&tau, Dist::inverse_gamma(3.0, 1.0));
    m.sample(&p, Dist::beta(1.0, 1.0));
    m.sample(&mid, Dist::uniform(-0.0, 1e-300));
    m.sample(&mu, Dist::laplace(&norms, 1.0));
    m.sample(&outcomes, Dist::bernoulli_logit(&eta));
    m.sample(&outcomes, Dist::binomial_logit(&trials, &theta));
    m.sample(&extreme_ints, Dist::poisson_log(&mu));
    m.sample(&walk, Dist::gaussian_random_walk(&tau));
    m.sample(
        &walk,
        Dist::GaussianRandomWalk {
            sigma: tau.clone(),
            drift: Some(Expr::Const(0.1)),
            init_mu: Some(mu.clone()),
            init_sigma: Some(Expr::Const(10.0)),
        },
    );
    m.sample(
        &walk,
        Dist::GaussianRandomWalk {
            sigma: tau.clone(),
            drift: None,
            init_mu: Some(Expr::Const(-1.0)),
            init_sigma: None,
        },
    );
    m.factor(wide.sum() * -&mu);
    m.build()
}

fn collect_ops(
    expr: &Expr,
    unary: &mut BTreeSet<&'static str>,
    binary: &mut BTreeSet<&'static str>,
) {
    match expr {
        Expr::Const(_) | Expr::Ref(_) => {}
        Expr::Unary(op, arg) => {
            unary.insert(op.name());
            collect_ops(arg, unary, binary);
        }
        Expr::Binary(op, lhs, rhs) => {
            binary.insert(op.name());
            collect_ops(lhs, unary, binary);
            collect_ops(rhs, unary, binary);
        }
        Expr::Concat(parts) => {
            unary.insert("concat");
            parts
                .iter()
                .for_each(|part| collect_ops(part, unary, binary));
        }
        Expr::Elem(arg, _) => {
            unary.insert("elem");
            collect_ops(arg, unary, binary);
        }
        Expr::Slice(arg, _, _) => {
            unary.insert("slice");
            collect_ops(arg, unary, binary);
        }
    }
}

fn constraint_kind(constraint: &Constraint) -> &'static str {
    match constraint {
        Constraint::Real => "real",
        Constraint::Positive => "positive",
        Constraint::UnitInterval => "unit_interval",
        Constraint::Lower(_) => "lower",
        Constraint::Upper(_) => "upper",
        Constraint::Interval { .. } => "interval",
        Constraint::Ordered => "ordered",
        Constraint::PositiveOrdered => "positive_ordered",
        Constraint::Simplex => "simplex",
        Constraint::UnitVector => "unit_vector",
        Constraint::CholeskyFactorCorr => "cholesky_factor_corr",
        Constraint::CholeskyFactorCov => "cholesky_factor_cov",
        Constraint::CorrMatrix => "corr_matrix",
        Constraint::CovMatrix => "cov_matrix",
    }
}

fn data_kind(value: &DataValue) -> &'static str {
    match value {
        DataValue::Real(_) => "real",
        DataValue::Int(_) => "int",
        DataValue::Vector(_) => "vector",
        DataValue::IntVector(_) => "int_vector",
        DataValue::Matrix(_) => "matrix",
    }
}

/// Guards the round-trip test below: when the IR grows a variant, this fails until
/// `all_features_model` uses it.
#[test]
fn all_features_model_uses_every_variant() {
    let model = all_features_model();
    let (mut unary, mut binary) = (BTreeSet::new(), BTreeSet::new());
    let mut dists = BTreeSet::new();
    let mut random_walk_args = BTreeSet::new();
    let mut has_factor = false;
    for transformed in &model.transformed {
        collect_ops(&transformed.value, &mut unary, &mut binary);
    }
    for statement in &model.model {
        match statement {
            Statement::Sample { value, dist } => {
                collect_ops(value, &mut unary, &mut binary);
                dists.insert(dist.name());
                for (_, arg) in dist.args() {
                    collect_ops(arg, &mut unary, &mut binary);
                }
                if let Dist::GaussianRandomWalk { .. } = dist {
                    random_walk_args.insert(dist.args().len());
                }
            }
            Statement::Factor { value } => {
                has_factor = true;
                collect_ops(value, &mut unary, &mut binary);
            }
        }
    }
    let all_unary: BTreeSet<_> = UnaryOp::ALL
        .iter()
        .map(|op| op.name())
        .chain(["concat", "elem", "slice"])
        .collect();
    let all_binary: BTreeSet<_> = BinaryOp::ALL.iter().map(|op| op.name()).collect();
    assert_eq!(unary, all_unary);
    assert_eq!(binary, all_binary);
    assert_eq!(
        dists.into_iter().collect::<Vec<_>>(),
        [
            "bernoulli_logit",
            "beta",
            "binomial_logit",
            "cauchy",
            "exponential",
            "gamma",
            "gaussian_random_walk",
            "half_cauchy",
            "half_normal",
            "inverse_gamma",
            "laplace",
            "log_normal",
            "normal",
            "poisson_log",
            "student_t",
            "uniform",
        ]
    );
    // Without its optional arguments, with all of them, and with some.
    assert_eq!(random_walk_args, BTreeSet::from([1, 2, 4]));
    assert!(has_factor);
    let constraints: BTreeSet<_> = model
        .parameters
        .iter()
        .map(|param| constraint_kind(&param.constraint))
        .collect();
    assert_eq!(constraints.len(), 14, "{constraints:?}");
    let params = &model.parameters;
    assert!(
        params
            .iter()
            .any(|p| p.lower.is_some() && p.upper.is_some())
    );
    assert!(
        params
            .iter()
            .any(|p| p.offset.is_some() && p.multiplier.is_some())
    );
    assert!(params.iter().any(|p| !p.dims.is_empty()));
    assert!(model.transformed.iter().any(|t| !t.dims.is_empty()));
    let data_kinds: BTreeSet<_> = model.data.values().map(data_kind).collect();
    assert_eq!(data_kinds.len(), 5, "{data_kinds:?}");
    assert!(model.parameters.iter().any(|param| param.size.is_some()));
}

#[test]
fn all_features_model_round_trips() {
    check_round_trip("all_features", &all_features_model());
}

/// Every awkward float, alone as a constant and as data, survives JSON bit for bit.
#[test]
fn awkward_floats_round_trip_bit_for_bit() {
    for value in AWKWARD_FLOATS {
        let mut m = ModelBuilder::new("float");
        m.data_real("r", value);
        m.data_vector("v", vec![value, -value]);
        let mu = m.param_constrained("mu", Constraint::Lower(value));
        m.sample(&mu, Dist::normal(value, Expr::Const(value).exp()));
        check_round_trip(&format!("float {value:e}"), &m.build());
    }
}

fn decode_json(text: &str) -> Result<Expr, String> {
    serde_json::from_str::<Expr>(text).map_err(|err| err.to_string())
}

fn decode_msgpack(bytes: &[u8]) -> Result<Expr, String> {
    rmp_serde::from_slice::<Expr>(bytes).map_err(|err| err.to_string())
}

fn check_expr(json: &str, expected: Expr) {
    assert_eq!(decode_json(json), Ok(expected.clone()), "JSON {json}");
    // The same structure through msgpack (serde_json's Value keeps integers as integers).
    let value: serde_json::Value = serde_json::from_str(json).expect("test input is JSON");
    let bytes = rmp_serde::to_vec(&value).expect("serialisable");
    assert_eq!(decode_msgpack(&bytes), Ok(expected), "msgpack of {json}");
}

fn unary(op: UnaryOp, arg: Expr) -> Expr {
    Expr::Unary(op, Box::new(arg))
}

fn binary(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary(op, Box::new(lhs), Box::new(rhs))
}

fn name(name: &str) -> Expr {
    Expr::Ref(name.to_owned())
}

#[test]
fn compact_expressions_decode() {
    check_expr("1.5", Expr::Const(1.5));
    check_expr("3", Expr::Const(3.0));
    check_expr("-2", Expr::Const(-2.0));
    check_expr("1e3", Expr::Const(1000.0));
    check_expr("18446744073709551615", Expr::Const(18446744073709551615.0));
    check_expr(r#""mu""#, name("mu"));
    check_expr(r#"{"exp": "x"}"#, unary(UnaryOp::Exp, name("x")));
    check_expr(
        r#"{"add": ["a", 1]}"#,
        binary(BinaryOp::Add, name("a"), Expr::Const(1.0)),
    );
    check_expr(
        r#"{"matvec": ["X", {"cumsum": {"neg": "b"}}]}"#,
        binary(
            BinaryOp::Matvec,
            name("X"),
            unary(UnaryOp::Cumsum, unary(UnaryOp::Neg, name("b"))),
        ),
    );
    for op in UnaryOp::ALL {
        check_expr(
            &format!(r#"{{"{}": 2}}"#, op.name()),
            unary(op, Expr::Const(2.0)),
        );
    }
    for op in BinaryOp::ALL {
        check_expr(
            &format!(r#"{{"{}": ["a", "b"]}}"#, op.name()),
            binary(op, name("a"), name("b")),
        );
    }
}

fn check_expr_error(json: &str, expected: &str) {
    match decode_json(json) {
        Ok(expr) => panic!("{json} decoded to {expr:?}, expected an error"),
        Err(err) => assert!(
            err.contains(expected),
            "{json}: error {err:?} lacks {expected:?}"
        ),
    }
}

#[test]
fn malformed_expressions_are_refused() {
    check_expr_error(
        r#"{"frobnicate": "x"}"#,
        "unknown operation `frobnicate`, expected one of: neg, exp,",
    );
    check_expr_error(r#"{"Exp": "x"}"#, "unknown operation `Exp`");
    check_expr_error(
        r#"{"exp": "x", "log": "y"}"#,
        "an expression object has exactly one key, found `exp` and `log`",
    );
    check_expr_error(
        r#"{"exp": "x", "exp": "x"}"#,
        "an expression object has exactly one key, found `exp` and `exp`",
    );
    check_expr_error("{}", "empty object is not an expression");
    check_expr_error(
        r#"{"add": ["a"]}"#,
        "`add` takes a list of exactly two arguments",
    );
    check_expr_error(
        r#"{"add": []}"#,
        "`add` takes a list of exactly two arguments",
    );
    check_expr_error(
        r#"{"pow": ["a", 2, 3]}"#,
        "`pow` takes a list of exactly two arguments",
    );
    check_expr_error(r#"{"dot": "a"}"#, "a list of two arguments for `dot`");
    check_expr_error(r#"{"exp": ["x"]}"#, "an expression: a number, a name");
    check_expr_error("null", "an expression: a number, a name");
    check_expr_error("true", "an expression: a number, a name");
    check_expr_error("[1, 2]", "an expression: a number, a name");
    check_expr_error("1e400", "number out of range");
}

/// `depth` unary operations around a name, as JSON and as msgpack.
fn nested_unary(depth: usize) -> (String, Vec<u8>) {
    let json = format!("{}\"x\"{}", r#"{"exp":"#.repeat(depth), "}".repeat(depth));
    // fixmap(1) { fixstr "exp": ... } around fixstr "x".
    let mut bytes = [0x81, 0xa3, b'e', b'x', b'p'].repeat(depth);
    bytes.extend_from_slice(&[0xa1, b'x']);
    (json, bytes)
}

#[test]
fn nesting_up_to_the_limit_decodes() {
    let (json, bytes) = nested_unary(MAX_EXPR_DEPTH);
    let mut expected = name("x");
    for _ in 0..MAX_EXPR_DEPTH {
        expected = unary(UnaryOp::Exp, expected);
    }
    assert_eq!(decode_json(&json), Ok(expected.clone()));
    assert_eq!(decode_msgpack(&bytes), Ok(expected));
}

#[test]
fn nesting_past_the_limit_is_an_error_not_a_stack_overflow() {
    let message = format!("expression nested deeper than {MAX_EXPR_DEPTH} levels");
    for depth in [MAX_EXPR_DEPTH + 1, 10_000, 1_000_000] {
        let (json, bytes) = nested_unary(depth);
        let json_err = decode_json(&json).expect_err("too deep");
        assert!(json_err.contains(&message), "depth {depth}: {json_err}");
        let msgpack_err = decode_msgpack(&bytes).expect_err("too deep");
        assert!(
            msgpack_err.contains(&message),
            "depth {depth}: {msgpack_err}"
        );

        // The same inside a whole model.
        let model_json = format!(
            r#"{{"ir_version":1,"name":"deep","parameters":[],"model":[{{"factor":{{"value":{json}}}}}]}}"#
        );
        let err = Model::from_json(&model_json).expect_err("too deep");
        assert!(err.to_string().contains(&message), "depth {depth}: {err}");
    }
}

/// Deep binary nesting reaches serde_json's own recursion limit or ours: an error either way.
#[test]
fn deep_binary_nesting_is_an_error() {
    let depth = 10_000;
    let json = format!("{}1{}", r#"{"add":[0,"#.repeat(depth), "]}".repeat(depth));
    assert!(decode_json(&json).is_err());
    let mut bytes = Vec::new();
    for _ in 0..depth {
        // fixmap(1) { "add": fixarray(2) [0, ...] }
        bytes.extend_from_slice(&[0x81, 0xa3, b'a', b'd', b'd', 0x92, 0x00]);
    }
    bytes.push(0x01);
    let err = decode_msgpack(&bytes).expect_err("too deep");
    assert!(err.contains("nested deeper than"), "{err}");
}

/// Runs `body` in a child process that runs only the test `name` of this binary, so that a
/// stack overflow (an abort, which `catch_unwind` cannot catch) fails that one test instead of
/// killing every test of the run.
fn in_child_process(name: &str, body: impl FnOnce()) {
    const CHILD: &str = "SAMPLER_TEST_IN_CHILD_PROCESS";
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let test_name = format!(
        "{}::{name}",
        module_path!().split_once("::").map_or("", |(_, rest)| rest)
    );
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = std::process::Command::new(exe)
        .args([test_name.as_str(), "--exact", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test_name} in a child process: {}\n{stdout}\n{stderr}",
        output.status
    );
}

/// The third element of a binary operation is skipped with `IgnoredAny`, which must not
/// recurse without bound either: deep junk there is an error, not a stack overflow.
#[test]
fn deep_junk_after_two_arguments_is_an_error() {
    in_child_process("deep_junk_after_two_arguments_is_an_error", || {
        let depth = 1_000_000;
        let json = format!(
            r#"{{"add":[1,2,{}{}]}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        assert!(decode_json(&json).is_err());
        let mut bytes = vec![0x81, 0xa3, b'a', b'd', b'd', 0x93, 0x01, 0x02];
        bytes.extend(std::iter::repeat_n(0x91, depth)); // fixarray(1), nested
        bytes.push(0xc0);
        assert!(decode_msgpack(&bytes).is_err());
    });
}

const MINIMAL: &str = r#"{"ir_version": 1, "name": "m", "parameters": [{"name": "mu"}],
    "model": [{"sample": {"value": "mu", "dist": {"normal": {"mu": 0, "sigma": 1}}}}]}"#;

/// Replaces the first occurrence of `from` in [`MINIMAL`] and checks the decode error.
fn check_model_error(from: &str, to: &str, expected: &str) {
    assert!(MINIMAL.contains(from), "{from:?} is not in the base model");
    let json = MINIMAL.replacen(from, to, 1);
    match Model::from_json(&json) {
        Ok(model) => panic!("{json} decoded to {model:?}"),
        Err(err) => {
            let err = err.to_string();
            assert!(err.starts_with("invalid model JSON: "), "{err}");
            assert!(err.contains(expected), "{json}: {err:?} lacks {expected:?}");
        }
    }
}

#[test]
fn minimal_model_decodes() {
    let model = Model::from_json(MINIMAL).expect("valid");
    assert_eq!(model.data, BTreeMap::new());
    assert_eq!(model.transformed, []);
    assert_eq!(model.parameters[0].constraint, Constraint::Real);
    assert_eq!(model.parameters[0].size, None);
}

#[test]
fn unknown_fields_are_refused() {
    check_model_error(
        r#""name": "m""#,
        r#""name": "m", "extra": 1"#,
        "unknown field `extra`",
    );
    check_model_error(
        r#"{"name": "mu"}"#,
        r#"{"name": "mu", "shape": [2]}"#,
        "unknown field `shape`",
    );
    check_model_error(
        r#""sigma": 1}"#,
        r#""sigma": 1, "nu": 3}"#,
        "unknown field `nu`",
    );
    check_model_error(
        r#""value": "mu", "#,
        r#""value": "mu", "weight": 2, "#,
        "unknown field `weight`",
    );
    check_model_error(
        r#"{"normal""#,
        r#"{"gaussian""#,
        "unknown variant `gaussian`",
    );
    check_model_error(r#"{"sample""#, r#"{"observe""#, "unknown variant `observe`");
    check_model_error(
        r#"{"name": "mu"}"#,
        r#"{"name": "mu", "constraint": "negative"}"#,
        "unknown variant `negative`",
    );
    check_model_error(
        r#"{"name": "mu"}"#,
        r#"{"name": "mu", "constraint": {"interval": {"lower": 0, "upper": 1, "step": 2}}}"#,
        "unknown field `step`",
    );
    check_model_error(
        r#""name": "m""#,
        r#""name": "m", "data": {"y": {"tensor": [1]}}"#,
        "unknown variant `tensor`",
    );
}

#[test]
fn missing_and_mistyped_fields_are_refused() {
    check_model_error(r#""sigma": 1"#, r#""scale": 1"#, "unknown field `scale`");
    check_model_error(r#", "sigma": 1"#, "", "missing field `sigma`");
    check_model_error(r#""ir_version": 1, "#, "", "missing field `ir_version`");
    check_model_error(r#""ir_version": 1"#, r#""ir_version": -1"#, "invalid value");
    check_model_error(
        r#"{"name": "mu"}"#,
        r#"{"name": "mu", "size": 2.5}"#,
        "invalid type",
    );
    check_model_error(
        r#""name": "m""#,
        r#""name": "m", "data": {"n": {"int": 1.5}}"#,
        "invalid type",
    );
}

#[test]
fn duplicate_data_names_are_refused() {
    let json = r#"{"ir_version": 1, "name": "m",
        "data": {"y": {"real": 1}, "z": {"int": 2}, "y": {"vector": [3]}},
        "parameters": [], "model": []}"#;
    let err = Model::from_json(json).expect_err("duplicate").to_string();
    assert!(err.contains("duplicate data name `y`"), "{err}");

    // The same in msgpack, which can also carry duplicate map keys.
    let value: serde_json::Value = serde_json::from_str(
        r#"{"ir_version": 1, "name": "m", "data": {"PLACEHOLDER": {"real": 1}, "z": {"int": 2}},
            "parameters": [], "model": []}"#,
    )
    .expect("JSON");
    let bytes = rmp_serde::to_vec_named(&value).expect("serialisable");
    let needle = b"\xabPLACEHOLDER";
    let at = bytes
        .windows(needle.len())
        .position(|window| window == needle)
        .expect("key present");
    let mut duplicated = bytes.clone();
    duplicated.splice(at..at + needle.len(), [0xa1, b'z']);
    let err = Model::from_msgpack(&duplicated, MAX_BYTES)
        .expect_err("duplicate")
        .to_string();
    assert!(err.contains("duplicate data name `z`"), "{err}");
}

#[test]
fn msgpack_over_the_size_limit_is_refused_before_decoding() {
    let bytes = Model::from_json(MINIMAL).expect("valid").to_msgpack();
    assert!(Model::from_msgpack(&bytes, bytes.len()).is_ok());
    assert_eq!(
        Model::from_msgpack(&bytes, bytes.len() - 1),
        Err(DecodeError::TooLarge {
            len: bytes.len(),
            max: bytes.len() - 1
        })
    );
}

/// A small model whose JSON text is pinned: a change of the format must show in review.
fn pinned_model() -> Model {
    let mut m = ModelBuilder::new("pinned");
    let y = m.data_vector("y", vec![1.5, -2.0]);
    m.data_int_vector("idx", vec![1, 0]);
    let mu = m.param("mu");
    let sigma = m.param_constrained(
        "sigma",
        Constraint::Interval {
            lower: 0.0,
            upper: 10.0,
        },
    );
    let z = m.vector_param("z", 2);
    let theta = m.transformed("theta", &mu + (&sigma * z.gather("idx")).exp());
    m.sample(&z, Dist::normal(0.0, 1.0));
    m.sample(&y, Dist::student_t(4.0, &theta, &sigma));
    m.sample(&z, Dist::gaussian_random_walk(1.0));
    m.factor(-&mu);
    m.build()
}

const PINNED_JSON: &str = r#"{
  "ir_version": 2,
  "name": "pinned",
  "data": {
    "idx": {
      "int_vector": [
        1,
        0
      ]
    },
    "y": {
      "vector": [
        1.5,
        -2.0
      ]
    }
  },
  "parameters": [
    {
      "name": "mu",
      "constraint": "real"
    },
    {
      "name": "sigma",
      "constraint": {
        "interval": {
          "lower": 0.0,
          "upper": 10.0
        }
      }
    },
    {
      "name": "z",
      "size": 2,
      "constraint": "real"
    }
  ],
  "transformed": [
    {
      "name": "theta",
      "value": {
        "add": [
          "mu",
          {
            "exp": {
              "mul": [
                "sigma",
                {
                  "gather": [
                    "z",
                    "idx"
                  ]
                }
              ]
            }
          }
        ]
      }
    }
  ],
  "model": [
    {
      "sample": {
        "value": "z",
        "dist": {
          "normal": {
            "mu": 0.0,
            "sigma": 1.0
          }
        }
      }
    },
    {
      "sample": {
        "value": "y",
        "dist": {
          "student_t": {
            "nu": 4.0,
            "mu": "theta",
            "sigma": "sigma"
          }
        }
      }
    },
    {
      "sample": {
        "value": "z",
        "dist": {
          "gaussian_random_walk": {
            "sigma": 1.0
          }
        }
      }
    },
    {
      "factor": {
        "value": {
          "neg": "mu"
        }
      }
    }
  ]
}"#;

#[test]
fn json_format_is_pinned() {
    let model = pinned_model();
    assert_eq!(model.to_json(), PINNED_JSON);
    assert_eq!(Model::from_json(PINNED_JSON), Ok(model));
}

#[test]
fn msgpack_format_is_pinned() {
    let mut m = ModelBuilder::new("p");
    let x = m.param_constrained("x", Constraint::Lower(1.0));
    m.sample(&x, Dist::exponential(2.0));
    let hex: String = m
        .build()
        .to_msgpack()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert_eq!(
        hex,
        "86aa69725f76657273696f6e02a46e616d65a170a46461746180aa706172616d65746572739182a46e616d65a178aa636f6e73747261696e7481a56c6f776572cb3ff0000000000000ab7472616e73666f726d656490a56d6f64656c9181a673616d706c6582a576616c7565a178a46469737481ab6578706f6e656e7469616c81a472617465cb4000000000000000"
    );
}

mod v2;
