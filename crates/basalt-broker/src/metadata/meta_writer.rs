//! [`MetadataWriter`]: the thread that makes one metadata table durable,
//! either by rewriting its JSON snapshot or, for a journaled table, by
//! appending each burst of changes to its journal (see
//! [`crate::metadata::journal`]) and folding the journal into the snapshot
//! now and then.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;

use crate::metadata::file::ConfigFile;
use crate::metadata::journal::JournalFile;

/// What the writer thread of a [`MetadataWriter`] has done so far.
#[derive(Debug, Clone, Default)]
struct WriteProgress {
    /// Every change up to this generation is on disk.
    written: u64,
    /// The last write attempt that failed covered changes up to this one.
    failed: u64,
    /// Why it failed.
    error: Option<String>,
}

/// Changes handed to the writer and not yet taken by a write.
#[derive(Debug, Default)]
struct Requested {
    /// Generation of the newest change.
    generation: u64,
    stop: bool,
    /// Journal entries of the changes since the last write, in table order.
    entries: Vec<Vec<u8>>,
    /// A change came without an entry: the next write is a snapshot.
    needs_snapshot: bool,
    /// The whole table was replaced: the journal describes a table that is
    /// gone and is emptied before the new snapshot is written.
    replaced: bool,
}

/// The files a write touches; held (in `WriterShared::writing`) for the
/// duration of one write, fsyncs included, by the writer thread or by
/// `flush_now` — no other lock waits on it.
#[derive(Debug)]
struct WriteTarget {
    journal: Option<JournalFile>,
    /// Size of the last snapshot written or read; bounds the journal.
    snapshot_len: u64,
    /// A write failed after it took its entries: the next one must be a
    /// snapshot, which covers them.
    must_compact: bool,
}

struct WriterShared {
    file: ConfigFile,
    snapshot: Box<dyn Fn() -> String + Send + Sync>,
    requested: Mutex<Requested>,
    wake: Condvar,
    progress: watch::Sender<WriteProgress>,
    writing: Mutex<WriteTarget>,
}

/// Writes one metadata file from a thread of its own. Owners change their
/// table in memory and call [`MetadataWriter::mark_changed`] (or, for a
/// journaled table, [`MetadataWriter::record_change`] with the change's
/// journal entry, while they still hold the table's lock so entries are
/// journaled in table order); the thread writes once per burst of changes
/// (a thousand topics created at once cost one write and one fsync, not a
/// thousand), and async callers wait with [`MetadataWriter::written`] until
/// a write covers their change, without blocking a tokio worker on the
/// fsync.
///
/// A journaled table's burst is one journal frame; when the journal grows
/// past the larger of [`JOURNAL_MIN_BOUND`] and the snapshot's size, the
/// write renders the snapshot instead (temp file, fsync, rename, fsync dir)
/// and empties the journal, so a change costs amortised O(1) bytes.
///
/// Invariant: `progress.written` only grows, and every generation at or
/// below it is in the snapshot or in an fsynced journal frame.
pub struct MetadataWriter {
    shared: Arc<WriterShared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for MetadataWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataWriter")
            .field("file", &self.shared.file.path())
            .finish()
    }
}

/// How long the writer waits before it tries a failed write again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// A journal never triggers compaction below this size.
pub const JOURNAL_MIN_BOUND: u64 = 1 << 20;

impl MetadataWriter {
    /// Starts the writer thread for `file`; `snapshot` renders the content.
    pub fn start(file: ConfigFile, snapshot: impl Fn() -> String + Send + Sync + 'static) -> Self {
        Self::start_with(file, None, 0, Box::new(snapshot))
    }

    /// Like [`MetadataWriter::start`], for a table whose changes go to
    /// `journal` (already replayed by the owner); `snapshot_len` is the size
    /// of the snapshot it was replayed onto.
    pub fn start_journaled(
        file: ConfigFile,
        journal: JournalFile,
        snapshot_len: u64,
        snapshot: impl Fn() -> String + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(file, Some(journal), snapshot_len, Box::new(snapshot))
    }

