//! `stan`: a front end for the Stan language: lexer, parser, and an AST whose every node has a
//! span, with errors rendered as `file:line:column` plus the source line and a caret,
//! a pretty-printer (`Display` on the AST) that prints valid Stan, Stan's JSON data format,
//! lowering of a program plus its data to `sampler`'s model IR, and a host interpreter that
//! runs `transformed data` and `generated quantities`.
//!
//! Grammar references: stanc3's `src/frontend/parser.mly` and `lexer.mll`, and the Stan
//! reference manual.

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
