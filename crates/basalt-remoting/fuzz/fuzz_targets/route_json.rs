#![no_main]
//! See basalt_remoting::fuzzing::route_json.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_remoting::fuzzing::route_json(data);
});
