//! Statements: assignment, `~` with truncation, `target +=`, loops, `if`, blocks, print and friends.

use super::Parser;
use crate::ast::{
    AssignOp, BinaryOp, Expr, ExprKind, LValue, Printable, Stmt, StmtKind, Truncation,
};
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::{Keyword, Punct, TokenKind};

fn assign_op(token: &TokenKind) -> Option<AssignOp> {
    match token {
        TokenKind::Punct(Punct::Assign) => Some(AssignOp::Assign),
        TokenKind::Punct(Punct::PlusAssign) => Some(AssignOp::Add),
        TokenKind::Punct(Punct::MinusAssign) => Some(AssignOp::Sub),
        TokenKind::Punct(Punct::StarAssign) => Some(AssignOp::Mul),
        TokenKind::Punct(Punct::SlashAssign) => Some(AssignOp::Div),
        TokenKind::Punct(Punct::DotStarAssign) => Some(AssignOp::EltMul),
        TokenKind::Punct(Punct::DotSlashAssign) => Some(AssignOp::EltDiv),
        _ => None,
    }
}

/// Keywords that start a declaration.
pub(super) fn starts_type(token: &TokenKind) -> bool {
    matches!(
        token,
        TokenKind::Keyword(
            Keyword::Int
                | Keyword::Real
                | Keyword::Complex
                | Keyword::Vector
                | Keyword::RowVector
                | Keyword::Matrix
                | Keyword::Array
                | Keyword::Tuple
                | Keyword::Ordered
                | Keyword::PositiveOrdered
                | Keyword::Simplex
                | Keyword::UnitVector
                | Keyword::SumToZeroVector
                | Keyword::CholeskyFactorCorr
                | Keyword::CholeskyFactorCov
                | Keyword::CorrMatrix
                | Keyword::CovMatrix
        )
    )
}

