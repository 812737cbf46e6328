#![no_main]
//! See basalt_client::fuzzing::response_bodies.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_client::fuzzing::response_bodies(data);
});
