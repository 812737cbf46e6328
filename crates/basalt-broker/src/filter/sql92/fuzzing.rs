//! The body of the `sql92_parse` fuzz target (crates/basalt-broker/fuzz),
//! shared with the unit tests so the normal suite runs it too. Whatever the
//! input, it must not panic: a selector either is refused with a position,
//! or prints to text that parses back to the same tree and evaluates
//! without panicking.

use std::collections::HashMap;

use super::{Sql92Filter, eval, lexer, parser};

/// Compiles `data` (as lossy UTF-8) and checks what a compiled selector
/// promises.
pub fn check_selector(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let filter = match Sql92Filter::compile(&text) {
        Ok(f) => f,
        Err(e) => {
            assert!(e.pos.line >= 1 && e.pos.column >= 1, "{e}");
            return;
        }
    };
    let printed = filter.ast().to_string();
    let again = lexer::tokenize(&printed)
        .and_then(parser::parse)
        .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?}, which does not parse: {e}"));
    assert_eq!(&again, filter.ast(), "{text:?} printed as {printed:?}");
    for props in sample_properties() {
        let _ = eval::evaluate(filter.ast(), &props);
    }
}

fn sample_properties() -> [HashMap<String, String>; 2] {
    let some = [
        ("a", "7"),
        ("b", "x"),
        ("c", "3.5"),
        ("d", "-0"),
        ("flag", "true"),
        ("TAGS", "A"),
        ("KEYS", "k1 k2"),
    ];
    [
        HashMap::new(),
        some.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    ]
}
