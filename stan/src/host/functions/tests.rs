//! User functions on the host: transformed data and generated quantities against values
//! worked out by hand, `_rng` user functions on the draw's stream, and refused programs.

use std::collections::BTreeMap;

use crate::{GeneratedQuantities, HostRng, parse, read_data, transformed_data};

const PROGRAM: &str = r#"
functions {
  real poly(real x, vector c) {
    real total = 0;
    for (k in 1:rows(c)) {
      total = total * x + c[k];
    }
    return total;
  }
  int first_over(array[] int xs, int limit) {
    for (i in 1:size(xs)) {
      if (xs[i] > limit) {
        return i;
      }
    }
    return 0;
  }
  real half(real x) {
    return x / 2;
  }
  real column_total(array[] vector pts, int d) {
    return sum(pts[:, d]) + prod(pts[1]) + dot_self(pts[2]);
  }
  real shifted_normal_rng(real mu) {
    return normal_rng(mu, 1) + 100;
  }
  void must_be_positive(real x) {
    if (x <= 0) {
      reject("not positive: ", x);
    }
  }
}
data {
  array[4] int xs;
  array[2] vector[2] pts;
}
transformed data {
  real p = poly(2, [1, -3, 0.5]');
  int i = first_over(xs, 3);
  real h = half(3);
  real t = column_total(pts, 2);
}
parameters {
  real mu;
}
model {
  mu ~ normal(0, 1);
}
generated quantities {
  real draw = shifted_normal_rng(mu);
  real twice = 2 * poly(mu, [1, 0]');
  must_be_positive(twice + 1000);
}
"#;

const DATA: &str = r#"{"xs": [1, 3, 7, 9], "pts": [[1.5, 2], [3, -1]]}"#;

#[test]
fn host_runs_user_functions_in_transformed_data() {
    let program = parse(PROGRAM).expect("parses");
    let data = read_data(&program, DATA).expect("data");
    let env = transformed_data(&program, &data).expect("runs");
    let real = |name: &str| env[name].value.real_at(0);
    // 1 x^2 - 3 x + 0.5 at 2; the first of xs above 3 is the third; 3 / 2 is real division.
    assert_eq!(real("p"), 4.0 - 6.0 + 0.5);
    assert_eq!(env["i"].value.as_int(), Some(3));
    assert_eq!(real("h"), 1.5);
    // pts[:, 2] = {2, -1}; prod(pts[1]) = 3; dot_self(pts[2]) = 10.
    assert_eq!(real("t"), 1.0 + 3.0 + 10.0);
}

#[test]
fn host_runs_rng_user_functions_in_generated_quantities() {
    let program = parse(PROGRAM).expect("parses");
    let data = read_data(&program, DATA).expect("data");
    let gq = GeneratedQuantities::new(&program, &data).expect("prepares");
    let inputs = BTreeMap::from([("mu".to_owned(), vec![0.25])]);
    let out = gq.run_draw(&inputs, 11, 0, 3).expect("runs");
    // The user function draws from the same stream as a direct call would.
    let mut rng = HostRng::for_draw(11, 0, 3);
    let direct = 0.25 + rng.normal() + 100.0;
    assert_eq!(out, vec![direct, 0.5]);
}

#[test]
fn host_refuses_recursive_functions() {
    let source = "functions {\n  int f(int n) {\n    return n == 0 ? 0 : f(n - 1);\n  }\n}\ntransformed data {\n  int k = f(3);\n}\n";
    let program = parse(source).expect("parses");
    let data = read_data(&program, "{}").expect("data");
    let err = transformed_data(&program, &data).expect_err("recursion");
    let rendered = err.render("test.stan", source);
    assert!(
        rendered.starts_with(
            "test.stan:2:7: error: the function `f` calls itself: recursion is not supported"
        ),
        "{rendered}"
    );
    assert!(rendered.contains("int f(int n) {"), "{rendered}");
    assert!(rendered.contains("^"), "{rendered}");
}
