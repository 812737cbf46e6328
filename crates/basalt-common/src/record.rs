//! The stored CommitLog record (docs/storage-format.md#commitlog-record)
//! — byte-compatible with RocketMQ.
//!
//! ```text
//!  0 TOTALSIZE i32 | 4 MAGICCODE i32 | 8 BODYCRC i32 | 12 QUEUEID i32 | 16 FLAG i32
//! 20 QUEUEOFFSET i64 | 28 PHYSICALOFFSET i64 | 36 SYSFLAG i32 | 40 BORNTIMESTAMP i64
//! 48 BORNHOST (ip 4|16, port i32) | STORETIMESTAMP i64 | STOREHOST (ip 4|16, port i32)
//!    RECONSUMETIMES i32 | PREPARED_TRANSACTION_OFFSET i64 | BODYLEN i32 | BODY
//!    TOPICLEN (i8 for V1, i16 for V2) | TOPIC | PROPERTIESLEN i16 | PROPERTIES
//! ```
//!
//! The store encodes a record once ([`RecordDraft::encode_into`]), outside its
//! append lock, then fills in the three fields only known under the lock
//! ([`stamp`]). Readers check every record they parse ([`RecordView::parse`]):
//! magic, lengths and, when asked, the body CRC.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;

use crate::CodecError;
use crate::crc::masked_crc32;
use crate::properties;
use crate::sysflag;

/// Magic of a V1 record (topic length in one signed byte).
pub const MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic of a V2 record (topic length in an i16), used for topics over 127 bytes.
pub const MAGIC_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Magic of the end-of-file filler that sends readers to the next file.
pub const MAGIC_BLANK: i32 = 0xCBD4_3194_u32 as i32;
/// Size of the end-of-file filler header: `[remaining i32][MAGIC_BLANK]`.
pub const BLANK_LEN: usize = 8;

/// Field positions that do not depend on host widths.
pub mod pos {
    pub const TOTAL_SIZE: usize = 0;
    pub const MAGIC: usize = 4;
    pub const BODY_CRC: usize = 8;
    pub const QUEUE_ID: usize = 12;
    pub const FLAG: usize = 16;
    pub const QUEUE_OFFSET: usize = 20;
    pub const PHYSICAL_OFFSET: usize = 28;
    pub const SYS_FLAG: usize = 36;
    pub const BORN_TIMESTAMP: usize = 40;
    pub const BORN_HOST: usize = 48;
}

/// Smallest possible record: IPv4 hosts, V1, empty body, topic and properties.
pub const MIN_RECORD_LEN: usize = 91;

/// Length of the whole-record CRC trailer RocketMQ 5 can append to the
/// properties (`enabledAppendPropCRC`): `__CRC32#` 0x01 ten digits 0x02.
pub const CRC_TRAILER_LEN: usize = 20;
const CRC_TRAILER_KEY: &[u8] = b"__CRC32#\x01";

/// Bytes a host takes in a record: IP plus an i32 port.
#[inline]
pub fn host_len(v6: bool) -> usize {
    if v6 { 20 } else { 8 }
}

/// Position of STORETIMESTAMP for a record with this sys flag.
#[inline]
pub fn store_timestamp_pos(sys_flag: i32) -> usize {
    pos::BORN_HOST + host_len(sysflag::born_host_v6(sys_flag))
}

/// Total length of a record with these parts.
pub fn record_len(
    body_len: usize,
    topic_len: usize,
    properties_len: usize,
    born_v6: bool,
    store_v6: bool,
) -> usize {
    let topic_len_size = if topic_len > 127 { 2 } else { 1 };
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + host_len(born_v6)
        + 8
        + host_len(store_v6)
        + 4
        + 8
        + 4
        + body_len
        + topic_len_size
        + topic_len
        + 2
        + properties_len
}

/// Everything a record holds except what is assigned at append time
/// (queue offset, physical offset, store timestamp).
#[derive(Debug, Clone, Copy)]
pub struct RecordDraft<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub flag: i32,
    /// Sys flag from the producer; the host-width bits are set by the encoder.
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    /// Encoded property string (docs/protocol.md#message-properties).
    pub properties: &'a [u8],
}

