//! SQL92 selectors (expression type `SQL92`): RocketMQ's property filter,
//! the grammar it adapted from ActiveMQ's JMS selectors
//! (docs/sql92-filter.md).
//!
//! [`Sql92Filter::compile`] turns the text a client sent into a tree once;
//! [`Sql92Filter::matches`] then evaluates it over each message's
//! properties (`TAGS` and `KEYS` are properties too). The text comes from a
//! client, so its length and nesting are bounded.

pub mod ast;
pub mod eval;
pub mod fuzzing;
pub mod lexer;
pub mod parser;

use std::borrow::Cow;
use std::fmt;

use basalt_common::properties;

use self::ast::Expr;
use self::eval::PropertySource;

/// Longest selector accepted, in bytes.
pub const MAX_EXPRESSION_LEN: usize = 16 * 1024;
/// Deepest nesting accepted: parentheses, prefixes and tree depth alike.
pub const MAX_DEPTH: usize = 64;

/// A place in the selector text, both counted from 1 (columns in
/// characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

/// Why a selector was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    pub pos: Pos,
    pub message: String,
}

impl ParseError {
    pub fn at(pos: Pos, message: impl Into<String>) -> Self {
        ParseError {
            pos,
            message: message.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Invalid MessageSelector at line {}, column {}: {}",
            self.pos.line, self.pos.column, self.message
        )
    }
}

/// A compiled SQL92 selector: its text as the client wrote it and the tree
/// evaluated per message. Invariant: `expr` is what `text` parses to.
#[derive(Debug, Clone, PartialEq)]
pub struct Sql92Filter {
    text: String,
    expr: Expr,
}

impl Sql92Filter {
    /// Parses `text`, refusing it with the place of the first error.
    pub fn compile(text: &str) -> Result<Sql92Filter, ParseError> {
        if text.len() > MAX_EXPRESSION_LEN {
            return Err(ParseError::at(
                Pos { line: 1, column: 1 },
                format!(
                    "the expression is {} bytes; at most {MAX_EXPRESSION_LEN} are accepted",
                    text.len()
                ),
            ));
        }
        let tokens = lexer::tokenize(text)?;
        let expr = parser::parse(tokens)?;
        Ok(Sql92Filter {
            text: text.to_string(),
            expr,
        })
    }

    pub fn expression(&self) -> &str {
        &self.text
    }

    pub fn ast(&self) -> &Expr {
        &self.expr
    }

    /// Whether a message with these properties is selected.
    pub fn matches<P: PropertySource>(&self, props: &P) -> bool {
        eval::matches(&self.expr, props)
    }

    /// Whether a message with this encoded property string
    /// (`name\x01value\x02...`) is selected.
    pub fn matches_encoded(&self, encoded: &[u8]) -> bool {
        self.matches(&EncodedProperties(encoded))
    }
}

/// A record's property string, read in place (the last of repeated names
/// wins; bytes that are not UTF-8 are replaced, as Java decodes them).
pub struct EncodedProperties<'a>(pub &'a [u8]);

impl PropertySource for EncodedProperties<'_> {
    fn property(&self, name: &str) -> Option<Cow<'_, str>> {
        properties::find(self.0, name).map(String::from_utf8_lossy)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
