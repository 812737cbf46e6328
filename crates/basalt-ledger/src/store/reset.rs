//! A reset: a truncation that keeps nothing ([`LedgerStore::reset`], or a
//! truncation whose kept prefix would not end at the leader's position).
//!
//! The checkpoint must stop claiming the removed entries durably before any
//! removal can reach the disk. Otherwise a power loss in between leaves a
//! checkpoint claiming entries the reset half removed, and recovery cannot
//! tell that from durable data that was lost, so it could never refuse a log
//! that ends before the checkpoint's entry.
//!
//! So the writer only detaches the old files (nothing on disk changes), and
//! the next [`super::SyncJob`], which the core's truncation barrier runs before
//! anything else is written, first replaces the checkpoint with one that
//! claims nothing ([`ResetWork::run`]), then unlinks the old files and syncs
//! the directories. Until that job has run, the writer refuses writes; the
//! new log's first file, with its leading blank, is created by its first
//! append.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use basalt_disk::Disk;

use super::{Dirty, LedgerCheckpoint, LedgerSegment, LedgerStore, LedgerStoreError, meta};

/// What a reset leaves for its sync to do: the checkpoint that claims nothing,
/// then the removal of the old files. Owns the detached segments (readers that
/// still map them keep valid bytes) and the flag the writer waits on.
pub(super) struct ResetWork {
    dir: PathBuf,
    /// `None` only under the test switch [`LedgerStore::skip_reset_checkpoint`].
    checkpoint: Option<LedgerCheckpoint>,
    old: Vec<Arc<LedgerSegment>>,
    dirs: Vec<PathBuf>,
    done: Arc<AtomicBool>,
}

impl ResetWork {
    /// Checkpoint first (durable: temp file, fsync, rename, directory fsync),
    /// then the unlinks and the directory syncs that make them durable.
    pub(super) fn run(&self, disk: &Disk) -> Result<(), LedgerStoreError> {
        self.run_first(disk, self.operations())?;
        self.done.store(true, Ordering::Release);
        Ok(())
    }

    /// The checkpoint replacement, each unlink and each directory sync.
    pub(super) fn operations(&self) -> usize {
        1 + self.old.len() + self.dirs.len()
    }

    /// Only the first `ops` operations of [`ResetWork::run`], in its order.
    pub(super) fn run_first(&self, disk: &Disk, ops: usize) -> Result<(), LedgerStoreError> {
        let mut left = ops;
        let mut step = || {
            let go = left > 0;
            left = left.saturating_sub(1);
            go
        };
        if step()
            && let Some(c) = self.checkpoint
        {
            meta::store_checkpoint(disk, &self.dir, c)?;
        }
        for f in &self.old {
            if !step() {
                return Ok(());
            }
            disk.remove_file(f.path())?;
        }
        for d in &self.dirs {
            if !step() {
                return Ok(());
            }
            disk.sync_dir(d)?;
        }
        Ok(())
    }
}

/// The writer's side of a reset: the work not yet taken by a sync, and the
/// flag of the one taken and not yet run.
#[derive(Default)]
pub(super) struct ResetState {
    pending: Option<ResetWork>,
    done: Option<Arc<AtomicBool>>,
    /// The first append writes the leading blank up to the reset's position.
    pub(super) leading_blank: bool,
    /// Test switch: resets leave the checkpoint as it was.
    skip_checkpoint: bool,
    /// The checkpoint on disk may still name a reset (until a checkpoint
    /// prepared after the reset's sync replaces it). A purge waits for that:
    /// recovery takes a log that does not begin with the reset's entry for
    /// its leftovers.
    pub(super) marker_on_disk: bool,
}

impl LedgerStore {
    /// Truncation keeping nothing: detach every file, start over at the
    /// leader's position (see the module documentation).
    pub(super) fn start_over_at(
        &mut self,
        next_index: i64,
        next_pos: i64,
    ) -> Result<(), LedgerStoreError> {
        self.tail.clear();
        self.tail_bytes = 0;
        let mut old = self.data.detach_all();
        old.extend(self.index.detach_all());
        match &mut self.reset.pending {
            Some(w) => {
                w.old.extend(old);
                if let Some(c) = &mut w.checkpoint {
                    c.reset = Some((next_index, next_pos));
                }
            }
            None => {
                let done = Arc::new(AtomicBool::new(false));
                self.reset.done = Some(done.clone());
                // It claims no commit either: a power loss in the middle of
                // the removals may leave a run of old entries that starts
                // after the old committed index, which a restart must not
                // take for entries it holds.
                self.reset.pending = Some(ResetWork {
                    dir: self.opts.dir.clone(),
                    checkpoint: (!self.reset.skip_checkpoint).then_some(LedgerCheckpoint {
                        end_index: -1,
                        committed_index: -1,
                        reset: Some((next_index, next_pos)),
                        header_crc_from: Some(self.header_crc_from),
                    }),
                    old,
                    dirs: vec![
                        self.data.dir().to_path_buf(),
                        self.index.dir().to_path_buf(),
                    ],
                    done,
                });
            }
        }
        // What was dirty belongs to the detached files.
        self.data_dirty = Dirty::default();
        self.index_dirty = Dirty::default();
        self.reset.leading_blank = true;
        self.reset.marker_on_disk |= !self.reset.skip_checkpoint;
        self.begin_index = -1;
        self.end_index = -1;
        self.end_term = -1;
        self.end_pos = next_pos;
        self.shared.begin_index.store(-1, Ordering::Release);
        self.shared.begin_pos.store(next_pos, Ordering::Release);
        // A start over below the committed index (the log held no committed
        // entry, see `truncate_as`): the committed index follows the empty
        // log; the entries up to it come again, identical, from the leader.
        self.shared
            .committed_index
            .fetch_min(next_index - 1, Ordering::AcqRel);
        self.shared.committed_pos.store(next_pos, Ordering::Release);
        Ok(())
    }

