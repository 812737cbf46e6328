//! Tokens of a SQL92 selector, with RocketMQ's lexical rules
//! (docs/sql92-filter.md#lexical-rules): keywords in any case, `'...'`
//! strings with `''` for a quote, decimal and floating literals chosen by
//! longest match, `-- ...` comments only when a line break ends them,
//! `/* ... */` comments.

use super::{ParseError, Pos};

/// What a token is. Literal tokens keep their text; strings are unquoted.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    Contains,
    StartsWith,
    EndsWith,
    /// `0`, `12`, `12L`: the text as written (suffix included).
    Decimal(String),
    /// `1.5`, `.5`, `5.`, `1e3`: the text as written.
    Float(String),
    /// A quoted string, with `''` already turned into `'`.
    Str(String),
    Ident(String),
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Eof,
}

impl TokenKind {
    /// How an error message names the token.
    pub fn describe(&self) -> String {
        match self {
            TokenKind::Decimal(t) | TokenKind::Float(t) => format!("number {t}"),
            TokenKind::Str(s) => format!("string '{}'", s.replace('\'', "''")),
            TokenKind::Ident(n) => format!("identifier {n}"),
            TokenKind::Eof => "the end of the expression".to_string(),
            other => format!("'{}'", other.symbol()),
        }
    }

    fn symbol(&self) -> &'static str {
        match self {
            TokenKind::Not => "NOT",
            TokenKind::And => "AND",
            TokenKind::Or => "OR",
            TokenKind::Between => "BETWEEN",
            TokenKind::In => "IN",
            TokenKind::True => "TRUE",
            TokenKind::False => "FALSE",
            TokenKind::Null => "NULL",
            TokenKind::Is => "IS",
            TokenKind::Contains => "CONTAINS",
            TokenKind::StartsWith => "STARTSWITH",
            TokenKind::EndsWith => "ENDSWITH",
            TokenKind::Eq => "=",
            TokenKind::Ne => "<>",
            TokenKind::Gt => ">",
            TokenKind::Ge => ">=",
            TokenKind::Lt => "<",
            TokenKind::Le => "<=",
            TokenKind::LParen => "(",
            TokenKind::RParen => ")",
            TokenKind::Comma => ",",
            TokenKind::Plus => "+",
            TokenKind::Minus => "-",
            _ => "",
        }
    }
}

/// One token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub pos: Pos,
}

