//! Recursive-descent parser for RocketMQ's selector grammar
//! (docs/sql92-filter.md#grammar), lowest precedence first:
//!
//! ```text
//! selector   := or EOF
//! or         := and (OR and)*
//! and        := equality (AND equality)*
//! equality   := comparison ( '=' comparison | '<>' comparison
//!                          | IS NULL | IS NOT NULL )*
//! comparison := unary ( ('>' | '>=' | '<' | '<=') unary
//!                     | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
//!                     | [NOT] BETWEEN unary AND unary
//!                     | [NOT] IN '(' string (',' string)* ')' )*
//! unary      := '+' unary | '-' unary | NOT unary | primary
//! primary    := literal | identifier | '(' or ')'
//! ```
//!
//! The checks RocketMQ makes while it builds the tree are made here too,
//! with its wording where it has one: `=` with a NULL literal, ordering a
//! string or boolean literal or a condition, `IN` on anything but a property,
//! `BETWEEN` with constant bounds in the wrong order, a non-condition where a
//! condition is needed. Unlike RocketMQ, text left over after a complete
//! selector is an error rather than ignored.

use super::ast::{CmpOp, Expr, InList, Literal, MatchOp};
use super::eval::{java_compare, java_double, literal};
use super::lexer::{Token, TokenKind};
use super::{MAX_DEPTH, ParseError, Pos};

/// A parsed sub-expression with where it starts and how deep its tree is.
struct Node {
    expr: Expr,
    pos: Pos,
    depth: usize,
}

impl Node {
    fn leaf(expr: Expr, pos: Pos) -> Node {
        Node {
            expr,
            pos,
            depth: 1,
        }
    }
}

/// Parses tokens (ending with EOF) into a boolean selector.
pub fn parse(tokens: Vec<Token>) -> Result<Expr, ParseError> {
    assert!(
        matches!(tokens.last().map(|t| &t.kind), Some(TokenKind::Eof)),
        "token list ends with EOF"
    );
    let mut p = Parser {
        tokens,
        at: 0,
        nesting: 0,
    };
    let n = p.or_expr()?;
    let t = p.peek();
    if t.kind != TokenKind::Eof {
        return Err(ParseError::at(
            t.pos,
            format!(
                "unexpected {} after a complete expression",
                t.kind.describe()
            ),
        ));
    }
    Ok(as_boolean(n)?.expr)
}

