//! `stan`: a front end for the Stan language: lexer, parser, and an AST whose every node has a
//! span, with errors rendered as `file:line:column` plus the source line and a caret,
//! a pretty-printer (`Display` on the AST) that prints valid Stan, Stan's JSON data format,
//! lowering of a program plus its data to `sampler`'s model IR, and a host interpreter that
//! runs `transformed data` and `generated quantities`.
//!
//! Grammar references: stanc3's `src/frontend/parser.mly` and `lexer.mll`, and the Stan
//! reference manual. What the front end supports: [`reference::markdown`], kept in
//! `docs/stan-reference.md`.
//!
//! # Example
//!
//! A program and its data lowered to an IR model, sampled, and its generated quantities run
//! for every draw from the draw's parameter columns:
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use sampler::{CheckedModel, Limits, NoObserver, SamplerSettings, Seed};
//!
//! let source = "
//! data { int N; vector[N] y; }
//! parameters { real mu; real<lower=0> sigma; }
//! model { y ~ normal(mu, sigma); mu ~ normal(0, 5); sigma ~ normal(0, 5); }
//! generated quantities { real y_rep = normal_rng(mu, sigma); }
//! ";
//! let program = stan::parse(source).map_err(|e| e.render("model.stan", source))?;
//! let data = stan::read_data(&program, r#"{"N": 3, "y": [0.5, -1.0, 2.0]}"#)?;
//! let model = stan::lower(&program, &data, "model").map_err(|e| e.render("model.stan", source))?;
//! let model = CheckedModel::new(model, &Limits::default())?;
//!
//! let settings = SamplerSettings { num_warmup: 200, num_draws: 100, ..Default::default() };
//! let seed = Seed(1);
//! let traces = sampler::sample(&model, &settings, seed, 1, &NoObserver)?;
//!
//! // Generated quantities run on the host, from each draw's values by parameter name.
//! let quantities = stan::GeneratedQuantities::new(&program, &data)?;
//! assert_eq!(quantities.columns()[0].to_string(), "y_rep");
//! let columns = model.columns();
//! let trace = &traces[0];
//! for (i, row) in trace.draws.chunks(trace.n_columns).enumerate() {
//!     let mut inputs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
//!     for (column, &value) in columns.iter().zip(row) {
//!         inputs.entry(column.name.clone()).or_default().push(value);
//!     }
//!     // The draw's own random stream: (seed, chain, draw).
//!     let y_rep = quantities.run_draw(&inputs, seed.0, 0, i as u64)?;
//!     assert!(y_rep[0].is_finite());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod ast;
mod data;
mod error;
mod gq;
mod host;
mod lexer;
mod lower;
mod parser;
pub mod posteriordb;
mod print;
pub mod reference;
mod value;

pub use ast::Program;
pub use data::{Data, DataError, MAX_JSON_BYTES, MAX_VALUES, read_data};
pub use error::{ParseError, ParseErrorKind, line_column, render};
pub use gq::{GeneratedQuantities, GqColumn, transformed_data, typed_data};
pub use host::{HostError, HostRng, TypedEnv, eval_typed};
pub use lower::{LowerError, lower};
pub use parser::parse;
pub use value::{Elem, Typed, Value, Values};