impl RecordDraft<'_> {
    /// The sys flag as stored: the producer's bits plus the IPv6 host bits.
    pub fn stored_sys_flag(&self) -> i32 {
        let mut f = self.sys_flag & !(sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6);
        if self.born_host.is_ipv6() {
            f |= sysflag::BORNHOST_V6;
        }
        if self.store_host.is_ipv6() {
            f |= sysflag::STOREHOST_V6;
        }
        f
    }

    /// Length of the encoded record.
    pub fn encoded_len(&self) -> usize {
        record_len(
            self.body.len(),
            self.topic.len(),
            self.properties.len(),
            self.born_host.is_ipv6(),
            self.store_host.is_ipv6(),
        )
    }

    /// Checks the limits of the layout: topic ≤ 32767 bytes (V2), properties ≤ 32767.
    pub fn validate(&self) -> Result<(), CodecError> {
        if self.topic.len() > i16::MAX as usize {
            return Err(CodecError::TooLarge {
                what: "topic",
                len: self.topic.len(),
                max: i16::MAX as usize,
            });
        }
        if self.properties.len() > properties::MAX_PROPERTIES_LEN {
            return Err(CodecError::TooLarge {
                what: "properties",
                len: self.properties.len(),
                max: properties::MAX_PROPERTIES_LEN,
            });
        }
        if self.body.len() > i32::MAX as usize - 1024 {
            return Err(CodecError::TooLarge {
                what: "body",
                len: self.body.len(),
                max: i32::MAX as usize - 1024,
            });
        }
        Ok(())
    }

    /// Appends the encoded record to `out`, computing the body CRC, with the
    /// append-time fields zero. Returns the record length.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<usize, CodecError> {
        self.encode_inner(out, false)
    }

    /// Like [`RecordDraft::encode_into`], but reserves the whole-record CRC
    /// trailer at the end of the properties; [`seal_crc`] fills it once the
    /// record is stamped.
    pub fn encode_with_crc_trailer(&self, out: &mut Vec<u8>) -> Result<usize, CodecError> {
        self.encode_inner(out, true)
    }

    /// Extra property bytes the CRC trailer needs for these properties.
    fn trailer_extra(&self) -> usize {
        let sep = usize::from(!self.properties.is_empty() && self.properties.last() != Some(&0x02));
        sep + CRC_TRAILER_LEN
    }

    fn encode_inner(&self, out: &mut Vec<u8>, crc_trailer: bool) -> Result<usize, CodecError> {
        self.validate()?;
        let extra = if crc_trailer { self.trailer_extra() } else { 0 };
        if self.properties.len() + extra > properties::MAX_PROPERTIES_LEN {
            return Err(CodecError::TooLarge {
                what: "properties",
                len: self.properties.len() + extra,
                max: properties::MAX_PROPERTIES_LEN,
            });
        }
        let len = self.encoded_len() + extra;
        let start = out.len();
        out.reserve(len);
        let v2 = self.topic.len() > 127;
        put_i32(out, len as i32);
        put_i32(out, if v2 { MAGIC_V2 } else { MAGIC_V1 });
        put_i32(out, masked_crc32(self.body) as i32);
        put_i32(out, self.queue_id);
        put_i32(out, self.flag);
        put_i64(out, 0); // QUEUEOFFSET, stamped under the append lock
        put_i64(out, 0); // PHYSICALOFFSET, stamped under the append lock
        put_i32(out, self.stored_sys_flag());
        put_i64(out, self.born_timestamp);
        put_host(out, self.born_host);
        put_i64(out, 0); // STORETIMESTAMP, stamped under the append lock
        put_host(out, self.store_host);
        put_i32(out, self.reconsume_times);
        put_i64(out, self.prepared_transaction_offset);
        put_i32(out, self.body.len() as i32);
        out.extend_from_slice(self.body);
        if v2 {
            put_i16(out, self.topic.len() as i16);
        } else {
            out.push(self.topic.len() as u8);
        }
        out.extend_from_slice(self.topic.as_bytes());
        put_i16(out, (self.properties.len() + extra) as i16);
        out.extend_from_slice(self.properties);
        if crc_trailer {
            if extra > CRC_TRAILER_LEN {
                out.push(0x02);
            }
            out.extend_from_slice(CRC_TRAILER_KEY);
            out.extend_from_slice(b"0000000000\x02");
        }
        debug_assert_eq!(out.len() - start, len);
        Ok(len)
    }
}

/// Whether the record ends with a whole-record CRC trailer.
pub fn has_crc_trailer(record: &[u8]) -> bool {
    let n = record.len();
    n >= MIN_RECORD_LEN + CRC_TRAILER_LEN
        && &record[n - CRC_TRAILER_LEN..n - 11] == CRC_TRAILER_KEY
        && record[n - 1] == 0x02
}

