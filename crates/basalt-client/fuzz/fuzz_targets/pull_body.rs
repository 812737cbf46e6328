#![no_main]
//! See basalt_client::fuzzing::pull_body.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_client::fuzzing::pull_body(data);
});
