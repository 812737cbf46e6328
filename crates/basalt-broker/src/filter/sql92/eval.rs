//! Evaluation of a parsed selector over a message's properties, with
//! RocketMQ's value rules (docs/sql92-filter.md#evaluation):
//!
//! * a missing property is NULL; comparisons with NULL are unknown, and
//!   `AND`/`OR`/`NOT` follow three-valued logic;
//! * a property is always a string: against a number literal it is parsed
//!   as that literal's type (`Integer`, `Long`, `Double`), and `<`, `>`,
//!   `<=`, `>=` between two strings compare them as doubles;
//! * a string that does not parse where a number is needed is an error,
//!   and an error anywhere makes the whole message not match (RocketMQ
//!   catches the exception and answers false), as does an unknown result.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::ast::{CmpOp, Expr, Literal, MatchOp};

/// A value during evaluation: RocketMQ's `Boolean`, `Integer`, `Long`,
/// `Double`, `String` or null.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(Cow<'a, str>),
}

/// Why an evaluation failed (where RocketMQ throws): the message does not
/// match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(pub String);

/// The properties a selector reads, by exact name.
pub trait PropertySource {
    fn property(&self, name: &str) -> Option<Cow<'_, str>>;
}

impl PropertySource for std::collections::HashMap<String, String> {
    fn property(&self, name: &str) -> Option<Cow<'_, str>> {
        self.get(name).map(|v| Cow::Borrowed(v.as_str()))
    }
}

/// Evaluates `e`; `Ok(Value::Bool(true))` is the only result that matches.
pub fn evaluate<'a, P: PropertySource>(e: &'a Expr, props: &'a P) -> Result<Value<'a>, EvalError> {
    Ok(match e {
        Expr::Literal(l) => literal(l),
        Expr::Property(n) => props.property(n).map_or(Value::Null, Value::Str),
        Expr::PropertyAsBool(n) => match props.property(n) {
            None => Value::Null,
            Some(_) => Value::Bool(false),
        },
        Expr::Negate(x) => match evaluate(x, props)? {
            Value::Int(i) => Value::Int(i.wrapping_neg()),
            Value::Long(l) => Value::Long(l.wrapping_neg()),
            Value::Double(d) => Value::Double(-d),
            _ => Value::Null,
        },
        Expr::Not(x) => tri(truth(evaluate(x, props)?)?.map(|b| !b)),
        Expr::Compare(op, l, r) => compare(*op, l, r, props)?,
        Expr::IsNull { operand, negated } => {
            Value::Bool((evaluate(operand, props)? == Value::Null) != *negated)
        }
        Expr::Between {
            value,
            low,
            high,
            negated: false,
        } => tri(and(
            || ordered(CmpOp::Ge, value, low, props),
            || ordered(CmpOp::Le, value, high, props),
        )?),
        Expr::Between {
            value,
            low,
            high,
            negated: true,
        } => tri(or(
            || ordered(CmpOp::Lt, value, low, props),
            || ordered(CmpOp::Gt, value, high, props),
        )?),
        Expr::In {
            property,
            list,
            negated,
        } => match props.property(property) {
            None => Value::Null,
            Some(v) => Value::Bool(list.contains(&v) != *negated),
        },
        Expr::Match {
            operand,
            op,
            pattern,
            negated,
        } => Value::Bool(string_match(operand, *op, pattern, props)? == Some(!*negated)),
        Expr::And(items) => tri(fold(items, props, false)?),
        Expr::Or(items) => tri(fold(items, props, true)?),
    })
}

/// Whether the selector accepts the message: true only for a TRUE result.
pub fn matches<P: PropertySource>(e: &Expr, props: &P) -> bool {
    matches!(evaluate(e, props), Ok(Value::Bool(true)))
}

/// A literal's value.
pub fn literal(l: &Literal) -> Value<'_> {
    match l {
        Literal::Str(s) => Value::Str(Cow::Borrowed(s)),
        Literal::Int(i) => Value::Int(*i),
        Literal::Long(l) => Value::Long(*l),
        Literal::Double(d) => Value::Double(*d),
        Literal::Bool(b) => Value::Bool(*b),
        Literal::Null => Value::Null,
    }
}

