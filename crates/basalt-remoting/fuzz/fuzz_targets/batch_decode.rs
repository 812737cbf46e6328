#![no_main]
//! See basalt_remoting::fuzzing::batch_decode.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_remoting::fuzzing::batch_decode(data);
});
