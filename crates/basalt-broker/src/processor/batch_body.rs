//! The body of a batch send, as the broker takes it apart.
//!
//! A batch body is the concatenation of batch entries
//! (`basalt_common::batch`). The C++ client 2.x (and the Python, Node.js and
//! older Go clients that wrap it) compresses a whole batch body over
//! `compressMsgBodyOverHowmuch` (4 KiB) with zlib and sets the COMPRESSED
//! sys flag on the request. When such a body does not decode as a batch,
//! Basalt inflates it, with a bound, and decodes the result
//! (docs/cpp-client.md#compressed-batches). The Java broker refuses these
//! batches.

use basalt_common::batch::{self, BatchEntry};
use basalt_common::sysflag;
use bytes::Bytes;
use flate2::{Decompress, FlushDecompress, Status};

/// Output grows by at most this much per step while inflating.
const INFLATE_STEP: usize = 64 * 1024;

/// The compression type of the sys flag's bits 8..10 that is zlib (Java's
/// `COMPRESSION_ZLIB_TYPE`); 0 is the older flag without a type, also zlib.
const ZLIB_TYPE: i32 = 3;

/// A batch body taken apart.
#[derive(Debug)]
pub(super) struct DecodedBatch {
    pub entries: Vec<BatchEntry>,
    /// Whether the body was inflated first; the stored records then carry
    /// the entries' own (uncompressed) bodies and must not claim
    /// COMPRESSED.
    pub inflated: bool,
}

/// Why a batch body cannot be taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum BatchBodyError {
    #[error("bad batch body: {0}")]
    Batch(basalt_common::CodecError),
    #[error("bad batch body: compressed, but {0}")]
    Inflate(InflateError),
    #[error("bad batch body: inflated, but {0}")]
    InflatedBatch(basalt_common::CodecError),
    #[error(
        "bad batch body: compressed with compression type {0} (sysFlag bits 8-10); \
         only zlib (0 or 3) is supported"
    )]
    CompressionType(i32),
}

/// Why a compressed body could not be inflated.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum InflateError {
    #[error(
        "it inflates past the limit of {limit} bytes (maxMessageSize); \
         the inflated body counts against it"
    )]
    TooLarge { limit: usize },
    #[error("it is not a valid zlib stream: {0}")]
    Corrupt(String),
    #[error("its zlib stream ends early, after {inflated} inflated bytes")]
    Truncated { inflated: usize },
    #[error("{0} bytes follow the end of its zlib stream")]
    Trailing(usize),
}

/// Decodes a batch body sent with sys flag `sys_flag`. A body that decodes
/// as a batch is taken as it is; one that does not, sent with COMPRESSED,
/// is inflated to at most `limit` bytes and decoded.
pub(super) fn decode(
    body: &Bytes,
    sys_flag: i32,
    limit: usize,
) -> Result<DecodedBatch, BatchBodyError> {
    let plain_err = match batch::decode(body) {
        Ok(entries) => {
            return Ok(DecodedBatch {
                entries,
                inflated: false,
            });
        }
        Err(e) => e,
    };
    if sys_flag & sysflag::COMPRESSED == 0 {
        return Err(BatchBodyError::Batch(plain_err));
    }
    let kind = (sys_flag & sysflag::COMPRESSION_TYPE_MASK) >> 8;
    if kind != 0 && kind != ZLIB_TYPE {
        return Err(BatchBodyError::CompressionType(kind));
    }
    let inflated = Bytes::from(inflate_bounded(body, limit).map_err(BatchBodyError::Inflate)?);
    let entries = batch::decode(&inflated).map_err(BatchBodyError::InflatedBatch)?;
    Ok(DecodedBatch {
        entries,
        inflated: true,
    })
}

/// The sys flag without its compression bits: that of a record whose body
/// is stored uncompressed.
pub(super) fn without_compression(sys_flag: i32) -> i32 {
    sys_flag & !(sysflag::COMPRESSED | sysflag::COMPRESSION_TYPE_MASK)
}

