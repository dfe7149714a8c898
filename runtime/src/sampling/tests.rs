//! A request checked against the caller's limits before it is sent.

use super::*;
use crate::limits::{Holder, JobLimits};

#[test]
fn a_request_is_checked_against_the_callers_limits_before_it_is_sent() {
    let text = include_str!("../../../models/eight_schools_noncentered.json");
    let model = sampler::CheckedModel::from_json(text, &sampler::Limits::default())
        .unwrap()
        .model()
        .clone();
    let settings = SamplerSettings {
        num_warmup: 1000,
        num_draws: 1_000_000_000,
        ..SamplerSettings::default()
    };
    let mut request = SampleRequest::new(model, settings, 1, Seed(1));
    let shape = request.shape().unwrap();
    assert_eq!(shape.columns, 18);
    let limits = JobLimits::memory(16_000_000_000);
    let error = request.check(&limits, &Holder::Machine).unwrap_err();
    assert_eq!(
        error.to_string(),
        "job needs 200.0 GB (1 chain x 1000000000 draws x 25 values), over this machine's \
         available memory of 16.0 GB: lower --draws/--chains"
    );
    // A broadcast burn-in counts as warmup; a job that fits passes.
    request.settings.num_draws = 1000;
    request.warmup = WarmupMode::Broadcast { burn_in: 100 };
    assert_eq!(request.shape().unwrap().warmup, 1100);
    assert_eq!(request.check(&limits, &Holder::Machine), Ok(()));
    // Chains are bounded even when the job keeps nothing.
    request.n_chains = u32::MAX;
    request.settings.num_draws = 0;
    let error = request.check(&limits, &Holder::Caller).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("job asks for 4294967295 chains, over the limit of"),
        "{error}"
    );
}
