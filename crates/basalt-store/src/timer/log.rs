//! The TimerLog: append-only segments of fixed-size [`TimerEntry`]s in
//! `{root}/timerlog/`, named like CommitLog files by the global position of
//! their first byte (docs/storage-format.md#timerlog).
//!
//! Entries are appended in the order of the timer topic's queue, one per
//! timer message, by one writer (the broker's enqueue task). A segment size
//! is a multiple of the entry size, so entries never span segments and a
//! position is always `segment start + k × 48`. A head segment goes once
//! every entry in it is delivered (its latest slot time is below the
//! wheel's read time); the tail segment always stays.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use parking_lot::Mutex;

use super::entry::{ENTRY_SIZE, TimerEntry};
use crate::error::{Result, StoreError};
use crate::mapped_file_queue::MappedFileQueue;

/// Where a scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerLogScanStop {
    /// At the limit the caller gave.
    Limit,
    /// At zero bytes: the end of the written data.
    End(i64),
    /// At an entry that failed its checks.
    Invalid { pos: i64, reason: String },
}

/// See the module documentation.
#[derive(Debug)]
pub struct TimerLog {
    files: MappedFileQueue,
    /// Segment start → the latest slot time of its entries.
    latest_slot: Mutex<BTreeMap<i64, i64>>,
}

impl TimerLog {
    /// A TimerLog in `dir` with segments of `segment_size` bytes (a
    /// multiple of the entry size).
    pub fn new(dir: PathBuf, segment_size: usize) -> TimerLog {
        assert!(
            segment_size >= ENTRY_SIZE && segment_size.is_multiple_of(ENTRY_SIZE),
            "TimerLog segments hold whole entries"
        );
        TimerLog {
            files: MappedFileQueue::new(dir, segment_size),
            latest_slot: Mutex::new(BTreeMap::new()),
        }
    }

    /// The segments live on `disk` (default: the real one).
    pub fn with_disk(mut self, disk: basalt_disk::Disk) -> TimerLog {
        self.files = self.files.with_disk(disk);
        self
    }

    /// Maps the segments found on disk (layout checked as for the CommitLog).
    pub fn load(&self) -> Result<()> {
        self.files.load()
    }

    pub fn dir(&self) -> &Path {
        self.files.dir()
    }

    /// Position of the first retained entry.
    pub fn min_offset(&self) -> i64 {
        self.files.min_offset()
    }

    /// Position just past the last entry.
    pub fn end(&self) -> i64 {
        self.files.max_offset()
    }

    /// Position up to which entries are on disk.
    pub fn flushed(&self) -> i64 {
        self.files.flushed_where()
    }

    fn corrupt(&self, path: &Path, pos: i64, reason: String) -> StoreError {
        StoreError::Corrupt {
            what: "TimerLog entry",
            path: path.to_path_buf(),
            offset: pos,
            reason,
        }
    }

    /// The entry at `pos`, checked. An error names the segment and position.
    pub fn read(&self, pos: i64) -> Result<TimerEntry> {
        let Some(f) = self.files.find_by_offset(pos) else {
            return Err(self.corrupt(
                self.files.dir(),
                pos,
                format!("no segment holds position {pos}"),
            ));
        };
        let in_file = (pos - f.start_offset()) as usize;
        if !in_file.is_multiple_of(ENTRY_SIZE) {
            return Err(self.corrupt(f.path(), pos, "position is not on an entry".into()));
        }
        let Some(b) = f.slice(in_file, ENTRY_SIZE) else {
            return Err(self.corrupt(f.path(), pos, "position is past the end".into()));
        };
        match TimerEntry::decode(b) {
            Ok(Some(e)) => Ok(e),
            Ok(None) => Err(self.corrupt(f.path(), pos, "entry is all zeros".into())),
            Err(reason) => Err(self.corrupt(f.path(), pos, reason)),
        }
    }

    /// Calls `each` for every valid entry from `from` until `limit`, the
    /// end of the written data or an invalid entry, and says which.
    pub fn scan(
        &self,
        from: i64,
        limit: i64,
        mut each: impl FnMut(i64, &TimerEntry),
    ) -> TimerLogScanStop {
        let mut pos = from;
        loop {
            if pos >= limit {
                return TimerLogScanStop::Limit;
            }
            let Some(f) = self.files.find_by_offset(pos) else {
                return TimerLogScanStop::End(pos);
            };
            let in_file = (pos - f.start_offset()) as usize;
            let Some(b) = f.slice(in_file, ENTRY_SIZE) else {
                return TimerLogScanStop::End(pos);
            };
            match TimerEntry::decode(b) {
                Ok(Some(e)) => {
                    self.note_slot(f.start_offset(), e.slot_ms);
                    each(pos, &e);
                }
                Ok(None) => return TimerLogScanStop::End(pos),
                Err(reason) => {
                    return TimerLogScanStop::Invalid {
                        pos,
                        reason: format!("{}: {reason}", f.path().display()),
                    };
                }
            }
            pos += ENTRY_SIZE as i64;
        }
    }

    fn note_slot(&self, segment: i64, slot_ms: i64) {
        let mut m = self.latest_slot.lock();
        let v = m.entry(segment).or_insert(slot_ms);
        *v = (*v).max(slot_ms);
    }

