//! IR v2 on the wire: version 1 files still load, the new forms are pinned and round-trip,
//! malformed new forms are decode errors (never panics), and their shapes are checked.

use super::*;
use crate::limits::Limits;
use crate::validate::CheckedModel;

fn pinned_v2_model() -> Model {
    let mut m = ModelBuilder::new("pinned_v2");
    let tau = m.param_constrained("tau", Constraint::Positive);
    let b = m.param_bounded("b", None, Some(Expr::Const(0.0)), Some(tau.clone()));
    m.param_decl(Parameter {
        name: "z".into(),
        size: Some(4),
        offset: Some(Expr::Const(1.0)),
        multiplier: Some(tau.clone()),
        dims: vec![2, 2],
        ..Parameter::default()
    });
    let s = m.param_with("s", Some(3), Constraint::Simplex);
    let o = m.param_with("o", Some(2), Constraint::Ordered);
    m.param_with("po", Some(2), Constraint::PositiveOrdered);
    m.param_with("u", Some(2), Constraint::UnitVector);
    m.transformed_with_dims(
        "t",
        Expr::concat([s.slice(0, 2), o.elem(1), Expr::Const(0.0)]),
        vec![2, 2],
    );
    m.factor(o.log_sum_exp() + tau.lgamma() + b.max(0.1) + b.min(0.9));
    m.build()
}

/// The compact JSON of [`pinned_v2_model`]: the v2 forms other tools write.
const PINNED_V2_JSON: &str = concat!(
    r#"{"ir_version":2,"name":"pinned_v2","data":{},"parameters":["#,
    r#"{"name":"tau","constraint":"positive"},"#,
    r#"{"name":"b","constraint":"real","lower":0.0,"upper":"tau"},"#,
    r#"{"name":"z","size":4,"constraint":"real","offset":1.0,"multiplier":"tau","dims":[2,2]},"#,
    r#"{"name":"s","size":3,"constraint":"simplex"},"#,
    r#"{"name":"o","size":2,"constraint":"ordered"},"#,
    r#"{"name":"po","size":2,"constraint":"positive_ordered"},"#,
    r#"{"name":"u","size":2,"constraint":"unit_vector"}],"#,
    r#""transformed":[{"name":"t","value":{"concat":[{"slice":["s",0,2]},{"elem":["o",1]},0.0]},"dims":[2,2]}],"#,
    r#""model":[{"factor":{"value":{"add":[{"add":[{"add":[{"log_sum_exp":"o"},{"lgamma":"tau"}]},"#,
    r#"{"max":["b",0.1]}]},{"min":["b",0.9]}]}}}]}"#
);

#[test]
fn v2_json_forms_are_pinned() {
    let model = pinned_v2_model();
    assert_eq!(
        serde_json::to_string(&model).expect("plain data"),
        PINNED_V2_JSON
    );
    assert_eq!(Model::from_json(PINNED_V2_JSON), Ok(model.clone()));
    check_round_trip("pinned_v2", &model);
    let checked = CheckedModel::from_json(PINNED_V2_JSON, &Limits::default())
        .unwrap_or_else(|err| panic!("{err}"));
    // tau, b, z (4), s (3 - 1), o (2), po (2), u (2).
    assert_eq!(checked.dim(), 1 + 1 + 4 + 2 + 2 + 2 + 2);
}