    /// A checkpoint is being prepared: once the reset's sync has run, it
    /// replaces the one naming the reset.
    pub(super) fn checkpoint_prepared(&mut self) {
        let settled = self.reset.pending.is_none()
            && self
                .reset
                .done
                .as_ref()
                .is_none_or(|d| d.load(Ordering::Acquire));
        if settled {
            self.reset.marker_on_disk = false;
        }
    }

    /// The reset's work for the next sync, if one is waiting.
    pub(super) fn take_reset(&mut self) -> Option<ResetWork> {
        self.reset.pending.take()
    }

    /// Refuses a write while a reset is not durable (its files could collide
    /// with the old ones, and the checkpoint may still claim them).
    pub(super) fn check_reset_settled(&mut self) -> Result<(), LedgerStoreError> {
        match &self.reset.done {
            Some(d) if !d.load(Ordering::Acquire) => Err(LedgerStoreError::Invalid(
                "write before the reset is durable (a truncation is a sync barrier)".into(),
            )),
            Some(_) => {
                self.reset.done = None;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Test switch: resets leave the old checkpoint in place, as the store did
    /// before it wrote one that claims nothing. For proving that the
    /// simulator notices.
    #[doc(hidden)]
    pub fn skip_reset_checkpoint(&mut self) {
        self.reset.skip_checkpoint = true;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LedgerStore, StoreOptions};
    use crate::core::LogRead;
    use crate::entry::{EntryHeader, EntryKind, HEADER_SIZE, place};

    const DATA: i64 = 1024;

    fn body(i: i64) -> Vec<u8> {
        (0..10 + (i * 37 % 150) as usize)
            .map(|k| (i as usize * 7 + k) as u8)
            .collect()
    }

    fn append(store: &mut LedgerStore, from: i64, to: i64, term: i64) {
        for i in from..to {
            let b = body(i);
            let pos = place(store.end_pos(), (HEADER_SIZE + b.len()) as i64, DATA).unwrap();
            let h = EntryHeader::new(EntryKind::Normal, i, term, pos, &b);
            store.append(&[(h, &b)]).unwrap();
        }
    }

    fn sync(store: &mut LedgerStore) {
        store.prepare_sync().run().unwrap();
    }

    /// Regression (issue 12): a follower reset past a purge holds no
    /// committed entry (its log starts after its committed index); a later
    /// leader that kept the purged entries resets it again below that
    /// committed index. The store refused (`truncating committed entry`); it
    /// now starts over there, its committed index going back to the new
    /// log's end, and takes the same entries again. A reset below committed
    /// entries the log still holds is still refused.
    #[test]
    fn a_reset_below_the_committed_index_of_a_log_holding_no_committed_entry() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            dir: dir.path().to_path_buf(),
            data_file_size: DATA,
            index_file_size: 32 * 8,
        };
        let (mut s, _) = LedgerStore::open(opts.clone()).unwrap();
        append(&mut s, 0, 40, 1);
        sync(&mut s);
        let pos10 = s.entry(10).unwrap().unwrap().header.pos;
        s.set_committed(20);
        // Reset past a purge: the log starts at 100, after the committed index.
        s.reset(100, 30 * DATA + 100).unwrap();
        sync(&mut s);
        append(&mut s, 100, 103, 2);
        sync(&mut s);
        assert_eq!(s.reader().committed_index(), 20);
        // A leader holding 10.. resets it there, below the committed index.
        s.reset(10, pos10).unwrap();
        assert_eq!(s.reader().committed_index(), 9);
        assert_eq!((s.begin_index(), s.end_index()), (-1, -1));
        sync(&mut s);
        append(&mut s, 10, 40, 1);
        sync(&mut s);
        s.set_committed(25);
        assert_eq!(s.reader().committed_index(), 25);
        assert_eq!(&s.entry(20).unwrap().unwrap().body[..], &body(20)[..]);
        s.prepare_checkpoint(39, 25).run().unwrap();
        drop(s);
        let (mut s, rec) = LedgerStore::open(opts).unwrap();
        assert_eq!(rec.cut, None);
        assert_eq!((s.begin_index(), s.end_index()), (10, 39));
        assert_eq!(rec.committed_index, 25);
        // The log holds committed entries 10..=25: a reset below them is refused.
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.reset(5, 0)));
        let msg = refused.expect_err("a reset below held committed entries was taken");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("truncating committed entry 5"), "{msg}");
    }
}