/// Deepest recursion through `unary` (parentheses and prefix operators).
/// Every tree within [`MAX_DEPTH`] prints to text within this bound: each
/// printed level adds a parenthesis, and `NOT` or `-` one more.
const MAX_NESTING: usize = 2 * MAX_DEPTH + 2;

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// Current recursion depth through `unary` (parentheses, prefixes).
    nesting: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.at]
    }

    fn peek_kind(&self) -> &TokenKind {
        &self.tokens[self.at].kind
    }

    fn next(&mut self) -> Token {
        let t = self.tokens[self.at].clone();
        if t.kind != TokenKind::Eof {
            self.at += 1;
        }
        t
    }

    fn expect(&mut self, kind: TokenKind, what: &str) -> Result<Pos, ParseError> {
        let t = self.next();
        if t.kind == kind {
            Ok(t.pos)
        } else {
            Err(unexpected(&t, what))
        }
    }

    fn or_expr(&mut self) -> Result<Node, ParseError> {
        let mut left = self.and_expr()?;
        while *self.peek_kind() == TokenKind::Or {
            self.next();
            let right = self.and_expr()?;
            left = chain(left, right, Expr::Or, |e| match e {
                Expr::Or(items) => Ok(items),
                other => Err(other),
            })?;
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Node, ParseError> {
        let mut left = self.equality()?;
        while *self.peek_kind() == TokenKind::And {
            self.next();
            let right = self.equality()?;
            left = chain(left, right, Expr::And, |e| match e {
                Expr::And(items) => Ok(items),
                other => Err(other),
            })?;
        }
        Ok(left)
    }

    fn equality(&mut self) -> Result<Node, ParseError> {
        let mut left = self.comparison()?;
        loop {
            left = match self.peek_kind() {
                TokenKind::Eq | TokenKind::Ne => {
                    let op = if self.next().kind == TokenKind::Eq {
                        CmpOp::Eq
                    } else {
                        CmpOp::Ne
                    };
                    let right = self.comparison()?;
                    equal(op, left, right)?
                }
                TokenKind::Is => {
                    self.next();
                    let negated = *self.peek_kind() == TokenKind::Not;
                    if negated {
                        self.next();
                    }
                    self.expect(TokenKind::Null, "NULL")?;
                    let pos = left.pos;
                    let depth = left.depth + 1;
                    let operand = Box::new(left.expr);
                    deeper(Expr::IsNull { operand, negated }, pos, depth)?
                }
                _ => return Ok(left),
            };
        }
    }

    fn comparison(&mut self) -> Result<Node, ParseError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek_kind() {
                TokenKind::Gt => CmpOp::Gt,
                TokenKind::Ge => CmpOp::Ge,
                TokenKind::Lt => CmpOp::Lt,
                TokenKind::Le => CmpOp::Le,
                TokenKind::Not
                | TokenKind::Contains
                | TokenKind::StartsWith
                | TokenKind::EndsWith
                | TokenKind::Between
                | TokenKind::In => {
                    left = self.keyword_test(left)?;
                    continue;
                }
                _ => return Ok(left),
            };
            self.next();
            let right = self.unary()?;
            left = ordered(op, left, right)?;
        }
    }

    /// `[NOT] CONTAINS|STARTSWITH|ENDSWITH|BETWEEN|IN ...` after `left`.
    fn keyword_test(&mut self, left: Node) -> Result<Node, ParseError> {
        let negated = *self.peek_kind() == TokenKind::Not;
        if negated {
            self.next();
        }
        let t = self.next();
        let op = match t.kind {
            TokenKind::Contains => MatchOp::Contains,
            TokenKind::StartsWith => MatchOp::StartsWith,
            TokenKind::EndsWith => MatchOp::EndsWith,
            TokenKind::Between => {
                let low = self.unary()?;
                self.expect(TokenKind::And, "AND")?;
                let high = self.unary()?;
                return between(left, low, high, negated);
            }
            TokenKind::In => return self.in_list(left, negated),
            _ => {
                return Err(unexpected(
                    &t,
                    "CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN",
                ));
            }
        };
        let pattern = self.string()?;
        let depth = left.depth + 1;
        let pos = left.pos;
        let operand = Box::new(left.expr);
        deeper(
            Expr::Match {
                operand,
                op,
                pattern,
                negated,
            },
            pos,
            depth,
        )
    }

    fn in_list(&mut self, left: Node, negated: bool) -> Result<Node, ParseError> {
        let Expr::Property(property) = left.expr else {
            return Err(ParseError::at(
                left.pos,
                format!("Expected a property for In expression, got: {}", left.expr),
            ));
        };
        self.expect(TokenKind::LParen, "'('")?;
        let mut values = vec![self.string()?];
        while *self.peek_kind() == TokenKind::Comma {
            self.next();
            values.push(self.string()?);
        }
        self.expect(TokenKind::RParen, "',' or ')'")?;
        let expr = Expr::In {
            property,
            list: InList::new(values),
            negated,
        };
        deeper(expr, left.pos, left.depth + 1)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        let t = self.next();
        match t.kind {
            TokenKind::Str(s) => Ok(s),
            _ => Err(unexpected(&t, "a quoted string")),
        }
    }

    fn unary(&mut self) -> Result<Node, ParseError> {
        let pos = self.peek().pos;
        if self.nesting >= MAX_NESTING {
            return Err(ParseError::at(
                pos,
                format!("expression nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.nesting += 1;
        let r = self.unary_inner(pos);
        self.nesting -= 1;
        r
    }

    fn unary_inner(&mut self, pos: Pos) -> Result<Node, ParseError> {
        match self.peek_kind() {
            TokenKind::Plus => {
                self.next();
                self.unary()
            }
            TokenKind::Minus => {
                self.next();
                let n = self.unary()?;
                deeper(Expr::Negate(Box::new(n.expr)), pos, n.depth + 1)
            }
            TokenKind::Not => {
                self.next();
                let n = as_boolean(self.unary()?)?;
                deeper(Expr::Not(Box::new(n.expr)), pos, n.depth + 1)
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Node, ParseError> {
        let t = self.next();
        let lit = |l| Ok(Node::leaf(Expr::Literal(l), t.pos));
        match &t.kind {
            TokenKind::Str(s) => lit(Literal::Str(s.clone())),
            TokenKind::Decimal(text) => lit(decimal(text, t.pos)?),
            TokenKind::Float(text) => lit(float(text, t.pos)?),
            TokenKind::True => lit(Literal::Bool(true)),
            TokenKind::False => lit(Literal::Bool(false)),
            TokenKind::Null => lit(Literal::Null),
            TokenKind::Ident(name) => Ok(Node::leaf(Expr::Property(name.clone()), t.pos)),
            TokenKind::LParen => {
                let mut n = self.or_expr()?;
                self.expect(TokenKind::RParen, "')'")?;
                n.pos = t.pos;
                Ok(n)
            }
            _ => Err(unexpected(&t, "a value, a property or '('")),
        }
    }
}

fn unexpected(t: &Token, wanted: &str) -> ParseError {
    ParseError::at(
        t.pos,
        format!("expected {wanted}, found {}", t.kind.describe()),
    )
}

/// A node `depth` levels deep, refused past [`MAX_DEPTH`].
fn deeper(expr: Expr, pos: Pos, depth: usize) -> Result<Node, ParseError> {
    if depth > MAX_DEPTH {
        return Err(ParseError::at(
            pos,
            format!("expression nests deeper than {MAX_DEPTH} levels"),
        ));
    }
    Ok(Node { expr, pos, depth })
}

/// `left OP right` for AND/OR, appending to `left` when it is already a
/// chain of the same operator.
fn chain(
    left: Node,
    right: Node,
    make: fn(Vec<Expr>) -> Expr,
    items_of: fn(Expr) -> Result<Vec<Expr>, Expr>,
) -> Result<Node, ParseError> {
    let left = as_boolean(left)?;
    let right = as_boolean(right)?;
    let (items, depth) = match items_of(left.expr) {
        Ok(mut items) => {
            items.push(right.expr);
            (items, left.depth.max(right.depth + 1))
        }
        Err(single) => (vec![single, right.expr], left.depth.max(right.depth) + 1),
    };
    deeper(make(items), left.pos, depth)
}

/// RocketMQ's `asBooleanExpression`: conditions stay, a property is read as
/// a boolean, anything else is refused.
fn as_boolean(n: Node) -> Result<Node, ParseError> {
    match n.expr {
        e if e.is_boolean() => Ok(Node { expr: e, ..n }),
        Expr::Property(name) => Ok(Node {
            expr: Expr::PropertyAsBool(name),
            ..n
        }),
        e => Err(ParseError::at(
            n.pos,
            format!("Expression will not result in a boolean value: {e}"),
        )),
    }
}

/// `=` / `<>` with RocketMQ's operand checks.
fn equal(op: CmpOp, left: Node, right: Node) -> Result<Node, ParseError> {
    for side in [&left, &right] {
        if side.expr == Expr::Literal(Literal::Null) {
            return Err(ParseError::at(side.pos, "'NULL' cannot be compared."));
        }
    }
    if let (Expr::Literal(l @ Literal::Bool(_)), Expr::Literal(r)) = (&left.expr, &right.expr)
        && !matches!(r, Literal::Bool(_))
    {
        return Err(ParseError::at(
            left.pos,
            format!("'{l}' cannot be compared with '{r}'"),
        ));
    }
    binary(op, left, right)
}

/// `<`, `<=`, `>`, `>=` with RocketMQ's operand checks.
fn ordered(op: CmpOp, left: Node, right: Node) -> Result<Node, ParseError> {
    check_orderable(&left)?;
    check_orderable(&right)?;
    binary(op, left, right)
}

fn binary(op: CmpOp, left: Node, right: Node) -> Result<Node, ParseError> {
    let depth = left.depth.max(right.depth) + 1;
    let pos = left.pos;
    let expr = Expr::Compare(op, Box::new(left.expr), Box::new(right.expr));
    deeper(expr, pos, depth)
}

/// RocketMQ's `checkLessThanOperand`: only number literals, properties and
/// negations may be ordered.
fn check_orderable(n: &Node) -> Result<(), ParseError> {
    let ok = match &n.expr {
        Expr::Literal(l) => matches!(l, Literal::Int(_) | Literal::Long(_) | Literal::Double(_)),
        e => !e.is_boolean(),
    };
    if ok {
        Ok(())
    } else {
        Err(ParseError::at(
            n.pos,
            format!("Value '{}' cannot be compared.", n.expr),
        ))
    }
}

fn between(value: Node, low: Node, high: Node, negated: bool) -> Result<Node, ParseError> {
    if !negated && let (Expr::Literal(lo), Expr::Literal(hi)) = (&low.expr, &high.expr) {
        check_between_bounds(lo, hi, low.pos)?;
    }
    for n in [&value, &low, &high] {
        check_orderable(n)?;
    }
    let depth = value.depth.max(low.depth).max(high.depth) + 1;
    let pos = value.pos;
    let expr = Expr::Between {
        value: Box::new(value.expr),
        low: Box::new(low.expr),
        high: Box::new(high.expr),
        negated,
    };
    deeper(expr, pos, depth)
}

/// Constant bounds must be non-null and in order (`BETWEEN 1 AND 2`).
fn check_between_bounds(lo: &Literal, hi: &Literal, pos: Pos) -> Result<(), ParseError> {
    if *lo == Literal::Null || *hi == Literal::Null {
        return Err(ParseError::at(
            pos,
            "Illegal values of between, values can not be null!",
        ));
    }
    let ord = java_compare(&literal(hi), &literal(lo)).map_err(|e| ParseError::at(pos, e.0))?;
    if ord == std::cmp::Ordering::Less {
        return Err(ParseError::at(
            pos,
            format!(
                "Illegal values of between, left value({lo}) must less than or equal to right value({hi})"
            ),
        ));
    }
    Ok(())
}

/// A DECIMAL_LITERAL: an `Int` when it fits 32 bits, else a `Long`.
fn decimal(text: &str, pos: Pos) -> Result<Literal, ParseError> {
    let digits = text.trim_end_matches(['l', 'L']);
    let v: i64 = digits
        .parse()
        .map_err(|_| ParseError::at(pos, format!("number {text} is out of range")))?;
    Ok(match i32::try_from(v) {
        Ok(i) => Literal::Int(i),
        Err(_) => Literal::Long(v),
    })
}

/// A FLOATING_POINT_LITERAL; infinite values are refused as in RocketMQ.
fn float(text: &str, pos: Pos) -> Result<Literal, ParseError> {
    match java_double(text) {
        Some(v) if v.is_finite() => Ok(Literal::Double(v)),
        _ => Err(ParseError::at(
            pos,
            format!("{text} is greater than {:e}", f64::MAX),
        )),
    }
}

#[cfg(test)]
#[path = "parser_tests.rs"]
mod tests;
