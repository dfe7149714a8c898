use crate::data::Data;
use crate::value::{Elem, Typed, Values};

/// Runs `body` as a `transformed data` block and returns its variables.
fn run(body: &str) -> Result<crate::host::TypedEnv, String> {
    let source = format!("transformed data {{\n{body}\n}}\n");
    let program = crate::parse(&source).map_err(|e| e.render("t.stan", &source))?;
    crate::gq::transformed_data(&program, &Data::default()).map_err(|e| e.render("t.stan", &source))
}

fn check(body: &str, name: &str) -> Typed {
    let env = run(body).unwrap_or_else(|e| panic!("{e}"));
    env.get(name)
        .cloned()
        .unwrap_or_else(|| panic!("no `{name}`"))
}

fn reals(body: &str, name: &str) -> Vec<f64> {
    check(body, name).reals()
}

fn ints(body: &str, name: &str) -> Vec<i64> {
    match check(body, name).value.values {
        Values::Int(v) => v,
        Values::Real(_) => panic!("`{name}` is real"),
    }
}

fn error(body: &str) -> String {
    match run(body) {
        Ok(_) => panic!("expected an error from:\n{body}"),
        Err(e) => e,
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + b.abs())
}

#[test]
fn host_declarations_start_as_stan_does() {
    let x = reals("real x; vector[2] v;", "x");
    assert!(x[0].is_nan());
    assert!(reals("vector[2] v;", "v").iter().all(|v| v.is_nan()));
    assert_eq!(ints("int n;", "n"), vec![i64::from(i32::MIN)]);
}

#[test]
fn host_integer_arithmetic_follows_stan() {
    assert_eq!(ints("int a = 7 / 2;", "a"), vec![3]);
    assert_eq!(ints("int a = -7 / 2;", "a"), vec![-3]);
    assert_eq!(ints("int a = -7 % 3;", "a"), vec![-1]);
    assert_eq!(ints("int a = 7 %/% 2;", "a"), vec![3]);
    assert_eq!(reals("real a = 7 / 2.0;", "a"), vec![3.5]);
    assert_eq!(reals("real a = 2 ^ 3;", "a"), vec![8.0]);
    assert_eq!(
        ints(
            "int a = (3 < 4) + (2 == 2) + (1 && 0) + (0 || 5) + !0;",
            "a"
        ),
        vec![4]
    );
    assert!(error("int a = 1 / 0;").contains("division by zero"));
    assert!(error("int a = 2147483647 + 1;").contains("overflow"));
}

#[test]
fn host_loops_branches_and_scopes() {
    let body = "
      vector[5] v;
      int n = 0;
      real total = 0;
      for (i in 1:5) v[i] = i * 1.5;
      for (i in 1:10) {
        if (i == 3) continue;
        if (i > 6) break;
        n += 1;
      }
      while (total < 10) { total += 3; }
      for (x in v) total += x;
      {
        real hidden = 99;
        total += hidden;
      }
    ";
    assert_eq!(reals(body, "v"), vec![1.5, 3.0, 4.5, 6.0, 7.5]);
    assert_eq!(ints(body, "n"), vec![5]);
    assert_eq!(reals(body, "total"), vec![12.0 + 22.5 + 99.0]);
    assert!(!run(body).unwrap().contains_key("hidden"));
}

