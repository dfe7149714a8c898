//! Lexer tests: literals, operators by longest match, comments, and lexical errors.

use super::{Keyword, Punct, TokenKind, tokenize};
use crate::error::ParseErrorKind;

fn kinds(source: &str) -> Vec<TokenKind> {
    let mut tokens: Vec<TokenKind> = tokenize(source)
        .unwrap_or_else(|e| panic!("{source:?}: {e}"))
        .into_iter()
        .map(|t| t.kind)
        .collect();
    assert_eq!(tokens.pop(), Some(TokenKind::Eof));
    tokens
}

fn p(punct: Punct) -> TokenKind {
    TokenKind::Punct(punct)
}

fn id(name: &str) -> TokenKind {
    TokenKind::Ident(name.to_string())
}

fn error_kind(source: &str) -> ParseErrorKind {
    tokenize(source).expect_err(source).kind
}

#[test]
fn lexer_numbers() {
    assert_eq!(
        kinds("0 42 1_000"),
        [
            TokenKind::IntLit(0),
            TokenKind::IntLit(42),
            TokenKind::IntLit(1000)
        ]
    );
    assert_eq!(
        kinds("1e-3 .5 2. 3.25 1E+2 6e2"),
        [1e-3, 0.5, 2.0, 3.25, 100.0, 600.0].map(TokenKind::RealLit)
    );
}

#[test]
fn lexer_dot_operators_and_reals() {
    // `.2` is a real, `.*` an operator, and `2.*x` is `2.` then `*` (longest match).
    assert_eq!(kinds("a.*b"), [id("a"), p(Punct::DotStar), id("b")]);
    assert_eq!(
        kinds("a./b .^ c"),
        [
            id("a"),
            p(Punct::DotSlash),
            id("b"),
            p(Punct::DotHat),
            id("c")
        ]
    );
    assert_eq!(
        kinds("2.*x"),
        [TokenKind::RealLit(2.0), p(Punct::Star), id("x")]
    );
    assert_eq!(
        kinds("x*.2"),
        [id("x"), p(Punct::Star), TokenKind::RealLit(0.2)]
    );
    assert_eq!(
        kinds("x .*= y ./= z"),
        [
            id("x"),
            p(Punct::DotStarAssign),
            id("y"),
            p(Punct::DotSlashAssign),
            id("z")
        ]
    );
}

#[test]
fn lexer_operators() {
    assert_eq!(
        kinds("%/% % \\ ' : ? && || ! ~ += -= *= /= == != <= >= < > = |"),
        [
            Punct::IntDiv,
            Punct::Percent,
            Punct::Backslash,
            Punct::Quote,
            Punct::Colon,
            Punct::Question,
            Punct::AndAnd,
            Punct::OrOr,
            Punct::Bang,
            Punct::Tilde,
            Punct::PlusAssign,
            Punct::MinusAssign,
            Punct::StarAssign,
            Punct::SlashAssign,
            Punct::EqEq,
            Punct::NotEq,
            Punct::Le,
            Punct::Ge,
            Punct::Lt,
            Punct::Gt,
            Punct::Assign,
            Punct::Bar,
        ]
        .map(p)
    );
}

#[test]
fn lexer_words_and_strings() {
    assert_eq!(
        kinds("for x_1 T target \"hi there\""),
        [
            TokenKind::Keyword(Keyword::For),
            id("x_1"),
            id("T"),
            TokenKind::Keyword(Keyword::Target),
            TokenKind::StrLit("hi there".to_string()),
        ]
    );
}

#[test]
fn lexer_comments_are_skipped() {
    assert_eq!(
        kinds("a // line\n/* block\n * more */ b"),
        [id("a"), id("b")]
    );
}

#[test]
fn lexer_spans_are_byte_offsets() {
    let tokens = tokenize("ab  <= 3.5").unwrap();
    let spans: Vec<_> = tokens.iter().map(|t| (t.span.start, t.span.end)).collect();
    assert_eq!(spans, [(0, 2), (4, 6), (7, 10), (10, 10)]);
}

#[test]
fn lexer_errors() {
    assert!(matches!(
        error_kind("# old comment"),
        ParseErrorKind::Removed { .. }
    ));
    assert!(matches!(
        error_kind("#include foo.stan"),
        ParseErrorKind::NotSupported { .. }
    ));
    assert!(matches!(
        error_kind("/* open"),
        ParseErrorKind::UnterminatedComment
    ));
    assert!(matches!(
        error_kind("\"open\n\""),
        ParseErrorKind::UnterminatedString
    ));
    assert!(matches!(
        error_kind("2i"),
        ParseErrorKind::NotSupported { .. }
    ));
    assert!(matches!(error_kind("x__"), ParseErrorKind::Invalid(_)));
    assert!(matches!(
        error_kind("3000000000"),
        ParseErrorKind::Invalid(_)
    ));
    assert!(matches!(error_kind("a @ b"), ParseErrorKind::Invalid(_)));
    assert!(matches!(error_kind("é"), ParseErrorKind::Invalid(_)));
    assert!(matches!(error_kind("12abc"), ParseErrorKind::Invalid(_)));
}
