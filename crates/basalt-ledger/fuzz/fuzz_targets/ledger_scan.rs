#![no_main]
//! See basalt_ledger::fuzzing::ledger_scan.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_ledger::fuzzing::ledger_scan(data);
});
