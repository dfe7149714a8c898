//! Lowering of a parsed Stan program plus its data to a `sampler` [`Model`] (IR v2).
//!
//! `data` and `transformed data` are evaluated on the host first. Parameters map to IR
//! parameters (`params`); `transformed parameters` and `model` are then *executed* with the
//! data known (`exec`): loops with known bounds are unrolled, conditions on data are decided,
//! and values that depend on parameters are built up as IR expressions (`expr`, `call`,
//! `density`). Transformed parameters become named [`sampler::Transformed`] values; `~` and
//! `target += *_lpdf(...)` become `Sample` statements, other `target +=` terms `Factor`s.
//! `generated quantities` is left to the host (`crate::gq`). Anything else is refused with
//! an error at the construct's span.
//!
//! Constants: the IR keeps or drops normalising constants the same way for `~` and for
//! `target += *_lpdf`, while Stan drops them only for `~`; log densities therefore match Stan's
//! up to a constant.

mod call;
mod density;
mod exec;
mod expr;
mod functions;
mod matrix;
mod multivariate;
mod params;
mod sym;
mod target;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
mod truncation;
mod vectorize;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use sampler::{DataValue, Expr as Ir, IR_VERSION, Model};

use crate::ast::{Program, Span};
use crate::data::Data;
use crate::error::render;
use crate::host::{Env, HostError};

/// A construct that cannot be lowered, at its span.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct LowerError {
    pub span: Span,
    pub message: String,
}

impl LowerError {
    pub fn new(span: Span, message: impl Into<String>) -> LowerError {
        LowerError {
            span,
            message: message.into(),
        }
    }

    /// `file:line:column: error: ...` with the source line and a caret.
    pub fn render(&self, file_name: &str, source: &str) -> String {
        render(file_name, source, self.span, &self.message)
    }
}

impl From<HostError> for LowerError {
    fn from(err: HostError) -> LowerError {
        LowerError::new(err.span, err.message)
    }
}

/// Lowers `program` with its `data` (from [`crate::read_data`]) to an IR model named `name`.
pub fn lower(program: &Program, data: &Data, name: &str) -> Result<Model, LowerError> {
    let functions = Rc::new(crate::host::Functions::new(program)?);
    // `generated quantities` runs on the host after sampling (`crate::GeneratedQuantities`).
    // `transformed data` runs on the host, once, before anything is lowered.
    let env = crate::gq::transformed_data(program, data)?
        .into_iter()
        .map(|(name, typed)| (name, typed.value))
        .collect();
    let mut lowerer = Lowerer {
        env,
        syms: BTreeMap::new(),
        scopes: Vec::new(),
        assignable: BTreeSet::new(),
        decl_spans: HashMap::new(),
        generated_items: HashMap::new(),
        read_once: HashSet::new(),
        hidden: 0,
        steps: 0,
        scalar_samples: BTreeMap::new(),
        scalar_factors: BTreeMap::new(),
        model: Model {
            ir_version: IR_VERSION,
            name: name.to_owned(),
            data: BTreeMap::new(),
            parameters: Vec::new(),
            transformed: Vec::new(),
            model: Vec::new(),
        },
        generated: 0,
        functions,
        call_depth: 0,
        reads_target: false,
    };
    if let Some(block) = &program.parameters {
        lowerer.parameters(block)?;
    }
    if let Some(block) = &program.transformed_parameters {
        lowerer.transformed_parameters(block)?;
    }
    if let Some(block) = &program.model {
        lowerer.model_block(block)?;
    }
    lowerer.merge_scalar_terms()?;
    Ok(lowerer.model)
}

pub(crate) struct Lowerer {
    /// Data and transformed data, by name.
    env: Env,
    /// Parameters, transformed parameters and locals that depend on parameters.
    syms: BTreeMap<String, sym::Sym>,
    /// Names declared in each open scope, innermost last.
    scopes: Vec<Vec<String>>,
    /// Variables the current block may assign: its own locals.
    assignable: BTreeSet<String>,
    /// Where each local was declared, for errors at the end of a block.
    decl_spans: HashMap<String, Span>,
    /// Generated data items by content, so repeated constants share one item.
    generated_items: HashMap<(bool, Vec<u64>), String>,
    /// Scalar variables read once since their last assignment (see `expr::read_var`).
    read_once: HashSet<String>,
    /// Hidden transformed values made so far (`_t1`, `_t2`, ...).
    hidden: usize,
    /// Statements run so far (see `exec::MAX_STEPS`).
    steps: usize,
    /// Scalar `~` statements by distribution, merged into vectorised ones at the end.
    scalar_samples: BTreeMap<String, Vec<(Ir, Vec<Ir>, Span)>>,
    /// Scalar `target +=` terms by structure, merged into vectorised ones at the end.
    scalar_factors: BTreeMap<String, Vec<Ir>>,
    model: Model,
    generated: usize,
    /// The program's user functions, inlined at each call.
    functions: Rc<crate::host::Functions>,
    /// Inlined calls in progress.
    call_depth: usize,
    /// Whether `target()` can be read: in `transformed parameters` and `model`.
    reads_target: bool,
}

fn unsupported<T>(span: Span, what: impl std::fmt::Display) -> Result<T, LowerError> {
    Err(LowerError::new(
        span,
        format!("{what} is not supported yet"),
    ))
}

impl Lowerer {
    /// Adds a data item: under the variable's own name, or a generated `_dN` (Stan names
    /// cannot start with `_`, so generated names never clash).
    fn data_item(&mut self, name: Option<String>, value: DataValue) -> Ir {
        let key = match (&name, &value) {
            (None, DataValue::Vector(v)) => Some((false, v.iter().map(|x| x.to_bits()).collect())),
            (None, DataValue::IntVector(v)) => Some((true, v.iter().map(|&x| x as u64).collect())),
            _ => None,
        };
        if let Some(key) = &key
            && let Some(existing) = self.generated_items.get(key)
        {
            return Ir::Ref(existing.clone());
        }
        let name = name.unwrap_or_else(|| {
            self.generated += 1;
            format!("_d{}", self.generated)
        });
        if let Some(key) = key {
            self.generated_items.insert(key, name.clone());
        }
        self.model.data.entry(name.clone()).or_insert(value);
        Ir::Ref(name)
    }
}
