#![no_main]
//! SQL92 selectors from arbitrary bytes: refused with a position, or printed
//! back to the same tree and evaluated without panicking.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    basalt_broker::filter::sql92::fuzzing::check_selector(data);
});
