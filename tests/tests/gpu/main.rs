//! The GPU against the CPU on whole programs: every posteriordb program the Stan front end
//! lowers, its log density and gradient computed by the device (lavapipe in CI) and by the
//! f64 CPU evaluator at the same random points.

mod stan_programs;