/// Computes the masked CRC32 of `record[..len-20]` and writes it into the
/// trailer reserved by [`RecordDraft::encode_with_crc_trailer`], as ten ASCII
/// digits, least significant first. Call after [`stamp`].
pub fn seal_crc(record: &mut [u8]) {
    debug_assert!(has_crc_trailer(record));
    let n = record.len();
    let mut crc = masked_crc32(&record[..n - CRC_TRAILER_LEN]);
    for d in &mut record[n - 11..n - 1] {
        *d = b'0' + (crc % 10) as u8;
        crc /= 10;
    }
}

/// Checks that a record known to have been written with the CRC trailer
/// still has one. A record whose trailer was torn away or whose trailer key
/// took a flipped bit otherwise looks like one written without a trailer,
/// and only its body CRC would be checked: damage to its header fields,
/// topic or properties would pass. The record format has no flag saying a
/// trailer was written, so the caller decides from what it knows of the
/// writer (see the store's `RecordCheck`). The trailer's CRC itself is
/// checked by [`RecordView::parse`].
pub fn require_crc_trailer(record: &[u8]) -> Result<(), CodecError> {
    if has_crc_trailer(record) {
        return Ok(());
    }
    Err(CodecError::MissingCrcTrailer {
        at: record.len().saturating_sub(CRC_TRAILER_LEN),
    })
}

/// The CRC stored in a record's trailer, if it has one with ten digits.
pub fn trailer_crc(record: &[u8]) -> Option<u32> {
    if !has_crc_trailer(record) {
        return None;
    }
    let n = record.len();
    let mut v: u64 = 0;
    for d in record[n - 11..n - 1].iter().rev() {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(d - b'0');
    }
    u32::try_from(v).ok()
}

/// Writes the append-time fields into an encoded record.
#[inline]
pub fn stamp(record: &mut [u8], queue_offset: i64, physical_offset: i64, store_timestamp: i64) {
    debug_assert!(record.len() >= MIN_RECORD_LEN);
    record[pos::QUEUE_OFFSET..pos::QUEUE_OFFSET + 8].copy_from_slice(&queue_offset.to_be_bytes());
    record[pos::PHYSICAL_OFFSET..pos::PHYSICAL_OFFSET + 8]
        .copy_from_slice(&physical_offset.to_be_bytes());
    let sys_flag = read_i32(record, pos::SYS_FLAG);
    let ts = store_timestamp_pos(sys_flag);
    record[ts..ts + 8].copy_from_slice(&store_timestamp.to_be_bytes());
}

/// Writes the end-of-file filler for `remaining` bytes at the start of `out`.
pub fn encode_blank(out: &mut [u8], remaining: usize) {
    debug_assert!(out.len() >= BLANK_LEN && remaining >= BLANK_LEN);
    out[0..4].copy_from_slice(&(remaining as i32).to_be_bytes());
    out[4..8].copy_from_slice(&MAGIC_BLANK.to_be_bytes());
}

/// What the first 8 bytes of a position in a CommitLog say is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordHead {
    /// A message record of `total_size` bytes (not yet validated beyond the magic).
    Message { total_size: usize },
    /// The end-of-file filler: the rest of the file is unused.
    Blank,
    /// Zero bytes: the never-written part of a preallocated file.
    Zeros,
    /// Anything else.
    Garbage { magic: u32, total_size: i32 },
}

/// Classifies the record header at the start of `buf` (needs 8 bytes).
pub fn peek_head(buf: &[u8]) -> Option<RecordHead> {
    if buf.len() < 8 {
        return None;
    }
    let total = read_i32(buf, 0);
    let magic = read_i32(buf, 4);
    Some(match magic {
        MAGIC_V1 | MAGIC_V2 if total as usize >= MIN_RECORD_LEN && total > 0 => {
            RecordHead::Message {
                total_size: total as usize,
            }
        }
        MAGIC_BLANK => RecordHead::Blank,
        0 if total == 0 => RecordHead::Zeros,
        _ => RecordHead::Garbage {
            magic: magic as u32,
            total_size: total,
        },
    })
}

/// A validated, borrowed view of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The whole record, `total_size` bytes.
    pub bytes: &'a [u8],
    pub magic: i32,
    pub body_crc: u32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

