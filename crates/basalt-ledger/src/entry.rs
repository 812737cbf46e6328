//! The DLedger entry layout (docs/ledger-protocol.md#entry-layout): a 48-byte
//! header followed by the body, the
//! end-of-file blank, the 32-byte index unit, and the rule that places an entry in the
//! data file list.
//!
//! Everything here is pure and shared by the I/O-free core (which assigns positions),
//! the mmap store (which writes and checks them) and the simulator.
//!
//! Header, big-endian:
//!
//! | off | size | field     | Basalt                                             |
//! |-----|------|-----------|----------------------------------------------------|
//! | 0   | 4    | magic     | 1 = normal entry, 2 = no-op (empty body)           |
//! | 4   | 4    | size      | 48 + bodyLen                                       |
//! | 8   | 8    | index     | log index, from 0                                  |
//! | 16  | 8    | term      |                                                    |
//! | 24  | 8    | pos       | global byte position of the entry in the data files|
//! | 32  | 4    | channel   | 0                                                  |
//! | 36  | 4    | chainCrc  | Basalt: the header's own CRC ([`EntryHeader::header_crc`]); 0 = none |
//! | 40  | 4    | bodyCrc   | masked CRC32 of the body — **set and checked**     |
//! | 44  | 4    | bodyLen   |                                                    |

use bytes::Bytes;
use thiserror::Error;

/// Size of the entry header; the body starts here (`DLedgerEntry.BODY_OFFSET`).
pub const HEADER_SIZE: usize = 48;
/// Offset of the `pos` field inside the header.
pub const POS_OFFSET: usize = 24;
/// Offset of the `chainCrc` field, where Basalt keeps the header's own CRC.
pub const HEADER_CRC_OFFSET: usize = 36;
/// Size of one index unit.
pub const INDEX_UNIT_SIZE: usize = 32;
/// Magic of the end-of-file blank: `[-1][remaining]`.
pub const BLANK_MAGIC: i32 = -1;
/// Room always kept at the end of a data file for the blank.
pub const BLANK_LEN: i64 = 8;

/// What an entry is. The broker skips [`EntryKind::Noop`] entries when dispatching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A caller's entry (magic 1, DLedger `NORMAL`).
    Normal,
    /// The empty entry a new leader appends to commit the entries of earlier terms
    /// (magic 2, DLedger `NOOP`).
    Noop,
}

impl EntryKind {
    /// The magic code written for this kind.
    pub fn magic(self) -> i32 {
        match self {
            EntryKind::Normal => 1,
            EntryKind::Noop => 2,
        }
    }

    /// The kind a magic code denotes, if any.
    pub fn from_magic(magic: i32) -> Option<EntryKind> {
        match magic {
            1 => Some(EntryKind::Normal),
            2 => Some(EntryKind::Noop),
            _ => None,
        }
    }
}

/// Why bytes are not a valid entry or index unit. Offsets are relative to the slice
/// given to the decoder; the store adds the file name and file offset.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EntryError {
    #[error("short entry: need {need} bytes, have {have}")]
    Short { need: usize, have: usize },
    #[error("bad magic {0}")]
    BadMagic(i32),
    #[error("bad size {size} (bodyLen {body_len})")]
    BadSize { size: i32, body_len: i32 },
    #[error("body CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: i32, computed: i32 },
    #[error("header CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadHeaderCrc { stored: i32, computed: i32 },
    #[error("no-op entry with a body of {0} bytes")]
    NoopWithBody(i32),
    #[error("entry too large: {size} bytes does not fit a data file of {file_size} bytes")]
    TooLarge { size: i64, file_size: i64 },
    #[error("{field} {value} out of range")]
    OutOfRange { field: &'static str, value: i64 },
}

/// The 48-byte header of an entry. `size == 48 + body_len` always holds for a
/// decoded header, and so does `chain_crc == header_crc()` unless `chain_crc`
/// is 0 (a header written without its CRC, as DLedger writes every header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntryHeader {
    pub magic: i32,
    pub size: i32,
    pub index: i64,
    pub term: i64,
    pub pos: i64,
    pub channel: i32,
    pub chain_crc: i32,
    pub body_crc: i32,
    pub body_len: i32,
}

/// The body CRC Basalt stores: RocketMQ's masked CRC32 (sign bit cleared).
pub fn body_crc(body: &[u8]) -> i32 {
    basalt_common::crc::masked_crc32(body) as i32
}

impl EntryHeader {
    /// Header for a body of `body_len` bytes at `index`/`term`/`pos`.
    pub fn new(kind: EntryKind, index: i64, term: i64, pos: i64, body: &[u8]) -> EntryHeader {
        EntryHeader {
            magic: kind.magic(),
            size: (HEADER_SIZE + body.len()) as i32,
            index,
            term,
            pos,
            channel: 0,
            chain_crc: 0,
            body_crc: body_crc(body),
            body_len: body.len() as i32,
        }
        .sealed()
    }

