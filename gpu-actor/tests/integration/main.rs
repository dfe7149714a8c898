//! `gpu-actor`'s integration tests, one binary:
//! * `codegen`: every shader the generator can produce for our models passes naga's
//!   validation (no GPU needed);
//! * `parity`: GPU log densities and gradients match the f64 CPU evaluator at fresh random
//!   points, in f32 and f64, for every benchmark model and models that use every operation,
//!   transform and distribution, with both tape placements;
//! * `device`: the device thread's behaviour (uploads once, caches pipelines, refuses bad
//!   requests with errors, survives nothing it should not: a panic or a lost device gives
//!   errors, never a hang);
//! * `f32_accuracy`: f32 on ill-conditioned regressions, against the CPU in the units NUTS
//!   feels (the log density's differences, the gradient whitened by the posterior's scale);
//! * `actors`: the GPU supervisor and workers (jobs, reports, restarts after a panic or a lost
//!   device with errors to in-flight callers, escalation, the CPU fallback);
//! * `precision`: `--precision auto` on ill-conditioned regressions (f64, matching the CPU),
//!   on an adapter without f64 (the CPU, saying why) and on an ordinary model (f32);
//! * `warmup`: the pooled warmup adapts like the CPU's on an ill-conditioned regression.
//!
//! GPU tests print a skip line when no adapter is found, unless `REQUIRE_GPU=1`, which makes
//! that a failure (CI sets it; lavapipe is enough).

mod actors;
mod codegen;
mod device;
mod f32_accuracy;
mod loop_limit;
mod models;
mod parity;
mod posterior;
mod precision;
mod support;
mod warmup;
