//! Walking the data files entry by entry, checking every entry: used by recovery
//! and by [`super::check_ledger_dir`].
//!
//! A blank `[-1][len]` means "skip `len` bytes": at the end of a file `len` is the
//! rest of the file; at the start of the first file after a reset it covers the
//! bytes before the first entry.

use std::path::PathBuf;

use crate::entry::{BLANK_MAGIC, EntryError, EntryHeader, HEADER_SIZE};

/// Read access to a list of data files.
pub(crate) trait DataSource {
    /// `(path, start, end)` of the file holding `pos`.
    fn file_of(&self, pos: i64) -> Option<(PathBuf, i64, i64)>;
    /// `len` bytes at `pos`, within one file.
    fn bytes(&self, pos: i64, len: usize) -> Option<&[u8]>;
    /// End of the last file.
    fn end(&self) -> i64;
}

/// Why a scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Zeros or the end of the files: a clean end.
    End,
    /// Something that is not an entry, a blank or zeros.
    Damage { pos: i64, reason: String },
}

#[derive(Debug, Clone)]
pub(crate) struct Scan {
    pub(crate) first: Option<EntryHeader>,
    pub(crate) last: Option<EntryHeader>,
    /// Where the next entry would go (the position of the damage, if any).
    pub(crate) end_pos: i64,
    pub(crate) stop: Stop,
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// What lies at one position of the data files.
enum Step<'a> {
    /// Zeros or the end of the files: a clean end.
    End,
    /// Something that is not an entry, a blank or zeros.
    Damage(String),
    /// A blank: skip this many bytes.
    Skip(i64),
    /// A valid entry and its body.
    Entry(EntryHeader, &'a [u8]),
}

/// Scans from `pos`. `expected` is the index the first entry must have (if
/// known) and `prev_term` the term it may not be below. Every header at or
/// past `crc_from` must carry its own CRC (the checkpoint's header-CRC rule;
/// `i64::MAX` for none). `on_entry` sees each valid entry with its body and
/// returns whether to go on.
pub(crate) fn scan(
    src: &dyn DataSource,
    crc_from: i64,
    mut pos: i64,
    mut expected: Option<i64>,
    mut prev_term: i64,
    mut on_entry: impl FnMut(&EntryHeader, &[u8]) -> bool,
) -> Scan {
    let mut first = None;
    let mut last: Option<EntryHeader> = None;
    loop {
        let stop = match step(src, crc_from, pos, first.is_none(), expected, prev_term) {
            Step::Skip(len) => {
                pos += len;
                continue;
            }
            Step::Entry(h, body) => {
                let go_on = on_entry(&h, body);
                if first.is_none() {
                    first = Some(h);
                }
                last = Some(h);
                expected = Some(h.index + 1);
                prev_term = h.term;
                pos += h.size as i64;
                if go_on {
                    continue;
                }
                Stop::End
            }
            Step::End => Stop::End,
            Step::Damage(reason) => Stop::Damage { pos, reason },
        };
        return Scan {
            first,
            last,
            end_pos: pos,
            stop,
        };
    }
}

/// What lies at `pos`: the end, a blank, zeros, or (see [`entry_at`]) an entry.
/// `before_first` says no entry was seen yet (a leading blank may then cover the
/// bytes before the first entry of a reset log).
fn step(
    src: &dyn DataSource,
    crc_from: i64,
    pos: i64,
    before_first: bool,
    expected: Option<i64>,
    prev_term: i64,
) -> Step<'_> {
    if pos >= src.end() {
        return Step::End;
    }
    let Some((_, file_start, file_end)) = src.file_of(pos) else {
        return Step::End;
    };
    let remaining = file_end - pos;
    if remaining < 8 {
        // Entries always leave room for a blank: only zeros can be here.
        return match src.bytes(pos, remaining as usize) {
            Some(b) if b.iter().all(|x| *x == 0) => Step::End,
            _ => Step::Damage("bytes in the last 8 bytes of a file".into()),
        };
    }
    let Some(head) = src.bytes(pos, 8) else {
        return Step::Damage("unreadable".into());
    };
    let magic = be_i32(&head[0..4]);
    let len = be_i32(&head[4..8]);
    if magic == BLANK_MAGIC {
        let at_file_start = pos == file_start;
        let ok = len as i64 == remaining
            || (at_file_start && before_first && len >= 8 && (len as i64) < remaining);
        if !ok {
            return Step::Damage(format!(
                "blank of {len} bytes with {remaining} left in the file"
            ));
        }
        return Step::Skip(len as i64);
    }
    if magic == 0 && len == 0 {
        let n = (remaining as usize).min(HEADER_SIZE);
        if src.bytes(pos, n).is_some_and(|b| b.iter().all(|x| *x == 0)) {
            return Step::End;
        }
        return Step::Damage("zero magic and size followed by data".into());
    }
    entry_at(src, crc_from, pos, remaining, expected, prev_term)
}

/// The entry at `pos`, `remaining` bytes before its file ends, checked: header,
/// position, room in the file, index continuity, term order, header CRC (and
/// its presence at or past `crc_from`), body CRC.
fn entry_at(
    src: &dyn DataSource,
    crc_from: i64,
    pos: i64,
    remaining: i64,
    expected: Option<i64>,
    prev_term: i64,
) -> Step<'_> {
    if remaining < HEADER_SIZE as i64 {
        return Step::Damage("short entry header".into());
    }
    let Some(hb) = src.bytes(pos, HEADER_SIZE) else {
        return Step::Damage("unreadable header".into());
    };
    let h = match EntryHeader::decode(hb) {
        Ok(h) => h,
        Err(e) => return Step::Damage(e.to_string()),
    };
    if h.pos != pos {
        return Step::Damage(format!("entry claims pos {} but sits at {pos}", h.pos));
    }
    if h.chain_crc == 0 && pos >= crc_from {
        return Step::Damage(format!(
            "index {}: header without its CRC at or past {crc_from}, where every header carries one",
            h.index
        ));
    }
    if h.size as i64 + 8 > remaining {
        return Step::Damage(format!("entry of {} bytes runs past the file end", h.size));
    }
    if let Some(x) = expected
        && h.index != x
    {
        return Step::Damage(format!("index {} where {x} was expected", h.index));
    }
    if h.term < prev_term {
        return Step::Damage(format!("term {} after term {prev_term}", h.term));
    }
    let Some(body) = src.bytes(pos + HEADER_SIZE as i64, h.body_len as usize) else {
        return Step::Damage("unreadable body".into());
    };
    if let Err(e) = h.check_body(body) {
        let reason = match e {
            EntryError::BadCrc { .. } => format!("index {}: {e}", h.index),
            other => other.to_string(),
        };
        return Step::Damage(reason);
    }
    Step::Entry(h, body)
}
