//! Tests of the JSON data reader against small `data` blocks.

use super::*;

fn read(decls: &str, json: &str) -> Result<Data, DataError> {
    let program = crate::parse(&format!("data {{ {decls} }}")).expect("program parses");
    read_data(&program, json)
}

#[test]
fn data_reads_scalars_vectors_matrices_and_arrays() {
    let data = read(
        "int<lower=0> N; vector[N] y; matrix[N, 2] X; array[2] int k; real s;",
        r#"{"N": 2, "y": [1, 2.5], "X": [[1, 2], [3, 4]], "k": [3, 4], "s": "-Inf", "extra": 1}"#,
    )
    .unwrap();
    assert_eq!(data.values["N"], Value::int(2));
    assert_eq!(data.values["y"].values, Values::Real(vec![1.0, 2.5]));
    assert_eq!(data.values["X"].shape, vec![2, 2]);
    assert_eq!(
        data.values["X"].values,
        Values::Real(vec![1.0, 2.0, 3.0, 4.0])
    );
    assert_eq!(data.values["k"].values, Values::Int(vec![3, 4]));
    assert_eq!(data.values["s"].as_real(), Some(f64::NEG_INFINITY));
    assert!(!data.values.contains_key("extra"));
}

#[test]
fn data_empty_arrays_take_their_size_from_the_declaration() {
    let data = read("int N; array[N] real y;", r#"{"N": 0, "y": []}"#).unwrap();
    assert!(data.values["y"].is_empty());
}

#[test]
fn data_refuses_a_decimal_int_a_missing_key_and_a_wrong_size() {
    let err = read("int N;", r#"{"N": 2.0}"#).unwrap_err();
    assert!(err.to_string().contains("declared int"), "{err}");
    let err = read("int N; real x;", r#"{"N": 2}"#).unwrap_err();
    assert_eq!(err, DataError::Missing { name: "x".into() });
    let err = read("int N; vector[N] y;", r#"{"N": 3, "y": [1, 2]}"#).unwrap_err();
    assert!(err.to_string().contains("expected 3 elements"), "{err}");
    let err = read("matrix[2, 2] X;", r#"{"X": [[1, 2], [3]]}"#).unwrap_err();
    assert!(err.to_string().contains("X"), "{err}");
}

#[test]
fn data_checks_declared_bounds() {
    let err = read("vector<lower=0, upper=200>[2] y;", r#"{"y": [1, 201]}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "data `y`[2]: value 201 violates the declared constraint upper=200"
    );
    let err = read("int<lower=1> N;", r#"{"N": 0}"#).unwrap_err();
    assert!(matches!(err, DataError::Constraint { .. }), "{err}");
}

#[test]
fn data_refuses_sizes_over_the_limit_before_allocating() {
    let err = read("int N; matrix[N, N] X;", r#"{"N": 100000, "X": []}"#).unwrap_err();
    assert!(matches!(err, DataError::TooManyValues { .. }), "{err}");
    let err = read("int N; vector[N] y;", r#"{"N": -1, "y": []}"#).unwrap_err();
    assert!(matches!(err, DataError::Size { .. }), "{err}");
}

#[test]
fn data_refuses_what_is_not_an_object() {
    assert_eq!(read("", "[1]").unwrap_err(), DataError::NotAnObject);
    assert!(matches!(read("", "{").unwrap_err(), DataError::Json(_)));
}

#[test]
fn data_reads_constrained_types_and_checks_them_as_stan_does() {
    let data = read(
        "simplex[3] s; ordered[2] o; positive_ordered[2] p; unit_vector[2] u; \
         cov_matrix[2] S; corr_matrix[2] R; cholesky_factor_cov[3, 2] L; \
         cholesky_factor_corr[2] C; array[2] simplex[2] ss;",
        r#"{"s": [0.2, 0.3, 0.5], "o": [-1, 2], "p": [0.5, 2], "u": [0.6, 0.8],
            "S": [[2, 0.5], [0.5, 1]], "R": [[1, 0.3], [0.3, 1]],
            "L": [[1, 0], [0.5, 2], [3, 4]], "C": [[1, 0], [0.6, 0.8]],
            "ss": [[0.5, 0.5], [1, 0]]}"#,
    )
    .unwrap();
    assert_eq!(data.values["S"].shape, vec![2, 2]);
    assert_eq!(data.values["L"].shape, vec![3, 2]);
    assert_eq!(data.values["ss"].shape, vec![2, 2]);
    let refused = [
        ("simplex[2] x;", r#"{"x": [0.5, 0.6]}"#, "sum to 1.1"),
        (
            "simplex[2] x;",
            r#"{"x": [1.5, -0.5]}"#,
            "element 2 is negative",
        ),
        ("ordered[2] x;", r#"{"x": [2, 2]}"#, "not increasing"),
        ("positive_ordered[2] x;", r#"{"x": [-1, 2]}"#, "negative"),
        (
            "unit_vector[2] x;",
            r#"{"x": [1, 1]}"#,
            "squared length is 2",
        ),
        (
            "cov_matrix[2] x;",
            r#"{"x": [[1, 2], [0, 1]]}"#,
            "not symmetric",
        ),
        (
            "cov_matrix[2] x;",
            r#"{"x": [[1, 2], [2, 1]]}"#,
            "not positive definite",
        ),
        (
            "corr_matrix[2] x;",
            r#"{"x": [[2, 0], [0, 1]]}"#,
            "[1,1] is 2, not 1",
        ),
        (
            "cholesky_factor_cov[2] x;",
            r#"{"x": [[1, 1], [0, 1]]}"#,
            "not lower triangular",
        ),
        (
            "cholesky_factor_cov[2] x;",
            r#"{"x": [[1, 0], [0, -1]]}"#,
            "[2,2] is -1",
        ),
        (
            "cholesky_factor_corr[2] x;",
            r#"{"x": [[1, 0], [1, 1]]}"#,
            "row 2",
        ),
        (
            "array[2] simplex[2] x;",
            r#"{"x": [[0.5, 0.5], [0.5, 0.4]]}"#,
            "simplex at [2]",
        ),
    ];
    for (decl, json, expected) in refused {
        let err = read(decl, json).unwrap_err().to_string();
        assert!(err.contains(expected), "{decl} {json}: {err}");
    }
}
