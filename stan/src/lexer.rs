//! Lexer: Stan source text to tokens with byte spans; comments are skipped here.
//!
//! Token rules follow stanc3's `src/frontend/lexer.mll` and the reference manual's
//! "Tokenizing rules": longest match, so `2.*x` is `2.` then `*`, and `.5` is a real.

use crate::ast::Span;
use crate::error::{ParseError, ParseErrorKind};

/// Reserved words: these never lex as identifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Keyword {
    Functions,
    Data,
    Transformed,
    Parameters,
    Model,
    Generated,
    Quantities,
    For,
    In,
    While,
    If,
    Else,
    Return,
    Break,
    Continue,
    Print,
    Reject,
    FatalError,
    Target,
    Profile,
    Void,
    Int,
    Real,
    Complex,
    Vector,
    RowVector,
    Matrix,
    Array,
    Tuple,
    Ordered,
    PositiveOrdered,
    Simplex,
    UnitVector,
    SumToZeroVector,
    CholeskyFactorCorr,
    CholeskyFactorCov,
    CorrMatrix,
    CovMatrix,
}

const KEYWORDS: &[(&str, Keyword)] = &[
    ("functions", Keyword::Functions),
    ("data", Keyword::Data),
    ("transformed", Keyword::Transformed),
    ("parameters", Keyword::Parameters),
    ("model", Keyword::Model),
    ("generated", Keyword::Generated),
    ("quantities", Keyword::Quantities),
    ("for", Keyword::For),
    ("in", Keyword::In),
    ("while", Keyword::While),
    ("if", Keyword::If),
    ("else", Keyword::Else),
    ("return", Keyword::Return),
    ("break", Keyword::Break),
    ("continue", Keyword::Continue),
    ("print", Keyword::Print),
    ("reject", Keyword::Reject),
    ("fatal_error", Keyword::FatalError),
    ("target", Keyword::Target),
    ("profile", Keyword::Profile),
    ("void", Keyword::Void),
    ("int", Keyword::Int),
    ("real", Keyword::Real),
    ("complex", Keyword::Complex),
    ("vector", Keyword::Vector),
    ("row_vector", Keyword::RowVector),
    ("matrix", Keyword::Matrix),
    ("array", Keyword::Array),
    ("tuple", Keyword::Tuple),
    ("ordered", Keyword::Ordered),
    ("positive_ordered", Keyword::PositiveOrdered),
    ("simplex", Keyword::Simplex),
    ("unit_vector", Keyword::UnitVector),
    ("sum_to_zero_vector", Keyword::SumToZeroVector),
    ("cholesky_factor_corr", Keyword::CholeskyFactorCorr),
    ("cholesky_factor_cov", Keyword::CholeskyFactorCov),
    ("corr_matrix", Keyword::CorrMatrix),
    ("cov_matrix", Keyword::CovMatrix),
];

impl Keyword {
    pub fn from_word(word: &str) -> Option<Keyword> {
        KEYWORDS.iter().find(|(w, _)| *w == word).map(|(_, k)| *k)
    }

    pub fn as_str(self) -> &'static str {
        KEYWORDS
            .iter()
            .find(|(_, k)| *k == self)
            .map(|(w, _)| *w)
            .unwrap_or("?")
    }
}

/// Punctuation and operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Punct {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Semi,
    Bar,
    Question,
    Colon,
    Tilde,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Backslash,
    Hat,
    DotStar,
    DotSlash,
    DotHat,
    IntDiv,
    Quote,
    Bang,
    AndAnd,
    OrOr,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    Assign,
    PlusAssign,
    MinusAssign,
    StarAssign,
    SlashAssign,
    DotStarAssign,
    DotSlashAssign,
}

