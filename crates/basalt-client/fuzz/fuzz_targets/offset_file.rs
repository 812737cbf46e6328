#![no_main]
//! See basalt_client::fuzzing::offset_file.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_client::fuzzing::offset_file(data);
});
