//! Transformed data and generated quantities, run on the host by the interpreter of
//! [`crate::host`].
//!
//! `generated quantities` runs once per kept draw, from the draw's constrained parameters
//! and transformed parameters (by name, flattened row-major), with a random stream per
//! (seed, chain, draw) ([`HostRng::for_draw`]), and returns the values of the block's
//! top-level declarations, flattened row-major, named like the sampler's columns
//! (`y_rep[3]`, `m[2,1]`). Transformed parameters that the draw does not carry are computed
//! from the parameters by running the `transformed parameters` block on the host.

use std::collections::BTreeMap;

use crate::ast::{Block, Constraint, Program, Span, StmtKind};
use crate::data::Data;
use crate::host::{Functions, HostError, HostRng, Interp, TypedEnv};
use crate::value::{Elem, Typed, Value, Values};

/// The seed of `_rng` calls in `transformed data`: fixed, so that lowering and generated
/// quantities see the same transformed data.
const TRANSFORMED_DATA_SEED: u64 = 0x7464_5f72_6e67;

/// A declared variable with its sizes evaluated.
#[derive(Debug, Clone)]
struct Declared {
    name: String,
    shape: Vec<usize>,
    elem: Elem,
    span: Span,
}

/// One output column of generated quantities, in the sampler's column terms: `index` is the
/// flat (row-major) position, `None` for a scalar; `dims` the shape when it has two or more
/// dimensions (for names like `m[2,1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GqColumn {
    pub name: String,
    pub index: Option<usize>,
    pub dims: Vec<usize>,
}

impl std::fmt::Display for GqColumn {
    /// `y`, `y_rep[3]`, `m[2,1]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(flat) = self.index else {
            return f.write_str(&self.name);
        };
        let indices: Vec<String> = if self.dims.len() < 2 {
            vec![(flat + 1).to_string()]
        } else {
            let mut rest = flat;
            let mut out = vec![0; self.dims.len()];
            for (k, &dim) in self.dims.iter().enumerate().rev() {
                out[k] = rest % dim.max(1) + 1;
                rest /= dim.max(1);
            }
            out.iter().map(usize::to_string).collect()
        };
        write!(f, "{}[{}]", self.name, indices.join(","))
    }
}

/// Data with the element types the `data` block declares.
pub fn typed_data(program: &Program, data: &Data) -> TypedEnv {
    let mut env = TypedEnv::new();
    for stmt in program.data.iter().flat_map(|b| &b.stmts) {
        let StmtKind::Decl { ty, vars } = &stmt.kind else {
            continue;
        };
        let (elem, _) = crate::host::base_elem(ty.base);
        for var in vars {
            if let Some(value) = data.values.get(&var.name.name) {
                env.insert(var.name.name.clone(), Typed::new(value.clone(), elem));
            }
        }
    }
    env
}

/// Runs `transformed data` over `data`: the data and the transformed data, typed.
pub fn transformed_data(program: &Program, data: &Data) -> Result<TypedEnv, HostError> {
    let data_env = typed_data(program, data);
    let Some(block) = &program.transformed_data else {
        return Ok(data_env);
    };
    let functions = Functions::new(program)?;
    let mut rng = HostRng::for_draw(TRANSFORMED_DATA_SEED, 0, 0);
    let mut interp = Interp::new(vec![&data_env], Some(&mut rng)).with_functions(&functions);
    interp.run_block(&block.stmts)?;
    check_block(&mut interp, block)?;
    let td = interp.into_block_scope();
    let mut env = data_env;
    env.extend(td);
    Ok(env)
}

/// The top-level declarations of a block with their sizes.
fn declarations(
    block: Option<&Block>,
    globals: &TypedEnv,
    functions: &Functions,
) -> Result<Vec<Declared>, HostError> {
    let mut out = Vec::new();
    let mut interp = Interp::new(vec![globals], None).with_functions(functions);
    for stmt in block.iter().flat_map(|b| &b.stmts) {
        if let StmtKind::Decl { ty, vars } = &stmt.kind {
            let (shape, elem, _) = interp.declared(ty)?;
            for var in vars {
                out.push(Declared {
                    name: var.name.name.clone(),
                    shape: shape.clone(),
                    elem,
                    span: var.name.span,
                });
            }
        }
    }
    Ok(out)
}