/// Longest first, so that a prefix never shadows a longer operator.
const PUNCTS: &[(&str, Punct)] = &[
    (".*=", Punct::DotStarAssign),
    ("./=", Punct::DotSlashAssign),
    ("%/%", Punct::IntDiv),
    (".*", Punct::DotStar),
    ("./", Punct::DotSlash),
    (".^", Punct::DotHat),
    ("&&", Punct::AndAnd),
    ("||", Punct::OrOr),
    ("==", Punct::EqEq),
    ("!=", Punct::NotEq),
    ("<=", Punct::Le),
    (">=", Punct::Ge),
    ("+=", Punct::PlusAssign),
    ("-=", Punct::MinusAssign),
    ("*=", Punct::StarAssign),
    ("/=", Punct::SlashAssign),
    ("(", Punct::LParen),
    (")", Punct::RParen),
    ("[", Punct::LBracket),
    ("]", Punct::RBracket),
    ("{", Punct::LBrace),
    ("}", Punct::RBrace),
    (",", Punct::Comma),
    (";", Punct::Semi),
    ("|", Punct::Bar),
    ("?", Punct::Question),
    (":", Punct::Colon),
    ("~", Punct::Tilde),
    ("+", Punct::Plus),
    ("-", Punct::Minus),
    ("*", Punct::Star),
    ("/", Punct::Slash),
    ("%", Punct::Percent),
    ("\\", Punct::Backslash),
    ("^", Punct::Hat),
    ("'", Punct::Quote),
    ("!", Punct::Bang),
    ("<", Punct::Lt),
    (">", Punct::Gt),
    ("=", Punct::Assign),
];

impl Punct {
    pub fn as_str(self) -> &'static str {
        PUNCTS
            .iter()
            .find(|(_, p)| *p == self)
            .map(|(s, _)| *s)
            .unwrap_or("?")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    Ident(String),
    Keyword(Keyword),
    IntLit(i64),
    RealLit(f64),
    StrLit(String),
    Punct(Punct),
    Eof,
}