    /// The CRC of the header itself, which Basalt keeps in `chainCrc`
    /// (DLedger leaves that field 0 and checks no header field): the masked
    /// CRC32 of the 48 header bytes with `chainCrc` zeroed, never 0, so that 0
    /// keeps meaning "written without one". Without it a torn header that
    /// zeroes the term of an entry, or any field the scan's continuity checks
    /// do not pin down, would pass.
    pub fn header_crc(&self) -> i32 {
        let mut bytes = [0u8; HEADER_SIZE];
        EntryHeader {
            chain_crc: 0,
            ..*self
        }
        .encode_into(&mut bytes);
        match basalt_common::crc::masked_crc32(&bytes) {
            0 => 1,
            crc => crc as i32,
        }
    }

    /// This header with its CRC in `chainCrc`: what the store writes.
    pub fn sealed(self) -> EntryHeader {
        EntryHeader {
            chain_crc: self.header_crc(),
            ..self
        }
    }

    /// The kind of the entry (a decoded header always has a known magic).
    pub fn kind(&self) -> EntryKind {
        EntryKind::from_magic(self.magic).unwrap_or(EntryKind::Normal)
    }

    /// Byte position just after this entry.
    pub fn end_pos(&self) -> i64 {
        self.pos + self.size as i64
    }

    /// Writes the header into the first 48 bytes of `out`.
    pub fn encode_into(&self, out: &mut [u8]) {
        assert!(out.len() >= HEADER_SIZE, "header buffer too small");
        out[0..4].copy_from_slice(&self.magic.to_be_bytes());
        out[4..8].copy_from_slice(&self.size.to_be_bytes());
        out[8..16].copy_from_slice(&self.index.to_be_bytes());
        out[16..24].copy_from_slice(&self.term.to_be_bytes());
        out[24..32].copy_from_slice(&self.pos.to_be_bytes());
        out[32..36].copy_from_slice(&self.channel.to_be_bytes());
        out[36..40].copy_from_slice(&self.chain_crc.to_be_bytes());
        out[40..44].copy_from_slice(&self.body_crc.to_be_bytes());
        out[44..48].copy_from_slice(&self.body_len.to_be_bytes());
    }

    /// The header as bytes.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        self.encode_into(&mut out);
        out
    }

    /// Decodes and checks a header: known magic, `size == 48 + bodyLen`, no body on a
    /// no-op, fields in range, and its own CRC when it carries one. The body CRC is checked separately by [`EntryHeader::check_body`].
    pub fn decode(bytes: &[u8]) -> Result<EntryHeader, EntryError> {
        if bytes.len() < HEADER_SIZE {
            return Err(EntryError::Short {
                need: HEADER_SIZE,
                have: bytes.len(),
            });
        }
        let h = EntryHeader {
            magic: be_i32(bytes, 0),
            size: be_i32(bytes, 4),
            index: be_i64(bytes, 8),
            term: be_i64(bytes, 16),
            pos: be_i64(bytes, 24),
            channel: be_i32(bytes, 32),
            chain_crc: be_i32(bytes, 36),
            body_crc: be_i32(bytes, 40),
            body_len: be_i32(bytes, 44),
        };
        let kind = EntryKind::from_magic(h.magic).ok_or(EntryError::BadMagic(h.magic))?;
        if h.body_len < 0 || h.size as i64 != HEADER_SIZE as i64 + h.body_len as i64 {
            return Err(EntryError::BadSize {
                size: h.size,
                body_len: h.body_len,
            });
        }
        if kind == EntryKind::Noop && h.body_len != 0 {
            return Err(EntryError::NoopWithBody(h.body_len));
        }
        // An index whose unit position overflows, or a negative index, term or
        // position, is damage (a flipped high bit), not an entry.
        for (field, value, max) in [
            ("index", h.index, i64::MAX / INDEX_UNIT_SIZE as i64),
            ("term", h.term, i64::MAX),
            ("pos", h.pos, i64::MAX),
        ] {
            if !(0..=max).contains(&value) {
                return Err(EntryError::OutOfRange { field, value });
            }
        }
        if h.chain_crc != 0 {
            let computed = h.header_crc();
            if computed != h.chain_crc {
                return Err(EntryError::BadHeaderCrc {
                    stored: h.chain_crc,
                    computed,
                });
            }
        }
        Ok(h)
    }

    /// Checks that `body` is this header's body (length and CRC).
    pub fn check_body(&self, body: &[u8]) -> Result<(), EntryError> {
        if body.len() != self.body_len as usize {
            return Err(EntryError::Short {
                need: self.body_len as usize,
                have: body.len(),
            });
        }
        let computed = body_crc(body);
        if computed != self.body_crc {
            return Err(EntryError::BadCrc {
                stored: self.body_crc,
                computed,
            });
        }
        Ok(())
    }
}

