//! `stan`: a front end for the Stan language: lexer, parser, and an AST whose every node has a
//! span, with errors rendered as `file:line:column` plus the source line and a caret,
//! and a pretty-printer (`Display` on the AST) that prints valid Stan.
//!
//! Lowering to the model IR is not here yet (issue 23, step 2). Grammar references: stanc3's
//! `src/frontend/parser.mly` and `lexer.mll`, and the Stan reference manual.

pub mod ast;
mod error;
mod lexer;
mod parser;
mod print;

pub use ast::Program;
pub use error::{ParseError, ParseErrorKind, line_column, render};
pub use parser::parse;
