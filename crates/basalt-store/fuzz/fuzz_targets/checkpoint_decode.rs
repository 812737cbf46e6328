#![no_main]
//! See basalt_store::fuzzing::checkpoint_decode.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_store::fuzzing::checkpoint_decode(data);
});