fn tri(v: Option<bool>) -> Value<'static> {
    v.map_or(Value::Null, Value::Bool)
}

/// A boolean operand's value in three-valued logic.
fn truth(v: Value<'_>) -> Result<Option<bool>, EvalError> {
    match v {
        Value::Bool(b) => Ok(Some(b)),
        Value::Null => Ok(None),
        other => Err(EvalError(format!("{other:?} is not a boolean"))),
    }
}

/// `l AND r` (`short` = false) or `l OR r` (`short` = true): `r` is not
/// evaluated when `l` alone decides.
fn combine(
    l: Option<bool>,
    r: impl FnOnce() -> Result<Option<bool>, EvalError>,
    short: bool,
) -> Result<Option<bool>, EvalError> {
    if l == Some(short) {
        return Ok(Some(short));
    }
    let r = r()?;
    if r == Some(short) {
        return Ok(Some(short));
    }
    Ok(if l.is_none() || r.is_none() {
        None
    } else {
        Some(!short)
    })
}

fn and(
    l: impl FnOnce() -> Result<Option<bool>, EvalError>,
    r: impl FnOnce() -> Result<Option<bool>, EvalError>,
) -> Result<Option<bool>, EvalError> {
    combine(l()?, r, false)
}

fn or(
    l: impl FnOnce() -> Result<Option<bool>, EvalError>,
    r: impl FnOnce() -> Result<Option<bool>, EvalError>,
) -> Result<Option<bool>, EvalError> {
    combine(l()?, r, true)
}

/// A chain `a AND b AND c` as RocketMQ's nested `((a AND b) AND c)`.
fn fold<P: PropertySource>(
    items: &[Expr],
    props: &P,
    short: bool,
) -> Result<Option<bool>, EvalError> {
    let (first, rest) = items.split_first().expect("AND/OR has operands");
    let mut acc = truth(evaluate(first, props)?)?;
    for item in rest {
        acc = combine(acc, || truth(evaluate(item, props)?), short)?;
    }
    Ok(acc)
}

fn compare<'a, P: PropertySource>(
    op: CmpOp,
    l: &'a Expr,
    r: &'a Expr,
    props: &'a P,
) -> Result<Value<'a>, EvalError> {
    match op {
        CmpOp::Eq => equal(l, r, props).map(tri),
        CmpOp::Ne => equal(l, r, props).map(|v| tri(v.map(|b| !b))),
        _ => ordered(op, l, r, props).map(tri),
    }
}

/// `=`: both null is true, one null is unknown (left) or false (right).
fn equal<P: PropertySource>(l: &Expr, r: &Expr, props: &P) -> Result<Option<bool>, EvalError> {
    let lv = evaluate(l, props)?;
    let rv = evaluate(r, props)?;
    Ok(match (&lv, &rv) {
        (Value::Null, Value::Null) => Some(true),
        (Value::Null, _) => None,
        (_, Value::Null) => Some(false),
        _ => Some(java_compare(&lv, &rv)? == Ordering::Equal),
    })
}

/// `<`, `<=`, `>`, `>=`: unknown when either side is null; two strings are
/// compared as doubles.
fn ordered<P: PropertySource>(
    op: CmpOp,
    l: &Expr,
    r: &Expr,
    props: &P,
) -> Result<Option<bool>, EvalError> {
    let lv = evaluate(l, props)?;
    if lv == Value::Null {
        return Ok(None);
    }
    let rv = evaluate(r, props)?;
    if rv == Value::Null {
        return Ok(None);
    }
    let ord = match (&lv, &rv) {
        (Value::Str(a), Value::Str(b)) => {
            let (Some(a), Some(b)) = (java_double(a), java_double(b)) else {
                return Err(EvalError(format!(
                    "strings {a:?} and {b:?} cannot be ordered"
                )));
            };
            java_double_cmp(a, b)
        }
        _ => java_compare(&lv, &rv)?,
    };
    Ok(Some(match op {
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Ge => ord != Ordering::Less,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Le => ord != Ordering::Greater,
        CmpOp::Eq | CmpOp::Ne => unreachable!("not an ordering operator"),
    }))
}

