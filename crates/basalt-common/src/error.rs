//! Errors of the codecs in this crate.

use thiserror::Error;

/// Why bytes could not be decoded into (or a value encoded as) a RocketMQ format.
///
/// Every variant says where in the input the problem is, so a caller that knows
/// the file or connection can report a precise location.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// The input ended before a field that the layout requires.
    #[error("truncated {what}: need {need} bytes at offset {at}, have {have}")]
    Truncated {
        what: &'static str,
        at: usize,
        need: usize,
        have: usize,
    },
    /// The magic code is not one this layout accepts.
    #[error("bad magic code {magic:#010x} at offset {at}")]
    BadMagic { magic: u32, at: usize },
    /// A length field is negative or disagrees with the other lengths.
    #[error("bad length: {what} = {value} at offset {at}")]
    BadLength {
        what: &'static str,
        value: i64,
        at: usize,
    },
    /// The CRC stored in the record does not match the bytes.
    #[error("body CRC mismatch at offset {at}: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc {
        at: usize,
        stored: u32,
        computed: u32,
    },
    /// A record that must end with the whole-record CRC trailer has none:
    /// the trailer (or the properties before it) is damaged, so nothing but
    /// the body would be checked.
    #[error("CRC trailer missing at offset {at}: the record was written with one")]
    MissingCrcTrailer { at: usize },
    /// A value does not fit the field that must hold it.
    #[error("{what} too large: {len} bytes (max {max})")]
    TooLarge {
        what: &'static str,
        len: usize,
        max: usize,
    },
    /// A text field is not valid for its format.
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
}