/// Checks the declared bounds of a block's top-level variables, as Stan does at the end of
/// the block.
fn check_block(interp: &mut Interp, block: &Block) -> Result<(), HostError> {
    for stmt in &block.stmts {
        let StmtKind::Decl { ty, vars } = &stmt.kind else {
            continue;
        };
        let Some(Constraint::Range { lower, upper }) = &ty.constraint else {
            continue;
        };
        let lower = lower.as_ref().map(|e| interp.eval(e)).transpose()?;
        let upper = upper.as_ref().map(|e| interp.eval(e)).transpose()?;
        for var in vars {
            let Some(value) = interp.block_scope().get(&var.name.name) else {
                continue;
            };
            for i in 0..value.len() {
                let x = value.real_at(i);
                let bound_at = |b: &Typed| {
                    b.real_at(if b.is_scalar() {
                        0
                    } else {
                        i.min(b.len().saturating_sub(1))
                    })
                };
                if let Some(lo) = &lower
                    && !(x >= bound_at(lo))
                {
                    return Err(HostError {
                        span: var.name.span,
                        message: format!(
                            "`{}`{} is {x}, but must be at least {}",
                            var.name.name,
                            position(value, i),
                            bound_at(lo)
                        ),
                    });
                }
                if let Some(hi) = &upper
                    && !(x <= bound_at(hi))
                {
                    return Err(HostError {
                        span: var.name.span,
                        message: format!(
                            "`{}`{} is {x}, but must be at most {}",
                            var.name.name,
                            position(value, i),
                            bound_at(hi)
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

/// `[i,j]` (1-based) of flat position `i`, empty for a scalar.
fn position(value: &Typed, i: usize) -> String {
    let shape = value.shape();
    if shape.is_empty() {
        return String::new();
    }
    let mut rest = i;
    let mut parts = vec![0; shape.len()];
    for (k, &dim) in shape.iter().enumerate().rev() {
        parts[k] = rest % dim.max(1) + 1;
        rest /= dim.max(1);
    }
    let parts: Vec<String> = parts.iter().map(usize::to_string).collect();
    format!("[{}]", parts.join(","))
}

/// A program's generated quantities, ready to run per draw.
#[derive(Debug, Clone)]
pub struct GeneratedQuantities {
    /// Data and transformed data.
    globals: TypedEnv,
    parameters: Vec<Declared>,
    transformed: Vec<Declared>,
    transformed_block: Option<Block>,
    block: Option<Block>,
    outputs: Vec<Declared>,
    functions: Functions,
}

impl GeneratedQuantities {
    /// Prepares `program`'s generated quantities over its `data` (transformed data runs here).
    pub fn new(program: &Program, data: &Data) -> Result<GeneratedQuantities, HostError> {
        let globals = transformed_data(program, data)?;
        let functions = Functions::new(program)?;
        let declared = |block: &Option<Block>| declarations(block.as_ref(), &globals, &functions);
        let parameters = declared(&program.parameters)?;
        let transformed = declared(&program.transformed_parameters)?;
        let outputs = declared(&program.generated_quantities)?;
        Ok(GeneratedQuantities {
            globals,
            parameters,
            transformed,
            transformed_block: program.transformed_parameters.clone(),
            block: program.generated_quantities.clone(),
            outputs,
            functions,
        })
    }

    /// Whether the program generates nothing.
    pub fn is_empty(&self) -> bool {
        self.outputs
            .iter()
            .all(|d| d.shape.iter().product::<usize>() == 0)
    }

    /// Data and transformed data, typed.
    pub fn transformed_data(&self) -> &TypedEnv {
        &self.globals
    }

    /// The output columns, in declaration order, each value row-major.
    pub fn columns(&self) -> Vec<GqColumn> {
        let mut out = Vec::new();
        for d in &self.outputs {
            let len: usize = d.shape.iter().product();
            for i in 0..len {
                out.push(GqColumn {
                    name: d.name.clone(),
                    index: (!d.shape.is_empty()).then_some(i),
                    dims: if d.shape.len() > 1 {
                        d.shape.clone()
                    } else {
                        Vec::new()
                    },
                });
            }
        }
        out
    }

    /// Runs the block for one draw: `inputs` maps each parameter (and transformed parameter,
    /// when available) to its flattened row-major values.
    pub fn run(
        &self,
        inputs: &BTreeMap<String, Vec<f64>>,
        rng: &mut HostRng,
    ) -> Result<Vec<f64>, HostError> {
        let take = |d: &Declared| -> Option<Result<Typed, HostError>> {
            let values = inputs.get(&d.name)?;
            let len: usize = d.shape.iter().product();
            if values.len() != len {
                return Some(Err(HostError {
                    span: d.span,
                    message: format!(
                        "`{}` has {} values in the draw but is declared with {len}",
                        d.name,
                        values.len()
                    ),
                }));
            }
            Some(Ok(Typed::new(
                Value {
                    shape: d.shape.clone(),
                    values: Values::Real(values.clone()),
                },
                d.elem,
            )))
        };
        let mut params = TypedEnv::new();
        for d in &self.parameters {
            match take(d) {
                Some(value) => params.insert(d.name.clone(), value?),
                None => {
                    return Err(HostError {
                        span: d.span,
                        message: format!("parameter `{}` is missing from the draw", d.name),
                    });
                }
            };
        }
        let mut transformed = TypedEnv::new();
        let complete = self
            .transformed
            .iter()
            .all(|d| inputs.contains_key(&d.name));
        if complete {
            for d in &self.transformed {
                if let Some(value) = take(d) {
                    transformed.insert(d.name.clone(), value?);
                }
            }
        } else if let Some(block) = &self.transformed_block {
            let mut interp =
                Interp::new(vec![&self.globals, &params], None).with_functions(&self.functions);
            interp.run_block(&block.stmts)?;
            check_block(&mut interp, block)?;
            transformed = interp.into_block_scope();
        }
        let Some(block) = &self.block else {
            return Ok(Vec::new());
        };
        let mut interp = Interp::new(vec![&self.globals, &params, &transformed], Some(rng))
            .with_functions(&self.functions);
        interp.run_block(&block.stmts)?;
        check_block(&mut interp, block)?;
        let scope = interp.into_block_scope();
        let mut out = Vec::new();
        for d in &self.outputs {
            match scope.get(&d.name) {
                Some(value) => out.extend(value.reals()),
                None => out.extend(std::iter::repeat_n(f64::NAN, d.shape.iter().product())),
            }
        }
        Ok(out)
    }

    /// [`GeneratedQuantities::run`] with the stream of draw `draw` of chain `chain`.
    pub fn run_draw(
        &self,
        inputs: &BTreeMap<String, Vec<f64>>,
        seed: u64,
        chain: u32,
        draw: u64,
    ) -> Result<Vec<f64>, HostError> {
        let mut rng = HostRng::for_draw(seed, chain, draw);
        self.run(inputs, &mut rng)
    }
}

#[cfg(test)]
mod tests;
