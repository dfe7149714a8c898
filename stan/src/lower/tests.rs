//! What the lowering refuses, and where: each error at the construct's span with the code's
//! message. Log densities of lowered programs are checked against hand-written ones in the
//! integration tests (`tests/integration/programs/lowering.rs` and `lowering/by_hand.rs`).

fn try_lower(source: &str, data: &str) -> Result<sampler::Model, String> {
    let program = crate::parse(source).map_err(|e| e.render("test.stan", source))?;
    let data = crate::read_data(&program, data).map_err(|e| e.to_string())?;
    super::lower(&program, &data, "test").map_err(|e| e.render("test.stan", source))
}

/// The rendered error of lowering `source`; panics when it lowers.
fn lower_error(source: &str, data: &str) -> String {
    match try_lower(source, data) {
        Ok(model) => panic!("lowered, but should not have: {model:?}"),
        Err(e) => e,
    }
}

/// Lowering `model` (with parameter `mu`, vector `beta[2]`, data `y[3]`) fails at `line:column`
/// with a message containing `message`.
fn check_error(model: &str, at: &str, message: &str) {
    let source = format!(
        "data {{\n  vector[3] y;\n}}\nparameters {{\n  real mu;\n  vector[2] beta;\n}}\nmodel {{\n{model}\n}}\n"
    );
    let rendered = lower_error(&source, r#"{"y": [1, 2, 3]}"#);
    let first = rendered.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("test.stan:{at}: error: ")) && first.contains(message),
        "wanted {at}: ...{message}..., got:\n{rendered}"
    );
}

#[test]
fn lower_errors_name_the_construct_and_its_place() {
    check_error(
        "  if (mu > 0) mu ~ normal(0, 1);",
        "9:7",
        "an `if` whose condition depends on parameters is not supported yet",
    );
    check_error("  y ~ normal(nu, 1);", "9:14", "unknown name `nu`");
    check_error(
        "  vector[3] v = rep_vector(0, 2);",
        "9:17",
        "declared as a vector of 3 but initialised with a vector of 2",
    );
    check_error("  real mu = 1;", "9:8", "`mu` is already declared");
    check_error("  y[1] = mu;", "9:3", "cannot assign to `y`");
    check_error(
        "  vector[3] v;\n  v[1] = mu;\n  target += sum(v);",
        "11:17",
        "`v[2]` is used before it is assigned",
    );
    check_error(
        "  target += foo(mu);",
        "9:13",
        "the function `foo` with 1 argument(s) on values that depend on parameters is not supported yet",
    );
    check_error(
        "  mu ~ cauchy(beta[1], 1) T[0, ];",
        "9:27",
        "truncation of `cauchy` with arguments or bounds that depend on parameters (its CDF \
         needs `atan`, which the IR lacks) is not supported yet",
    );
    check_error(
        "  mu ~ normal(beta[3], 1);",
        "9:20",
        "index 3 out of range 1..=2",
    );
    check_error("  y ~ normal(beta, 1);", "9:14", "does not match");
    check_error(
        "  mu ~ wobbly(0, 1);",
        "9:8",
        "the distribution `wobbly` is not supported yet",
    );
    check_error(
        "  for (i in 1:2) {\n    real mu2 = beta[i];\n    real mu2 = 1;\n  }",
        "11:10",
        "`mu2` is already declared",
    );
}

#[test]
fn lower_refuses_multivariate_cases_it_cannot_write_out() {
    check_error(
        "  mu ~ categorical(beta);",
        "9:3",
        "a `categorical` outcome that depends on parameters is not supported yet",
    );
}

#[test]
fn lower_refuses_a_local_whose_element_count_overflows() {
    let source = "parameters {\n  real x;\n}\nmodel {\n  array[100000, 100000] real big;\n  x ~ normal(0, 1);\n}\n";
    let program = crate::parse(source).expect("parses");
    let data = crate::read_data(&program, "{}").expect("no data");
    let err = crate::lower(&program, &data, "big").expect_err("too large");
    assert!(err.message.contains("more than"), "{err}");
    assert_eq!(crate::line_column(source, err.span.start).0, 5, "{err}");
}
