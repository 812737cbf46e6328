//! Where stored records are read from.
//!
//! Normally that is the [`CommitLog`]. In ledger mode the records live in the
//! replicated ledger's data files instead (a record's physical offset is then
//! its entry's position plus the entry header), and the broker opens the
//! store with [`crate::MessageSource::External`] over them. Pulls, lookups
//! and searches go through this trait and so work the same in both modes.

use basalt_common::record::{self, RecordHead};
use bytes::Bytes;

use crate::commit_log::CommitLog;

/// Read access to stored records by physical offset.
pub trait MessageLog: Send + Sync {
    /// Oldest physical offset still readable.
    fn min_offset(&self) -> i64;
    /// Physical offset just past the last readable record.
    fn max_offset(&self) -> i64;
    /// `size` bytes at `offset`, zero-copy, within one file.
    fn read_bytes(&self, offset: i64, size: usize) -> Option<Bytes>;
    /// First offset of the file after the one holding `offset`.
    fn roll_next_file(&self, offset: i64) -> i64;

    /// The whole record at `offset`.
    fn read_record(&self, offset: i64) -> Option<Bytes> {
        let head = self.read_bytes(offset, 8)?;
        match record::peek_head(&head)? {
            RecordHead::Message { total_size } => self.read_bytes(offset, total_size),
            _ => None,
        }
    }

    /// Store timestamp of the record at `offset`.
    fn store_timestamp_at(&self, offset: i64) -> Option<i64> {
        let head = self.read_bytes(offset, record::pos::BORN_HOST)?;
        let sys_flag = record::read_i32(&head, record::pos::SYS_FLAG);
        let at = record::store_timestamp_pos(sys_flag);
        let ts = self.read_bytes(offset + at as i64, 8)?;
        Some(record::read_i64(&ts, 0))
    }
}

impl MessageLog for CommitLog {
    fn min_offset(&self) -> i64 {
        CommitLog::min_offset(self)
    }
    fn max_offset(&self) -> i64 {
        CommitLog::max_offset(self)
    }
    fn read_bytes(&self, offset: i64, size: usize) -> Option<Bytes> {
        CommitLog::read_bytes(self, offset, size)
    }
    fn roll_next_file(&self, offset: i64) -> i64 {
        CommitLog::roll_next_file(self, offset)
    }
    fn read_record(&self, offset: i64) -> Option<Bytes> {
        CommitLog::read_record(self, offset)
    }
    fn store_timestamp_at(&self, offset: i64) -> Option<i64> {
        CommitLog::store_timestamp_at(self, offset)
    }
}
