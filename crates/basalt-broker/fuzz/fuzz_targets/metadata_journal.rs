#![no_main]
//! Arbitrary bytes as a metadata journal (config/topics.json.journal).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    basalt_broker::metadata::journal::fuzzing::journal_decode(data);
});
