use sampler::{CheckedModel, Evaluator, Limits, LogDensity};

use super::*;

fn model() -> CheckedModel {
    let json = r#"{ "ir_version": 1, "name": "check",
        "data": { "y": { "vector": [1.5, -0.3, 2.2, 0.7] } },
        "parameters": [ { "name": "mu" }, { "name": "sigma", "constraint": "positive" } ],
        "model": [
          { "sample": { "value": "mu", "dist": { "normal": { "mu": 0, "sigma": 10 } } } },
          { "sample": { "value": "sigma", "dist": { "exponential": { "rate": 1 } } } },
          { "sample": { "value": "y", "dist": { "normal": { "mu": "mu", "sigma": "sigma" } } } } ] }"#;
    CheckedModel::from_json(json, &Limits::default()).expect("a valid model")
}

fn cpu(model: &CheckedModel, q: &[f64]) -> (f64, Vec<f64>) {
    let mut evaluator = Evaluator::new(model.program().clone());
    let mut grad = vec![0.0; q.len()];
    let lp = evaluator.logp_grad(q, &mut grad);
    (lp, grad)
}

#[test]
fn check_accepts_rounding_and_refuses_a_wrong_density_or_gradient() {
    let model = model();
    let program = model.program();
    let q = [0.4, -0.2];
    let (lp, grad) = cpu(&model, &q);
    let check = |lp: f64, grad: Option<&[f64]>| {
        check_point(
            "test adapter",
            program,
            Precision::F32,
            3,
            CheckedPoint::Initial,
            &q,
            lp,
            grad,
        )
    };
    // f32 rounding of every value passes.
    let rounded: Vec<f64> = grad.iter().map(|&g| f64::from(g as f32)).collect();
    check(f64::from(lp as f32), Some(&rounded)).expect("f32 rounding is no mismatch");
    check(lp, None).expect("the CPU's own value");
    // A log density off by a nat, or a gradient coordinate off by 10%, stops the run.
    let error = check(lp + 1.0, Some(&grad)).expect_err("a wrong density");
    let message = error.to_string();
    assert!(
        message.contains("test adapter")
            && message.contains("chain 3")
            && message.contains("log density"),
        "{message}"
    );
    let mut wrong = grad.clone();
    wrong[1] *= 1.1;
    let message = check(lp, Some(&wrong))
        .expect_err("a wrong gradient")
        .to_string();
    assert!(message.contains("gradient[1]"), "{message}");
    // A non-finite value where the CPU's is finite is a mismatch too.
    assert!(check(f64::NAN, None).is_err());
}
