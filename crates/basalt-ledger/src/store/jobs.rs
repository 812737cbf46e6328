//! I/O the writer prepares and a blocking thread runs: syncs ([`SyncJob`]),
//! checkpoint writes ([`CheckpointJob`]) and page prefaulting ([`PrefaultJob`]),
//! and the per-file-list record of what a sync still owes (`Dirty`).
//!
//! Preparing a job takes what is dirty from the writer; running it touches only
//! the files it holds, so the writer can go on appending meanwhile.

use std::path::PathBuf;
use std::sync::Arc;

use basalt_disk::Disk;

use super::reset::ResetWork;
use super::{LedgerCheckpoint, LedgerSegment, LedgerSegmentList, LedgerStoreError, meta};

/// Syncs prepared by the writer, run on a blocking thread. Owns the segments and
/// directories to sync.
#[derive(Default)]
pub struct SyncJob {
    pub(super) disk: Disk,
    pub(super) ranges: Vec<(Arc<LedgerSegment>, usize, usize)>,
    pub(super) fsync: Vec<Arc<LedgerSegment>>,
    pub(super) dirs: Vec<PathBuf>,
    /// A reset's checkpoint and removals, made before the syncs.
    pub(super) reset: Option<ResetWork>,
}

impl SyncJob {
    /// Performs the syncs (after a reset's work, if it carries one).
    pub fn run(&self) -> Result<(), LedgerStoreError> {
        if let Some(r) = &self.reset {
            r.run(&self.disk)?;
        }
        for (f, off, len) in &self.ranges {
            f.sync_range(*off, *len)?;
        }
        for f in &self.fsync {
            f.sync_all()?;
        }
        for d in &self.dirs {
            self.disk.sync_dir(d)?;
        }
        Ok(())
    }

    /// How many operations a reset this job carries makes (0 without one):
    /// the checkpoint replacement, each unlink, each directory sync.
    pub fn reset_operations(&self) -> usize {
        self.reset.as_ref().map_or(0, |r| r.operations())
    }

    /// Makes only the first `ops` operations of the reset this job carries, as
    /// a crash would stop it; nothing else. For the simulator, which then cuts
    /// the power.
    pub fn run_reset_first(&self, ops: usize) -> Result<(), LedgerStoreError> {
        match &self.reset {
            Some(r) => r.run_first(&self.disk, ops),
            None => Ok(()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
            && self.fsync.is_empty()
            && self.dirs.is_empty()
            && self.reset.is_none()
    }
}

/// A checkpoint write prepared by the writer: syncs the index units, then replaces
/// the `checkpoint` file. The index units are durable before the checkpoint
/// that claims them.
pub struct CheckpointJob {
    pub(super) sync: SyncJob,
    pub(super) dir: PathBuf,
    pub(super) checkpoint: LedgerCheckpoint,
}

impl CheckpointJob {
    pub fn run(&self) -> Result<(), LedgerStoreError> {
        self.sync.run()?;
        meta::store_checkpoint(&self.sync.disk, &self.dir, self.checkpoint)
    }

    pub fn checkpoint(&self) -> LedgerCheckpoint {
        self.checkpoint
    }
}

/// Bytes modified since the last sync of one file list: a covering range, files
/// to fsync whole (punched or cut), and whether the directory changed. Taking it
/// into a [`SyncJob`] leaves it clean.
#[derive(Default)]
pub(super) struct Dirty {
    pub(super) range: Option<(i64, i64)>,
    pub(super) fsync: Vec<Arc<LedgerSegment>>,
    pub(super) dir: bool,
}

impl Dirty {
    pub(super) fn mark(&mut self, lo: i64, hi: i64) {
        self.range = Some(match self.range {
            Some((a, b)) => (a.min(lo), b.max(hi)),
            None => (lo, hi),
        });
    }

    pub(super) fn take(&mut self, list: &LedgerSegmentList, job: &mut SyncJob) {
        if let Some((lo, hi)) = self.range.take() {
            job.ranges.extend(list.ranges(lo, hi));
        }
        job.fsync.append(&mut self.fsync);
        if std::mem::take(&mut self.dir) {
            job.dirs.push(list.dir().to_path_buf());
        }
    }
}

/// Pages to fault in ahead of the writer, on a thread of their own. Holds the
/// segments it touches, so they stay mapped while it runs.
pub struct PrefaultJob {
    pub(super) ranges: Vec<(Arc<LedgerSegment>, usize, usize)>,
}

impl PrefaultJob {
    /// Faults the ranges in; false if the kernel cannot (then nothing is lost but
    /// the head start).
    pub fn run(&self) -> bool {
        self.ranges
            .iter()
            .all(|(f, off, len)| f.prefault(*off, *len))
    }
}