/// Inflates one whole zlib stream (RFC 1950, as zlib's `deflateInit` writes
/// it) to at most `limit` bytes. Memory grows with the output actually
/// produced, never past `limit` + 1 bytes, whatever the stream claims.
pub(super) fn inflate_bounded(data: &[u8], limit: usize) -> Result<Vec<u8>, InflateError> {
    let mut d = Decompress::new(true);
    let mut out: Vec<u8> = Vec::with_capacity(data.len().saturating_mul(2).min(limit + 1));
    loop {
        if out.len() > limit {
            return Err(InflateError::TooLarge { limit });
        }
        if out.len() == out.capacity() {
            let grow = out.capacity().clamp(INFLATE_STEP, INFLATE_STEP * 16);
            let cap = (out.capacity() + grow).min(limit + 1);
            out.reserve_exact(cap - out.len());
        }
        let consumed = d.total_in() as usize;
        let (in_before, out_before) = (d.total_in(), out.len());
        let status = d
            .decompress_vec(&data[consumed..], &mut out, FlushDecompress::None)
            .map_err(|e| InflateError::Corrupt(e.to_string()))?;
        if status == Status::StreamEnd {
            break;
        }
        let stuck = d.total_in() == in_before && out.len() == out_before;
        if stuck && out.len() < out.capacity() {
            // Room to write and no progress: the input has run out.
            return Err(InflateError::Truncated {
                inflated: out.len(),
            });
        }
    }
    if out.len() > limit {
        return Err(InflateError::TooLarge { limit });
    }
    let rest = data.len() - d.total_in() as usize;
    if rest > 0 {
        return Err(InflateError::Trailing(rest));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(5));
        e.write_all(data).expect("compress");
        e.finish().expect("compress")
    }

    /// One batch entry with `body` and `props`, as the clients encode it.
    fn entry(body: &[u8], props: &[u8]) -> Vec<u8> {
        let total = 20 + body.len() + 2 + props.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(total as i32).to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes());
        v.extend_from_slice(&7i32.to_be_bytes());
        v.extend_from_slice(&(body.len() as i32).to_be_bytes());
        v.extend_from_slice(body);
        v.extend_from_slice(&(props.len() as i16).to_be_bytes());
        v.extend_from_slice(props);
        v
    }

    fn batch_of(n: usize, size: usize) -> (Vec<Vec<u8>>, Vec<u8>) {
        let bodies: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("m{i}:").into_bytes().repeat(size / 3 + 1)[..size].to_vec())
            .collect();
        let raw = bodies
            .iter()
            .flat_map(|b| entry(b, b"KEYS\x01k\x02"))
            .collect();
        (bodies, raw)
    }

    #[test]
    fn plain_batch_is_taken_as_sent() {
        let (bodies, raw) = batch_of(3, 100);
        // Even with COMPRESSED set, a body that decodes is not inflated.
        let d = decode(&Bytes::from(raw), sysflag::COMPRESSED, 1 << 20).expect("decodes");
        assert!(!d.inflated);
        let got: Vec<_> = d.entries.iter().map(|e| e.body.to_vec()).collect();
        assert_eq!(got, bodies);
    }

    #[test]
    fn compressed_batch_is_inflated_entry_by_entry() {
        for (n, size) in [(3, 1536), (10, 20 * 1024)] {
            let (bodies, raw) = batch_of(n, size);
            let packed = zlib(&raw);
            assert!(packed.len() < raw.len());
            for flag in [sysflag::COMPRESSED, sysflag::COMPRESSED | (ZLIB_TYPE << 8)] {
                let d = decode(&Bytes::from(packed.clone()), flag, 4 << 20).expect("inflates");
                assert!(d.inflated);
                assert_eq!(d.entries.len(), n);
                for (e, b) in d.entries.iter().zip(&bodies) {
                    assert_eq!(&e.body[..], &b[..]);
                    assert_eq!(e.flag, 7);
                    assert_eq!(&e.properties[..], b"KEYS\x01k\x02");
                }
            }
        }
        assert_eq!(
            without_compression(sysflag::COMPRESSED | (3 << 8) | sysflag::MULTI_TAGS),
            sysflag::MULTI_TAGS
        );
    }

    #[test]
    fn uncompressed_garbage_is_refused_as_before() {
        let e = decode(&Bytes::from_static(b"not a batch body"), 0, 1 << 20).unwrap_err();
        assert!(matches!(e, BatchBodyError::Batch(_)), "{e}");
    }

    #[test]
    fn zip_bomb_is_refused_at_the_limit() {
        // 64 MiB of zeros compress to ~64 KiB; the limit is 1 MiB.
        let bomb = zlib(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 128 * 1024);
        let limit = 1 << 20;
        let e = inflate_bounded(&bomb, limit).unwrap_err();
        assert_eq!(e, InflateError::TooLarge { limit });
        let e = decode(&Bytes::from(bomb), sysflag::COMPRESSED, limit).unwrap_err();
        assert!(e.to_string().contains("maxMessageSize"), "{e}");
        // Exactly at the limit is fine; one byte over is not.
        let exact = zlib(&vec![1u8; 1000]);
        assert_eq!(inflate_bounded(&exact, 1000).expect("at limit").len(), 1000);
        assert_eq!(
            inflate_bounded(&exact, 999).unwrap_err(),
            InflateError::TooLarge { limit: 999 }
        );
    }

    #[test]
    fn corrupt_deflate_stream_is_refused() {
        let (_, raw) = batch_of(3, 1536);
        let mut packed = zlib(&raw);
        // Damage the deflate data past the 2-byte zlib header.
        for b in &mut packed[2..12] {
            *b ^= 0xA5;
        }
        let e = decode(&Bytes::from(packed), sysflag::COMPRESSED, 1 << 20).unwrap_err();
        assert!(
            matches!(
                e,
                BatchBodyError::Inflate(InflateError::Corrupt(_) | InflateError::Truncated { .. })
            ),
            "{e}"
        );
        // Not zlib at all (a bad header).
        let e = inflate_bounded(b"\x00\x01\x02\x03garbage", 1 << 20).unwrap_err();
        assert!(matches!(e, InflateError::Corrupt(_)), "{e}");
    }

    #[test]
    fn truncated_and_trailing_streams_are_refused() {
        let (_, raw) = batch_of(3, 1536);
        let packed = zlib(&raw);
        let e = inflate_bounded(&packed[..packed.len() / 2], 1 << 20).unwrap_err();
        assert!(matches!(e, InflateError::Truncated { .. }), "{e}");
        let e = inflate_bounded(&packed[..packed.len() - 1], 1 << 20).unwrap_err();
        assert!(matches!(e, InflateError::Truncated { .. }), "{e}");
        let mut extra = packed.clone();
        extra.extend_from_slice(b"xyz");
        assert_eq!(
            inflate_bounded(&extra, 1 << 20).unwrap_err(),
            InflateError::Trailing(3)
        );
    }

    #[test]
    fn inflated_body_that_is_no_batch_is_refused() {
        let packed = zlib(b"this is not a batch body at all, just text");
        let e = decode(&Bytes::from(packed), sysflag::COMPRESSED, 1 << 20).unwrap_err();
        assert!(matches!(e, BatchBodyError::InflatedBatch(_)), "{e}");
    }

    #[test]
    fn other_compression_types_are_refused() {
        let (_, raw) = batch_of(3, 1536);
        let packed = Bytes::from(zlib(&raw));
        for kind in [1, 2] {
            let e = decode(&packed, sysflag::COMPRESSED | (kind << 8), 1 << 20).unwrap_err();
            assert_eq!(e, BatchBodyError::CompressionType(kind));
        }
    }
}
