//! Declarations and types: sized types with constraints, and the unsized types of function signatures.

use super::Parser;
use super::expr::CONSTRAINT_PRECEDENCE;
use crate::ast::{
    BaseType, Constraint, Declarator, Expr, FunctionDef, Param, SizedType, Span, Stmt, StmtKind,
    UnsizedType,
};
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::{Keyword, Punct, TokenKind};

fn not_supported(span: Span, feature: &str) -> ParseError {
    ParseError::new(
        span,
        ParseErrorKind::NotSupported {
            feature: feature.to_string(),
        },
    )
}

fn invalid(span: Span, message: String) -> ParseError {
    ParseError::new(span, ParseErrorKind::Invalid(message))
}

impl Parser<'_> {
    /// A base type keyword, or an error for the types Stan has but we do not.
    fn base_type(&mut self) -> Result<BaseType, ParseError> {
        let span = self.span();
        let base = match self.peek() {
            TokenKind::Keyword(Keyword::Int) => BaseType::Int,
            TokenKind::Keyword(Keyword::Real) => BaseType::Real,
            TokenKind::Keyword(Keyword::Vector) => BaseType::Vector,
            TokenKind::Keyword(Keyword::RowVector) => BaseType::RowVector,
            TokenKind::Keyword(Keyword::Matrix) => BaseType::Matrix,
            TokenKind::Keyword(Keyword::Ordered) => BaseType::Ordered,
            TokenKind::Keyword(Keyword::PositiveOrdered) => BaseType::PositiveOrdered,
            TokenKind::Keyword(Keyword::Simplex) => BaseType::Simplex,
            TokenKind::Keyword(Keyword::UnitVector) => BaseType::UnitVector,
            TokenKind::Keyword(Keyword::CholeskyFactorCorr) => BaseType::CholeskyFactorCorr,
            TokenKind::Keyword(Keyword::CholeskyFactorCov) => BaseType::CholeskyFactorCov,
            TokenKind::Keyword(Keyword::CorrMatrix) => BaseType::CorrMatrix,
            TokenKind::Keyword(Keyword::CovMatrix) => BaseType::CovMatrix,
            TokenKind::Keyword(Keyword::Complex) => {
                return Err(not_supported(span, "`complex` (complex numbers)"));
            }
            TokenKind::Keyword(Keyword::Tuple) => {
                return Err(not_supported(span, "`tuple` types"));
            }
            TokenKind::Keyword(Keyword::SumToZeroVector) => {
                return Err(not_supported(span, "`sum_to_zero_vector`"));
            }
            TokenKind::Keyword(Keyword::Array) => {
                return Err(invalid(
                    span,
                    "write all array dimensions in one `array[...]`, as in `array[M, N] real`"
                        .to_string(),
                ));
            }
            TokenKind::Ident(name) if name.starts_with("complex_") => {
                let feature = format!("`{name}` (complex numbers)");
                return Err(not_supported(span, &feature));
            }
            _ => return Err(self.expected("a type")),
        };
        self.bump();
        Ok(base)
    }

    /// `array[d1, d2] base<constraint>[sizes]`.
    pub(super) fn sized_type(&mut self) -> Result<SizedType, ParseError> {
        let start = self.span();
        let mut array_dims = Vec::new();
        if self.eat_keyword(Keyword::Array) {
            self.expect(Punct::LBracket)?;
            array_dims = self.exprs_until(Punct::RBracket, " in the array dimensions")?;
        }
        let base_span = self.span();
        let base = self.base_type()?;
        let constraint = if self.at(Punct::Lt) {
            let constraint = self.constraint()?;
            let allowed = matches!(
                (&constraint, base),
                (Constraint::Range { .. }, BaseType::Int | BaseType::Real)
                    | (
                        _,
                        BaseType::Real | BaseType::Vector | BaseType::RowVector | BaseType::Matrix
                    )
            );
            if !allowed {
                return Err(invalid(
                    base_span.to(self.prev_span()),
                    format!("`{}` cannot take this constraint", base.as_str()),
                ));
            }
            Some(constraint)
        } else {
            None
        };
        let sizes = if self.at(Punct::LBracket) {
            self.bump();
            self.exprs_until(Punct::RBracket, " in the sizes")?
        } else {
            Vec::new()
        };
        let expected_sizes: &[usize] = match base {
            BaseType::Int | BaseType::Real => &[0],
            BaseType::Matrix => &[2],
            BaseType::CholeskyFactorCov => &[1, 2],
            _ => &[1],
        };
        if !expected_sizes.contains(&sizes.len()) {
            let message = match (base, sizes.len()) {
                (BaseType::Int | BaseType::Real, _) => format!(
                    "`{}` takes no size; for an array write `array[N] {}`",
                    base.as_str(),
                    base.as_str()
                ),
                (BaseType::Matrix, _) => "`matrix` needs two sizes: `matrix[M, N]`".to_string(),
                (BaseType::CholeskyFactorCov, _) => {
                    "`cholesky_factor_cov` needs one or two sizes: `[M]` or `[M, N]`".to_string()
                }
                (_, 0) => format!("`{}` needs a size: `{}[N]`", base.as_str(), base.as_str()),
                _ => format!("`{}` takes exactly one size", base.as_str()),
            };
            return Err(invalid(base_span.to(self.prev_span()), message));
        }
        Ok(SizedType {
            base,
            sizes,
            constraint,
            array_dims,
            span: start.to(self.prev_span()),
        })
    }

    /// `<lower=a, upper=b>` or `<offset=a, multiplier=b>`; bounds stop below `>`.
    fn constraint(&mut self) -> Result<Constraint, ParseError> {
        let open = self.expect(Punct::Lt)?;
        let mut lower = None;
        let mut upper = None;
        let mut offset = None;
        let mut multiplier = None;
        loop {
            let key_span = self.span();
            let key = match self.peek() {
                TokenKind::Ident(name) => name.clone(),
                _ => {
                    return Err(self.expected("`lower`, `upper`, `offset` or `multiplier`"));
                }
            };
            let slot = match key.as_str() {
                "lower" => &mut lower,
                "upper" => &mut upper,
                "offset" => &mut offset,
                "multiplier" => &mut multiplier,
                _ => return Err(self.expected("`lower`, `upper`, `offset` or `multiplier`")),
            };
            if slot.is_some() {
                return Err(invalid(key_span, format!("`{key}` is given twice")));
            }
            self.bump();
            self.expect(Punct::Assign)?;
            let value: Expr = self.expr_bp(CONSTRAINT_PRECEDENCE)?;
            *slot = Some(value);
            if key == "lower" && upper.is_some() {
                return Err(invalid(
                    key_span,
                    "write `lower` before `upper`: `<lower=a, upper=b>`".to_string(),
                ));
            }
            if self.eat(Punct::Gt) {
                break;
            }
            if !self.eat(Punct::Comma) {
                return Err(self.expected(
                    "`,` or `>` (a bound that uses a comparison must be in parentheses)",
                ));
            }
        }
        let span = open.to(self.prev_span());
        match (lower, upper, offset, multiplier) {
            (lower, upper, None, None) => Ok(Constraint::Range { lower, upper }),
            (None, None, offset, multiplier) => Ok(Constraint::Affine { offset, multiplier }),
            _ => Err(invalid(
                span,
                "`lower`/`upper` cannot be combined with `offset`/`multiplier`".to_string(),
            )),
        }
    }

    /// `type name [= init], name2 [= init2];`
    pub(super) fn decl_stmt(&mut self) -> Result<Stmt, ParseError> {
        let start = self.span();
        let ty = self.sized_type()?;
        let mut vars = Vec::new();
        loop {
            let name = self.ident()?;
            if self.at(Punct::LBracket) {
                return Err(ParseError::new(
                    self.span(),
                    ParseErrorKind::Removed {
                        what: "array sizes after the variable name (`real x[N]`)".to_string(),
                        instead: format!("write `array[N] {} {}`", ty.base.as_str(), name.name),
                    },
                ));
            }
            let init = if self.eat(Punct::Assign) {
                Some(self.expr()?)
            } else {
                None
            };
            vars.push(Declarator { name, init });
            if self.eat(Punct::Comma) {
                continue;
            }
            self.expect(Punct::Semi)
                .map_err(|_| self.expected("`;`, `,` or `=`"))?;
            break;
        }
        Ok(Stmt {
            kind: StmtKind::Decl { ty, vars },
            span: start.to(self.prev_span()),
        })
    }

    /// `array[,] vector`: a type without sizes or constraints.
    fn unsized_type(&mut self) -> Result<UnsizedType, ParseError> {
        let start = self.span();
        let mut array_rank = 0;
        if self.eat_keyword(Keyword::Array) {
            self.expect(Punct::LBracket)?;
            array_rank = 1;
            while self.eat(Punct::Comma) {
                array_rank += 1;
            }
            self.expect(Punct::RBracket)
                .map_err(|_| self.expected("`,` or `]` (no sizes in a function signature)"))?;
        }
        let base_span = self.span();
        let base = self.base_type()?;
        if !matches!(
            base,
            BaseType::Int
                | BaseType::Real
                | BaseType::Vector
                | BaseType::RowVector
                | BaseType::Matrix
        ) {
            return Err(invalid(
                base_span,
                format!(
                    "`{}` is not allowed in a function signature; use `vector` or `matrix`",
                    base.as_str()
                ),
            ));
        }
        if self.at(Punct::LBracket) {
            return Err(ParseError::new(
                self.span(),
                ParseErrorKind::Removed {
                    what: "array types written `real[]`".to_string(),
                    instead: format!("write `array[] {}`", base.as_str()),
                },
            ));
        }
        Ok(UnsizedType {
            base,
            array_rank,
            span: start.to(self.prev_span()),
        })
    }

    /// `void f(data real x, vector y) { ... }` or a forward declaration ending in `;`.
    pub(super) fn function_def(&mut self) -> Result<FunctionDef, ParseError> {
        let start = self.span();
        let return_type = if self.eat_keyword(Keyword::Void) {
            None
        } else {
            Some(self.unsized_type()?)
        };
        let name = self.ident()?;
        self.expect(Punct::LParen)?;
        let mut params = Vec::new();
        if !self.eat(Punct::RParen) {
            loop {
                let param_start = self.span();
                let data_only = self.eat_keyword(Keyword::Data);
                let ty = self.unsized_type()?;
                let param_name = self.ident()?;
                params.push(Param {
                    data_only,
                    ty,
                    name: param_name,
                    span: param_start.to(self.prev_span()),
                });
                if self.eat(Punct::RParen) {
                    break;
                }
                if !self.eat(Punct::Comma) {
                    return Err(self.expected("`,` or `)`"));
                }
            }
        }
        let body = if self.eat(Punct::Semi) {
            None
        } else if self.at(Punct::LBrace) {
            Some(self.stmt()?)
        } else {
            return Err(self.expected("`{` (a function body) or `;` (a forward declaration)"));
        };
        Ok(FunctionDef {
            return_type,
            name,
            params,
            body,
            span: start.to(self.prev_span()),
        })
    }
}
