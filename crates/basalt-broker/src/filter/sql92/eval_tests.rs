//! Evaluation cases, most taken from RocketMQ's `ExpressionTest` and the
//! rules of its `ComparisonExpression`, `LogicExpression` and
//! `UnaryExpression`.

use std::collections::HashMap;

use super::*;
use crate::filter::sql92::Sql92Filter;

/// What RocketMQ's `evaluate` returns: TRUE, FALSE, null, or an exception.
#[derive(Debug, PartialEq)]
enum Outcome {
    True,
    False,
    Unknown,
    Error,
}

fn outcome(expr: &str, props: &[(&str, &str)]) -> Outcome {
    let f = Sql92Filter::compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let map: HashMap<String, String> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let r = evaluate(f.ast(), &map);
    assert_eq!(
        f.matches(&map),
        matches!(r, Ok(Value::Bool(true))),
        "matches() agrees with evaluate() for {expr}"
    );
    match r {
        Ok(Value::Bool(true)) => Outcome::True,
        Ok(Value::Bool(false)) => Outcome::False,
        Ok(Value::Null) => Outcome::Unknown,
        Ok(other) => panic!("{expr} gave a non-boolean {other:?}"),
        Err(_) => Outcome::Error,
    }
}

use Outcome::{Error, False, True, Unknown};

#[test]
fn rocketmq_expression_test_cases() {
    let abc = [("a", "3"), ("b", "4"), ("c", "6"), ("d", "4")];
    assert_eq!(outcome("a=3 and b<>4 And c>5 AND d<=4", &abc), False);
    assert_eq!(outcome("a=3 and b<>5 And c>5 AND d<=4", &abc), True);
    assert_eq!(outcome("a=3 or b<>4 Or c>5 OR d<=4", &abc), True);
    assert_eq!(outcome("a in ('3', '4', '5')", &abc), True);
    assert_eq!(outcome("a not in ('3', '4', '5')", &abc), False);
    assert_eq!(outcome("a between 2 and 10", &abc), True);
    assert_eq!(outcome("a not between 2 and 10", &abc), False);
    assert_eq!(outcome("a is null", &abc), False);
    assert_eq!(outcome("a is not null", &abc), True);
    assert_eq!(outcome("a is null", &[]), True);
    assert_eq!(
        outcome("a is not null and a='hello'", &[("a", "hello")]),
        True
    );
    assert_eq!(outcome("a is null OR a='hello'", &[]), True);
    assert_eq!(
        outcome(
            "TAGS is not null and TAGS='''''tag'''''",
            &[("TAGS", "''tag''")]
        ),
        True
    );
    assert_eq!(
        outcome(
            "a not in ('4', '4', '5') and b between 3 and 10 and c not contains 'axbc'",
            &[("a", "3"), ("b", "3"), ("c", "axbdc")]
        ),
        True
    );
}

#[test]
fn string_tests_are_false_not_unknown() {
    let v = [("value", "axb")];
    assert_eq!(outcome("value contains 'x'", &v), True);
    assert_eq!(outcome("value startswith 'ax'", &v), True);
    assert_eq!(outcome("value endswith 'xb'", &v), True);
    assert_eq!(outcome("value not contains 'x'", &v), False);
    assert_eq!(outcome("value not startswith 'u'", &v), True);
    // An empty pattern or a missing property: false, negated or not.
    for e in [
        "value contains ''",
        "value not contains ''",
        "value not endswith ''",
        "missing contains 'x'",
        "missing not contains 'x'",
        "missing not startswith 'x'",
        "1 not contains 'x'",
    ] {
        assert_eq!(outcome(e, &v), False, "{e}");
    }
    assert_eq!(outcome("' ' not startswith ' '", &v), False);
    assert_eq!(outcome("'axb' not endswith '.'", &v), True);
}

#[test]
fn a_property_against_a_number_is_parsed_as_that_number() {
    assert_eq!(outcome("a > 5", &[("a", "7")]), True);
    assert_eq!(outcome("a = 5", &[("a", "+5")]), True);
    assert_eq!(outcome("a = 5", &[("a", "005")]), True);
    // An Integer literal parses the property as an int: a long or a
    // fraction does not parse, and the message does not match.
    assert_eq!(outcome("a > 5", &[("a", "7.5")]), Error);
    assert_eq!(outcome("a > 5", &[("a", "3000000000")]), Error);
    assert_eq!(outcome("a > 5", &[("a", "seven")]), Error);
    assert_eq!(outcome("a > 5", &[("a", " 7")]), Error);
    // A Long literal parses it as a long, a Double literal as a double.
    assert_eq!(outcome("a > 2147483648", &[("a", "3000000000")]), True);
    assert_eq!(outcome("a > 5.0", &[("a", "7.5")]), True);
    assert_eq!(outcome("a > 5.0", &[("a", " 7.5d ")]), True);
    assert_eq!(outcome("a < 5.0", &[("a", "-Infinity")]), True);
    assert_eq!(outcome("a > 5.0", &[("a", "NaN")]), True);
    assert_eq!(outcome("a = 5.0", &[("a", "inf")]), Error);
    // The literal on the left works the same way.
    assert_eq!(outcome("5 < a", &[("a", "7")]), True);
    assert_eq!(outcome("5 < a", &[("a", "x")]), Error);
    // Mixed literal types widen.
    assert_eq!(outcome("5 = 5.0", &[]), True);
    assert_eq!(outcome("2147483648 > 5", &[]), True);
    assert_eq!(outcome("-2147483649 < -5", &[]), True);
}

