#![no_main]
//! See basalt_ledger::fuzzing::wire_bin_decode.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_ledger::fuzzing::wire_bin_decode(data);
});
