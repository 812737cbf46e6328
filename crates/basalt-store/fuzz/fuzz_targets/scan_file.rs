#![no_main]
//! See basalt_store::fuzzing::scan_file.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_store::fuzzing::scan_file(data);
});
