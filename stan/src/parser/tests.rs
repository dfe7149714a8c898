//! Parser unit tests: one construct per test, precedence and associativity, and error positions.

use crate::ast::{
    AssignOp, BaseType, Constraint, Expr, ExprKind, Index, Printable, Program, Stmt, StmtKind,
};
use crate::{ParseErrorKind, parse};

/// An expression as an S-expression, so precedence tests read at a glance.
fn sexpr(expr: &Expr) -> String {
    let list = |items: &[Expr]| items.iter().map(sexpr).collect::<Vec<_>>().join(" ");
    match &expr.kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Real(v) => format!("{v:?}"),
        ExprKind::Var(id) => id.name.clone(),
        ExprKind::Call { name, args } => format!("({} {})", name.name, list(args)),
        ExprKind::CondCall { name, args } => {
            format!("({} {} | {})", name.name, sexpr(&args[0]), list(&args[1..]))
        }
        ExprKind::GetTarget => "(target)".to_string(),
        ExprKind::Index { base, indices } => {
            let shown: Vec<String> = indices
                .iter()
                .map(|i| match i {
                    Index::All => ":".to_string(),
                    Index::Single(e) => sexpr(e),
                    Index::From(e) => format!("{}:", sexpr(e)),
                    Index::UpTo(e) => format!(":{}", sexpr(e)),
                    Index::Between(a, b) => format!("{}:{}", sexpr(a), sexpr(b)),
                })
                .collect();
            format!("{}[{}]", sexpr(base), shown.join(", "))
        }
        ExprKind::Unary { op, operand } => format!("({} {})", op.as_str(), sexpr(operand)),
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", op.as_str(), sexpr(lhs), sexpr(rhs))
        }
        ExprKind::Ternary {
            cond,
            then,
            otherwise,
        } => format!("(? {} {} {})", sexpr(cond), sexpr(then), sexpr(otherwise)),
        ExprKind::Transpose(e) => format!("(' {})", sexpr(e)),
        ExprKind::Paren(e) => format!("[{}]", sexpr(e)),
        ExprKind::ArrayLit(items) => format!("{{{}}}", list(items)),
        ExprKind::RowVectorLit(items) => format!("(row {})", list(items)),
    }
}

fn model(body: &str) -> Vec<Stmt> {
    let source = format!("model {{\n{body}\n}}\n");
    let program = parse(&source).unwrap_or_else(|e| panic!("{}", e.render("test.stan", &source)));
    program.model.expect("a model block").stmts
}

fn one_stmt(body: &str) -> StmtKind {
    let mut stmts = model(body);
    assert_eq!(stmts.len(), 1, "{body}");
    stmts.remove(0).kind
}

/// Parses `e` as the right of `target += e;` and shows it as an S-expression.
fn check_expr(source: &str, expected: &str) {
    match one_stmt(&format!("target += {source};")) {
        StmtKind::TargetPlus(e) => assert_eq!(sexpr(&e), expected, "{source}"),
        other => panic!("{other:?}"),
    }
}

/// The rendered error for a whole program.
fn error(source: &str) -> String {
    let err = parse(source).expect_err(source);
    err.render("bad.stan", source)
}

#[test]
fn parse_precedence_of_unary_and_power() {
    check_expr("-a^b", "(- (^ a b))");
    check_expr("-a^-b", "(- (^ a (- b)))");
    check_expr("a^b^c", "(^ a (^ b c))");
    check_expr("a .^ b ^ c", "(.^ a (^ b c))");
    check_expr("a ^ -b * c", "(* (^ a (- b)) c)");
    check_expr("!a && b", "(&& (! a) b)");
    check_expr("-a'", "(- (' a))");
    check_expr("-a \\ b", "(\\ (- a) b)");
}

#[test]
fn parse_precedence_of_binary_operators() {
    check_expr("a + b * c", "(+ a (* b c))");
    check_expr("a - b - c", "(- (- a b) c)");
    check_expr("a \\ b * c", "(* (\\ a b) c)");
    check_expr("a * b \\ c", "(* a (\\ b c))");
    check_expr("a %/% b * c", "(* (%/% a b) c)");
    check_expr("a * b %/% c", "(* a (%/% b c))");
    check_expr("a % b .* c ./ d", "(./ (.* (% a b) c) d)");
    check_expr("a' * b", "(* (' a) b)");
    check_expr("a * b'", "(* a (' b))");
    check_expr("x[1]' * y", "(* (' x[1]) y)");
    check_expr("a < b == c > d", "(== (< a b) (> c d))");
    check_expr("a || b && c", "(|| a (&& b c))");
    check_expr("a <= b + 1 || c >= 2", "(|| (<= a (+ b 1)) (>= c 2))");
    check_expr("(a + b) * c", "(* [(+ a b)] c)");
}

