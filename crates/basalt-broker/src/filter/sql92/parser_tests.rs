//! Parser cases: the trees RocketMQ's grammar gives, and what it refuses.

use super::super::ast::{CmpOp, Expr, InList, Literal, MatchOp};
use super::super::{Pos, Sql92Filter, lexer};
use super::*;

fn tree(text: &str) -> Expr {
    Sql92Filter::compile(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .ast()
        .clone()
}

fn refusal(text: &str) -> ParseError {
    match Sql92Filter::compile(text) {
        Ok(f) => panic!("{text} was accepted as {}", f.ast()),
        Err(e) => e,
    }
}

fn prop(n: &str) -> Box<Expr> {
    Box::new(Expr::Property(n.into()))
}

fn int(i: i32) -> Box<Expr> {
    Box::new(Expr::Literal(Literal::Int(i)))
}

fn at(line: u32, column: u32) -> Pos {
    Pos { line, column }
}

#[test]
fn precedence_and_associativity() {
    // AND binds tighter than OR; chains keep their order.
    assert_eq!(
        tree("a = 1 OR b = 2 AND c = 3 OR d = 4"),
        Expr::Or(vec![
            Expr::Compare(CmpOp::Eq, prop("a"), int(1)),
            Expr::And(vec![
                Expr::Compare(CmpOp::Eq, prop("b"), int(2)),
                Expr::Compare(CmpOp::Eq, prop("c"), int(3)),
            ]),
            Expr::Compare(CmpOp::Eq, prop("d"), int(4)),
        ])
    );
    // NOT applies to the next operand only: (NOT a) = 1.
    assert_eq!(
        tree("NOT a = 1"),
        Expr::Compare(
            CmpOp::Eq,
            Box::new(Expr::Not(Box::new(Expr::PropertyAsBool("a".into())))),
            int(1)
        )
    );
    // Unary minus is a node, not part of the literal; '+' is no node.
    assert_eq!(
        tree("a > -5 AND b < +2"),
        Expr::And(vec![
            Expr::Compare(CmpOp::Gt, prop("a"), Box::new(Expr::Negate(int(5)))),
            Expr::Compare(CmpOp::Lt, prop("b"), int(2)),
        ])
    );
    // Parentheses group without a node of their own.
    assert_eq!(tree("((a > 1))"), tree("a > 1"));
    assert_eq!(tree("(a=1 AND b=2) AND c=3"), tree("a=1 AND b=2 AND c=3"));
}

#[test]
fn operators_and_literals() {
    assert_eq!(
        tree("a NOT BETWEEN 1 AND 2.5"),
        Expr::Between {
            value: prop("a"),
            low: int(1),
            high: Box::new(Expr::Literal(Literal::Double(2.5))),
            negated: true,
        }
    );
    assert_eq!(
        tree("TAGS in ('A', 'B')"),
        Expr::In {
            property: "TAGS".into(),
            list: InList::new(vec!["A".into(), "B".into()]),
            negated: false,
        }
    );
    assert_eq!(
        tree("d IS NOT NULL"),
        Expr::IsNull {
            operand: prop("d"),
            negated: true,
        }
    );
    assert_eq!(
        tree("b not endswith 'x'''"),
        Expr::Match {
            operand: prop("b"),
            op: MatchOp::EndsWith,
            pattern: "x'".into(),
            negated: true,
        }
    );
    assert_eq!(
        tree("a = 2147483648 OR a = 12L OR a = 5E2"),
        Expr::Or(vec![
            Expr::Compare(
                CmpOp::Eq,
                prop("a"),
                Box::new(Expr::Literal(Literal::Long(1 << 31)))
            ),
            Expr::Compare(CmpOp::Eq, prop("a"), int(12)),
            Expr::Compare(
                CmpOp::Eq,
                prop("a"),
                Box::new(Expr::Literal(Literal::Double(500.0)))
            ),
        ])
    );
    assert_eq!(tree("true"), Expr::Literal(Literal::Bool(true)));
    assert_eq!(tree("NULL"), Expr::Literal(Literal::Null));
    assert_eq!(tree("flag"), Expr::PropertyAsBool("flag".into()));
    // A property called "now" is just a property.
    assert_eq!(
        tree("a <= now"),
        Expr::Compare(CmpOp::Le, prop("a"), prop("now"))
    );
    // Comments and line breaks.
    assert_eq!(
        tree("a > 1 -- why\n/* and */ AND b > 2"),
        tree("a>1 AND b>2")
    );
}

#[test]
fn rocketmq_refusals_with_its_words() {
    let cases: &[(&str, Pos, &str)] = &[
        ("a and between 2 and 10", at(1, 7), "expected a value"),
        (
            " a between 10 and 0",
            at(1, 12),
            "left value(10) must less than or equal to right value(0)",
        ),
        ("a between NULL and 1", at(1, 11), "values can not be null"),
        ("a > 100000000000000000000000", at(1, 5), "out of range"),
        ("a = NULL", at(1, 5), "'NULL' cannot be compared."),
        (
            "TRUE = 'x'",
            at(1, 1),
            "'TRUE' cannot be compared with ''x''",
        ),
        ("a > 'x'", at(1, 5), "Value ''x'' cannot be compared."),
        ("a > TRUE", at(1, 5), "Value 'TRUE' cannot be compared."),
        ("a > 1 > 2", at(1, 1), "Value '(a > 1)' cannot be compared."),
        ("NOT a > 5", at(1, 1), "Value '(NOT a)' cannot be compared."),
        (
            "5 IN ('a')",
            at(1, 1),
            "Expected a property for In expression, got: 5",
        ),
        ("a IN ()", at(1, 7), "expected a quoted string"),
        ("a IN (1)", at(1, 7), "expected a quoted string"),
        ("a CONTAINS b", at(1, 12), "expected a quoted string"),
        (
            "5",
            at(1, 1),
            "Expression will not result in a boolean value: 5",
        ),
        (
            "a > 1 AND 'x'",
            at(1, 11),
            "Expression will not result in a boolean value: 'x'",
        ),
        (
            "-a",
            at(1, 1),
            "Expression will not result in a boolean value: (-a)",
        ),
        ("a IS 5", at(1, 6), "expected NULL"),
        (
            "a NOT LIKE 'x'",
            at(1, 7),
            "expected CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN",
        ),
        ("(a > 1", at(1, 7), "expected ')'"),
        ("", at(1, 1), "found the end of the expression"),
        ("a > 1e999", at(1, 5), "is greater than"),
    ];
    for (text, pos, words) in cases {
        let e = refusal(text);
        assert_eq!(e.pos, *pos, "{text}: {e}");
        assert!(e.message.contains(words), "{text}: {e}");
    }
}

#[test]
fn left_over_text_is_refused_unlike_rocketmq() {
    let e = refusal("a = 1 b = 2");
    assert_eq!(e.pos, at(1, 7));
    assert!(e.message.contains("after a complete expression"), "{e}");
    assert_eq!(refusal("(a = 1))").pos, at(1, 8));
}

#[test]
fn errors_point_at_the_line_and_column() {
    let e = refusal("a = 1\n  AND b >");
    assert_eq!(e.pos, at(2, 10));
    assert_eq!(
        e.to_string(),
        "Invalid MessageSelector at line 2, column 10: expected a value, a property or '(', found the end of the expression"
    );
}

#[test]
fn nesting_is_bounded() {
    let ok = format!("{}a > 1{}", "(".repeat(60), ")".repeat(60));
    assert!(Sql92Filter::compile(&ok).is_ok());
    let nots = format!("{}a", "NOT ".repeat(MAX_DEPTH));
    assert!(refusal(&nots).message.contains("nests deeper"));
    let parens = format!("{}a > 1{}", "(".repeat(200), ")".repeat(200));
    assert!(refusal(&parens).message.contains("nests deeper"));
    let chain = format!("a = 1{}", " = TRUE".repeat(MAX_DEPTH + 1));
    assert!(refusal(&chain).message.contains("nests deeper"));
    // A long OR chain is one node, not a deep tree.
    let ors: Vec<String> = (0..1000).map(|i| format!("a = {i}")).collect();
    let f = Sql92Filter::compile(&ors.join(" OR ")).unwrap();
    assert!(matches!(f.ast(), Expr::Or(items) if items.len() == 1000));
    let long = "a".repeat(crate::filter::sql92::MAX_EXPRESSION_LEN + 1);
    assert!(refusal(&long).message.contains("at most"));
}

#[test]
fn parse_takes_tokens_ending_in_eof() {
    let tokens = lexer::tokenize("a > 1").unwrap();
    assert!(parse(tokens).is_ok());
}
