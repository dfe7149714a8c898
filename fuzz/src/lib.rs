//! What the model targets do once an input has decoded: check invariants of a valid model and
//! evaluate its log density and gradient at a point derived from the input; and what the wire
//! target does (`wire`).

pub mod wire;

use sampler::{CheckedModel, Limits, LoadError, LogDensity, Model};

/// Small limits, so that one input costs microseconds to milliseconds, not seconds.
pub const LIMITS: Limits = Limits {
    max_name_len: 64,
    max_data_values: 10_000,
    max_dim: 1_000,
    max_declarations: 1_000,
    max_expr_nodes: 10_000,
    max_tape_values: 100_000,
    max_model_bytes: 1 << 20,
};

/// Exercises the outcome of `CheckedModel::from_json` or `from_msgpack` on `input`.
///
/// Errors are fine (their messages are rendered, which must not panic either). A valid model
/// must survive a msgpack round trip unchanged, and its evaluator must return some value at a
/// point derived from the input.
pub fn exercise(input: &[u8], loaded: Result<CheckedModel, LoadError>) {
    let checked = match loaded {
        Ok(checked) => checked,
        Err(err) => {
            let _ = err.to_string();
            return;
        }
    };

    let bytes = checked.model().to_msgpack();
    let again = Model::from_msgpack(&bytes, usize::MAX).expect("own msgpack decodes");
    assert_eq!(
        &again,
        checked.model(),
        "msgpack round trip changed the model"
    );
    let rechecked = CheckedModel::new(again, &LIMITS).expect("a valid model stays valid");
    assert_eq!(rechecked.hash(), checked.hash());

    let mut evaluator = checked.evaluator();
    let dim = evaluator.dim();
    assert_eq!(dim, checked.dim());
    let theta = point(input, dim);
    let mut grad = vec![0.0; dim];
    let _lp = evaluator.logp_grad(&theta, &mut grad);
    let mut outputs = vec![0.0; evaluator.n_outputs()];
    evaluator.write_outputs(&theta, &mut outputs);
    assert_eq!(outputs.len(), checked.columns().len());
    let _ = evaluator.explain(&theta);
}

/// A point of the unconstrained space, seeded by the input's FNV-1a hash: mostly moderate
/// values, sometimes 0 or large ones, which is where transforms overflow.
fn point(input: &[u8], dim: usize) -> Vec<f64> {
    let mut state = input.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    }) | 1;
    (0..dim)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let uniform = (state >> 11) as f64 / (1u64 << 53) as f64;
            match state % 16 {
                0 => 0.0,
                1 => 800.0 * (uniform - 0.5),
                _ => 6.0 * (uniform - 0.5),
            }
        })
        .collect()
}
