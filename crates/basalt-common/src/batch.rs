//! The batch body of `SEND_BATCH_MESSAGE` (docs/protocol.md#batch-body;
//! RocketMQ's `MessageDecoder.encodeMessages`):
//!
//! ```text
//! TOTALSIZE i32 | MAGICCODE i32 (0) | BODYCRC i32 (0) | FLAG i32 | BODYLEN i32 | BODY
//! | PROPERTIESLEN i16 | PROPERTIES        — repeated, one per message
//! ```

use bytes::Bytes;

use crate::CodecError;
use crate::properties::MAX_PROPERTIES_LEN;

/// Fixed bytes of one batch entry besides its body and properties.
const ENTRY_OVERHEAD: usize = 4 + 4 + 4 + 4 + 4 + 2;

/// One message of a batch: what the producer chose per message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchEntry {
    pub flag: i32,
    pub body: Bytes,
    /// Encoded property string (including this message's own `UNIQ_KEY`).
    pub properties: Bytes,
}

/// Decodes a batch body. Every entry's TOTALSIZE must equal its fields' sum.
/// Slices of `body` are shared, not copied.
pub fn decode(body: &Bytes) -> Result<Vec<BatchEntry>, CodecError> {
    let buf = &body[..];
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < buf.len() {
        let need = |n: usize, what: &'static str| -> Result<(), CodecError> {
            if at + n > buf.len() {
                Err(CodecError::Truncated {
                    what,
                    at,
                    need: n,
                    have: buf.len() - at,
                })
            } else {
                Ok(())
            }
        };
        need(20, "batch entry header")?;
        let total = i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
        let flag = i32::from_be_bytes(buf[at + 12..at + 16].try_into().expect("4 bytes"));
        let body_len = i32::from_be_bytes(buf[at + 16..at + 20].try_into().expect("4 bytes"));
        if body_len < 0 {
            return Err(CodecError::BadLength {
                what: "batch BODYLEN",
                value: body_len as i64,
                at: at + 16,
            });
        }
        let body_len = body_len as usize;
        need(20 + body_len + 2, "batch entry body")?;
        let body_start = at + 20;
        let props_len_at = body_start + body_len;
        let props_len = i16::from_be_bytes([buf[props_len_at], buf[props_len_at + 1]]);
        if props_len < 0 {
            return Err(CodecError::BadLength {
                what: "batch PROPERTIESLEN",
                value: props_len as i64,
                at: props_len_at,
            });
        }
        let props_len = props_len as usize;
        need(
            ENTRY_OVERHEAD + body_len + props_len,
            "batch entry properties",
        )?;
        let entry_len = ENTRY_OVERHEAD + body_len + props_len;
        if total < 0 || total as usize != entry_len {
            return Err(CodecError::BadLength {
                what: "batch TOTALSIZE",
                value: total as i64,
                at,
            });
        }
        out.push(BatchEntry {
            flag,
            body: body.slice(body_start..body_start + body_len),
            properties: body.slice(props_len_at + 2..props_len_at + 2 + props_len),
        });
        at += entry_len;
    }
    Ok(out)
}

/// Encodes entries into a batch body, as a producer does.
pub fn encode(entries: &[BatchEntry]) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(
        entries
            .iter()
            .map(|e| ENTRY_OVERHEAD + e.body.len() + e.properties.len())
            .sum(),
    );
    for e in entries {
        if e.properties.len() > MAX_PROPERTIES_LEN {
            return Err(CodecError::TooLarge {
                what: "batch entry properties",
                len: e.properties.len(),
                max: MAX_PROPERTIES_LEN,
            });
        }
        let total = ENTRY_OVERHEAD + e.body.len() + e.properties.len();
        if total > i32::MAX as usize {
            return Err(CodecError::TooLarge {
                what: "batch entry",
                len: total,
                max: i32::MAX as usize,
            });
        }
        out.extend_from_slice(&(total as i32).to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&e.flag.to_be_bytes());
        out.extend_from_slice(&(e.body.len() as i32).to_be_bytes());
        out.extend_from_slice(&e.body);
        out.extend_from_slice(&(e.properties.len() as i16).to_be_bytes());
        out.extend_from_slice(&e.properties);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_two_messages() {
        // Hand-written: two entries, bodies "ab" and "", properties "K\x01v\x02" and "".
        let hex = concat!(
            "0000001c", "00000000", "00000000", "00000007", "00000002", "6162", "0004", "4b017602",
            "00000016", "00000000", "00000000", "00000000", "00000000", "0000",
        );
        let raw: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let entries = decode(&Bytes::from(raw.clone())).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].flag, 7);
        assert_eq!(&entries[0].body[..], b"ab");
        assert_eq!(&entries[0].properties[..], b"K\x01v\x02");
        assert!(entries[1].body.is_empty());
        assert_eq!(encode(&entries).unwrap(), raw);
    }

    #[test]
    fn rejects_inconsistent_lengths() {
        let e = BatchEntry {
            flag: 0,
            body: Bytes::from_static(b"hello"),
            properties: Bytes::new(),
        };
        let mut raw = encode(&[e]).unwrap();
        raw[3] += 1; // TOTALSIZE one too large
        assert!(decode(&Bytes::from(raw.clone())).is_err());
        raw[3] -= 1;
        raw.truncate(raw.len() - 1);
        assert!(decode(&Bytes::from(raw)).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(entries in proptest::collection::vec(
            (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..300),
             proptest::collection::vec(any::<u8>(), 0..100)), 0..10)) {
            let entries: Vec<BatchEntry> = entries.into_iter().map(|(flag, body, props)| BatchEntry {
                flag, body: Bytes::from(body), properties: Bytes::from(props),
            }).collect();
            let raw = encode(&entries).unwrap();
            prop_assert_eq!(decode(&Bytes::from(raw)).unwrap(), entries);
        }

        #[test]
        fn decode_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&Bytes::from(raw));
        }
    }
}
