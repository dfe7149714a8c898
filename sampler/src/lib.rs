//! `sampler`: the model IR, its lowering, the CPU log density and gradient, NUTS with Stan's and
//! nutpie's adaptation, and convergence diagnostics.
//!
//! Pure computation: no async, no GPU, no network, no files. Chains run on threads of the
//! caller's choosing; many chains are the base case.

mod adapt;
mod builder;
mod chain;
mod chain_core;
pub mod diagnostics;
mod dist;
mod error;
mod eval;
pub mod growing;
pub mod ir;
mod limits;
mod linalg;
mod lower;
mod metric;
mod model_error;
pub mod nuts;
mod outputs;
mod program;
pub mod reference;
mod rng;
mod room;
mod run;
mod sample;
mod special;
pub mod stan_csv;
pub mod summary;
mod validate;

pub use adapt::{AdaptationKind, MetricKind, Welford, WindowOptions, WindowedMetric};
pub use builder::ModelBuilder;
pub use error::SampleError;
pub use eval::{Evaluator, LogDensity};
pub use ir::{
    BinaryOp, Constraint, DataValue, DecodeError, Dist, Expr, IR_VERSION, MIN_IR_VERSION, Model,
    Parameter, Statement, Transformed, UnaryOp,
};
pub use limits::Limits;
pub use metric::Metric;
pub use model_error::{ModelError, Problem};
pub use outputs::OutputWriter;
pub use program::{
    Column, DataRef, DensityKind, IndexRef, Inst, ListRef, MapOp, MatrixRef, Operand, Output,
    Program, Slot, SlotId, StatementId, ThetaRef, Transform, ZipOp,
};
pub use rng::{ChainId, ChainRng, Seed};
pub use room::Room;
pub use run::{
    ChainDraws, ChainSpec, ChainTrace, DrawBatch, DrawEvent, DrawStats, NoObserver, Observer,
    SamplerSettings, Tuning,
};
pub use sample::{sample, sample_chains};
pub use special::{digamma, lgamma, log_sum_exp, logistic, softplus};
pub use summary::RunSummary;
pub use validate::{CheckedModel, LoadError, ModelHash};
