//! Helpers shared by the lowering's unit tests: lower a program, and check its log density
//! against one written by hand (up to a constant) with gradients against finite differences.

use sampler::{CheckedModel, Limits, LogDensity};

pub(super) fn try_lower(source: &str, data: &str) -> Result<sampler::Model, String> {
    let program = crate::parse(source).map_err(|e| e.render("test.stan", source))?;
    let data = crate::read_data(&program, data).map_err(|e| e.to_string())?;
    crate::lower::lower(&program, &data, "test").map_err(|e| e.render("test.stan", source))
}

pub(super) fn lower(source: &str, data: &str) -> CheckedModel {
    let model = try_lower(source, data).unwrap_or_else(|e| panic!("{e}"));
    CheckedModel::new(model, &Limits::default())
        .unwrap_or_else(|e| panic!("the IR refuses the lowered model: {e}"))
}

/// The lowered log density minus `by_hand` is one constant (within `lp_tolerance`, relative)
/// at every point, and the gradient matches central finite differences (allowing for the
/// rounding of the log density over the step).
pub(super) fn check_points(
    model: &CheckedModel,
    points: &[Vec<f64>],
    lp_tolerance: f64,
    by_hand: impl Fn(&[f64]) -> f64,
) {
    let mut eval = model.evaluator();
    let mut offset = None;
    for theta in points {
        let dim = theta.len();
        let mut grad = vec![0.0; dim];
        let lp = eval.logp_grad(theta, &mut grad);
        let expected = by_hand(theta);
        assert!(lp.is_finite(), "logp {lp} at {theta:?}");
        let diff = lp - expected;
        let first = *offset.get_or_insert(diff);
        assert!(
            (diff - first).abs() <= lp_tolerance * expected.abs().max(1.0),
            "logp {lp} vs by hand {expected} (constant {first}, here {diff}) at {theta:?}"
        );
        for i in 0..dim {
            let h = 1e-6 * theta[i].abs().max(1.0);
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (eval.logp(&up) - eval.logp(&down)) / (2.0 * h);
            assert!(
                (grad[i] - fd).abs() <= 1e-5 * fd.abs().max(1.0) + 1e-11 * lp.abs() / h,
                "d/dtheta[{i}] {} vs finite difference {fd} at {theta:?}",
                grad[i]
            );
        }
    }
}
