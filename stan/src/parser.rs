//! Recursive-descent parser: tokens to a [`Program`]; blocks here, the rest in submodules.
//!
//! Grammar: stanc3's `src/frontend/parser.mly` and the reference manual's BNF
//! (`src/reference-manual/grammar.txt`). Expressions use a Pratt parser (`expr`),
//! statements (`stmt`) and declarations and types (`decl`) are plain recursive descent.

mod decl;
mod expr;
mod stmt;

#[cfg(test)]
mod tests;

use crate::ast::{Block, BlockKind, Expr, FunctionsBlock, Ident, Program, Span, StmtKind};
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::{Keyword, Punct, Token, TokenKind, tokenize};

/// Deepest nesting of expressions and statements; the parser takes untrusted input.
const MAX_DEPTH: usize = 128;

/// Parses a whole Stan program.
pub fn parse(source: &str) -> Result<Program, ParseError> {
    let tokens = tokenize(source)?;
    let mut parser = Parser {
        source,
        tokens,
        pos: 0,
        depth: 0,
    };
    parser.program()
}

struct Parser<'a> {
    source: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn token(&self) -> &Token {
        // The last token is always `Eof`; never read past it.
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn peek(&self) -> &TokenKind {
        &self.token().kind
    }

    fn peek_nth(&self, n: usize) -> &TokenKind {
        &self.tokens[(self.pos + n).min(self.tokens.len() - 1)].kind
    }

    fn span(&self) -> Span {
        self.token().span
    }

    /// The span of the token just consumed.
    fn prev_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1)].span
    }

    fn bump(&mut self) -> Token {
        let token = self.token().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        token
    }

    fn at(&self, punct: Punct) -> bool {
        *self.peek() == TokenKind::Punct(punct)
    }

    fn at_keyword(&self, keyword: Keyword) -> bool {
        *self.peek() == TokenKind::Keyword(keyword)
    }

    fn eat(&mut self, punct: Punct) -> bool {
        let found = self.at(punct);
        if found {
            self.bump();
        }
        found
    }

    fn eat_keyword(&mut self, keyword: Keyword) -> bool {
        let found = self.at_keyword(keyword);
        if found {
            self.bump();
        }
        found
    }

    fn expect(&mut self, punct: Punct) -> Result<Span, ParseError> {
        if self.at(punct) {
            Ok(self.bump().span)
        } else {
            Err(self.expected(&format!("`{}`", punct.as_str())))
        }
    }

    fn expect_keyword(&mut self, keyword: Keyword) -> Result<Span, ParseError> {
        if self.at_keyword(keyword) {
            Ok(self.bump().span)
        } else {
            Err(self.expected(&format!("`{}`", keyword.as_str())))
        }
    }

    /// One or more comma-separated expressions, then `close`; `context` ends the error
    /// message ("`,` or `]` in the sizes").
    fn exprs_until(&mut self, close: Punct, context: &str) -> Result<Vec<Expr>, ParseError> {
        let mut exprs = Vec::new();
        loop {
            exprs.push(self.expr()?);
            if self.eat(close) {
                return Ok(exprs);
            }
            if !self.eat(Punct::Comma) {
                let what = format!("`,` or `{}`{context}", close.as_str());
                return Err(self.expected(&what));
            }
        }
    }

    /// "expected {what}, found {the current token}".
    fn expected(&self, what: &str) -> ParseError {
        ParseError::new(
            self.span(),
            ParseErrorKind::Expected {
                expected: what.to_string(),
                found: self.peek().describe(),
            },
        )
    }

    fn ident(&mut self) -> Result<Ident, ParseError> {
        match self.peek().clone() {
            TokenKind::Ident(name) => Ok(Ident {
                name,
                span: self.bump().span,
            }),
            TokenKind::Keyword(keyword) => Err(ParseError::new(
                self.span(),
                ParseErrorKind::Invalid(format!(
                    "expected an identifier, found keyword `{}`, which Stan reserves",
                    keyword.as_str()
                )),
            )),
            _ => Err(self.expected("an identifier")),
        }
    }

    /// Counts one level of nesting; pair with `leave`.
    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::new(
                self.span(),
                ParseErrorKind::Invalid(format!(
                    "program nested too deeply (more than {MAX_DEPTH} levels)"
                )),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn program(&mut self) -> Result<Program, ParseError> {
        let mut program = Program::default();
        // Rank of the last block seen: blocks must come in the fixed order, each once.
        let mut last_rank = 0;
        loop {
            let start = self.span();
            let (rank, name) = match self.peek() {
                TokenKind::Eof => return Ok(program),
                TokenKind::Keyword(Keyword::Functions) => (1, "functions"),
                TokenKind::Keyword(Keyword::Data) => (2, "data"),
                TokenKind::Keyword(Keyword::Transformed) => match self.peek_nth(1) {
                    TokenKind::Keyword(Keyword::Data) => (3, "transformed data"),
                    TokenKind::Keyword(Keyword::Parameters) => (5, "transformed parameters"),
                    _ => {
                        self.bump();
                        return Err(self.expected("`data` or `parameters` after `transformed`"));
                    }
                },
                TokenKind::Keyword(Keyword::Parameters) => (4, "parameters"),
                TokenKind::Keyword(Keyword::Model) => (6, "model"),
                TokenKind::Keyword(Keyword::Generated) => (7, "generated quantities"),
                _ => {
                    return Err(self.expected(
                        "a block (`functions`, `data`, `transformed data`, `parameters`, \
                         `transformed parameters`, `model` or `generated quantities`)",
                    ));
                }
            };
            self.bump();
            if rank == 3 || rank == 5 {
                self.bump();
            } else if rank == 7 {
                self.expect_keyword(Keyword::Quantities)?;
            }
            let header = start.to(self.prev_span());
            if rank <= last_rank {
                let message = if rank == last_rank {
                    format!("the `{name}` block appears twice")
                } else {
                    format!(
                        "the `{name}` block is out of order: blocks go functions, data, \
                         transformed data, parameters, transformed parameters, model, \
                         generated quantities"
                    )
                };
                return Err(ParseError::new(header, ParseErrorKind::Invalid(message)));
            }
            last_rank = rank;
            if rank == 1 {
                program.functions = Some(self.functions_block(start)?);
                continue;
            }
            let kind = match rank {
                2 => BlockKind::Data,
                3 => BlockKind::TransformedData,
                4 => BlockKind::Parameters,
                5 => BlockKind::TransformedParameters,
                6 => BlockKind::Model,
                _ => BlockKind::GeneratedQuantities,
            };
            let block = self.block(kind, start)?;
            let slot = match kind {
                BlockKind::Data => &mut program.data,
                BlockKind::TransformedData => &mut program.transformed_data,
                BlockKind::Parameters => &mut program.parameters,
                BlockKind::TransformedParameters => &mut program.transformed_parameters,
                BlockKind::Model => &mut program.model,
                BlockKind::GeneratedQuantities => &mut program.generated_quantities,
            };
            *slot = Some(block);
        }
    }

    fn functions_block(&mut self, start: Span) -> Result<FunctionsBlock, ParseError> {
        self.expect(Punct::LBrace)?;
        let mut functions = Vec::new();
        while !self.at(Punct::RBrace) {
            if *self.peek() == TokenKind::Eof {
                return Err(self.expected("a function definition or `}`"));
            }
            functions.push(self.function_def()?);
        }
        let end = self.bump().span;
        Ok(FunctionsBlock {
            functions,
            span: start.to(end),
        })
    }

    fn block(&mut self, kind: BlockKind, start: Span) -> Result<Block, ParseError> {
        self.expect(Punct::LBrace)?;
        let mut stmts = Vec::new();
        while !self.at(Punct::RBrace) {
            if *self.peek() == TokenKind::Eof {
                return Err(self.expected("a statement or `}`"));
            }
            let stmt = self.stmt()?;
            if matches!(kind, BlockKind::Data | BlockKind::Parameters) {
                match &stmt.kind {
                    StmtKind::Decl { vars, .. } => {
                        if let Some(init) = vars.iter().find_map(|v| v.init.as_ref()) {
                            return Err(ParseError::new(
                                init.span,
                                ParseErrorKind::Invalid(format!(
                                    "variables in the {} block cannot have an initial value",
                                    kind.as_str()
                                )),
                            ));
                        }
                    }
                    _ => {
                        return Err(ParseError::new(
                            stmt.span,
                            ParseErrorKind::Invalid(format!(
                                "only declarations are allowed in the {} block",
                                kind.as_str()
                            )),
                        ));
                    }
                }
            }
            stmts.push(stmt);
        }
        let end = self.bump().span;
        Ok(Block {
            kind,
            stmts,
            span: start.to(end),
        })
    }
}