    /// Makes sure the tail segment has room and says how many entries fit
    /// in it. Creating a segment fsyncs the directory, so the writer calls
    /// this outside any lock its appends hold. Writer only.
    pub fn room(&self) -> Result<usize> {
        let f = self.files.last_writable(0)?;
        Ok(f.remaining() / ENTRY_SIZE)
    }

    /// Appends an entry; returns its position. Writer only.
    pub fn append(&self, e: &TimerEntry) -> Result<i64> {
        let f = self.files.last_writable(0)?;
        let bytes = e.to_bytes();
        let Some(at) = f.append(&bytes) else {
            // Segments hold whole entries, so a non-full tail has room.
            unreachable!("TimerLog segment without room for an entry");
        };
        self.note_slot(f.start_offset(), e.slot_ms);
        Ok(f.start_offset() + at as i64)
    }

    /// Cuts the log at `pos` (recovery): later entries are zeroed or their
    /// segments deleted; flushing resumes there.
    pub fn truncate(&self, pos: i64) -> Result<()> {
        assert!(
            pos % ENTRY_SIZE as i64 == 0 || self.files.is_empty(),
            "cut on an entry boundary"
        );
        self.files.truncate_dirty(pos)?;
        // A cut at the very start of a segment leaves it empty but present.
        self.files.set_flushed_and_committed(pos);
        let mut m = self.latest_slot.lock();
        m.retain(|start, _| *start <= pos);
        Ok(())
    }

    /// fsyncs everything appended; returns the position now on disk.
    pub fn flush(&self) -> Result<i64> {
        self.files.flush(0)
    }

    /// Deletes head segments whose entries are all in slots before
    /// `read_ms` (delivered); never the tail. Returns how many went.
    pub fn delete_delivered(&self, read_ms: i64) -> Result<usize> {
        let files = self.files.files();
        let Some((_, head)) = files.split_last() else {
            return Ok(0);
        };
        let latest = self.latest_slot.lock().clone();
        let victims: Vec<_> = head
            .iter()
            .take_while(|f| latest.get(&f.start_offset()).is_none_or(|t| *t < read_ms))
            .cloned()
            .collect();
        self.files.remove_head(&victims, Duration::ZERO)?;
        let mut m = self.latest_slot.lock();
        for f in &victims {
            m.remove(&f.start_offset());
        }
        Ok(victims.len())
    }

    /// Removes every segment (a TimerLog damaged in its middle is rebuilt
    /// from the timer topic's queue).
    pub fn destroy_all(&self) -> Result<()> {
        self.files.destroy_all()?;
        self.latest_slot.lock().clear();
        Ok(())
    }

    /// Segments on disk.
    pub fn segment_count(&self) -> usize {
        self.files.file_count()
    }

    /// Stops the segment allocator (shutdown).
    pub fn shutdown(&self) {
        self.files.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(slot_ms: i64, q: i64) -> TimerEntry {
        TimerEntry {
            slot_ms,
            phys: q * 100,
            size: 100,
            queue_offset: q,
            prev: -1,
        }
    }

    #[test]
    fn append_read_scan_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let log = TimerLog::new(dir.path().join("timerlog"), ENTRY_SIZE * 4);
        log.load().unwrap();
        for q in 0..10 {
            assert_eq!(log.append(&entry(1000 * q, q)).unwrap(), q * 48);
        }
        assert_eq!(log.read(96).unwrap(), entry(2000, 2));
        assert!(log.read(100).is_err());
        log.flush().unwrap();
        drop(log);
        let log = TimerLog::new(dir.path().join("timerlog"), ENTRY_SIZE * 4);
        log.load().unwrap();
        let mut seen = Vec::new();
        let stop = log.scan(0, i64::MAX, |p, e| seen.push((p, e.queue_offset)));
        assert_eq!(stop, TimerLogScanStop::End(480));
        assert_eq!(seen.len(), 10);
        log.truncate(480).unwrap();
        assert_eq!(log.end(), 480);
        // Segments 0 and 1 hold slots below 8 s; segment 2 is the tail.
        assert_eq!(log.delete_delivered(8000).unwrap(), 2);
        assert_eq!(log.min_offset(), 384);
        assert_eq!(log.read(432).unwrap(), entry(9000, 9));
    }

    #[test]
    fn a_damaged_entry_stops_the_scan_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let log = TimerLog::new(dir.path().join("timerlog"), ENTRY_SIZE * 8);
        log.load().unwrap();
        for q in 0..3 {
            log.append(&entry(1000, q)).unwrap();
        }
        log.flush().unwrap();
        drop(log);
        let seg = dir
            .path()
            .join("timerlog")
            .join(crate::mapped_file::file_name(0));
        let mut raw = std::fs::read(&seg).unwrap();
        raw[48 + 10] ^= 0xff;
        std::fs::write(&seg, raw).unwrap();
        let log = TimerLog::new(dir.path().join("timerlog"), ENTRY_SIZE * 8);
        log.load().unwrap();
        match log.scan(0, i64::MAX, |_, _| {}) {
            TimerLogScanStop::Invalid { pos, reason } => {
                assert_eq!(pos, 48);
                assert!(reason.contains("CRC"), "{reason}");
            }
            other => panic!("scan ran past the damage: {other:?}"),
        }
        let e = log.read(48).unwrap_err().to_string();
        assert!(
            e.contains("00000000000000000000") && e.contains("48"),
            "{e}"
        );
    }
}