/// A version 1 file loads unchanged and keeps its version.
#[test]
fn version_1_files_load_unchanged() {
    let v1 = PINNED_JSON.replace(r#""ir_version": 2"#, r#""ir_version": 1"#);
    assert_ne!(v1, PINNED_JSON);
    let model = Model::from_json(&v1).expect("v1 decodes");
    assert_eq!(model.ir_version, 1);
    let expected = Model {
        ir_version: 1,
        ..pinned_model()
    };
    assert_eq!(model, expected);
    let checked = CheckedModel::from_json(&v1, &Limits::default()).expect("v1 checks");
    assert_eq!(checked.model().ir_version, 1);
    // Written back, only the version differs from what this build writes.
    assert_eq!(model.to_json(), v1);
}

#[test]
fn v2_expressions_decode() {
    check_expr(
        r#"{"concat": ["a", 1, {"exp": "b"}]}"#,
        Expr::Concat(vec![
            name("a"),
            Expr::Const(1.0),
            unary(UnaryOp::Exp, name("b")),
        ]),
    );
    check_expr(r#"{"concat": []}"#, Expr::Concat(Vec::new()));
    check_expr(r#"{"elem": ["a", 3]}"#, Expr::Elem(Box::new(name("a")), 3));
    check_expr(
        r#"{"slice": [{"neg": "a"}, 0, 2]}"#,
        Expr::Slice(Box::new(unary(UnaryOp::Neg, name("a"))), 0, 2),
    );
    for op in [UnaryOp::Lgamma, UnaryOp::LogSumExp] {
        check_expr(
            &format!(r#"{{"{}": "a"}}"#, op.name()),
            unary(op, name("a")),
        );
    }
    for op in [BinaryOp::Max, BinaryOp::Min] {
        check_expr(
            &format!(r#"{{"{}": ["a", 2]}}"#, op.name()),
            binary(op, name("a"), Expr::Const(2.0)),
        );
    }
}

#[test]
fn malformed_v2_expressions_are_refused() {
    let elem = "`elem` takes a list [expression, k] with k a non-negative integer";
    let slice = "`slice` takes a list [expression, start, len] of non-negative integers";
    for (json, expected) in [
        (r#"{"concat": 1}"#, "a list of expressions for `concat`"),
        (r#"{"concat": "a"}"#, "a list of expressions for `concat`"),
        (
            r#"{"concat": [1, {"bogus": 1}]}"#,
            "unknown operation `bogus`",
        ),
        (r#"{"elem": "a"}"#, elem),
        (r#"{"elem": ["a"]}"#, elem),
        (r#"{"elem": []}"#, elem),
        (r#"{"elem": ["a", -1]}"#, "invalid value"),
        (r#"{"elem": ["a", 1.5]}"#, "invalid type"),
        (r#"{"elem": ["a", 4294967296]}"#, "invalid value"),
        (r#"{"elem": ["a", "b"]}"#, "invalid type"),
        (r#"{"elem": ["a", 1, 2]}"#, elem),
        (r#"{"slice": ["a", 1]}"#, slice),
        (r#"{"slice": ["a", 0, 1, 2]}"#, slice),
        (r#"{"slice": ["a", 0, 1, {"exp": "x"}]}"#, slice),
        (r#"{"concat": ["a"], "elem": ["a", 0]}"#, "exactly one key"),
        (
            r#"{"lgamma": ["a", "b"]}"#,
            "an expression: a number, a name",
        ),
        (
            r#"{"max": ["a"]}"#,
            "`max` takes a list of exactly two arguments",
        ),
    ] {
        check_expr_error(json, expected);
    }
}

#[test]
fn malformed_v2_declarations_are_refused() {
    let base = r#"{"ir_version": 2, "name": "m", "parameters": [PARAM], "model": []}"#;
    for (param, expected) in [
        (r#"{"name": "x", "dims": [-1]}"#, "invalid value"),
        (r#"{"name": "x", "dims": "2"}"#, "invalid type"),
        (
            r#"{"name": "x", "lower": {"bogus": 1}}"#,
            "unknown operation",
        ),
        (
            r#"{"name": "x", "constraint": {"simplex": 3}}"#,
            "invalid type",
        ),
        (
            r#"{"name": "x", "constraint": "sorted"}"#,
            "unknown variant `sorted`",
        ),
        (
            r#"{"name": "x", "bounds": [0, 1]}"#,
            "unknown field `bounds`",
        ),
    ] {
        let json = base.replace("PARAM", param);
        match Model::from_json(&json) {
            Ok(model) => panic!("{json} decoded to {model:?}"),
            Err(err) => assert!(err.to_string().contains(expected), "{json}: {err}"),
        }
    }
    let transformed = r#"{"ir_version": 2, "name": "m", "parameters": [], "transformed": [{"name": "t", "value": 1, "dims": [1.5]}], "model": []}"#;
    assert!(Model::from_json(transformed).is_err());
}

/// Nesting through the new forms is bounded like any other: our limit in msgpack, serde_json's
/// recursion limit (hit first: each level is an object and a list) in JSON.
#[test]
fn deep_v2_nesting_is_an_error_not_a_stack_overflow() {
    let depth = 2 * MAX_EXPR_DEPTH;
    let wraps: [fn(Expr) -> Expr; 3] = [
        |e| Expr::Concat(vec![e]),
        |e| Expr::Elem(Box::new(e), 0),
        |e| Expr::Slice(Box::new(e), 0, 1),
    ];
    for wrap in wraps {
        let mut expr = name("x");
        for _ in 0..depth {
            expr = wrap(expr);
        }
        let bytes = rmp_serde::to_vec(&expr).expect("plain data");
        let err = decode_msgpack(&bytes).expect_err("too deep");
        assert!(err.contains("nested deeper than"), "{err}");
        let json = serde_json::to_string(&expr).expect("plain data");
        assert!(decode_json(&json).is_err());
    }
}

/// Shape errors of the new expressions name the node.
#[test]
fn v2_expression_shapes_are_checked() {
    let cases: [(Expr, &str, &str); 8] = [
        (
            name("v").elem(3),
            "transformed[0].value.elem[1]",
            "element 3 is out of range for a vector of length 3",
        ),
        (
            name("s").elem(0),
            "transformed[0].value.elem[0]",
            "`elem` reads from a vector, found a scalar",
        ),
        (
            name("v").slice(2, 2),
            "transformed[0].value.slice[1]",
            "slice 2..4",
        ),
        (
            name("v").slice(0, 0),
            "transformed[0].value.slice[1]",
            "not a non-empty range",
        ),
        (
            name("v").slice(u32::MAX, 2),
            "transformed[0].value.slice[1]",
            "not a non-empty range",
        ),
        (
            Expr::concat([]),
            "transformed[0].value",
            "`concat` needs at least one part",
        ),
        (
            Expr::concat([name("v"), name("m")]),
            "transformed[0].value.concat[1]",
            "found a matrix",
        ),
        (
            name("m").log_sum_exp(),
            "transformed[0].value.log_sum_exp",
            "found a matrix",
        ),
    ];
    for (value, path, message) in cases {
        let mut m = ModelBuilder::new("shapes");
        m.data_matrix("m", vec![vec![1.0, 2.0]]);
        m.vector_param("v", 3);
        m.param("s");
        m.transformed("t", value);
        let err = CheckedModel::new(m.build(), &Limits::default()).expect_err("invalid");
        assert_eq!(err.path, path, "{err}");
        assert!(err.to_string().contains(message), "{err}");
    }
}