impl TokenKind {
    /// How the token reads in an error message ("found `for`").
    pub fn describe(&self) -> String {
        match self {
            TokenKind::Ident(name) => format!("identifier `{name}`"),
            TokenKind::Keyword(k) => format!("keyword `{}`", k.as_str()),
            TokenKind::IntLit(v) => format!("integer `{v}`"),
            TokenKind::RealLit(v) => format!("real `{v:?}`"),
            TokenKind::StrLit(_) => "a string".to_string(),
            TokenKind::Punct(p) => format!("`{}`", p.as_str()),
            TokenKind::Eof => "end of file".to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// Largest integer literal Stan accepts (its `int` is 32 bits).
const MAX_INT_LITERAL: i64 = i32::MAX as i64;

/// Splits `source` into tokens, ending with one `Eof` token.
pub fn tokenize(source: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer {
        src: source.as_bytes(),
        pos: 0,
    };
    let mut tokens = Vec::new();
    loop {
        lexer.skip_trivia()?;
        let start = lexer.pos;
        let Some(&byte) = lexer.src.get(start) else {
            tokens.push(Token {
                kind: TokenKind::Eof,
                span: Span::new(start, start),
            });
            return Ok(tokens);
        };
        let kind = if byte.is_ascii_alphabetic() {
            lexer.word(source)?
        } else if byte.is_ascii_digit()
            || (byte == b'.' && lexer.peek(1).is_some_and(|b| b.is_ascii_digit()))
        {
            lexer.number(source)?
        } else if byte == b'"' {
            lexer.string(source)?
        } else {
            lexer.punct(source)?
        };
        tokens.push(Token {
            kind,
            span: Span::new(start, lexer.pos),
        });
    }
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn error(&self, start: usize, end: usize, kind: ParseErrorKind) -> ParseError {
        ParseError::new(Span::new(start, end), kind)
    }

    fn skip_trivia(&mut self) -> Result<(), ParseError> {
        loop {
            match self.peek(0) {
                Some(b) if b.is_ascii_whitespace() => self.pos += 1,
                Some(b'/') if self.peek(1) == Some(b'/') => {
                    while self.peek(0).is_some_and(|b| b != b'\n') {
                        self.pos += 1;
                    }
                }
                Some(b'/') if self.peek(1) == Some(b'*') => {
                    let start = self.pos;
                    self.pos += 2;
                    loop {
                        match self.peek(0) {
                            None => {
                                return Err(self.error(
                                    start,
                                    start + 2,
                                    ParseErrorKind::UnterminatedComment,
                                ));
                            }
                            Some(b'*') if self.peek(1) == Some(b'/') => {
                                self.pos += 2;
                                break;
                            }
                            Some(_) => self.pos += 1,
                        }
                    }
                }
                Some(b'#') => {
                    let start = self.pos;
                    let rest = &self.src[start..];
                    let kind = if rest.starts_with(b"#include") {
                        ParseErrorKind::NotSupported {
                            feature: "`#include`".to_string(),
                        }
                    } else {
                        ParseErrorKind::Removed {
                            what: "`#` comments".to_string(),
                            instead: "use `//` instead".to_string(),
                        }
                    };
                    return Err(self.error(start, start + 1, kind));
                }
                _ => return Ok(()),
            }
        }
    }

    fn word(&mut self, source: &str) -> Result<TokenKind, ParseError> {
        let start = self.pos;
        while self
            .peek(0)
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            self.pos += 1;
        }
        let word = &source[start..self.pos];
        if let Some(keyword) = Keyword::from_word(word) {
            return Ok(TokenKind::Keyword(keyword));
        }
        if word.ends_with("__") {
            return Err(self.error(
                start,
                self.pos,
                ParseErrorKind::Invalid(format!(
                    "identifier `{word}` ends in `__`, which Stan reserves"
                )),
            ));
        }
        Ok(TokenKind::Ident(word.to_string()))
    }

    fn digits(&mut self) {
        // `[0-9]+(_[0-9]+)*`: an underscore only between digits.
        while let Some(b) = self.peek(0) {
            if b.is_ascii_digit() || (b == b'_' && self.peek(1).is_some_and(|n| n.is_ascii_digit()))
            {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn number(&mut self, source: &str) -> Result<TokenKind, ParseError> {
        let start = self.pos;
        let mut is_real = false;
        self.digits();
        if self.peek(0) == Some(b'.') {
            // `2.*x` is `2.` then `*`: longest match, as stanc3's lexer does.
            is_real = true;
            self.pos += 1;
            self.digits();
        }
        if matches!(self.peek(0), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(self.peek(1), Some(b'+' | b'-')));
            if self.peek(1 + sign).is_some_and(|b| b.is_ascii_digit()) {
                is_real = true;
                self.pos += 1 + sign;
                self.digits();
            }
        }
        if self.peek(0) == Some(b'i') && !self.peek(1).is_some_and(|b| b.is_ascii_alphanumeric()) {
            return Err(self.error(
                start,
                self.pos + 1,
                ParseErrorKind::NotSupported {
                    feature: "imaginary literals (complex numbers)".to_string(),
                },
            ));
        }
        if self
            .peek(0)
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        {
            return Err(self.error(
                start,
                self.pos + 1,
                ParseErrorKind::Invalid(format!(
                    "malformed number `{}`",
                    &source[start..self.pos + 1]
                )),
            ));
        }
        let text: String = source[start..self.pos]
            .chars()
            .filter(|c| *c != '_')
            .collect();
        if is_real {
            let value: f64 = text.parse().map_err(|_| {
                self.error(
                    start,
                    self.pos,
                    ParseErrorKind::Invalid(format!("malformed real `{text}`")),
                )
            })?;
            Ok(TokenKind::RealLit(value))
        } else {
            match text.parse::<i64>() {
                Ok(value) if value <= MAX_INT_LITERAL => Ok(TokenKind::IntLit(value)),
                _ => Err(self.error(
                    start,
                    self.pos,
                    ParseErrorKind::Invalid(format!(
                        "integer literal `{text}` is larger than {MAX_INT_LITERAL}"
                    )),
                )),
            }
        }
    }

    fn string(&mut self, source: &str) -> Result<TokenKind, ParseError> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.peek(0) {
                None | Some(b'\n') => {
                    return Err(self.error(start, start + 1, ParseErrorKind::UnterminatedString));
                }
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(TokenKind::StrLit(
                        source[start + 1..self.pos - 1].to_string(),
                    ));
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    fn punct(&mut self, source: &str) -> Result<TokenKind, ParseError> {
        let start = self.pos;
        let rest = &self.src[start..];
        if let Some((text, punct)) = PUNCTS.iter().find(|(s, _)| rest.starts_with(s.as_bytes())) {
            self.pos += text.len();
            return Ok(TokenKind::Punct(*punct));
        }
        // `pos` is always on a character boundary: everything skipped so far ends in ASCII.
        let shown = source[start..].chars().next().unwrap_or('?');
        let len = shown.len_utf8();
        Err(self.error(
            start,
            start + len,
            ParseErrorKind::Invalid(format!("unexpected character `{shown}`")),
        ))
    }
}

#[cfg(test)]
mod tests;
