//! Properties of the whole pipeline: printed trees parse back to
//! themselves, the fuzz body holds on arbitrary and mutated input, and the
//! deepest accepted selector fits a small stack.

use proptest::prelude::*;

use super::ast::{CmpOp, Expr, InList, Literal, MatchOp};
use super::eval::{java_compare, literal};
use super::{MAX_DEPTH, Sql92Filter, fuzzing, lexer, parser};

const KEYWORDS: &[&str] = &[
    "not",
    "and",
    "or",
    "between",
    "in",
    "true",
    "false",
    "null",
    "is",
    "contains",
    "startswith",
    "endswith",
];

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z_$][a-zA-Z0-9_$]{0,6}".prop_filter("not a keyword", |n| {
        !KEYWORDS.contains(&n.to_ascii_lowercase().as_str())
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![".{0,6}", "[a-z' ]{0,6}"]
}

fn number() -> impl Strategy<Value = Literal> {
    prop_oneof![
        (0..=i32::MAX).prop_map(Literal::Int),
        (i64::from(i32::MAX) + 1..=i64::MAX).prop_map(Literal::Long),
        (0.0f64..1e300).prop_map(Literal::Double),
        (0.0f64..1e-300).prop_map(Literal::Double),
    ]
}

fn lit(l: Literal) -> Expr {
    Expr::Literal(l)
}

/// What may be ordered with `<`, `>`: numbers, properties, negations.
fn orderable() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![name().prop_map(Expr::Property), number().prop_map(lit)];
    leaf.prop_recursive(2, 4, 1, |inner| {
        inner.prop_map(|e| Expr::Negate(Box::new(e)))
    })
}

/// What may stand on either side of `=`: also strings (and conditions on
/// the left when the right is a boolean literal, see `condition`).
fn comparable() -> impl Strategy<Value = Expr> {
    prop_oneof![orderable(), text().prop_map(|s| lit(Literal::Str(s)))]
}

fn bounds(value: Expr, low: Expr, high: Expr, negated: bool) -> Expr {
    // Constant bounds must be in order (RocketMQ refuses `BETWEEN 10 AND 0`).
    let (low, high) = match (&low, &high) {
        (Expr::Literal(l), Expr::Literal(h)) if !negated => {
            match java_compare(&literal(h), &literal(l)) {
                Ok(std::cmp::Ordering::Less) => (high, low),
                _ => (low, high),
            }
        }
        _ => (low, high),
    };
    Expr::Between {
        value: Box::new(value),
        low: Box::new(low),
        high: Box::new(high),
        negated,
    }
}

fn simple_condition() -> impl Strategy<Value = Expr> {
    let ord_op = prop_oneof![
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
        Just(CmpOp::Lt),
        Just(CmpOp::Le)
    ];
    let eq_op = prop_oneof![Just(CmpOp::Eq), Just(CmpOp::Ne)];
    let match_op = prop_oneof![
        Just(MatchOp::Contains),
        Just(MatchOp::StartsWith),
        Just(MatchOp::EndsWith)
    ];
    prop_oneof![
        (ord_op, orderable(), orderable()).prop_map(|(op, l, r)| Expr::Compare(
            op,
            Box::new(l),
            Box::new(r)
        )),
        (eq_op.clone(), comparable(), comparable()).prop_map(|(op, l, r)| Expr::Compare(
            op,
            Box::new(l),
            Box::new(r)
        )),
        (eq_op, comparable(), any::<bool>()).prop_map(|(op, l, b)| Expr::Compare(
            op,
            Box::new(l),
            Box::new(lit(Literal::Bool(b)))
        )),
        (comparable(), any::<bool>()).prop_map(|(e, negated)| Expr::IsNull {
            operand: Box::new(e),
            negated
        }),
        (orderable(), orderable(), orderable(), any::<bool>())
            .prop_map(|(v, l, h, n)| bounds(v, l, h, n)),
        (name(), prop::collection::vec(text(), 1..4), any::<bool>()).prop_map(
            |(property, values, negated)| Expr::In {
                property,
                list: InList::new(values),
                negated
            }
        ),
        (comparable(), match_op, text(), any::<bool>()).prop_map(|(e, op, pattern, negated)| {
            Expr::Match {
                operand: Box::new(e),
                op,
                pattern,
                negated,
            }
        }),
        name().prop_map(Expr::PropertyAsBool),
        any::<bool>().prop_map(|b| lit(Literal::Bool(b))),
        Just(lit(Literal::Null)),
    ]
}