#[test]
fn an_error_anywhere_fails_the_whole_message() {
    // RocketMQ's evaluation throws, and the filter answers false even
    // where OR would have been true.
    assert_eq!(outcome("b = 1 OR a > 5", &[("a", "x"), ("b", "1")]), True);
    assert_eq!(outcome("a > 5 OR b = 1", &[("a", "x"), ("b", "1")]), Error);
    assert_eq!(outcome("a between 0 and 100", &[("a", "abc")]), Error);
    assert_eq!(
        outcome(
            "key is not null and key between 0 and 100",
            &[("key", "con")]
        ),
        Error
    );
}

#[test]
fn two_strings_order_as_doubles_and_equal_as_text() {
    let p = [("a", "3.14"), ("b", "3.14"), ("c", "10"), ("up", "up")];
    assert_eq!(outcome("a = b", &p), True);
    assert_eq!(outcome("c > a", &p), True);
    assert_eq!(outcome("a between up and c", &p), Error);
    assert_eq!(outcome("a = 'x'", &p), False);
    assert_eq!(outcome("c > n", &[("c", "10"), ("n", "9")]), True);
    assert_eq!(outcome("'3.0' = '3'", &p), False);
}

#[test]
fn three_valued_logic_with_missing_properties() {
    assert_eq!(outcome("a > 5", &[]), Unknown);
    assert_eq!(outcome("a = 'x'", &[]), Unknown);
    assert_eq!(outcome("'x' = a", &[]), False);
    assert_eq!(outcome("a <> 'x'", &[]), Unknown);
    assert_eq!(outcome("NOT (a > 5)", &[]), Unknown);
    assert_eq!(outcome("a > 5 AND b = 1", &[("b", "2")]), False);
    assert_eq!(outcome("a > 5 AND b = 1", &[("b", "1")]), Unknown);
    assert_eq!(outcome("a > 5 OR b = 1", &[("b", "1")]), True);
    assert_eq!(outcome("a > 5 OR b = 1", &[("b", "2")]), Unknown);
    assert_eq!(outcome("a in ('x')", &[]), Unknown);
    assert_eq!(outcome("a not in ('x')", &[]), Unknown);
    assert_eq!(outcome("a between 1 and 2", &[]), Unknown);
    assert_eq!(outcome("a not between 1 and 2", &[]), Unknown);
    assert_eq!(outcome("NULL", &[]), Unknown);
    assert_eq!(outcome("TRUE", &[]), True);
    assert_eq!(outcome("NOT FALSE", &[]), True);
}

#[test]
fn booleans_and_properties_in_condition_position() {
    // A property stands for a condition: unknown when missing, else false.
    assert_eq!(outcome("flag", &[]), Unknown);
    assert_eq!(outcome("flag", &[("flag", "true")]), False);
    assert_eq!(outcome("NOT flag", &[("flag", "true")]), True);
    // A string property equals TRUE when it reads "true" in any case.
    assert_eq!(outcome("flag = TRUE", &[("flag", "TRUE")]), True);
    assert_eq!(outcome("flag = FALSE", &[("flag", "yes")]), True);
    // With the boolean on the left RocketMQ fails on the cast.
    assert_eq!(outcome("TRUE = flag", &[("flag", "true")]), Error);
    // NOT binds to its operand before '=': (NOT a) = 1 is boolean vs int.
    assert_eq!(outcome("NOT a = 1", &[("a", "2")]), False);
    assert_eq!(outcome("NOT (a = 1)", &[("a", "2")]), True);
    assert_eq!(outcome("(a = 1) = FALSE", &[("a", "2")]), True);
    assert_eq!(outcome("5 = TRUE", &[]), False);
}

#[test]
fn negation_and_between() {
    assert_eq!(outcome("a = -5", &[("a", "-5")]), True);
    assert_eq!(outcome("-a = 5", &[("a", "-5")]), Unknown);
    assert_eq!(outcome("a between -1 and 1", &[("a", "0")]), True);
    assert_eq!(outcome("a between 1 and 1", &[("a", "1")]), True);
    assert_eq!(outcome("a not between 2 and 10", &[("a", "11")]), True);
    assert_eq!(outcome("a not between 2 and 10", &[("a", "2")]), False);
    assert_eq!(outcome("- -5 = 5", &[]), True);
    assert_eq!(outcome("-2147483648 = -2147483648", &[]), True);
}

#[test]
fn java_doubles() {
    use std::cmp::Ordering::*;
    assert_eq!(java_double_cmp(-0.0, 0.0), Less);
    assert_eq!(java_double_cmp(f64::NAN, f64::INFINITY), Greater);
    assert_eq!(java_double_cmp(f64::NAN, -f64::NAN), Equal);
    assert_eq!(java_double_cmp(1.0, 1.0), Equal);
    assert_eq!(java_double("1."), Some(1.0));
    assert_eq!(java_double(".5e1"), Some(5.0));
    assert_eq!(java_double("\t-2.5F\n"), Some(-2.5));
    assert_eq!(java_double("+Infinity"), Some(f64::INFINITY));
    assert!(java_double("-NaN").is_some_and(f64::is_nan));
    for bad in ["", ".", "inf", "nan", "1e", "0x10", "1,5", "e5", "--1"] {
        assert_eq!(java_double(bad), None, "{bad:?}");
    }
}

#[test]
fn properties_are_read_in_place_from_a_record() {
    let mut encoded = Vec::new();
    for (k, v) in [("a", "7"), ("TAGS", "A"), ("a", "9")] {
        basalt_common::properties::append(&mut encoded, k, v);
    }
    let f = Sql92Filter::compile("a = 9 AND TAGS IN ('A', 'B')").unwrap();
    assert!(f.matches_encoded(&encoded));
    let f = Sql92Filter::compile("a = 7").unwrap();
    assert!(!f.matches_encoded(&encoded), "the last repeated name wins");
    assert!(!f.matches_encoded(b"garbage"));
}
