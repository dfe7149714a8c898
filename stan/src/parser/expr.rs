//! Pratt parser for expressions, with stanc3's precedence and associativity (`BinaryOp::precedence`).

use super::Parser;
use crate::ast::{Assoc, BinaryOp, Expr, ExprKind, Ident, Index, PREFIX_PRECEDENCE, UnaryOp};
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::{Keyword, Punct, TokenKind};

/// Binding power of `? :`, the loosest operator.
const TERNARY_PRECEDENCE: u8 = 1;

/// Constraint bounds (`<lower=e>`) stop below comparisons, so that `>` closes them.
pub(super) const CONSTRAINT_PRECEDENCE: u8 = 6;

/// Suffixes of functions that take the conditional bar: `normal_lpdf(y | mu, sigma)`.
const CONDITIONAL_SUFFIXES: &[&str] = &[
    "_lpdf", "_lupdf", "_lpmf", "_lupmf", "_lcdf", "_lccdf", "_cdf",
];

fn binary_op(token: &TokenKind) -> Option<BinaryOp> {
    let TokenKind::Punct(punct) = token else {
        return None;
    };
    Some(match punct {
        Punct::OrOr => BinaryOp::Or,
        Punct::AndAnd => BinaryOp::And,
        Punct::EqEq => BinaryOp::Eq,
        Punct::NotEq => BinaryOp::NotEq,
        Punct::Lt => BinaryOp::Lt,
        Punct::Le => BinaryOp::Le,
        Punct::Gt => BinaryOp::Gt,
        Punct::Ge => BinaryOp::Ge,
        Punct::Plus => BinaryOp::Add,
        Punct::Minus => BinaryOp::Sub,
        Punct::Star => BinaryOp::Mul,
        Punct::Slash => BinaryOp::Div,
        Punct::Percent => BinaryOp::Mod,
        Punct::DotStar => BinaryOp::EltMul,
        Punct::DotSlash => BinaryOp::EltDiv,
        Punct::Backslash => BinaryOp::LeftDiv,
        Punct::IntDiv => BinaryOp::IntDiv,
        Punct::Hat => BinaryOp::Pow,
        Punct::DotHat => BinaryOp::EltPow,
        _ => return None,
    })
}

