//! Retention's purge, in two halves: the writer detaches the files that lie
//! before a position ([`LedgerStore::prepare_purge`], no I/O but the index
//! file list), and a [`PurgeJob`] deletes them and syncs the directories on a
//! blocking thread, so the runtime task never waits on an unlink.
//!
//! A crash between the halves leaves the detached files on disk: recovery
//! loads them again and the first index is simply earlier than the purge
//! made it, which the next purge corrects.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{LedgerSegment, LedgerStore, LedgerStoreError, UNIT, first_entry, sync_dir};

/// Files a purge detached from the writer's lists, to delete off the runtime
/// task. Holds the segments, so readers that still map them keep valid bytes
/// until they drop them.
pub struct PurgeJob {
    files: Vec<Arc<LedgerSegment>>,
    dirs: Vec<PathBuf>,
    /// The first index once the files are gone.
    pub begin_index: i64,
}

impl PurgeJob {
    /// Deletes the detached files and syncs their directories; returns the
    /// new first index.
    pub fn run(self) -> Result<i64, LedgerStoreError> {
        for f in &self.files {
            let path = f.path();
            std::fs::remove_file(path).map_err(|e| LedgerStoreError::Io {
                path: path.to_path_buf(),
                op: "remove",
                source: e,
            })?;
        }
        for d in &self.dirs {
            sync_dir(d)?;
        }
        Ok(self.begin_index)
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
            files: Vec::new(),
            dirs: Vec::new(),
            begin_index: self.begin_index,
        };
        while self.data.files().len() > 1 && self.data.files()[0].end() <= limit {
            job.files.extend(self.data.detach_first());
        }
        if job.files.is_empty() {
            return Ok(job);
        }
        job.dirs.push(self.data.dir().to_path_buf());
        let Some(first) = first_entry(&self.data) else {
            return Ok(job);
        };
        while self.index.files().len() > 1 && self.index.files()[0].end() <= first.index * UNIT {
            job.files.extend(self.index.detach_first());
        }
        job.dirs.push(self.index.dir().to_path_buf());
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
