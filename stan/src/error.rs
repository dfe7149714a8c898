//! Parse errors and their rendering as `file:line:column: error: ...` with the line and a caret.

use crate::ast::Span;

/// What went wrong, with the values involved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error("expected {expected}, found {found}")]
    Expected { expected: String, found: String },
    #[error("{feature} is not supported yet")]
    NotSupported { feature: String },
    #[error("{what} were removed from Stan: {instead}")]
    Removed { what: String, instead: String },
    #[error("unterminated `/* */` comment")]
    UnterminatedComment,
    #[error("unterminated string: a string must end with `\"` on the same line")]
    UnterminatedString,
    #[error("{0}")]
    Invalid(String),
}

/// A parse error at a span of the source.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind}")]
pub struct ParseError {
    pub span: Span,
    pub kind: ParseErrorKind,
}

impl ParseError {
    pub fn new(span: Span, kind: ParseErrorKind) -> ParseError {
        ParseError { span, kind }
    }

    /// Where the error starts, 1-based line and column (columns count characters).
    pub fn line_column(&self, source: &str) -> (usize, usize) {
        line_column(source, self.span.start)
    }

    /// Renders the error the way rustc and stanc do:
    ///
    /// ```text
    /// model.stan:3:9: error: expected `;`, found `}`
    ///   |
    /// 3 |   real x
    ///   |         ^
    /// ```
    pub fn render(&self, file_name: &str, source: &str) -> String {
        render(file_name, source, self.span, &self.kind.to_string())
    }
}

/// 1-based line and column of byte `offset` (clamped to the source).
pub fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(source, offset);
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = source[line_start..offset].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(source: &str, offset: usize) -> usize {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// `file:line:col: error: message`, the source line, and carets under the span's part
/// on that line (one caret at least, also for an error at the end of the file).
pub fn render(file_name: &str, source: &str, span: Span, message: &str) -> String {
    let (line, column) = line_column(source, span.start);
    let start = floor_char_boundary(source, span.start);
    let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = source[start..]
        .find('\n')
        .map_or(source.len(), |i| start + i);
    let text = source[line_start..line_end].trim_end_matches('\r');
    let end = floor_char_boundary(source, span.end.clamp(start, line_end));
    let width = source[start..end].chars().count().max(1);
    let gutter = line.to_string();
    let pad = " ".repeat(gutter.len());
    // Tabs stay tabs under the caret, so the caret lines up in any terminal.
    let lead: String = source[line_start..start]
        .chars()
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    format!(
        "{file_name}:{line}:{column}: error: {message}\n{pad} |\n{gutter} | {text}\n{pad} | {lead}{carets}\n",
        carets = "^".repeat(width)
    )
}
