//! The read side: [`LedgerReader`] serves committed entries and bytes to any
//! thread, zero-copy from the mappings the writer published.
//!
//! Readers only touch what is committed; committed bytes and their index units
//! are never rewritten, so the shared mappings need no lock beyond the one that
//! publishes the file lists.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{SegmentSlice, Shared, UNIT, find};
use crate::entry::{EntryHeader, EntryKind, HEADER_SIZE, INDEX_UNIT_SIZE, IndexUnit};

/// A committed entry, its body shared with the mapping (it keeps the mapping
/// alive). Checked against its index unit and body CRC when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    pub index: i64,
    pub term: i64,
    /// Byte position of the entry header; the body starts at `pos + 48`.
    pub pos: i64,
    pub kind: EntryKind,
    pub body: Bytes,
}

impl LedgerEntry {
    /// Position of the body (RocketMQ's physical offset of the record it holds).
    pub fn body_pos(&self) -> i64 {
        self.pos + HEADER_SIZE as i64
    }

    /// Position just after the entry.
    pub fn end_pos(&self) -> i64 {
        self.body_pos() + self.body.len() as i64
    }
}

/// Why a read failed: not committed (yet), already purged, or damaged on disk
/// (naming the file and offset).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("range {pos}+{len} is not committed (committed up to byte {committed_pos})")]
    NotCommitted {
        pos: i64,
        len: usize,
        committed_pos: i64,
    },
    #[error("index {index} is not committed (committed index {committed_index})")]
    IndexNotCommitted { index: i64, committed_index: i64 },
    #[error("position {0} is before the first retained byte")]
    BeforeBegin(i64),
    #[error("range {pos}+{len} crosses a file boundary")]
    CrossesFile { pos: i64, len: usize },
    #[error("corrupt ledger file {path:?} at offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// One data file of the ledger as [`LedgerReader::data_files`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerDataFile {
    /// Global byte position of the file's first byte.
    pub start: i64,
    /// Global byte position just past the file.
    pub end: i64,
    pub path: std::path::PathBuf,
}

/// Reads committed entries and bytes, from any thread, zero-copy. Cheap to clone.
/// Shares the writer's state; never sees past the committed position.
#[derive(Clone)]
pub struct LedgerReader {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for LedgerReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerReader")
            .field("committed_index", &self.committed_index())
            .finish()
    }
}

impl LedgerReader {
    pub fn committed_index(&self) -> i64 {
        self.shared.committed_index.load(Ordering::Acquire)
    }

    /// Byte position just past the last committed entry.
    pub fn committed_pos(&self) -> i64 {
        self.shared.committed_pos.load(Ordering::Acquire)
    }

    pub fn begin_index(&self) -> i64 {
        self.shared.begin_index.load(Ordering::Acquire)
    }

    /// The data files, oldest first: where each starts and ends (global byte
    /// positions) and its path. Retention reads their ages from the paths and
    /// purges with [`crate::LedgerHandle::purge_before`].
    pub fn data_files(&self) -> Vec<LedgerDataFile> {
        self.shared
            .data
            .read()
            .iter()
            .map(|f| LedgerDataFile {
                start: f.start(),
                end: f.end(),
                path: f.path().to_path_buf(),
            })
            .collect()
    }

    /// Position of the entry at `index`, if it is committed and still kept.
    pub fn pos_of(&self, index: i64) -> Option<i64> {
        self.entry(index).ok().map(|e| e.pos)
    }

    /// `len` committed bytes at `pos` (within one data file), sharing the mapping.
    /// The broker serves pulls from this: a record at `entry.body_pos()`.
    pub fn read(&self, pos: i64, len: usize) -> Result<Bytes, ReadError> {
        let committed_pos = self.committed_pos();
        if pos < 0 || pos + len as i64 > committed_pos {
            return Err(ReadError::NotCommitted {
                pos,
                len,
                committed_pos,
            });
        }
        let files = self.shared.data.read().clone();
        let f = find(&files, self.shared.data_file_size, pos).ok_or(ReadError::BeforeBegin(pos))?;
        let off = (pos - f.start()) as usize;
        if off + len > f.size() as usize {
            return Err(ReadError::CrossesFile { pos, len });
        }
        Ok(Bytes::from_owner(SegmentSlice {
            file: f.clone(),
            off,
            len,
        }))
    }

    /// The committed entry at `index`, checked (header against its index unit, body
    /// CRC).
    pub fn entry(&self, index: i64) -> Result<LedgerEntry, ReadError> {
        let committed_index = self.committed_index();
        if index > committed_index {
            return Err(ReadError::IndexNotCommitted {
                index,
                committed_index,
            });
        }
        if index < self.begin_index() || index < 0 {
            return Err(ReadError::BeforeBegin(index));
        }
        let unit_pos = index * UNIT;
        let index_files = self.shared.index.read().clone();
        let uf = find(&index_files, self.shared.index_file_size, unit_pos)
            .ok_or(ReadError::BeforeBegin(index))?;
        let uoff = (unit_pos - uf.start()) as usize;
        // SAFETY: units of committed entries are never rewritten.
        let unit =
            IndexUnit::decode(unsafe { uf.slice(uoff, INDEX_UNIT_SIZE) }).ok_or_else(|| {
                ReadError::Corrupt {
                    path: uf.path().to_path_buf(),
                    offset: uoff as u64,
                    reason: format!("no index unit for committed index {index}"),
                }
            })?;
        let files = self.shared.data.read().clone();
        let f = find(&files, self.shared.data_file_size, unit.pos)
            .ok_or(ReadError::BeforeBegin(unit.pos))?;
        let off = (unit.pos - f.start()) as usize;
        let corrupt = |reason: String| ReadError::Corrupt {
            path: f.path().to_path_buf(),
            offset: off as u64,
            reason,
        };
        if off + unit.size as usize > f.size() as usize || unit.size < HEADER_SIZE as i32 {
            return Err(corrupt(format!(
                "index unit of {index} points past the file"
            )));
        }
        // SAFETY: committed bytes are immutable.
        let hb = unsafe { f.slice(off, HEADER_SIZE) };
        let h = EntryHeader::decode(hb).map_err(|e| corrupt(e.to_string()))?;
        if !unit.matches(&h) {
            return Err(corrupt(format!(
                "entry header does not match index unit {index}"
            )));
        }
        let body = Bytes::from_owner(SegmentSlice {
            file: f.clone(),
            off: off + HEADER_SIZE,
            len: h.body_len as usize,
        });
        h.check_body(&body).map_err(|e| corrupt(e.to_string()))?;
        Ok(LedgerEntry {
            index,
            term: h.term,
            pos: h.pos,
            kind: h.kind(),
            body,
        })
    }

    /// Committed entries from `from` on, at most `max_entries` and about
    /// `max_bytes` (at least one entry when one is committed).
    pub fn entries(
        &self,
        from: i64,
        max_entries: usize,
        max_bytes: usize,
    ) -> Result<Vec<LedgerEntry>, ReadError> {
        let committed = self.committed_index();
        let mut out = Vec::new();
        let mut bytes = 0;
        let mut i = from.max(self.begin_index()).max(0);
        while i <= committed && out.len() < max_entries && (out.is_empty() || bytes < max_bytes) {
            let e = self.entry(i)?;
            bytes += e.body.len() + HEADER_SIZE;
            out.push(e);
            i += 1;
        }
        Ok(out)
    }
}