impl Parser<'_> {
    pub(super) fn stmt(&mut self) -> Result<Stmt, ParseError> {
        self.enter()?;
        let result = self.stmt_inner();
        self.leave();
        result
    }

    fn stmt_inner(&mut self) -> Result<Stmt, ParseError> {
        let start = self.span();
        if starts_type(self.peek()) {
            return self.decl_stmt();
        }
        let kind = match self.peek() {
            TokenKind::Punct(Punct::LBrace) => {
                self.bump();
                let mut stmts = Vec::new();
                while !self.at(Punct::RBrace) {
                    if *self.peek() == TokenKind::Eof {
                        return Err(self.expected("a statement or `}`"));
                    }
                    stmts.push(self.stmt()?);
                }
                self.bump();
                StmtKind::Block(stmts)
            }
            TokenKind::Punct(Punct::Semi) => {
                self.bump();
                StmtKind::Empty
            }
            TokenKind::Keyword(Keyword::For) => self.for_stmt()?,
            TokenKind::Keyword(Keyword::While) => {
                self.bump();
                self.expect(Punct::LParen)?;
                let cond = self.expr()?;
                self.expect(Punct::RParen)?;
                let body = Box::new(self.stmt()?);
                StmtKind::While { cond, body }
            }
            TokenKind::Keyword(Keyword::If) => {
                self.bump();
                self.expect(Punct::LParen)?;
                let cond = self.expr()?;
                self.expect(Punct::RParen)?;
                let then = Box::new(self.stmt()?);
                // A dangling `else` goes with the nearest `if`.
                let otherwise = if self.eat_keyword(Keyword::Else) {
                    Some(Box::new(self.stmt()?))
                } else {
                    None
                };
                StmtKind::If {
                    cond,
                    then,
                    otherwise,
                }
            }
            TokenKind::Keyword(Keyword::Break) => {
                self.bump();
                self.expect(Punct::Semi)?;
                StmtKind::Break
            }
            TokenKind::Keyword(Keyword::Continue) => {
                self.bump();
                self.expect(Punct::Semi)?;
                StmtKind::Continue
            }
            TokenKind::Keyword(Keyword::Return) => {
                self.bump();
                let value = if self.at(Punct::Semi) {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.expect(Punct::Semi)?;
                StmtKind::Return(value)
            }
            TokenKind::Keyword(Keyword::Print) => StmtKind::Print(self.printables()?),
            TokenKind::Keyword(Keyword::Reject) => StmtKind::Reject(self.printables()?),
            TokenKind::Keyword(Keyword::FatalError) => StmtKind::FatalError(self.printables()?),
            TokenKind::Keyword(Keyword::Profile) => {
                return Err(ParseError::new(
                    start,
                    ParseErrorKind::NotSupported {
                        feature: "`profile` blocks".to_string(),
                    },
                ));
            }
            TokenKind::Keyword(Keyword::Target)
                if *self.peek_nth(1) == TokenKind::Punct(Punct::PlusAssign) =>
            {
                self.bump();
                self.bump();
                let value = self.expr()?;
                self.expect(Punct::Semi)?;
                StmtKind::TargetPlus(value)
            }
            _ => self.expr_stmt()?,
        };
        Ok(Stmt {
            kind,
            span: start.to(self.prev_span()),
        })
    }

    fn for_stmt(&mut self) -> Result<StmtKind, ParseError> {
        self.bump();
        self.expect(Punct::LParen)?;
        let var = self.ident()?;
        self.expect_keyword(Keyword::In)?;
        let first = self.expr()?;
        let kind = if self.eat(Punct::Colon) {
            let upper = self.expr()?;
            self.expect(Punct::RParen)?;
            StmtKind::For {
                var,
                lower: first,
                upper,
                body: Box::new(self.stmt()?),
            }
        } else {
            self.expect(Punct::RParen)
                .map_err(|_| self.expected("`:` or `)`"))?;
            StmtKind::ForEach {
                var,
                iterable: first,
                body: Box::new(self.stmt()?),
            }
        };
        Ok(kind)
    }

    /// `(` strings and expressions `)` `;` after print, reject or fatal_error.
    fn printables(&mut self) -> Result<Vec<Printable>, ParseError> {
        self.bump();
        self.expect(Punct::LParen)?;
        let mut items = Vec::new();
        loop {
            if let TokenKind::StrLit(text) = self.peek().clone() {
                items.push(Printable::Str(text, self.bump().span));
            } else {
                items.push(Printable::Expr(self.expr()?));
            }
            if self.eat(Punct::Comma) {
                continue;
            }
            self.expect(Punct::RParen)
                .map_err(|_| self.expected("`,` or `)`"))?;
            self.expect(Punct::Semi)?;
            return Ok(items);
        }
    }

    /// Statements that start with an expression: assignment, `~`, or a call.
    fn expr_stmt(&mut self) -> Result<StmtKind, ParseError> {
        let lhs = self.expr()?;
        if self.eat(Punct::Tilde) {
            return self.tilde(lhs);
        }
        if let Some(op) = assign_op(self.peek()) {
            self.bump();
            let lhs = self.lvalue(lhs)?;
            let rhs = self.expr()?;
            self.expect(Punct::Semi)?;
            return Ok(StmtKind::Assign { lhs, op, rhs });
        }
        if let ExprKind::Call { name, args } = lhs.kind {
            self.expect(Punct::Semi)?;
            return Ok(StmtKind::Call { name, args });
        }
        // `x <- 1;` lexes as `x < -1`.
        if let ExprKind::Binary {
            op: BinaryOp::Lt,
            lhs: left,
            ..
        } = &lhs.kind
        {
            let after = &self.source[left.span.end..lhs.span.end];
            if let Some(at) = after.find("<-") {
                let start = left.span.end + at;
                return Err(ParseError::new(
                    crate::ast::Span::new(start, start + 2),
                    ParseErrorKind::Removed {
                        what: "`<-` assignments".to_string(),
                        instead: "use `=` instead".to_string(),
                    },
                ));
            }
        }
        if self.at(Punct::Semi) {
            return Err(ParseError::new(
                lhs.span,
                ParseErrorKind::Invalid(
                    "an expression on its own is not a statement: expected an assignment, \
                     a `~` statement or a function call"
                        .to_string(),
                ),
            ));
        }
        Err(self.expected("`=`, `~`, `+=` or another assignment operator, or `;`"))
    }

    fn tilde(&mut self, lhs: Expr) -> Result<StmtKind, ParseError> {
        let distribution = self.ident()?;
        self.expect(Punct::LParen)?;
        let mut args = Vec::new();
        if !self.eat(Punct::RParen) {
            args = self.exprs_until(Punct::RParen, "")?;
        }
        // `T[` is truncation only here; elsewhere `T` is an ordinary identifier.
        let truncation = if matches!(self.peek(), TokenKind::Ident(name) if name == "T")
            && *self.peek_nth(1) == TokenKind::Punct(Punct::LBracket)
        {
            let start = self.bump().span;
            self.bump();
            let lower = if self.at(Punct::Comma) {
                None
            } else {
                Some(self.expr()?)
            };
            self.expect(Punct::Comma)
                .map_err(|_| self.expected("`,` in the truncation `T[lower, upper]`"))?;
            let upper = if self.at(Punct::RBracket) {
                None
            } else {
                Some(self.expr()?)
            };
            let end = self.expect(Punct::RBracket)?;
            Some(Truncation {
                lower,
                upper,
                span: start.to(end),
            })
        } else {
            None
        };
        self.expect(Punct::Semi)?;
        Ok(StmtKind::Tilde {
            lhs,
            distribution,
            args,
            truncation,
        })
    }

    fn lvalue(&self, expr: Expr) -> Result<LValue, ParseError> {
        let span = expr.span;
        let mut groups = Vec::new();
        let mut current = expr;
        loop {
            match current.kind {
                ExprKind::Var(name) => {
                    groups.reverse();
                    return Ok(LValue {
                        name,
                        indices: groups,
                        span,
                    });
                }
                ExprKind::Index { base, indices } => {
                    groups.push(indices);
                    current = *base;
                }
                _ => {
                    return Err(ParseError::new(
                        span,
                        ParseErrorKind::Invalid(
                            "cannot assign to this expression: the left of an assignment \
                             must be a variable, possibly indexed"
                                .to_string(),
                        ),
                    ));
                }
            }
        }
    }
}