#[test]
fn parse_ternary_is_right_associative_and_loosest() {
    check_expr("a ? b : c ? d : e", "(? a b (? c d e))");
    check_expr("a || b ? c + 1 : d", "(? (|| a b) (+ c 1) d)");
    check_expr("a ? b ? c : d : e", "(? a (? b c d) e)");
}

#[test]
fn parse_calls_and_conditional_densities() {
    check_expr("normal_lpdf(y | mu, sigma)", "(normal_lpdf y | mu sigma)");
    check_expr("poisson_lpmf(n | )", "(poisson_lpmf n | )");
    check_expr("log_sum_exp(a, b) + f()", "(+ (log_sum_exp a b) (f ))");
    check_expr("target()", "(target)");
    check_expr("{1, 2}", "{1 2}");
    check_expr("[a, b]'", "(' (row a b))");
    check_expr("{[1, 2], [3, 4]}", "{(row 1 2) (row 3 4)}");
    check_expr("1e-3 + .5 * 2.", "(+ 0.001 (* 0.5 2.0))");
}

#[test]
fn parse_indexing() {
    check_expr("a[i, :, 2:, :n, 1:3, ]", "a[i, :, 2:, :n, 1:3, :]");
    check_expr("a[ : , 1]", "a[:, 1]");
    check_expr("a[i][j]", "a[i][j]");
    check_expr("theta[{1, 3}]", "theta[{1 3}]");
    check_expr("a[b ? 1 : 2]", "a[(? b 1 2)]");
    check_expr("a[i - 1:n]", "a[(- i 1):n]");
}