    fn start_with(
        file: ConfigFile,
        journal: Option<JournalFile>,
        snapshot_len: u64,
        snapshot: Box<dyn Fn() -> String + Send + Sync>,
    ) -> Self {
        let (progress, _) = watch::channel(WriteProgress::default());
        let shared = Arc::new(WriterShared {
            file,
            snapshot,
            requested: Mutex::new(Requested::default()),
            wake: Condvar::new(),
            progress,
            writing: Mutex::new(WriteTarget {
                journal,
                snapshot_len,
                must_compact: false,
            }),
        });
        let s = Arc::clone(&shared);
        let name = format!(
            "basalt-meta-{}",
            shared
                .file
                .path()
                .file_stem()
                .and_then(|n| n.to_str())
                .unwrap_or("file")
        );
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || s.run())
            .expect("spawn metadata writer thread");
        MetadataWriter {
            shared,
            thread: Mutex::new(Some(thread)),
        }
    }

    pub fn path(&self) -> &std::path::Path {
        self.shared.file.path()
    }

    /// Records that the table changed in a way the journal does not
    /// describe: the next write is a snapshot. Returns the generation.
    pub fn mark_changed(&self) -> u64 {
        self.push(|r| r.needs_snapshot = true)
    }

    /// Records a change described by journal `entry` (a plain snapshot
    /// writer ignores the entry). Call with the table's lock held.
    pub fn record_change(&self, entry: Vec<u8>) -> u64 {
        self.push(|r| r.entries.push(entry))
    }

    /// Records that the whole table was replaced (a slave copying its
    /// master): the journal is emptied and a snapshot written.
    pub fn mark_replaced(&self) -> u64 {
        self.push(|r| {
            r.replaced = true;
            r.needs_snapshot = true;
        })
    }

    fn push(&self, f: impl FnOnce(&mut Requested)) -> u64 {
        let mut r = self.shared.requested.lock();
        r.generation += 1;
        f(&mut r);
        self.shared.wake.notify_one();
        r.generation
    }

    /// Waits until a write covers change `generation`. `Err` when the write
    /// meant to cover it failed (the writer keeps trying in the background).
    pub async fn written(&self, generation: u64) -> Result<(), String> {
        let mut rx = self.shared.progress.subscribe();
        let p = rx
            .wait_for(|p| p.written >= generation || p.failed >= generation)
            .await
            .map_err(|_| "the metadata writer stopped".to_string())?
            .clone();
        if p.written >= generation {
            Ok(())
        } else {
            Err(p.error.unwrap_or_default())
        }
    }

    /// Writes the whole snapshot now and empties the journal, in the
    /// caller's thread (start-up, shutdown, tests). Blocks. The snapshot
    /// file is rewritten only if its content changed.
    pub fn flush_now(&self) -> Result<(), String> {
        self.shared.write(true)
    }

    /// Writes what is pending and stops the thread. Idempotent.
    pub fn stop(&self) {
        self.shared.requested.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetadataWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

impl WriterShared {
    fn run(&self) {
        let mut retry = false;
        loop {
            {
                let mut r = self.requested.lock();
                loop {
                    let pending = r.generation > self.progress.borrow().written;
                    if pending && !retry {
                        break;
                    }
                    if r.stop {
                        if pending {
                            break;
                        }
                        return;
                    }
                    if retry {
                        self.wake.wait_for(&mut r, RETRY_AFTER_FAILURE);
                        retry = false;
                    } else {
                        self.wake.wait(&mut r);
                    }
                }
            }
            let failed = self.write(false).is_err();
            if failed && self.requested.lock().stop {
                // Stopping: the owner flushes or reports on its own.
                return;
            }
            retry = failed;
        }
    }

    /// Makes every change requested so far durable: a journal frame, or the
    /// snapshot when `compact`, when the table is not journaled, or when the
    /// journal has outgrown its bound.
    fn write(&self, compact: bool) -> Result<(), String> {
        let mut target = self.writing.lock();
        // Taken after `writing`: the snapshot rendered below is newer than
        // every entry taken here.
        let (generation, entries, needs_snapshot, replaced) = {
            let mut r = self.requested.lock();
            let e = std::mem::take(&mut r.entries);
            let flags = (r.needs_snapshot, r.replaced);
            r.needs_snapshot = false;
            r.replaced = false;
            (r.generation, e, flags.0, flags.1)
        };
        if !compact && generation <= self.progress.borrow().written {
            return Ok(());
        }
        let bound = target.snapshot_len.max(JOURNAL_MIN_BOUND);
        let append = !compact && !needs_snapshot && !target.must_compact;
        let result = match &mut target.journal {
            Some(j) if append && j.len() < bound => {
                if entries.is_empty() {
                    Ok(())
                } else {
                    j.append(&entries).map_err(|e| e.to_string())
                }
            }
            _ => self.compact(&mut target, replaced),
        };
        match result {
            Ok(()) => {
                target.must_compact = false;
                self.progress
                    .send_modify(|p| p.written = p.written.max(generation));
                Ok(())
            }
            Err(msg) => {
                target.must_compact = true;
                tracing::error!(error = %msg, "metadata write failed; retrying");
                self.progress.send_modify(|p| {
                    p.failed = p.failed.max(generation);
                    p.error = Some(msg.clone());
                });
                Err(msg)
            }
        }
    }

    /// Writes the snapshot and empties the journal. A replaced table empties
    /// the journal first: its entries must never be replayed onto the new
    /// table (losing them in a crash is harmless, the new table supersedes
    /// them).
    fn compact(&self, target: &mut WriteTarget, replaced: bool) -> Result<(), String> {
        let cannot =
            |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", self.file.path().display());
        if replaced && let Some(j) = &mut target.journal {
            j.clear().map_err(|e| cannot(&e))?;
        }
        let text = (self.snapshot)();
        self.file.save(&text).map_err(|e| cannot(&e))?;
        target.snapshot_len = text.len() as u64;
        if let Some(j) = &mut target.journal {
            j.clear().map_err(|e| cannot(&e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "meta_writer_tests.rs"]
mod tests;