/// Splits `text` into tokens, ending with [`TokenKind::Eof`].
pub fn tokenize(text: &str) -> Result<Vec<Token>, ParseError> {
    let mut lx = Lexer {
        chars: text.chars().collect(),
        at: 0,
        pos: Pos { line: 1, column: 1 },
    };
    let mut out = Vec::new();
    loop {
        lx.skip_blanks_and_comments()?;
        let pos = lx.pos;
        let Some(c) = lx.peek(0) else {
            out.push(Token {
                kind: TokenKind::Eof,
                pos,
            });
            return Ok(out);
        };
        let kind = if c == '\'' {
            lx.string(pos)?
        } else if c.is_ascii_digit() || (c == '.' && lx.peek(1).is_some_and(|d| d.is_ascii_digit()))
        {
            lx.number()
        } else if c.is_ascii_alphabetic() || c == '_' || c == '$' {
            lx.word()
        } else {
            lx.operator(pos)?
        };
        out.push(Token { kind, pos });
    }
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    pos: Pos,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.at += 1;
        // "\r\n" counts as one line break.
        if c == '\n' || (c == '\r' && self.peek(0) != Some('\n')) {
            self.pos.line += 1;
            self.pos.column = 1;
        } else if c != '\r' {
            self.pos.column += 1;
        }
        Some(c)
    }

    fn bump_n(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    fn skip_blanks_and_comments(&mut self) -> Result<(), ParseError> {
        loop {
            match (self.peek(0), self.peek(1)) {
                (Some(' ' | '\t' | '\n' | '\r' | '\x0c'), _) => {
                    self.bump();
                }
                // A line comment must end with a line break; at the end of
                // the input, "--" is two minus signs (as in RocketMQ).
                (Some('-'), Some('-')) => {
                    let rest = &self.chars[self.at..];
                    let Some(nl) = rest.iter().position(|c| *c == '\n' || *c == '\r') else {
                        return Ok(());
                    };
                    self.bump_n(nl + 1);
                }
                (Some('/'), Some('*')) => {
                    let start = self.pos;
                    let body = &self.chars[self.at + 2..];
                    let Some(end) = body.windows(2).position(|w| w == ['*', '/']) else {
                        return Err(ParseError::at(start, "unterminated comment"));
                    };
                    self.bump_n(end + 4);
                }
                _ => return Ok(()),
            }
        }
    }

    fn string(&mut self, start: Pos) -> Result<TokenKind, ParseError> {
        self.bump();
        let mut s = String::new();
        loop {
            match self.bump() {
                None => return Err(ParseError::at(start, "unterminated string literal")),
                Some('\'') if self.peek(0) == Some('\'') => {
                    self.bump();
                    s.push('\'');
                }
                Some('\'') => return Ok(TokenKind::Str(s)),
                Some(c) => s.push(c),
            }
        }
    }

    fn digits_from(&self, from: usize) -> usize {
        self.chars[from.min(self.chars.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    }

    /// Length of an exponent (`e`, optional sign, digits) at `from`, 0 if none.
    fn exponent_at(&self, from: usize) -> usize {
        match self.chars.get(from) {
            Some('e' | 'E') => {}
            _ => return 0,
        }
        let sign = usize::from(matches!(self.chars.get(from + 1), Some('+' | '-')));
        let digits = self.digits_from(from + 1 + sign);
        if digits == 0 { 0 } else { 1 + sign + digits }
    }

    /// The longest of RocketMQ's DECIMAL_LITERAL and FLOATING_POINT_LITERAL
    /// forms at the current position (a decimal wins a tie: it is declared
    /// first).
    fn number(&mut self) -> TokenKind {
        let start = self.at;
        let int_digits = self.digits_from(start);
        // DECIMAL: "0" | [1-9][0-9]* [lL]?
        let decimal = match self.chars[start] {
            '0' => 1,
            c if c.is_ascii_digit() => {
                int_digits
                    + usize::from(matches!(
                        self.chars.get(start + int_digits),
                        Some('l' | 'L')
                    ))
            }
            _ => 0,
        };
        // FLOAT: digits "." digits* exp? | "." digits exp? | digits exp
        let float = if int_digits > 0 {
            if self.chars.get(start + int_digits) == Some(&'.') {
                let frac = self.digits_from(start + int_digits + 1);
                let at = start + int_digits + 1 + frac;
                at + self.exponent_at(at) - start
            } else {
                let e = self.exponent_at(start + int_digits);
                if e > 0 { int_digits + e } else { 0 }
            }
        } else {
            let frac = self.digits_from(start + 1);
            1 + frac + self.exponent_at(start + 1 + frac)
        };
        let (len, is_float) = if float > decimal {
            (float, true)
        } else {
            (decimal, false)
        };
        debug_assert!(len > 0, "number() called off a number");
        let text: String = self.chars[start..start + len].iter().collect();
        self.bump_n(len);
        if is_float {
            TokenKind::Float(text)
        } else {
            TokenKind::Decimal(text)
        }
    }

    fn word(&mut self) -> TokenKind {
        let len = self.chars[self.at..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '$')
            .count();
        let text: String = self.chars[self.at..self.at + len].iter().collect();
        self.bump_n(len);
        match text.to_ascii_uppercase().as_str() {
            "NOT" => TokenKind::Not,
            "AND" => TokenKind::And,
            "OR" => TokenKind::Or,
            "BETWEEN" => TokenKind::Between,
            "IN" => TokenKind::In,
            "TRUE" => TokenKind::True,
            "FALSE" => TokenKind::False,
            "NULL" => TokenKind::Null,
            "IS" => TokenKind::Is,
            "CONTAINS" => TokenKind::Contains,
            "STARTSWITH" => TokenKind::StartsWith,
            "ENDSWITH" => TokenKind::EndsWith,
            _ => TokenKind::Ident(text),
        }
    }

    fn operator(&mut self, pos: Pos) -> Result<TokenKind, ParseError> {
        let two = (self.peek(0), self.peek(1));
        let (kind, len) = match two {
            (Some('<'), Some('>')) => (TokenKind::Ne, 2),
            (Some('<'), Some('=')) => (TokenKind::Le, 2),
            (Some('>'), Some('=')) => (TokenKind::Ge, 2),
            (Some('<'), _) => (TokenKind::Lt, 1),
            (Some('>'), _) => (TokenKind::Gt, 1),
            (Some('='), _) => (TokenKind::Eq, 1),
            (Some('('), _) => (TokenKind::LParen, 1),
            (Some(')'), _) => (TokenKind::RParen, 1),
            (Some(','), _) => (TokenKind::Comma, 1),
            (Some('+'), _) => (TokenKind::Plus, 1),
            (Some('-'), _) => (TokenKind::Minus, 1),
            (Some(c), _) => {
                return Err(ParseError::at(pos, format!("unexpected character {c:?}")));
            }
            (None, _) => return Ok(TokenKind::Eof),
        };
        self.bump_n(len);
        Ok(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind> {
        tokenize(text)
            .unwrap()
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    #[test]
    fn keywords_in_any_case_and_identifiers() {
        use TokenKind::*;
        assert_eq!(
            kinds("not And oR between In true FALSE Null is contains StartsWith endswith"),
            vec![
                Not, And, Or, Between, In, True, False, Null, Is, Contains, StartsWith, EndsWith,
                Eof
            ]
        );
        assert_eq!(
            kinds("NOTE a_1 $x _y"),
            vec![
                Ident("NOTE".into()),
                Ident("a_1".into()),
                Ident("$x".into()),
                Ident("_y".into()),
                Eof
            ]
        );
    }

    #[test]
    fn numbers_by_longest_match() {
        use TokenKind::*;
        let d = |s: &str| Decimal(s.into());
        let f = |s: &str| Float(s.into());
        assert_eq!(
            kinds("0 12 12L 7l"),
            vec![d("0"), d("12"), d("12L"), d("7l"), Eof]
        );
        assert_eq!(
            kinds("1.5 .5 5. 5e3 5E+3 .5e-2 05.5"),
            vec![
                f("1.5"),
                f(".5"),
                f("5."),
                f("5e3"),
                f("5E+3"),
                f(".5e-2"),
                f("05.5"),
                Eof
            ]
        );
        // "007" is three decimals; "5e" is a decimal and an identifier.
        assert_eq!(kinds("007"), vec![d("0"), d("0"), d("7"), Eof]);
        assert_eq!(kinds("5e"), vec![d("5"), Ident("e".into()), Eof]);
        assert_eq!(kinds("1.2.3"), vec![f("1.2"), f(".3"), Eof]);
    }

    #[test]
    fn strings_operators_and_comments() {
        use TokenKind::*;
        assert_eq!(
            kinds("'it''s' '' '\n'"),
            vec![
                Str("it's".into()),
                Str(String::new()),
                Str("\n".into()),
                Eof
            ]
        );
        assert_eq!(
            kinds("= <> > >= < <= ( ) , + -"),
            vec![
                Eq, Ne, Gt, Ge, Lt, Le, LParen, RParen, Comma, Plus, Minus, Eof
            ]
        );
        assert_eq!(
            kinds("a -- note\n/* block * / */ = 1"),
            vec![Ident("a".into()), Eq, d1(), Eof]
        );
        // Without a line break at the end, "--" is two minus signs.
        assert_eq!(kinds("--1"), vec![Minus, Minus, d1(), Eof]);
    }

    fn d1() -> TokenKind {
        TokenKind::Decimal("1".into())
    }

    #[test]
    fn positions_count_lines_and_columns() {
        let t = tokenize("a\n  = 'x'").unwrap();
        assert_eq!(t[0].pos, Pos { line: 1, column: 1 });
        assert_eq!(t[1].pos, Pos { line: 2, column: 3 });
        assert_eq!(t[2].pos, Pos { line: 2, column: 5 });
    }

    #[test]
    fn lexical_errors_name_the_place() {
        let e = tokenize("a = 'open").unwrap_err();
        assert_eq!(e.pos, Pos { line: 1, column: 5 });
        assert!(e.message.contains("unterminated string"), "{e}");
        let e = tokenize("a = 1 /* open").unwrap_err();
        assert_eq!(e.pos, Pos { line: 1, column: 7 });
        let e = tokenize("a != 1").unwrap_err();
        assert_eq!(e.pos, Pos { line: 1, column: 3 });
        assert!(e.message.contains("'!'"), "{e}");
        let e = tokenize("a = .").unwrap_err();
        assert_eq!(e.pos, Pos { line: 1, column: 5 });
    }
}
