#![no_main]
//! See basalt_ledger::fuzzing::wire_decode.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_ledger::fuzzing::wire_decode(data);
});