/// Checks a whole record's CRC. The whole-record CRC of the trailer covers
/// the body and the BODYCRC field, so when a record has one, checking it
/// alone is enough (and reads the body once); otherwise the body CRC.
fn check_record_crc(whole: &[u8], body: &[u8], body_crc: u32) -> Result<(), CodecError> {
    let total = whole.len();
    if !has_crc_trailer(whole) {
        // The trailer's key where a trailer starts, but not a whole trailer
        // after it: the trailer itself is damaged (a torn last sector, say).
        // Falling back to the body CRC would accept the damaged record.
        if total >= MIN_RECORD_LEN + CRC_TRAILER_LEN
            && &whole[total - CRC_TRAILER_LEN..total - 11] == CRC_TRAILER_KEY
        {
            return Err(CodecError::BadCrc {
                at: total - 11,
                stored: u32::MAX,
                computed: masked_crc32(&whole[..total - CRC_TRAILER_LEN]),
            });
        }
        let computed = masked_crc32(body);
        if computed != body_crc {
            return Err(CodecError::BadCrc {
                at: pos::BODY_CRC,
                stored: body_crc,
                computed,
            });
        }
        return Ok(());
    }
    let computed = masked_crc32(&whole[..total - CRC_TRAILER_LEN]);
    match trailer_crc(whole) {
        Some(stored) if stored == computed => Ok(()),
        stored => Err(CodecError::BadCrc {
            at: total - 11,
            stored: stored.unwrap_or(u32::MAX),
            computed,
        }),
    }
}

impl<'a> RecordView<'a> {
    /// Parses the record at the start of `buf`, checking the magic, that every
    /// length agrees with TOTALSIZE and, if `check_crc`, the body CRC.
    pub fn parse(buf: &'a [u8], check_crc: bool) -> Result<Self, CodecError> {
        let mut r = Reader { buf, at: 0 };
        let total_size = r.i32("TOTALSIZE")?;
        let magic = r.i32("MAGICCODE")?;
        if magic != MAGIC_V1 && magic != MAGIC_V2 {
            return Err(CodecError::BadMagic {
                magic: magic as u32,
                at: pos::MAGIC,
            });
        }
        if total_size < MIN_RECORD_LEN as i32 || total_size as usize > buf.len() {
            return Err(CodecError::BadLength {
                what: "TOTALSIZE",
                value: total_size as i64,
                at: 0,
            });
        }
        let total = total_size as usize;
        // From here on, read only inside the record.
        r.buf = &buf[..total];
        let body_crc = r.i32("BODYCRC")? as u32;
        let queue_id = r.i32("QUEUEID")?;
        let flag = r.i32("FLAG")?;
        let queue_offset = r.i64("QUEUEOFFSET")?;
        let physical_offset = r.i64("PHYSICALOFFSET")?;
        let sys_flag = r.i32("SYSFLAG")?;
        let born_timestamp = r.i64("BORNTIMESTAMP")?;
        let born_host = r.host("BORNHOST", sysflag::born_host_v6(sys_flag))?;
        let store_timestamp = r.i64("STORETIMESTAMP")?;
        let store_host = r.host("STOREHOST", sysflag::store_host_v6(sys_flag))?;
        let reconsume_times = r.i32("RECONSUMETIMES")?;
        let prepared_transaction_offset = r.i64("PREPARED_TRANSACTION_OFFSET")?;
        let body_len = r.len_i32("BODYLEN")?;
        let body = r.bytes("BODY", body_len)?;
        let topic_len = r.topic_len(magic)?;
        let topic = r.bytes("TOPIC", topic_len)?;
        let properties_len = r.len_i16("PROPERTIESLEN")?;
        let properties = r.bytes("PROPERTIES", properties_len)?;
        if r.at != total {
            return Err(CodecError::BadLength {
                what: "TOTALSIZE (fields end elsewhere)",
                value: total as i64,
                at: r.at,
            });
        }
        if check_crc {
            check_record_crc(&buf[..total], body, body_crc)?;
        }
        Ok(RecordView {
            bytes: &buf[..total],
            magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            body,
            topic,
            properties,
        })
    }

    pub fn total_size(&self) -> usize {
        self.bytes.len()
    }

    /// Topic as text (lossy if the stored bytes are not UTF-8).
    pub fn topic_str(&self) -> std::borrow::Cow<'a, str> {
        String::from_utf8_lossy(self.topic)
    }

    /// Value of one property, without decoding the others.
    pub fn property(&self, name: &str) -> Option<&'a [u8]> {
        properties::find(self.properties, name)
    }

    /// An owned copy of the decoded record.
    pub fn to_message(&self) -> StoredMessage {
        StoredMessage {
            queue_id: self.queue_id,
            flag: self.flag,
            queue_offset: self.queue_offset,
            physical_offset: self.physical_offset,
            sys_flag: self.sys_flag,
            born_timestamp: self.born_timestamp,
            born_host: self.born_host,
            store_timestamp: self.store_timestamp,
            store_host: self.store_host,
            reconsume_times: self.reconsume_times,
            prepared_transaction_offset: self.prepared_transaction_offset,
            body_crc: self.body_crc,
            topic: self.topic_str().into_owned(),
            body: Bytes::copy_from_slice(self.body),
            properties: Bytes::copy_from_slice(self.properties),
        }
    }
}

