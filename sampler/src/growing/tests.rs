use super::*;
use crate::{CheckedModel, Limits};

/// Every size of the study is a valid model, and models grow with the size: the Gaussian
/// process's program by the cube, the chain's linearly, the ARMA model's data by the square
/// (its program stays the same).
#[test]
fn every_family_checks_at_every_size_and_grows() {
    for family in Family::ALL {
        let mut previous = (0, 0);
        for &n in family.sizes() {
            let model = family.model(n);
            assert_eq!(model.name, format!("{}{n}", family.name()));
            let checked = CheckedModel::new(model, &Limits::default())
                .unwrap_or_else(|err| panic!("{} {n}: {err}", family.name()));
            let program = checked.program();
            let size = (program.insts.len(), program.data.len());
            let grows = match family {
                Family::Arma => size.0 == previous.0.max(size.0) && size.1 > previous.1,
                Family::Gp | Family::Chain => size.0 > previous.0,
            };
            assert!(grows, "{} {n}: {size:?} after {previous:?}", family.name());
            previous = size;
        }
    }
    let gp = |n| {
        CheckedModel::new(gp(n), &Limits::default())
            .expect("checks")
            .program()
            .insts
            .len()
    };
    // (n^3 - n) / 3 multiply-subtracts of the factor alone.
    assert!(gp(11) > 400, "{}", gp(11));
    let chain_len = |n| {
        CheckedModel::new(chain(n), &Limits::default())
            .expect("checks")
            .program()
            .insts
            .len()
    };
    assert!(chain_len(200) < 2 * chain_len(100) + 10);
}

/// The Gaussian process's transformed values are the Cholesky factor of its kernel: `L L^T`
/// gives back `K` at a point.
#[test]
fn the_gaussian_process_factor_reproduces_its_kernel() {
    use crate::{Evaluator, LogDensity};
    let n = 5;
    let checked = CheckedModel::new(gp(n), &Limits::default()).expect("checks");
    let program = checked.program().clone();
    let mut evaluator = Evaluator::new(program.clone());
    let theta: Vec<f64> = (0..program.dim).map(|k| 0.1 * k as f64 - 0.2).collect();
    let mut values = vec![0.0; evaluator.n_outputs()];
    evaluator.write_outputs(&theta, &mut values);
    let columns = program.columns();
    let value = |name: &str| {
        let at = columns
            .iter()
            .position(|column| column.name == name)
            .unwrap_or_else(|| panic!("no column {name}"));
        values[at]
    };
    for i in 0..n {
        for j in 0..=i {
            let product: f64 = (0..=j)
                .map(|k| value(&format!("L{i}_{k}")) * value(&format!("L{j}_{k}")))
                .sum();
            let kernel = value(&format!("K{i}_{j}"));
            assert!(
                (product - kernel).abs() < 1e-9,
                "({i}, {j}): {product} vs {kernel}"
            );
        }
    }
}
