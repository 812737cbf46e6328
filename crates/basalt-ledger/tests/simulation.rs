//! Deterministic simulation of ledger clusters (see `basalt_ledger::sim`).
//!
//! The CI set is split into several test functions so nextest runs them in
//! parallel. A failing seed prints the command that replays it, e.g.
//! `LEDGER_SIM_SEED=1234 cargo test -p basalt-ledger --test simulation replay -- --nocapture`
//! (add `LEDGER_SIM_TRACE=1` to print every step). A longer soak:
//! `LEDGER_SIM_SEEDS=100000 cargo test --release -p basalt-ledger --test simulation soak -- --ignored --nocapture`.

use basalt_ledger::sim::{SimOptions, run};

fn run_seeds(seeds: std::ops::Range<u64>) {
    let mut acked = 0;
    let mut terms = 0;
    let (mut transferred, mut preferred) = (0, 0);
    for seed in seeds.clone() {
        match run(SimOptions::for_seed(seed)) {
            Ok(r) => {
                acked += r.acked_appends;
                terms += r.terms;
                transferred += r.transferred_after_heal as u32;
                preferred += r.led_by_preferred as u32;
            }
            Err(e) => panic!(
                "{e}\nreplay with: LEDGER_SIM_SEED={seed} cargo test -p basalt-ledger --test simulation replay -- --nocapture"
            ),
        }
    }
    // The runs must have done real work: appends acknowledged, elections held.
    assert!(acked > 0, "no append was acknowledged in seeds {seeds:?}");
    assert!(terms > 0, "no leader was elected in seeds {seeds:?}");
    // Leadership moved where it was asked to: a transfer after the heal, or
    // the preferred leader leading the settled cluster (about a quarter).
    let n = (seeds.end - seeds.start) as u32;
    assert!(
        transferred + preferred == n,
        "{transferred} transfers + {preferred} preferred of {n} runs"
    );
    assert!(
        transferred > 0 && preferred > 0,
        "{transferred} transfers, {preferred} preferred"
    );
}

#[test]
fn seeds_0000_0250() {
    run_seeds(0..250);
}

#[test]
fn seeds_0250_0500() {
    run_seeds(250..500);
}

#[test]
fn seeds_0500_0750() {
    run_seeds(500..750);
}

#[test]
fn seeds_0750_1000() {
    run_seeds(750..1000);
}

/// Replays one seed: `LEDGER_SIM_SEED=n` (`LEDGER_SIM_TRACE=1` prints each step).
#[test]
fn replay() {
    let Ok(seed) = std::env::var("LEDGER_SIM_SEED") else {
        return;
    };
    let seed: u64 = seed.parse().expect("LEDGER_SIM_SEED must be a number");
    let mut opts = SimOptions::for_seed(seed);
    opts.trace = std::env::var("LEDGER_SIM_TRACE").is_ok();
    println!("{opts:?}");
    match run(opts) {
        Ok(r) => println!("seed {seed} passed: {r:?}"),
        Err(e) => panic!("{e}"),
    }
}

/// `LEDGER_SIM_SEEDS=n` seeds from `LEDGER_SIM_FROM` (default 1000).
#[test]
#[ignore]
fn soak() {
    let n: u64 = std::env::var("LEDGER_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let from: u64 = std::env::var("LEDGER_SIM_FROM")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    run_seeds(from..from + n);
    println!("{n} seeds passed");
}
