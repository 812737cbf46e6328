#![no_main]
//! Ext fields built from the input (`key=value` lines) parsed as every typed header.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let ext = basalt_remoting::fuzzing::ext_from_bytes(data);
    basalt_remoting::fuzzing::parse_all_headers(&ext);
});