/// One log entry: header and body. The body is shared, never copied by cloning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub header: EntryHeader,
    pub body: Bytes,
}

impl Entry {
    /// A new entry; the header's CRC and lengths are computed from `body`.
    pub fn new(kind: EntryKind, index: i64, term: i64, pos: i64, body: Bytes) -> Entry {
        Entry {
            header: EntryHeader::new(kind, index, term, pos, &body),
            body,
        }
    }

    pub fn index(&self) -> i64 {
        self.header.index
    }

    pub fn term(&self) -> i64 {
        self.header.term
    }

    pub fn pos(&self) -> i64 {
        self.header.pos
    }

    /// Whole size on disk (header + body).
    pub fn size(&self) -> i64 {
        self.header.size as i64
    }

    /// Checks header/body consistency (lengths, kind, CRC) of an entry that came from
    /// the network.
    pub fn validate(&self) -> Result<(), EntryError> {
        let decoded = EntryHeader::decode(&self.header.encode())?;
        decoded.check_body(&self.body)
    }
}

/// One 32-byte index unit: `[magic i32][pos i64][size i32][index i64][term i64]`.
/// Unit `k` lives at byte `k * 32` of the index file list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexUnit {
    pub magic: i32,
    pub pos: i64,
    pub size: i32,
    pub index: i64,
    pub term: i64,
}

impl IndexUnit {
    /// The unit describing `header`.
    pub fn of(header: &EntryHeader) -> IndexUnit {
        IndexUnit {
            magic: header.magic,
            pos: header.pos,
            size: header.size,
            index: header.index,
            term: header.term,
        }
    }

    pub fn encode(&self) -> [u8; INDEX_UNIT_SIZE] {
        let mut out = [0u8; INDEX_UNIT_SIZE];
        out[0..4].copy_from_slice(&self.magic.to_be_bytes());
        out[4..12].copy_from_slice(&self.pos.to_be_bytes());
        out[12..16].copy_from_slice(&self.size.to_be_bytes());
        out[16..24].copy_from_slice(&self.index.to_be_bytes());
        out[24..32].copy_from_slice(&self.term.to_be_bytes());
        out
    }

    /// Decodes a unit; `None` when the slice is short or the magic is not an entry's.
    pub fn decode(bytes: &[u8]) -> Option<IndexUnit> {
        if bytes.len() < INDEX_UNIT_SIZE {
            return None;
        }
        let unit = IndexUnit {
            magic: be_i32(bytes, 0),
            pos: be_i64(bytes, 4),
            size: be_i32(bytes, 12),
            index: be_i64(bytes, 16),
            term: be_i64(bytes, 24),
        };
        EntryKind::from_magic(unit.magic)?;
        Some(unit)
    }

    /// Whether this unit describes exactly `header`.
    pub fn matches(&self, header: &EntryHeader) -> bool {
        *self == IndexUnit::of(header)
    }
}

/// Where an entry of `size` bytes goes when the data files are written up to
/// `end_pos` and each file holds `file_size` bytes (DLedger `preAppend`): at
/// `end_pos` when `size + 8` bytes remain in the current file, otherwise at the start
/// of the next file (the rest of the current file then holds a blank).
pub fn place(end_pos: i64, size: i64, file_size: i64) -> Result<i64, EntryError> {
    debug_assert!(end_pos >= 0 && file_size > BLANK_LEN);
    if size + BLANK_LEN > file_size {
        return Err(EntryError::TooLarge { size, file_size });
    }
    let remaining = file_size - end_pos % file_size;
    if size + BLANK_LEN > remaining {
        Ok(end_pos + remaining)
    } else {
        Ok(end_pos)
    }
}