/// `CONTAINS` and friends: `Some(found)`, or `None` (the test is false
/// either way, negated or not) for an empty pattern or a non-string.
fn string_match<P: PropertySource>(
    operand: &Expr,
    op: MatchOp,
    pattern: &str,
    props: &P,
) -> Result<Option<bool>, EvalError> {
    if pattern.is_empty() {
        return Ok(None);
    }
    Ok(match evaluate(operand, props)? {
        Value::Str(s) => Some(match op {
            MatchOp::Contains => s.contains(pattern),
            MatchOp::StartsWith => s.starts_with(pattern),
            MatchOp::EndsWith => s.ends_with(pattern),
        }),
        _ => None,
    })
}

fn bad_number(s: &str, what: &str) -> EvalError {
    EvalError(format!("{s:?} is not {what}"))
}

/// RocketMQ's `ComparisonExpression.__compare` with string conversion on:
/// values of different types are converted to the wider numeric type, a
/// string to the other side's type; pairs it cannot convert order as "less".
pub fn java_compare(lv: &Value<'_>, rv: &Value<'_>) -> Result<Ordering, EvalError> {
    use Value::*;
    let int = |s: &str| s.parse::<i32>().map_err(|_| bad_number(s, "an int"));
    let long = |s: &str| s.parse::<i64>().map_err(|_| bad_number(s, "a long"));
    let double = |s: &str| java_double(s).ok_or_else(|| bad_number(s, "a double"));
    Ok(match (lv, rv) {
        (Bool(a), Bool(b)) => a.cmp(b),
        (Int(a), Int(b)) => a.cmp(b),
        (Long(a), Long(b)) => a.cmp(b),
        (Double(a), Double(b)) => java_double_cmp(*a, *b),
        (Str(a), Str(b)) => a.encode_utf16().cmp(b.encode_utf16()),
        // RocketMQ casts the boolean to a string here and fails.
        (Bool(_), Str(_)) => {
            return Err(EvalError(
                "a boolean cannot be compared with a string".into(),
            ));
        }
        (Int(a), Long(b)) => i64::from(*a).cmp(b),
        (Int(a), Double(b)) => java_double_cmp(f64::from(*a), *b),
        (Int(a), Str(b)) => a.cmp(&int(b)?),
        (Long(a), Int(b)) => a.cmp(&i64::from(*b)),
        (Long(a), Double(b)) => java_double_cmp(*a as f64, *b),
        (Long(a), Str(b)) => a.cmp(&long(b)?),
        (Double(a), Int(b)) => java_double_cmp(*a, f64::from(*b)),
        (Double(a), Long(b)) => java_double_cmp(*a, *b as f64),
        (Double(a), Str(b)) => java_double_cmp(*a, double(b)?),
        (Str(a), Bool(b)) => a.eq_ignore_ascii_case("true").cmp(b),
        (Str(a), Int(b)) => int(a)?.cmp(b),
        (Str(a), Long(b)) => long(a)?.cmp(b),
        (Str(a), Double(b)) => java_double_cmp(double(a)?, *b),
        (Null, _) | (_, Null) => return Err(EvalError("null cannot be compared".into())),
        // Boolean against a number, or a number against a boolean.
        _ => Ordering::Less,
    })
}

/// Java's `Double.compareTo`: -0.0 below 0.0, NaN above everything and
/// equal to itself.
pub fn java_double_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a
            .partial_cmp(&b)
            .filter(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| (a.to_bits() as i64).cmp(&(b.to_bits() as i64))),
    }
}

/// Java's `Double.valueOf` for decimal text: surrounding blanks and
/// control characters are ignored, `NaN` and `Infinity` are words with an
/// optional sign, a trailing `f`/`F`/`d`/`D` is allowed. Hexadecimal
/// floating text (`0x1p3`) is not accepted.
pub fn java_double(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    match body {
        "NaN" => return Some(f64::NAN),
        "Infinity" => return Some(sign * f64::INFINITY),
        _ => {}
    }
    let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
    let numeric = body.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && body
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if !numeric {
        return None;
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

#[cfg(test)]
#[path = "eval_tests.rs"]
mod tests;