/// A chain whose first operand is not itself the same chain (the parser
/// flattens `(a AND b) AND c`).
fn chain(items: Vec<Expr>, and: bool) -> Expr {
    let same = |e: &Expr| matches!((e, and), (Expr::And(_), true) | (Expr::Or(_), false));
    let mut items = items;
    if same(&items[0]) {
        items[0] = Expr::Not(Box::new(items[0].clone()));
    }
    if and {
        Expr::And(items)
    } else {
        Expr::Or(items)
    }
}

fn condition() -> impl Strategy<Value = Expr> {
    simple_condition().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| Expr::Not(Box::new(e))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| chain(v, true)),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| chain(v, false)),
            (
                inner.clone().prop_filter(
                    "NULL cannot be compared; a bare property is no condition",
                    |e| { !matches!(e, Expr::Literal(Literal::Null) | Expr::PropertyAsBool(_)) }
                ),
                any::<bool>()
            )
                .prop_map(|(e, b)| Expr::Compare(
                    CmpOp::Eq,
                    Box::new(e),
                    Box::new(lit(Literal::Bool(b)))
                )),
            (
                inner.prop_filter("a bare property is no condition", |e| {
                    !matches!(e, Expr::PropertyAsBool(_))
                }),
                any::<bool>()
            )
                .prop_map(|(e, negated)| Expr::IsNull {
                    operand: Box::new(e),
                    negated
                }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn printed_trees_parse_back_to_themselves(e in condition()) {
        let printed = e.to_string();
        let parsed = lexer::tokenize(&printed).and_then(parser::parse);
        prop_assert_eq!(parsed.as_ref(), Ok(&e), "printed as {}", printed);
    }

    #[test]
    fn fuzz_body_holds_on_arbitrary_text(s in ".{0,80}") {
        fuzzing::check_selector(s.as_bytes());
    }

    #[test]
    fn fuzz_body_holds_on_mutated_selectors(
        e in condition(),
        cut in any::<prop::sample::Index>(),
        insert in prop_oneof![Just(""), Just("("), Just(")"), Just("'"), Just(" NOT "),
            Just(" AND "), Just("--"), Just("/*"), Just("1e"), Just(".")],
    ) {
        let printed = e.to_string();
        let at = cut.index(printed.len() + 1);
        let at = (0..=at).rev().find(|i| printed.is_char_boundary(*i)).unwrap_or(0);
        let mutated = format!("{}{insert}{}", &printed[..at], &printed[at..]);
        fuzzing::check_selector(mutated.as_bytes());
    }
}

#[test]
fn fuzz_body_on_raw_bytes() {
    for data in [
        &b""[..],
        b"\xff\xfe a > 1",
        b"a = '\xc3\x28'",
        b"((((((((((",
        b"a IN ('x',",
        b"- - - - 1 = 1",
        b"a > 1 -- comment",
        b"/**/a/**/IS/**/NULL",
    ] {
        fuzzing::check_selector(data);
    }
}

#[test]
fn the_deepest_accepted_selector_fits_a_small_stack() {
    // Deepest nesting the parser accepts, in the form that recurses most.
    let depth = MAX_DEPTH - 2;
    let text = format!("{}a{}", "(NOT ".repeat(depth), ")".repeat(depth));
    let run = move || {
        let f = Sql92Filter::compile(&text).expect("within the limits");
        let printed = f.ast().to_string();
        assert!(Sql92Filter::compile(&printed).is_ok());
        f.matches(&std::collections::HashMap::new())
    };
    // Tokio workers have 2 MiB; a quarter of that is plenty.
    let handle = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(run)
        .expect("spawn");
    assert!(!handle.join().expect("no stack overflow"));
}

#[test]
fn selectors_from_the_issue() {
    let f = Sql92Filter::compile("a > 5 AND b = 'x'").unwrap();
    let props = |pairs: &[(&str, &str)]| -> std::collections::HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(f.matches(&props(&[("a", "6"), ("b", "x")])));
    assert!(!f.matches(&props(&[("a", "5"), ("b", "x")])));
    assert!(!f.matches(&props(&[("b", "x")])));
    let f = Sql92Filter::compile("c IN ('p','q')").unwrap();
    assert!(f.matches(&props(&[("c", "q")])));
    assert!(!f.matches(&props(&[("c", "r")])));
    let f = Sql92Filter::compile("d IS NULL").unwrap();
    assert!(f.matches(&props(&[])));
    assert!(!f.matches(&props(&[("d", "")])));
    let f = Sql92Filter::compile("TAGS IN ('A','B')").unwrap();
    assert!(f.matches(&props(&[("TAGS", "B")])));
    assert!(!f.matches(&props(&[("TAGS", "C")])));
    assert_eq!(f.expression(), "TAGS IN ('A','B')");
}