#[test]
fn parse_assignments_and_compound_operators() {
    let ops = [
        ("=", AssignOp::Assign),
        ("+=", AssignOp::Add),
        ("-=", AssignOp::Sub),
        ("*=", AssignOp::Mul),
        ("/=", AssignOp::Div),
        (".*=", AssignOp::EltMul),
        ("./=", AssignOp::EltDiv),
    ];
    for (text, expected) in ops {
        match one_stmt(&format!("x[i, 2:][j] {text} 1;")) {
            StmtKind::Assign { lhs, op, .. } => {
                assert_eq!(op, expected);
                assert_eq!(lhs.name.name, "x");
                assert_eq!(lhs.indices.len(), 2);
                assert_eq!(lhs.indices[0].len(), 2);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn parse_tilde_with_and_without_truncation() {
    match one_stmt("y ~ normal(mu, sigma) T[0, ];") {
        StmtKind::Tilde {
            distribution,
            args,
            truncation: Some(t),
            ..
        } => {
            assert_eq!(distribution.name, "normal");
            assert_eq!(args.len(), 2);
            assert!(t.lower.is_some() && t.upper.is_none());
        }
        other => panic!("{other:?}"),
    }
    match one_stmt("y ~ std_normal();") {
        StmtKind::Tilde {
            args, truncation, ..
        } => assert!(args.is_empty() && truncation.is_none()),
        other => panic!("{other:?}"),
    }
    // `T` is a variable everywhere but right after `~ dist(...)`.
    let stmts = model("int T = 3;\narray[T] real y;\ny[T] ~ normal(T[1], 1) T[, U];");
    assert_eq!(stmts.len(), 3);
    assert!(matches!(
        &stmts[2].kind,
        StmtKind::Tilde { truncation: Some(t), .. } if t.lower.is_none() && t.upper.is_some()
    ));
}

#[test]
fn parse_control_flow() {
    let stmts = model(
        "for (i in 1:N) { x[i] = i; }\n\
         for (v in xs) print(v);\n\
         while (1) { if (a) break; else if (b) continue; else { } }\n\
         if (a) if (b) x = 1; else x = 2;\n\
         { real local = 1; ; }\n\
         print(\"x = \", x);\n\
         reject(\"bad \", x);\n\
         fatal_error(\"worse\");\n\
         foo(1, 2);",
    );
    let kinds: Vec<&StmtKind> = stmts.iter().map(|s| &s.kind).collect();
    assert!(matches!(kinds[0], StmtKind::For { .. }));
    assert!(matches!(kinds[1], StmtKind::ForEach { .. }));
    assert!(matches!(kinds[2], StmtKind::While { .. }));
    // The dangling `else` belongs to the inner `if`.
    match kinds[3] {
        StmtKind::If {
            then, otherwise, ..
        } => {
            assert!(otherwise.is_none());
            assert!(matches!(
                &then.kind,
                StmtKind::If {
                    otherwise: Some(_),
                    ..
                }
            ));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(kinds[4], StmtKind::Block(inner) if inner.len() == 2));
    assert!(
        matches!(kinds[5], StmtKind::Print(items) if matches!(&items[0], Printable::Str(s, _) if s == "x = "))
    );
    assert!(matches!(kinds[6], StmtKind::Reject(items) if items.len() == 2));
    assert!(matches!(kinds[7], StmtKind::FatalError(_)));
    assert!(
        matches!(kinds[8], StmtKind::Call { name, args } if name.name == "foo" && args.len() == 2)
    );
}

fn decl(source: &str) -> (crate::ast::SizedType, Vec<String>) {
    match one_stmt(source) {
        StmtKind::Decl { ty, vars } => (ty, vars.into_iter().map(|v| v.name.name).collect()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn parse_declarations_and_constraints() {
    let (ty, names) = decl("real<lower=0, upper=(1 - a)> x, y;");
    assert_eq!(ty.base, BaseType::Real);
    assert_eq!(names, ["x", "y"]);
    assert!(matches!(
        ty.constraint,
        Some(Constraint::Range {
            lower: Some(_),
            upper: Some(_)
        })
    ));
    let (ty, _) = decl("array[N, 2] vector<multiplier=s, offset=m>[K] z;");
    assert_eq!(ty.array_dims.len(), 2);
    assert_eq!(ty.sizes.len(), 1);
    assert!(matches!(
        ty.constraint,
        Some(Constraint::Affine {
            offset: Some(_),
            multiplier: Some(_)
        })
    ));
    let (ty, _) = decl("matrix<upper=-1>[M, N] m;");
    assert_eq!(ty.sizes.len(), 2);
    let (ty, _) = decl("int<lower=0> n = 3;");
    assert_eq!(ty.base, BaseType::Int);
    let (ty, _) = decl("row_vector<lower=a + b * 2>[3] r;");
    assert!(matches!(
        ty.constraint,
        Some(Constraint::Range { upper: None, .. })
    ));
    for (source, base, n_sizes) in [
        ("ordered[K] o;", BaseType::Ordered, 1),
        ("positive_ordered[K] o;", BaseType::PositiveOrdered, 1),
        ("simplex[K] o;", BaseType::Simplex, 1),
        ("unit_vector[K] o;", BaseType::UnitVector, 1),
        (
            "cholesky_factor_corr[K] o;",
            BaseType::CholeskyFactorCorr,
            1,
        ),
        (
            "cholesky_factor_cov[M, N] o;",
            BaseType::CholeskyFactorCov,
            2,
        ),
        ("cholesky_factor_cov[M] o;", BaseType::CholeskyFactorCov, 1),
        ("corr_matrix[K] o;", BaseType::CorrMatrix, 1),
        ("cov_matrix[K] o;", BaseType::CovMatrix, 1),
    ] {
        let (ty, _) = decl(source);
        assert_eq!((ty.base, ty.sizes.len()), (base, n_sizes), "{source}");
    }
}

#[test]
fn parse_all_blocks_and_functions() {
    let source = "functions {\n\
        real f(real x);\n\
        real f(real x) { return x; }\n\
        void g(data array[,] real a, vector v, matrix m, array[] int i) { print(a); }\n\
        array[] vector h() { return {[1]'}; }\n\
    }\n\
    data { int N; }\n\
    transformed data { real s = 1; }\n\
    parameters { real mu; }\n\
    transformed parameters { real nu = mu; }\n\
    model { mu ~ normal(0, 1); }\n\
    generated quantities { real y = normal_rng(mu, 1); }\n";
    let program: Program = parse(source).unwrap_or_else(|e| panic!("{}", e.render("t", source)));
    let functions = &program.functions.as_ref().unwrap().functions;
    assert_eq!(functions.len(), 4);
    assert!(functions[0].body.is_none());
    assert!(functions[1].body.is_some());
    assert!(functions[2].return_type.is_none());
    assert!(functions[2].params[0].data_only);
    assert_eq!(functions[2].params[0].ty.array_rank, 2);
    assert_eq!(functions[3].return_type.as_ref().unwrap().array_rank, 1);
    assert_eq!(program.blocks().count(), 6);
    assert!(parse("").unwrap().blocks().next().is_none());
}

#[test]
fn parse_spans_cover_their_text() {
    let source = "model {\n  y ~ normal(mu + 1, s);\n}\n";
    let program = parse(source).unwrap();
    let stmt = &program.model.unwrap().stmts[0];
    assert_eq!(
        &source[stmt.span.start..stmt.span.end],
        "y ~ normal(mu + 1, s);"
    );
    let StmtKind::Tilde { args, .. } = &stmt.kind else {
        panic!()
    };
    assert_eq!(&source[args[0].span.start..args[0].span.end], "mu + 1");
}

#[test]
fn parse_error_renders_line_column_and_caret() {
    assert_eq!(
        error("data {\n  real x\n}\n"),
        "bad.stan:3:1: error: expected `;`, `,` or `=`, found `}`\n  |\n3 | }\n  | ^\n"
    );
    assert_eq!(
        error("parameters {\n  real x[N];\n}\n"),
        "bad.stan:2:9: error: array sizes after the variable name (`real x[N]`) were removed \
         from Stan: write `array[N] real x`\n  |\n2 |   real x[N];\n  |         ^\n"
    );
    assert_eq!(
        error("model {\n  x <- 1;\n}"),
        "bad.stan:2:5: error: `<-` assignments were removed from Stan: use `=` instead\n  \
         |\n2 |   x <- 1;\n  |     ^^\n"
    );
    assert_eq!(
        error("data {\n  complex z;\n}"),
        "bad.stan:2:3: error: `complex` (complex numbers) is not supported yet\n  |\n\
         2 |   complex z;\n  |   ^^^^^^^\n"
    );
}

#[test]
fn parse_error_messages() {
    let cases = [
        ("model { x = ; }", "expected an expression, found `;`"),
        (
            "model { x + 1; }",
            "an expression on its own is not a statement",
        ),
        ("model { y ~ normal(0, 1) T[0]; }", "`,` in the truncation"),
        ("data { int x = 1; }", "cannot have an initial value"),
        (
            "parameters { real x; x = 1; }",
            "only declarations are allowed",
        ),
        ("model {} data {}", "out of order"),
        ("model {} model {}", "appears twice"),
        ("model { real<lower=0 x; }", "expected `,` or `>`"),
        ("data { int<offset=1> n; }", "cannot take this constraint"),
        (
            "data { real<upper=1, lower=0> n; }",
            "write `lower` before `upper`",
        ),
        ("data { matrix[3] m; }", "needs two sizes"),
        ("data { vector v; }", "needs a size"),
        ("model { target += f(x | y); }", "`|` is allowed only"),
        ("model { real for; }", "keyword `for`"),
        (
            "functions { real f(real[] x) { return 1; } }",
            "write `array[] real`",
        ),
        (
            "functions { real f(simplex x); }",
            "not allowed in a function signature",
        ),
        (
            "model { profile(\"a\") { } }",
            "`profile` blocks is not supported yet",
        ),
        ("model { x = (a, b); }", "tuples is not supported yet"),
        ("model { x = y.1; }", "tuple projection"),
        ("model { 1 = 2; }", "cannot assign to this expression"),
        ("model {", "expected a statement or `}`, found end of file"),
        ("foo", "expected a block"),
    ];
    for (source, expected) in cases {
        let err = parse(source).expect_err(source);
        let message = err.to_string();
        assert!(message.contains(expected), "{source}: {message}");
    }
}

#[test]
fn parse_error_kinds_and_positions() {
    let err = parse("model {\n  target += 1 +;\n}").unwrap_err();
    assert!(matches!(err.kind, ParseErrorKind::Expected { .. }));
    assert_eq!(err.line_column("model {\n  target += 1 +;\n}"), (2, 16));
}

#[test]
fn parse_deep_nesting_is_an_error_not_a_crash() {
    let source = format!(
        "model {{ target += {}1{}; }}",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    assert!(
        parse(&source)
            .unwrap_err()
            .to_string()
            .contains("nested too deeply")
    );
    let source = format!("model {{ target += {}1; }}", "-".repeat(10_000));
    assert!(
        parse(&source)
            .unwrap_err()
            .to_string()
            .contains("nested too deeply")
    );
}