/// An owned, decoded record: what a consumer sees of a stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body_crc: u32,
    pub topic: String,
    pub body: Bytes,
    /// Encoded property string.
    pub properties: Bytes,
}

impl StoredMessage {
    /// Value of one property as text.
    pub fn property(&self, name: &str) -> Option<String> {
        properties::find(&self.properties, name).map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The offset msgId of this message (store host + physical offset).
    pub fn offset_msg_id(&self) -> String {
        crate::msgid::encode(self.store_host, self.physical_offset)
    }
}

/// Decodes a concatenation of records, as in a pull response body. Stops with
/// an error at the first record that does not parse.
pub fn decode_all(buf: &[u8], check_crc: bool) -> Result<Vec<StoredMessage>, CodecError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let view = RecordView::parse(&buf[at..], check_crc).map_err(|e| shift(e, at))?;
        out.push(view.to_message());
        at += view.total_size();
    }
    Ok(out)
}

/// Moves the offset an error reports by `base` bytes.
pub fn shift(e: CodecError, base: usize) -> CodecError {
    match e {
        CodecError::Truncated {
            what,
            at,
            need,
            have,
        } => CodecError::Truncated {
            what,
            at: at + base,
            need,
            have,
        },
        CodecError::BadMagic { magic, at } => CodecError::BadMagic {
            magic,
            at: at + base,
        },
        CodecError::BadLength { what, value, at } => CodecError::BadLength {
            what,
            value,
            at: at + base,
        },
        CodecError::BadCrc {
            at,
            stored,
            computed,
        } => CodecError::BadCrc {
            at: at + base,
            stored,
            computed,
        },
        CodecError::MissingCrcTrailer { at } => CodecError::MissingCrcTrailer { at: at + base },
        other => other,
    }
}

#[inline]
pub fn read_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

#[inline]
pub fn read_i64(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

fn put_i16(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a host as RocketMQ stores it: the IP's bytes, then the port as an i32.
pub fn put_host(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => out.extend_from_slice(&ip.octets()),
        IpAddr::V6(ip) => out.extend_from_slice(&ip.octets()),
    }
    put_i32(out, addr.port() as i32);
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], CodecError> {
        let have = self.buf.len().saturating_sub(self.at);
        if n > have {
            return Err(CodecError::Truncated {
                what,
                at: self.at,
                need: n,
                have,
            });
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn i32(&mut self, what: &'static str) -> Result<i32, CodecError> {
        let b = self.bytes(what, 4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self, what: &'static str) -> Result<i64, CodecError> {
        let b = self.bytes(what, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn len_i32(&mut self, what: &'static str) -> Result<usize, CodecError> {
        let at = self.at;
        let v = self.i32(what)?;
        if v < 0 {
            return Err(CodecError::BadLength {
                what,
                value: v as i64,
                at,
            });
        }
        Ok(v as usize)
    }
    fn len_i16(&mut self, what: &'static str) -> Result<usize, CodecError> {
        let at = self.at;
        let b = self.bytes(what, 2)?;
        let v = i16::from_be_bytes([b[0], b[1]]);
        if v < 0 {
            return Err(CodecError::BadLength {
                what,
                value: v as i64,
                at,
            });
        }
        Ok(v as usize)
    }
    /// TOPICLEN: a 2-byte length in V2 records; in V1 a signed byte (Java
    /// reads it with get()), so a negative one is refused.
    fn topic_len(&mut self, magic: i32) -> Result<usize, CodecError> {
        if magic == MAGIC_V2 {
            return self.len_i16("TOPICLEN");
        }
        let b = self.bytes("TOPICLEN", 1)?[0] as i8;
        if b < 0 {
            return Err(CodecError::BadLength {
                what: "TOPICLEN",
                value: b as i64,
                at: self.at - 1,
            });
        }
        Ok(b as usize)
    }
    fn host(&mut self, what: &'static str, v6: bool) -> Result<SocketAddr, CodecError> {
        let ip: IpAddr = if v6 {
            let b = self.bytes(what, 16)?;
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Ipv6Addr::from(a).into()
        } else {
            let b = self.bytes(what, 4)?;
            Ipv4Addr::new(b[0], b[1], b[2], b[3]).into()
        };
        let port = self.i32(what)?;
        // Java stores the port as an int; anything outside u16 is not a real port.
        let port = u16::try_from(port).map_err(|_| CodecError::BadLength {
            what: "port",
            value: port as i64,
            at: self.at - 4,
        })?;
        Ok(SocketAddr::new(ip, port))
    }
}

#[cfg(test)]
mod tests;
