//! The seeded simulator of a three-member ledger group over real
//! `LedgerStore`s on simulated disks that lose power (see
//! `basalt_ledger::sim` and docs/fault-model.md).
//!
//! * `cargo test -p basalt-ledger --test ledger_power_loss` runs the suite's
//!   seeds on two threads;
//! * `BASALT_SIM_SEED=1234` replays one seed (its number is printed when it
//!   fails; `BASALT_SIM_TRACE=1` prints every step);
//! * `BASALT_SIM_SEEDS=20000 cargo test --release -p basalt-ledger --test
//!   ledger_power_loss -- --ignored soak` runs a long soak.

use basalt_ledger::sim::{SimOptions, SimReport, run};

/// Seeds in the normal suite.
const SUITE_SEEDS: u64 = 1000;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs `seeds` on two threads with `opts_of`; returns the reports, or the
/// first failing seed and its violation.
fn run_all(seeds: &[u64], opts_of: fn(u64) -> SimOptions) -> Result<Vec<SimReport>, (u64, String)> {
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for part in seeds.chunks(seeds.len().div_ceil(2).max(1)) {
            let results = &results;
            s.spawn(move || {
                for &seed in part {
                    // A panic inside the store or the core is a failure of its seed.
                    let r = std::panic::catch_unwind(|| run(opts_of(seed)))
                        .unwrap_or_else(|p| {
                            Err(format!(
                                "panicked: {}",
                                p.downcast_ref::<String>()
                                    .cloned()
                                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                    .unwrap_or_default()
                            ))
                        })
                        .map_err(|e| (seed, e));
                    let failed = r.is_err();
                    results.lock().unwrap().push(r);
                    if failed {
                        return;
                    }
                }
            });
        }
    });
    let mut out = Vec::new();
    let mut failures = Vec::new();
    for r in results.into_inner().unwrap() {
        match r {
            Ok(rep) => out.push(rep),
            Err(f) => failures.push(f),
        }
    }
    failures.sort();
    match failures.into_iter().next() {
        Some(f) => Err(f),
        None => Ok(out),
    }
}

fn run_seeds(seeds: &[u64]) {
    match run_all(seeds, SimOptions::for_disk_seed) {
        Ok(reports) => {
            // The runs did real work: appends acknowledged, members crashed.
            let acked: u64 = reports.iter().map(|r| r.acked_appends).sum();
            let crashes: u64 = reports.iter().map(|r| r.crashes).sum();
            assert!(acked > 0 && crashes > 0, "{acked} acked, {crashes} crashes");
            let purges: u64 = reports.iter().map(|r| r.purges).sum();
            let cut_short: u64 = reports.iter().map(|r| r.purges_interrupted).sum();
            let resets: u64 = reports.iter().map(|r| r.resets).sum();
            let behind: u64 = reports.iter().map(|r| r.resets_past_purge).sum();
            let reset_cut: u64 = reports.iter().map(|r| r.resets_cut_short).sum();
            let below: u64 = reports.iter().map(|r| r.resets_below_commit).sum();
            eprintln!(
                "{} seeds: {acked} acked appends, {crashes} crashes, {purges} purges \
                 ({cut_short} cut short by a power loss), {resets} resets ({behind} past a purge, \
                 {below} below the committed index, {reset_cut} cut short by a power loss)",
                reports.len()
            );
        }
        Err((seed, e)) => panic!(
            "{e}\nreplay with: BASALT_SIM_SEED={seed} cargo test -p basalt-ledger --test ledger_power_loss suite -- --nocapture"
        ),
    }
}

#[test]
fn suite_seeds_keep_every_committed_entry() {
    match env_u64("BASALT_SIM_SEED") {
        Some(seed) => {
            let mut opts = SimOptions::for_disk_seed(seed);
            opts.trace = std::env::var("BASALT_SIM_TRACE").is_ok();
            println!("{opts:?}");
            match run(opts) {
                Ok(r) => println!("seed {seed} passed: {r:?}"),
                Err(e) => panic!("{e}"),
            }
        }
        None => run_seeds(&(0..SUITE_SEEDS).collect::<Vec<_>>()),
    }
}

/// Without the data files' fsyncs (a test switch of the simulated disk: they
/// report success and make nothing durable) the simulator must notice within
/// the suite's seeds, and for what it is: durable data lost.
#[test]
fn a_missing_ledger_data_fsync_is_caught() {
    fn without_data_syncs(seed: u64) -> SimOptions {
        let mut o = SimOptions::for_disk_seed(seed);
        if let Some(d) = &mut o.disk {
            d.skip_syncs_of = Some("/data/".into());
        }
        o
    }
    let caught = (0..SUITE_SEEDS).find_map(|seed| run(without_data_syncs(seed)).err());
    let Some(violation) = caught else {
        panic!("no seed noticed that the ledger's data fsyncs make nothing durable");
    };
    eprintln!("caught the missing fsync: {violation}");
    assert!(
        violation.contains("missing or changed after recovery")
            || violation.contains("durable on only")
            || violation.contains("refused"),
        "failed for another reason: {violation}"
    );
}

/// A reset (a truncation that keeps nothing) that leaves the old checkpoint in
/// place, claiming entries the reset removes, as the store did before its
/// reset wrote one that claims nothing: recovery refuses a log that ends
/// before the checkpoint's entry, so a power loss after such a reset must make
/// it refuse within the suite's seeds.
#[test]
fn a_reset_that_leaves_its_checkpoint_is_caught() {
    fn stale_checkpoint(seed: u64) -> SimOptions {
        let mut o = SimOptions::for_disk_seed(seed);
        if let Some(d) = &mut o.disk {
            d.skip_reset_checkpoint = true;
        }
        o
    }
    let caught =
        (0..SUITE_SEEDS).find_map(|seed| run(stale_checkpoint(seed)).err().map(|e| (seed, e)));
    let Some((seed, violation)) = caught else {
        panic!("no seed noticed a reset that leaves the checkpoint claiming what it removed");
    };
    eprintln!("seed {seed} caught the stale checkpoint: {violation}");
    assert!(
        violation.contains("before the checkpoint's durable entry"),
        "failed for another reason: {violation}"
    );
}

/// The seeds that found the bugs listed in docs/fault-model.md, replayed in
/// the suite whatever its seed range becomes.
#[test]
fn regression_seeds_of_fixed_bugs() {
    run_seeds(&[1, 5, 24, 26, 33, 192, 361, 1831, 12080]);
}

#[test]
#[ignore = "long soak; run by hand with BASALT_SIM_SEEDS"]
fn soak() {
    let n = env_u64("BASALT_SIM_SEEDS").unwrap_or(20_000);
    let first = env_u64("BASALT_SIM_FIRST_SEED").unwrap_or(SUITE_SEEDS);
    run_seeds(&(first..first + n).collect::<Vec<_>>());
    println!("{n} seeds passed");
}