/// The largest body an entry can carry in data files of `file_size` bytes.
pub fn max_body_len(file_size: i64) -> i64 {
    file_size - BLANK_LEN - HEADER_SIZE as i64
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trip_and_layout() {
        let body = b"hello";
        let h = EntryHeader::new(EntryKind::Normal, 7, 3, 4096, body);
        let bytes = h.encode();
        assert_eq!(&bytes[0..4], &1i32.to_be_bytes());
        assert_eq!(&bytes[4..8], &53i32.to_be_bytes());
        assert_eq!(&bytes[POS_OFFSET..POS_OFFSET + 8], &4096i64.to_be_bytes());
        assert_eq!(&bytes[44..48], &5i32.to_be_bytes());
        let d = EntryHeader::decode(&bytes).unwrap();
        assert_eq!(d, h);
        d.check_body(body).unwrap();
        assert!(matches!(
            d.check_body(b"hellp"),
            Err(EntryError::BadCrc { .. })
        ));
    }

    #[test]
    fn decode_rejects_bad_fields() {
        let h = EntryHeader::new(EntryKind::Normal, 0, 1, 0, b"x");
        let mut b = h.encode();
        b[0..4].copy_from_slice(&0i32.to_be_bytes());
        assert_eq!(EntryHeader::decode(&b), Err(EntryError::BadMagic(0)));
        let mut b = h.encode();
        b[4..8].copy_from_slice(&100i32.to_be_bytes());
        assert!(matches!(
            EntryHeader::decode(&b),
            Err(EntryError::BadSize { .. })
        ));
        let noop = EntryHeader::new(EntryKind::Noop, 0, 1, 0, b"x");
        assert_eq!(
            EntryHeader::decode(&noop.encode()),
            Err(EntryError::NoopWithBody(1))
        );
        assert!(matches!(
            EntryHeader::decode(&[0u8; 10]),
            Err(EntryError::Short { .. })
        ));
    }

    #[test]
    fn a_header_carries_its_own_crc_and_a_dledger_header_none() {
        let h = EntryHeader::new(EntryKind::Noop, 4, 1, 480, b"");
        assert_ne!(h.chain_crc, 0);
        assert_eq!(h.chain_crc, h.header_crc());
        // A torn term (the CRC kept) is caught.
        let mut b = h.encode();
        b[16..24].copy_from_slice(&0i64.to_be_bytes());
        assert!(matches!(
            EntryHeader::decode(&b),
            Err(EntryError::BadHeaderCrc { .. })
        ));
        // DLedger writes 0 there: such a header decodes (the store's header-CRC
        // rule decides whether it may be without one).
        let dledger = EntryHeader { chain_crc: 0, ..h };
        assert_eq!(EntryHeader::decode(&dledger.encode()), Ok(dledger));
        assert_eq!(dledger.sealed(), h);
    }

    #[test]
    fn placement_rolls_with_room_for_blank() {
        // 100-byte files: an entry of 60 fits at 0 (60 + 8 <= 100).
        assert_eq!(place(0, 60, 100), Ok(0));
        // At 40, 52 + 8 = 60 == remaining 60: fits exactly.
        assert_eq!(place(40, 52, 100), Ok(40));
        // At 40, 53 + 8 > 60: goes to the next file.
        assert_eq!(place(40, 53, 100), Ok(100));
        assert_eq!(place(100, 92, 100), Ok(100));
        assert!(matches!(
            place(0, 93, 100),
            Err(EntryError::TooLarge { .. })
        ));
        assert_eq!(max_body_len(100), 44);
    }

    #[test]
    fn index_unit_round_trip() {
        let h = EntryHeader::new(EntryKind::Noop, 9, 2, 300, b"");
        let u = IndexUnit::of(&h);
        let d = IndexUnit::decode(&u.encode()).unwrap();
        assert_eq!(d, u);
        assert!(d.matches(&h));
        assert_eq!(IndexUnit::decode(&[0u8; 32]), None);
    }

    #[test]
    fn an_index_whose_unit_position_overflows_is_refused() {
        let h = EntryHeader::new(EntryKind::Normal, i64::MAX / 32 + 1, 1, 0, b"x");
        assert!(matches!(
            EntryHeader::decode(&h.encode()),
            Err(EntryError::OutOfRange { field: "index", .. })
        ));
        let h = EntryHeader::new(EntryKind::Normal, 3, -1, 0, b"x");
        assert!(EntryHeader::decode(&h.encode()).is_err());
    }

    proptest! {
        #[test]
        fn header_codec_round_trips(index in 0i64..=i64::MAX / INDEX_UNIT_SIZE as i64, term in 0i64..i64::MAX,
                                    pos in 0i64..i64::MAX, body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let h = EntryHeader::new(EntryKind::Normal, index, term, pos, &body);
            let d = EntryHeader::decode(&h.encode()).unwrap();
            prop_assert_eq!(d, h);
            prop_assert!(d.check_body(&body).is_ok());
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = EntryHeader::decode(&bytes);
            let _ = IndexUnit::decode(&bytes);
        }

        #[test]
        fn placement_keeps_blank_room(end in 0i64..10_000, size in 48i64..500) {
            let file = 1024i64;
            let pos = place(end, size, file).unwrap();
            prop_assert!(pos >= end);
            prop_assert!(pos - end < file);
            // The entry and the 8-byte blank room stay inside one file.
            prop_assert!((pos % file) + size + BLANK_LEN <= file);
            prop_assert_eq!(pos / file, (pos + size) / file);
        }
    }
}
