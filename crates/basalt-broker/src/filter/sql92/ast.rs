//! The parsed form of a SQL92 selector, and its printed form.
//!
//! The tree mirrors what RocketMQ's `SelectorParser` builds, with two
//! simplifications that do not change any result: `<>`, `IS [NOT] NULL`,
//! `[NOT] BETWEEN` keep their own nodes instead of being rewritten into
//! `NOT`, `=`, `AND`, `OR`; and a chain of `AND` (or `OR`) is one node with
//! its operands in order, evaluated left to right exactly as the nested
//! binary nodes would be.
//!
//! [`Expr`]'s `Display` prints a fully parenthesised selector that parses
//! back to the same tree.

use std::collections::HashSet;
use std::fmt;

/// A literal as RocketMQ types it: integers that fit 32 bits are `Int`,
/// larger ones `Long`; every literal with a point or exponent is `Double`.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Str(String),
    Int(i32),
    Long(i64),
    Double(f64),
    Bool(bool),
    Null,
}

/// The comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
        }
    }
}

/// The string tests of RocketMQ 5.x (`CONTAINS`, `STARTSWITH`, `ENDSWITH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    Contains,
    StartsWith,
    EndsWith,
}

impl MatchOp {
    pub fn keyword(self) -> &'static str {
        match self {
            MatchOp::Contains => "CONTAINS",
            MatchOp::StartsWith => "STARTSWITH",
            MatchOp::EndsWith => "ENDSWITH",
        }
    }
}

/// The strings of an `IN` list, as written and as a set for lookups.
/// Equality compares the list as written.
#[derive(Debug, Clone)]
pub struct InList {
    values: Vec<String>,
    set: HashSet<String>,
}

impl InList {
    pub fn new(values: Vec<String>) -> Self {
        assert!(!values.is_empty(), "an IN list has at least one value");
        let set = values.iter().cloned().collect();
        InList { values, set }
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    pub fn contains(&self, s: &str) -> bool {
        self.set.contains(s)
    }
}

impl PartialEq for InList {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

/// A node of a parsed selector. Invariant (kept by the parser): operands of
/// `Not`, `And` and `Or` are boolean nodes ([`Expr::is_boolean`]); `And` and
/// `Or` have at least two operands.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(Literal),
    /// A message property (or `TAGS`, `KEYS`, ...), by its exact name.
    Property(String),
    /// A property used where a boolean is expected (`WHERE flag`): unknown
    /// when absent, false otherwise (a property is a string, never a boolean).
    PropertyAsBool(String),
    /// Unary minus.
    Negate(Box<Expr>),
    Not(Box<Expr>),
    Compare(CmpOp, Box<Expr>, Box<Expr>),
    IsNull {
        operand: Box<Expr>,
        negated: bool,
    },
    Between {
        value: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    In {
        property: String,
        list: InList,
        negated: bool,
    },
    Match {
        operand: Box<Expr>,
        op: MatchOp,
        pattern: String,
        negated: bool,
    },
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

impl Expr {
    /// Whether RocketMQ counts the node as a `BooleanExpression`: it may
    /// stand where a condition is expected and may not be ordered with
    /// `<`, `>`.
    pub fn is_boolean(&self) -> bool {
        match self {
            Expr::Literal(l) => matches!(l, Literal::Bool(_) | Literal::Null),
            Expr::Property(_) | Expr::Negate(_) => false,
            _ => true,
        }
    }
}

/// Writes `s` as a quoted literal, doubling quotes.
pub fn quote(s: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str("'")?;
    f.write_str(&s.replace('\'', "''"))?;
    f.write_str("'")
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Str(s) => quote(s, f),
            Literal::Int(i) => write!(f, "{i}"),
            Literal::Long(l) => write!(f, "{l}"),
            // Debug keeps a point or exponent, so it reads back as a float.
            Literal::Double(d) => write!(f, "{d:?}"),
            Literal::Bool(true) => f.write_str("TRUE"),
            Literal::Bool(false) => f.write_str("FALSE"),
            Literal::Null => f.write_str("NULL"),
        }
    }
}

fn not(negated: bool) -> &'static str {
    if negated { "NOT " } else { "" }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Literal(l) => write!(f, "{l}"),
            Expr::Property(n) | Expr::PropertyAsBool(n) => f.write_str(n),
            Expr::Negate(e) => write!(f, "(-{e})"),
            Expr::Not(e) => write!(f, "(NOT {e})"),
            Expr::Compare(op, l, r) => write!(f, "({l} {} {r})", op.symbol()),
            Expr::IsNull { operand, negated } => {
                write!(f, "({operand} IS {}NULL)", not(*negated))
            }
            Expr::Between {
                value,
                low,
                high,
                negated,
            } => write!(f, "({value} {}BETWEEN {low} AND {high})", not(*negated)),
            Expr::In {
                property,
                list,
                negated,
            } => {
                write!(f, "({property} {}IN (", not(*negated))?;
                for (i, v) in list.values().iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    quote(v, f)?;
                }
                f.write_str("))")
            }
            Expr::Match {
                operand,
                op,
                pattern,
                negated,
            } => {
                write!(f, "({operand} {}{} ", not(*negated), op.keyword())?;
                quote(pattern, f)?;
                f.write_str(")")
            }
            Expr::And(items) => join(f, items, " AND "),
            Expr::Or(items) => join(f, items, " OR "),
        }
    }
}

fn join(f: &mut fmt::Formatter<'_>, items: &[Expr], sep: &str) -> fmt::Result {
    f.write_str("(")?;
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write!(f, "{e}")?;
    }
    f.write_str(")")
}