#[test]
fn host_indexing_slices_and_multi_indexes() {
    let body = "
      matrix[2, 3] m = [[1, 2, 3], [4, 5, 6]];
      row_vector[3] r = m[2];
      vector[2] c = m[:, 3];
      matrix[2, 2] sub = m[1:2, {1, 3}];
      array[3] int idx = {3, 1, 2};
      vector[3] v = [10, 20, 30]';
      vector[3] w = v[idx];
      vector[4] u = rep_vector(0, 4);
      array[2, 3] real a;
      u[2:3] = v[1:2];
      u[{1, 4}] = [7, 8]';
      m[1, :] = [9, 9, 9];
      m[:, 2] += [1, 1]';
      a[1] = {1.0, 2.0, 3.0};
      a[2, 2:3] = {5.0, 6.0};
      a[2][1] = 4;
    ";
    assert_eq!(reals(body, "r"), vec![4.0, 5.0, 6.0]);
    assert_eq!(check(body, "r").elem, Elem::RowVector);
    assert_eq!(reals(body, "c"), vec![3.0, 6.0]);
    assert_eq!(reals(body, "sub"), vec![1.0, 3.0, 4.0, 6.0]);
    assert_eq!(reals(body, "w"), vec![30.0, 10.0, 20.0]);
    assert_eq!(reals(body, "u"), vec![7.0, 10.0, 20.0, 8.0]);
    assert_eq!(reals(body, "m"), vec![9.0, 10.0, 9.0, 4.0, 6.0, 6.0]);
    assert_eq!(reals(body, "a"), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn host_errors_name_the_problem() {
    assert!(error("vector[3] v; v[4] = 1;").contains("index 4 out of range"));
    assert!(error("real x; x = y;").contains("`y` is not known"));
    assert!(error("vector[3] v = rep_vector(1, 2);").contains("vector[2]"));
    let e = error("reject(\"bad value \", 3);");
    assert!(e.contains("reject: bad value 3"), "{e}");
    assert!(e.starts_with("t.stan:2:1"), "{e}");
    let e = error("int n = 0; while (1) { n += 1; }");
    assert!(e.contains("`while` loop ran more than"), "{e}");
    assert!(error("int n = 2.5;").contains("real value for an int"));
    assert!(error("real x = normal_rng(0, -1);").contains("scale is -1"));
}

#[test]
fn host_math_matches_known_values() {
    let body = "
      real a = log_sum_exp([1, 2, 3]');
      real b = log1m(0.25) - log(0.75);
      real c = inv_logit(0.3) - 1 / (1 + exp(-0.3));
      real d = lgamma(5);
      real e1 = fmin(2, 3) + fmax(2, 3) + min(2, 3) + max({1, 7, 4});
      real f = sd([1, 2, 3, 4]');
      real g = variance({1.0, 2.0, 3.0, 4.0});
      real h = Phi(1.959963984540054);
      real i1 = inv_Phi(0.975);
      real j = erf(0.5);
      real k = log_inv_logit(-800);
      real l = log1m_exp(-1e-20);
      real m = logit(0.5) + square(3) + pow(2, 10) + fabs(-1.5) + abs(-2);
      int n = int_step(0.1) + is_inf(positive_infinity()) + is_nan(not_a_number());
      real o = pi() + e() + sqrt2() + machine_precision();
      vector[3] s = softmax([1, 2, 3]');
      vector[3] cs = cumulative_sum([1, 2, 3]');
      real p = prod({2, 3, 4}) + sum([1, 2]) + mean({1, 2, 3, 6});
    ";
    let env = run(body).unwrap_or_else(|e| panic!("{e}"));
    let get = |n: &str| env[n].reals();
    let lse = 3.0 + ((-2.0f64).exp() + (-1.0f64).exp() + 1.0).ln();
    assert!(close(get("a")[0], lse, 1e-14));
    assert!(get("b")[0].abs() < 1e-15);
    assert!(get("c")[0].abs() < 1e-15);
    assert!(close(get("d")[0], 24f64.ln(), 1e-13));
    assert_eq!(get("e1")[0], 2.0 + 3.0 + 2.0 + 7.0);
    assert!(close(get("f")[0], (5.0f64 / 3.0).sqrt(), 1e-14));
    assert!(close(get("g")[0], 5.0 / 3.0, 1e-14));
    assert!(close(get("h")[0], 0.975, 1e-12));
    assert!(close(get("i1")[0], 1.959963984540054, 1e-10));
    assert!(close(get("j")[0], 0.520_499_877_813_046_5, 1e-14));
    assert!(close(get("k")[0], -800.0, 1e-14));
    assert!(close(get("l")[0], (1e-20f64).ln(), 1e-10));
    assert_eq!(get("m")[0], 0.0 + 9.0 + 1024.0 + 1.5 + 2.0);
    assert_eq!(ints(body, "n"), vec![3]);
    let o = std::f64::consts::PI + std::f64::consts::E + std::f64::consts::SQRT_2 + f64::EPSILON;
    assert!(close(get("o")[0], o, 1e-15));
    let z: f64 = [1f64, 2.0, 3.0].iter().map(|x| x.exp()).sum();
    let s: Vec<f64> = [1f64, 2.0, 3.0].iter().map(|x| x.exp() / z).collect();
    for (x, y) in get("s").iter().zip(&s) {
        assert!(close(*x, *y, 1e-14));
    }
    assert_eq!(get("cs"), vec![1.0, 3.0, 6.0]);
    assert_eq!(get("p")[0], 24.0 + 3.0 + 3.0);
}

#[test]
fn host_containers_and_shapes() {
    let body = "
      array[2, 3] real a = rep_array(1.5, 2, 3);
      array[2] int d = dims(a);
      int sz = size(a);
      int ne = num_elements(a);
      matrix[2, 3] m = [[1, 2, 3], [4, 5, 6]];
      int r = rows(m);
      int c = cols(m);
      vector[6] v = to_vector(m);
      array[6] real flat = to_array_1d(m);
      array[6] real flat_a = to_array_1d({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
      matrix[3, 2] t = m';
      matrix[2, 2] rm = rep_matrix(0.5, 2, 2);
      row_vector[3] cdp = columns_dot_product(m, m);
      real dp = dot_product([1, 2, 3]', [4, 5, 6]') + dot_self([1, 2]');
    ";
    assert_eq!(ints(body, "d"), vec![2, 3]);
    assert_eq!(ints(body, "sz"), vec![2]);
    assert_eq!(ints(body, "ne"), vec![6]);
    assert_eq!((ints(body, "r"), ints(body, "c")), (vec![2], vec![3]));
    // Stan's to_vector and to_array_1d of a matrix are column-major; of arrays row-major.
    assert_eq!(reals(body, "v"), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(reals(body, "flat"), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(reals(body, "flat_a"), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(reals(body, "t"), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(reals(body, "rm"), vec![0.5; 4]);
    assert_eq!(reals(body, "cdp"), vec![17.0, 29.0, 45.0]);
    assert_eq!(reals(body, "dp"), vec![32.0 + 5.0]);
}

#[test]
fn host_linear_algebra_agrees_with_its_definitions() {
    let body = "
      matrix[3, 3] A = [[4, 2, 0.6], [2, 5, 1.5], [0.6, 1.5, 3]];
      matrix[3, 3] L = cholesky_decompose(A);
      matrix[3, 3] LLt = L * L';
      vector[3] b = [1, -2, 0.5]';
      vector[3] x = mdivide_left_tri_low(L, b);
      vector[3] Lx = L * x;
      real q = quad_form(A, b);
      real q2 = b' * A * b;
      matrix[3, 3] cp = crossprod(L);
      matrix[3, 3] cp2 = L' * L;
      matrix[3, 3] dpm = diag_pre_multiply([1, 2, 3]', A);
      matrix[3, 3] dpm2 = diag_matrix([1, 2, 3]') * A;
      vector[3] y = A \\ b;
      vector[3] Ay = A * y;
      real ld = log_determinant(A);
      real ld2 = 2 * sum(log(diagonal(L)));
      matrix[2, 2] K = gp_exp_quad_cov({0.0, 1.0}, 2.0, 0.5);
    ";
    let env = run(body).unwrap_or_else(|e| panic!("{e}"));
    let get = |n: &str| env[n].reals();
    let pairs = [
        ("LLt", "A"),
        ("Lx", "b"),
        ("q", "q2"),
        ("cp", "cp2"),
        ("dpm", "dpm2"),
        ("Ay", "b"),
        ("ld", "ld2"),
    ];
    for (p, q) in pairs {
        for (x, y) in get(p).iter().zip(get(q)) {
            assert!(
                close(*x, y, 1e-12),
                "{p} = {:?} but {q} = {:?}",
                get(p),
                get(q)
            );
        }
    }
    let l = get("L");
    assert_eq!((l[1], l[2], l[5]), (0.0, 0.0, 0.0), "lower triangular");
    let k = get("K");
    assert!(close(k[0], 4.0, 1e-15) && close(k[1], 4.0 * (-2.0f64).exp(), 1e-14));
    assert!(
        error("matrix[2, 2] B = cholesky_decompose([[1, 2], [2, 1]]);")
            .contains("not positive definite")
    );
}

/// LKJ: for K = 2 the correlation r has density `(1 - r^2)^(eta - 1) / (2^(2 eta - 1)
/// B(eta, eta))`, for the matrix and (with the Jacobian `L_22 = sqrt(1 - r^2)`) for its
/// factor; draws have unit rows and the variance `1 / (2 eta + 1)` of r.
#[test]
fn host_lkj_densities_and_draws_match_the_two_by_two_case() {
    let (r, eta) = (0.35f64, 2.5f64);
    let lbeta = super::math::lbeta(eta, eta);
    let expected =
        (eta - 1.0) * (1.0 - r * r).ln() - (2.0 * eta - 1.0) * std::f64::consts::LN_2 - lbeta;
    let body = format!(
        "matrix[2, 2] O = [[1, {r}], [{r}, 1]];\nreal a = lkj_corr_lpdf(O | {eta});\n\
         real b = lkj_corr_cholesky_lpdf(cholesky_decompose(O) | {eta});"
    );
    let a = reals(&body, "a")[0];
    assert!(close(a, expected, 1e-12), "{a} vs {expected}");
    // d Omega_21 / d L_21 = 1: the factor's density is the matrix's, in r = L_21.
    let b = reals(&body, "b")[0];
    assert!(close(b, expected, 1e-12), "{b} vs {expected}");

    let n = 4000;
    let body = format!(
        "array[{n}] real r;\narray[{n}] real norm;\nfor (i in 1:{n}) {{\n  \
         matrix[3, 3] L = lkj_corr_cholesky_rng(3, {eta});\n  matrix[2, 2] O = lkj_corr_rng(2, {eta});\n  \
         r[i] = O[1, 2];\n  norm[i] = L[3, 1]^2 + L[3, 2]^2 + L[3, 3]^2 + L[1, 2]^2;\n}}"
    );
    let env = run(&body).unwrap_or_else(|e| panic!("{e}"));
    let rs = env["r"].reals();
    assert!(env["norm"].reals().iter().all(|v| (v - 1.0).abs() < 1e-12));
    let mean = rs.iter().sum::<f64>() / n as f64;
    let var = rs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
    let want = 1.0 / (2.0 * eta + 1.0);
    // 5 standard errors: sd(r) / sqrt(n) for the mean, var sqrt(2 / n) (roughly) for var.
    assert!(mean.abs() < 5.0 * want.sqrt() / (n as f64).sqrt(), "{mean}");
    assert!(
        (var - want).abs() < 5.0 * want * (2.0 / n as f64).sqrt(),
        "{var} vs {want}"
    );
}
