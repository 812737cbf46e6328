//! Retention's purge, in two halves: the writer detaches the files that lie
//! before a position ([`LedgerStore::prepare_purge`], no I/O but the index
//! file list), and a [`PurgeJob`] deletes them and syncs the directories on a
//! blocking thread, so the runtime task never waits on an unlink.
//!
//! A crash between the halves leaves the detached files on disk: recovery
//! loads them again and the first index is simply earlier than the purge
//! made it, which the next purge corrects.
//!
//! Files are deleted oldest first, each deletion made durable (directory
//! fsync) before the next: a power loss may keep or undo any unsynced
//! unlink, and undoing an older one while keeping a newer one would leave a
//! gap among the file names, which recovery takes for an unsynced tail and
//! cuts. One at a time, what survives is always a suffix of the files.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use basalt_disk::Disk;

use super::{LedgerSegment, LedgerStore, LedgerStoreError, Shared, UNIT, first_entry};

/// Files a purge detached from the writer's lists, to delete off the runtime
/// task, data files first, oldest first in each list. Holds the segments,
/// so readers that still map them keep valid bytes until they drop them.
///
/// A failed unlink or directory sync poisons the store: after a failed fsync
/// the directory's state on disk is unknown, and a later sync that reports
/// success need not cover the earlier removal.
pub struct PurgeJob {
    disk: Disk,
    files: Vec<Arc<LedgerSegment>>,
    shared: Arc<Shared>,
    /// The first index once the files are gone.
    pub begin_index: i64,
}

impl PurgeJob {
    /// Deletes the detached files, each made durable before the next;
    /// returns the new first index.
    pub fn run(self) -> Result<i64, LedgerStoreError> {
        let n = self.operations();
        self.run_first(n)?;
        Ok(self.begin_index)
    }

    /// How many operations [`PurgeJob::run`] makes: an unlink and a directory
    /// sync per file.
    pub fn operations(&self) -> usize {
        2 * self.files.len()
    }

    /// Makes only the first `ops` operations of [`PurgeJob::run`] (unlink,
    /// directory sync, unlink, ...), as a crash would stop it. For the
    /// simulator, which then cuts the power.
    pub fn run_first(&self, ops: usize) -> Result<(), LedgerStoreError> {
        let mut left = ops;
        for f in &self.files {
            let path = f.path();
            for sync in [false, true] {
                if left == 0 {
                    return Ok(());
                }
                left -= 1;
                let r = match (sync, path.parent()) {
                    (false, _) => self.disk.remove_file(path).map(|_| ()),
                    (true, Some(dir)) => self.disk.sync_dir(dir),
                    (true, None) => Ok(()),
                };
                if let Err(e) = r {
                    self.shared.poisoned.store(true, Ordering::Release);
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }
}

impl LedgerStore {
    /// Deletes data files that lie entirely before `pos` and before the committed
    /// position, and the index files before the new first entry. Returns the new
    /// begin index. ([`LedgerStore::prepare_purge`] and [`PurgeJob::run`] in one.)
    pub fn purge_before(&mut self, pos: i64) -> Result<i64, LedgerStoreError> {
        self.prepare_purge(pos)?.run()
    }

    /// Detaches the data files that lie entirely before `pos` and before the
    /// committed position, and the index files before the new first entry, and
    /// publishes the new first entry to readers. The job deletes the files.
    pub fn prepare_purge(&mut self, pos: i64) -> Result<PurgeJob, LedgerStoreError> {
        self.check_writable()?;
        let limit = pos.min(self.shared.committed_pos.load(Ordering::Acquire));
        let mut job = PurgeJob {
            disk: self.data.disk().clone(),
            files: Vec::new(),
            shared: self.shared.clone(),
            begin_index: self.begin_index,
        };
        if self.reset.marker_on_disk {
            // The checkpoint still names a reset: purged, the log would not
            // begin with its entry, and recovery would take all of it for the
            // reset's leftovers. The next checkpoint clears that; purge then.
            return Ok(job);
        }
        while self.data.files().len() > 1 && self.data.files()[0].end() <= limit {
            job.files.extend(self.data.detach_first());
        }
        if job.files.is_empty() {
            return Ok(job);
        }
        let Some(first) = first_entry(&self.data, self.header_crc_from) else {
            return Ok(job);
        };
        while self.index.files().len() > 1 && self.index.files()[0].end() <= first.index * UNIT {
            job.files.extend(self.index.detach_first());
        }
        self.begin_index = first.index;
        self.shared
            .begin_index
            .store(first.index, Ordering::Release);
        self.shared.begin_pos.store(first.pos, Ordering::Release);
        self.publish_files();
        job.begin_index = first.index;
        Ok(job)
    }
}