impl Parser<'_> {
    /// A full expression, ternary included.
    pub(super) fn expr(&mut self) -> Result<Expr, ParseError> {
        self.expr_bp(TERNARY_PRECEDENCE)
    }

    /// An expression whose operators all bind at least as tightly as `min`.
    pub(super) fn expr_bp(&mut self, min: u8) -> Result<Expr, ParseError> {
        self.enter()?;
        let result = self.expr_bp_inner(min);
        self.leave();
        result
    }

    fn expr_bp_inner(&mut self, min: u8) -> Result<Expr, ParseError> {
        let mut lhs = self.prefix()?;
        loop {
            if self.at(Punct::Question) {
                if TERNARY_PRECEDENCE < min {
                    break;
                }
                self.bump();
                let then = self.expr()?;
                self.expect(Punct::Colon)?;
                // Right-associative: `a ? b : c ? d : e` is `a ? b : (c ? d : e)`.
                let otherwise = self.expr_bp(TERNARY_PRECEDENCE)?;
                let span = lhs.span.to(otherwise.span);
                lhs = Expr {
                    kind: ExprKind::Ternary {
                        cond: Box::new(lhs),
                        then: Box::new(then),
                        otherwise: Box::new(otherwise),
                    },
                    span,
                };
                continue;
            }
            let Some(op) = binary_op(self.peek()) else {
                break;
            };
            let (precedence, assoc) = op.precedence();
            if precedence < min {
                break;
            }
            self.bump();
            let next_min = match assoc {
                Assoc::Left => precedence + 1,
                Assoc::Right => precedence,
            };
            let rhs = self.expr_bp(next_min)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
                span,
            };
        }
        Ok(lhs)
    }

    /// Prefix operators, then a primary with its postfix `[...]` and `'`.
    fn prefix(&mut self) -> Result<Expr, ParseError> {
        let op = match self.peek() {
            TokenKind::Punct(Punct::Minus) => Some(UnaryOp::Neg),
            TokenKind::Punct(Punct::Plus) => Some(UnaryOp::Plus),
            TokenKind::Punct(Punct::Bang) => Some(UnaryOp::Not),
            _ => None,
        };
        if let Some(op) = op {
            let start = self.bump().span;
            // `-a^b` is `-(a^b)`; `-a \ b` is `(-a) \ b`.
            let operand = self.expr_bp(PREFIX_PRECEDENCE)?;
            let span = start.to(operand.span);
            return Ok(Expr {
                kind: ExprKind::Unary {
                    op,
                    operand: Box::new(operand),
                },
                span,
            });
        }
        let primary = self.primary()?;
        self.postfix(primary)
    }

    fn postfix(&mut self, mut expr: Expr) -> Result<Expr, ParseError> {
        loop {
            match self.peek() {
                TokenKind::Punct(Punct::LBracket) => {
                    let indices = self.indices()?;
                    let span = expr.span.to(self.prev_span());
                    expr = Expr {
                        kind: ExprKind::Index {
                            base: Box::new(expr),
                            indices,
                        },
                        span,
                    };
                }
                TokenKind::Punct(Punct::Quote) => {
                    let span = expr.span.to(self.bump().span);
                    expr = Expr {
                        kind: ExprKind::Transpose(Box::new(expr)),
                        span,
                    };
                }
                // `x.1` lexes as `x` then the real `.1`: a tuple projection.
                TokenKind::RealLit(_)
                    if self.span().start == expr.span.end
                        && self.source.as_bytes().get(self.span().start) == Some(&b'.') =>
                {
                    return Err(ParseError::new(
                        self.span(),
                        ParseErrorKind::NotSupported {
                            feature: "tuple projection (`x.1`)".to_string(),
                        },
                    ));
                }
                _ => return Ok(expr),
            }
        }
    }

    /// `[i, :, 2:, :n, a:b, ]`: the brackets and everything between.
    pub(super) fn indices(&mut self) -> Result<Vec<Index>, ParseError> {
        self.expect(Punct::LBracket)?;
        let mut indices = Vec::new();
        loop {
            indices.push(self.index()?);
            if self.eat(Punct::Comma) {
                continue;
            }
            if self.eat(Punct::RBracket) {
                return Ok(indices);
            }
            return Err(self.expected("`,` or `]` in an index"));
        }
    }

    fn at_index_end(&self) -> bool {
        self.at(Punct::Comma) || self.at(Punct::RBracket)
    }

    fn index(&mut self) -> Result<Index, ParseError> {
        if self.at_index_end() {
            return Ok(Index::All);
        }
        if self.eat(Punct::Colon) {
            if self.at_index_end() {
                return Ok(Index::All);
            }
            return Ok(Index::UpTo(self.expr()?));
        }
        let first = self.expr()?;
        if !self.eat(Punct::Colon) {
            return Ok(Index::Single(first));
        }
        if self.at_index_end() {
            return Ok(Index::From(first));
        }
        Ok(Index::Between(first, self.expr()?))
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let start = self.span();
        match self.peek().clone() {
            TokenKind::IntLit(value) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Int(value),
                    span: start,
                })
            }
            TokenKind::RealLit(value) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Real(value),
                    span: start,
                })
            }
            TokenKind::Ident(_) => {
                let name = self.ident()?;
                if self.at(Punct::LParen) {
                    self.call(name)
                } else {
                    Ok(Expr {
                        span: name.span,
                        kind: ExprKind::Var(name),
                    })
                }
            }
            TokenKind::Keyword(Keyword::Target) => {
                self.bump();
                self.expect(Punct::LParen)?;
                let end = self.expect(Punct::RParen)?;
                Ok(Expr {
                    kind: ExprKind::GetTarget,
                    span: start.to(end),
                })
            }
            TokenKind::Punct(Punct::LParen) => {
                self.bump();
                let inner = self.expr()?;
                if self.at(Punct::Comma) {
                    return Err(ParseError::new(
                        self.span(),
                        ParseErrorKind::NotSupported {
                            feature: "tuples".to_string(),
                        },
                    ));
                }
                let end = self.expect(Punct::RParen)?;
                Ok(Expr {
                    kind: ExprKind::Paren(Box::new(inner)),
                    span: start.to(end),
                })
            }
            TokenKind::Punct(Punct::LBrace) => {
                self.bump();
                let items = self.expr_list(Punct::RBrace)?;
                if items.is_empty() {
                    return Err(ParseError::new(
                        start.to(self.prev_span()),
                        ParseErrorKind::Invalid(
                            "an array expression `{...}` needs at least one element".to_string(),
                        ),
                    ));
                }
                Ok(Expr {
                    kind: ExprKind::ArrayLit(items),
                    span: start.to(self.prev_span()),
                })
            }
            TokenKind::Punct(Punct::LBracket) => {
                self.bump();
                let items = self.expr_list(Punct::RBracket)?;
                Ok(Expr {
                    kind: ExprKind::RowVectorLit(items),
                    span: start.to(self.prev_span()),
                })
            }
            TokenKind::StrLit(_) => Err(ParseError::new(
                start,
                ParseErrorKind::Invalid(
                    "a string is allowed only in print, reject and fatal_error".to_string(),
                ),
            )),
            _ => Err(self.expected("an expression")),
        }
    }

    /// Comma-separated expressions up to and including `close`; may be empty.
    fn expr_list(&mut self, close: Punct) -> Result<Vec<Expr>, ParseError> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.expr()?);
            if self.eat(Punct::Comma) {
                continue;
            }
            if self.eat(close) {
                return Ok(items);
            }
            return Err(self.expected(&format!("`,` or `{}`", close.as_str())));
        }
    }

    /// `name(args)` or `name(outcome | args)`; the name is already consumed.
    fn call(&mut self, name: Ident) -> Result<Expr, ParseError> {
        self.expect(Punct::LParen)?;
        if self.eat(Punct::RParen) {
            return Ok(Expr {
                span: name.span.to(self.prev_span()),
                kind: ExprKind::Call { name, args: vec![] },
            });
        }
        let first = self.expr()?;
        if self.at(Punct::Bar) {
            let bar = self.bump().span;
            if !CONDITIONAL_SUFFIXES.iter().any(|s| name.name.ends_with(s)) {
                return Err(ParseError::new(
                    bar,
                    ParseErrorKind::Invalid(format!(
                        "`|` is allowed only in calls of functions ending in {}; `{}` is not one",
                        CONDITIONAL_SUFFIXES.join(", "),
                        name.name
                    )),
                ));
            }
            let mut args = vec![first];
            if !self.eat(Punct::RParen) {
                args.extend(self.exprs_until(Punct::RParen, "")?);
            }
            return Ok(Expr {
                span: name.span.to(self.prev_span()),
                kind: ExprKind::CondCall { name, args },
            });
        }
        let mut args = vec![first];
        while self.eat(Punct::Comma) {
            args.push(self.expr()?);
        }
        if !self.eat(Punct::RParen) {
            return Err(self.expected("`,` or `)`"));
        }
        Ok(Expr {
            span: name.span.to(self.prev_span()),
            kind: ExprKind::Call { name, args },
        })
    }
}
