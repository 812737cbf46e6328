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

/// Scans from `pos`. `expected` is the index the first entry must have (if
/// known) and `prev_term` the term it may not be below. `on_entry` sees each valid
/// entry with its body and returns whether to go on.
pub(crate) fn scan(
    src: &dyn DataSource,
    mut pos: i64,
    mut expected: Option<i64>,
    mut prev_term: i64,
    mut on_entry: impl FnMut(&EntryHeader, &[u8]) -> bool,
) -> Scan {
    let mut first = None;
    let mut last: Option<EntryHeader> = None;
    let damage = |pos: i64, reason: String, first, last| Scan {
        first,
        last,
        end_pos: pos,
        stop: Stop::Damage { pos, reason },
    };
    loop {
        if pos >= src.end() {
            return Scan {
                first,
                last,
                end_pos: pos,
                stop: Stop::End,
            };
        }
        let Some((_, file_start, file_end)) = src.file_of(pos) else {
            return Scan {
                first,
                last,
                end_pos: pos,
                stop: Stop::End,
            };
        };
        let remaining = file_end - pos;
        if remaining < 8 {
            // Entries always leave room for a blank: only zeros can be here.
            match src.bytes(pos, remaining as usize) {
                Some(b) if b.iter().all(|x| *x == 0) => {
                    return Scan {
                        first,
                        last,
                        end_pos: pos,
                        stop: Stop::End,
                    };
                }
                _ => {
                    return damage(
                        pos,
                        "bytes in the last 8 bytes of a file".into(),
                        first,
                        last,
                    );
                }
            }
        }
        let Some(head) = src.bytes(pos, 8) else {
            return damage(pos, "unreadable".into(), first, last);
        };
        let magic = be_i32(&head[0..4]);
        let len = be_i32(&head[4..8]);
        if magic == BLANK_MAGIC {
            let at_file_start = pos == file_start;
            let ok = len as i64 == remaining
                || (at_file_start && first.is_none() && len >= 8 && (len as i64) < remaining);
            if !ok {
                return damage(
                    pos,
                    format!("blank of {len} bytes with {remaining} left in the file"),
                    first,
                    last,
                );
            }
            pos += len as i64;
            continue;
        }
        if magic == 0 && len == 0 {
            let n = (remaining as usize).min(HEADER_SIZE);
            if src.bytes(pos, n).is_some_and(|b| b.iter().all(|x| *x == 0)) {
                return Scan {
                    first,
                    last,
                    end_pos: pos,
                    stop: Stop::End,
                };
            }
            return damage(
                pos,
                "zero magic and size followed by data".into(),
                first,
                last,
            );
        }
        if remaining < HEADER_SIZE as i64 {
            return damage(pos, "short entry header".into(), first, last);
        }
        let Some(hb) = src.bytes(pos, HEADER_SIZE) else {
            return damage(pos, "unreadable header".into(), first, last);
        };
        let h = match EntryHeader::decode(hb) {
            Ok(h) => h,
            Err(e) => return damage(pos, e.to_string(), first, last),
        };
        if h.pos != pos {
            return damage(
                pos,
                format!("entry claims pos {} but sits at {pos}", h.pos),
                first,
                last,
            );
        }
        if h.size as i64 + 8 > remaining {
            return damage(
                pos,
                format!("entry of {} bytes runs past the file end", h.size),
                first,
                last,
            );
        }
        if let Some(x) = expected
            && h.index != x
        {
            return damage(
                pos,
                format!("index {} where {x} was expected", h.index),
                first,
                last,
            );
        }
        if h.term < prev_term {
            return damage(
                pos,
                format!("term {} after term {prev_term}", h.term),
                first,
                last,
            );
        }
        let Some(body) = src.bytes(pos + HEADER_SIZE as i64, h.body_len as usize) else {
            return damage(pos, "unreadable body".into(), first, last);
        };
        if let Err(e) = h.check_body(body) {
            let reason = match e {
                EntryError::BadCrc { .. } => format!("index {}: {e}", h.index),
                other => other.to_string(),
            };
            return damage(pos, reason, first, last);
        }
        let go_on = on_entry(&h, body);
        if first.is_none() {
            first = Some(h);
        }
        last = Some(h);
        expected = Some(h.index + 1);
        prev_term = h.term;
        pos += h.size as i64;
        if !go_on {
            return Scan {
                first,
                last,
                end_pos: pos,
                stop: Stop::End,
            };
        }
    }
}
