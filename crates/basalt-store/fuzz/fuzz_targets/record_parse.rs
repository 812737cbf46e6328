#![no_main]
//! See basalt_store::fuzzing::record_parse.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_store::fuzzing::record_parse(data);
});
