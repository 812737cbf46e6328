//! SQL92 selector costs: compiling the selectors (once per
//! subscription version or cached pull selector), and evaluating one over a
//! stored message's property string (once per message a pull examines).
//!
//! `cargo bench -p basalt-broker --bench sql92`

use std::hint::black_box;

use basalt_broker::filter::Sql92Filter;
use basalt_common::properties;
use criterion::{Criterion, criterion_group, criterion_main};

const SELECTORS: [&str; 4] = [
    "a > 5 AND b = 'x'",
    "c IN ('p','q')",
    "d IS NULL",
    "TAGS IN ('A','B')",
];

/// A property string like a client's: system properties first, then four
/// user properties.
fn encoded_properties() -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in [
        ("KEYS", "order-4242"),
        ("UNIQ_KEY", "7F0000010B2A18B4AAC2714A4B7F0000"),
        ("WAIT", "true"),
        ("TAGS", "B"),
        ("a", "7"),
        ("b", "x"),
        ("c", "q"),
        ("d", "d4242"),
    ] {
        properties::append(&mut out, k, v);
    }
    out
}

fn compile(c: &mut Criterion) {
    for s in SELECTORS {
        c.bench_function(&format!("compile {s}"), |b| {
            b.iter(|| Sql92Filter::compile(black_box(s)).expect("compiles"))
        });
    }
}

fn evaluate(c: &mut Criterion) {
    let props = encoded_properties();
    for s in SELECTORS {
        let f = Sql92Filter::compile(s).expect("compiles");
        c.bench_function(&format!("evaluate {s}"), |b| {
            b.iter(|| f.matches_encoded(black_box(&props)))
        });
    }
}

criterion_group!(benches, compile, evaluate);
criterion_main!(benches);
