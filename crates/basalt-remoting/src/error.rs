//! Errors of the remoting layer.

use std::io;

use thiserror::Error;

/// A custom header (ext fields) that lacks a required field or holds a value
/// that does not parse. Names the field so the reply can say which.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    #[error("the header field {field} is missing")]
    Missing { field: &'static str },
    #[error("the header field {field} has the invalid value {value:?}")]
    Invalid { field: &'static str, value: String },
}

/// Why a frame or a header could not be decoded (or encoded). Any of these on a
/// connection closes that connection only.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("frame length {len} is out of range (max {max})")]
    FrameTooLarge { len: i64, max: usize },
    #[error("frame too short: {0}")]
    Truncated(&'static str),
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    #[error("header length {header_len} exceeds the frame's {frame_len} bytes")]
    HeaderLength { header_len: usize, frame_len: usize },
    #[error("invalid JSON header: {0}")]
    Json(String),
    #[error("invalid binary header: {0}")]
    Binary(&'static str),
    #[error("header is not UTF-8: {0}")]
    Utf8(&'static str),
    #[error("cannot encode: {0}")]
    Encode(String),
}

/// What went wrong in the transport or in an exchange with a peer.
#[derive(Debug, Error)]
pub enum RemotingError {
    #[error("I/O error with {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("connecting to {addr} timed out after {millis} ms")]
    ConnectTimeout { addr: String, millis: u64 },
    #[error("request code {code} to {addr} timed out after {millis} ms")]
    Timeout {
        addr: String,
        code: i32,
        millis: u64,
    },
    #[error("frame of {len} bytes exceeds the maximum {max}")]
    FrameTooLarge { len: i64, max: usize },
    #[error("decode error from {addr}: {source}")]
    Decode {
        addr: String,
        #[source]
        source: DecodeError,
    },
    #[error("the connection to {addr} is closed")]
    ConnectionClosed { addr: String },
    #[error("invalid address {addr:?}")]
    BadAddress { addr: String },
    #[error("bad header: {0}")]
    Header(#[from] HeaderError),
    #[error("bad body: {0}")]
    Body(String),
}
