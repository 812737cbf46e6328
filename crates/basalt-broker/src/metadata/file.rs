//! The broker's JSON metadata files in `{root}/config/` (topics.json,
//! subscriptionGroup.json, consumerOffset.json, delayOffset.json): replaced
//! atomically, with the previous version kept as `<name>.bak` and used when
//! the main file is missing or unreadable; [`MetadataWriter`] writes them off
//! the async workers and coalesces bursts of changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use basalt_store::fs_util;
use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;

/// One metadata file. See the module documentation.
///
/// Invariant: one save at a time per file (clones share the lock). Two
/// concurrent saves would share the temp file name and could rename an older
/// snapshot over a newer one; the lock is held across the save's fsyncs on
/// purpose, and only writers of this one file wait for it.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    saving: Arc<Mutex<()>>,
}

impl ConfigFile {
    pub fn new(root: &Path, name: &str) -> Self {
        ConfigFile {
            path: root.join("config").join(name),
            saving: Arc::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn bak(&self) -> PathBuf {
        let mut n = self.path.file_name().unwrap_or_default().to_os_string();
        n.push(".bak");
        self.path.with_file_name(n)
    }

    /// Parses the file with `parse`, falling back to the `.bak` copy when the
    /// main file is missing, empty or does not parse. `None` when neither works.
    pub fn load<T>(&self, parse: impl Fn(&str) -> Result<T, String>) -> Option<T> {
        for p in [self.path.clone(), self.bak()] {
            match std::fs::read_to_string(&p) {
                Ok(text) if !text.trim().is_empty() => match parse(&text) {
                    Ok(v) => return Some(v),
                    Err(e) => {
                        tracing::error!(file = %p.display(), error = %e, "unreadable metadata file")
                    }
                },
                _ => {}
            }
        }
        None
    }

    /// Writes `content` atomically, keeping the previous content as `.bak`.
    pub fn save(&self, content: &str) -> basalt_store::Result<()> {
        let _one_at_a_time = self.saving.lock();
        self.save_locked(content)
    }

    /// Renders and writes the newest content, if `render` has any, as one
    /// step: a snapshot taken by a later call is never overwritten by an
    /// earlier one.
    pub fn save_latest(&self, render: impl FnOnce() -> Option<String>) -> basalt_store::Result<()> {
        let _one_at_a_time = self.saving.lock();
        match render() {
            Some(content) => self.save_locked(&content),
            None => Ok(()),
        }
    }

    fn save_locked(&self, content: &str) -> basalt_store::Result<()> {
        if let Some(dir) = self.path.parent() {
            fs_util::create_dir_all_durable(dir)?;
        }
        if let Ok(prev) = std::fs::read(&self.path) {
            if prev != content.as_bytes() {
                fs_util::atomic_write(&self.bak(), &prev)?;
            } else {
                return Ok(());
            }
        }
        fs_util::atomic_write(&self.path, content.as_bytes())
    }
}

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

struct WriterShared {
    file: ConfigFile,
    snapshot: Box<dyn Fn() -> String + Send + Sync>,
    /// Changes requested so far, and whether to stop.
    requested: Mutex<(u64, bool)>,
    wake: Condvar,
    progress: watch::Sender<WriteProgress>,
    /// Held while a snapshot is written, by the thread or by `flush_now`.
    writing: Mutex<()>,
}

/// Writes one metadata file from a thread of its own. Owners change their
/// table in memory and call [`MetadataWriter::mark_changed`]; the thread
/// writes the newest snapshot once per burst of changes (so a thousand
/// topics created at once cost one write, not a thousand), and async callers
/// wait with [`MetadataWriter::written`] until a write covers their change,
/// without blocking a tokio worker on the fsync.
///
/// Invariant: `progress.written` only grows, and every generation at or
/// below it was covered by a snapshot taken after that change was made.
pub struct MetadataWriter {
    shared: Arc<WriterShared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for MetadataWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataWriter")
            .field("file", &self.shared.file.path)
            .finish()
    }
}

/// How long the writer waits before it tries a failed write again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

impl MetadataWriter {
    /// Starts the writer thread for `file`; `snapshot` renders the content.
    pub fn start(file: ConfigFile, snapshot: impl Fn() -> String + Send + Sync + 'static) -> Self {
        let (progress, _) = watch::channel(WriteProgress::default());
        let shared = Arc::new(WriterShared {
            file,
            snapshot: Box::new(snapshot),
            requested: Mutex::new((0, false)),
            wake: Condvar::new(),
            progress,
            writing: Mutex::new(()),
        });
        let s = Arc::clone(&shared);
        let name = format!(
            "basalt-meta-{}",
            shared
                .file
                .path
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

    pub fn path(&self) -> &Path {
        self.shared.file.path()
    }

    /// Records that the table changed; returns the change's generation.
    pub fn mark_changed(&self) -> u64 {
        let mut r = self.shared.requested.lock();
        r.0 += 1;
        self.shared.wake.notify_one();
        r.0
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

    /// Writes the newest snapshot now, in the caller's thread (shutdown,
    /// tests). Blocks.
    pub fn flush_now(&self) -> Result<(), String> {
        let generation = self.shared.requested.lock().0;
        self.shared.write(generation)
    }

    /// Writes what is pending and stops the thread. Idempotent.
    pub fn stop(&self) {
        self.shared.requested.lock().1 = true;
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
            let generation = {
                let mut r = self.requested.lock();
                loop {
                    let pending = r.0 > self.progress.borrow().written;
                    if pending && !retry {
                        break;
                    }
                    if r.1 {
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
                r.0
            };
            let failed = self.write(generation).is_err();
            if failed && self.requested.lock().1 {
                // Stopping: the owner flushes or reports on its own.
                return;
            }
            retry = failed;
        }
    }

    /// Renders and writes the content for everything up to `generation`.
    fn write(&self, generation: u64) -> Result<(), String> {
        let _w = self.writing.lock();
        if self.progress.borrow().written >= generation && generation > 0 {
            return Ok(());
        }
        let text = (self.snapshot)();
        match self.file.save(&text) {
            Ok(()) => {
                self.progress
                    .send_modify(|p| p.written = p.written.max(generation));
                Ok(())
            }
            Err(e) => {
                let msg = format!("cannot write {}: {e}", self.file.path.display());
                tracing::error!(error = %msg, "metadata write failed; retrying");
                self.progress.send_modify(|p| {
                    p.failed = p.failed.max(generation);
                    p.error = Some(msg.clone());
                });
                Err(msg)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Saves of one file from several threads at once all succeed (they
    /// used to share the temp file, and a rename found it gone).
    #[test]
    fn concurrent_saves_of_one_file_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let f = ConfigFile::new(dir.path(), "x.json");
        std::thread::scope(|s| {
            for t in 0..4 {
                let f = f.clone();
                s.spawn(move || {
                    for i in 0..100 {
                        f.save(&format!("{{\"t\":{t},\"i\":{i}}}")).unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert!(text.contains("\"i\":99"), "{text}");
    }

    #[test]
    fn falls_back_to_bak() {
        let dir = tempfile::tempdir().unwrap();
        let f = ConfigFile::new(dir.path(), "x.json");
        f.save("one").unwrap();
        f.save("two").unwrap();
        assert_eq!(f.load(|s| Ok::<_, String>(s.to_string())).unwrap(), "two");
        std::fs::write(f.path(), "garbage").unwrap();
        let parsed = f.load(|s| {
            if s == "one" {
                Ok(1)
            } else {
                Err("bad".to_string())
            }
        });
        assert_eq!(parsed, Some(1));
    }

    #[test]
    fn writer_coalesces_and_reports_progress() {
        let dir = tempfile::tempdir().unwrap();
        let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let c = Arc::clone(&counter);
        let w = MetadataWriter::start(ConfigFile::new(dir.path(), "m.json"), move || {
            c.load(std::sync::atomic::Ordering::SeqCst).to_string()
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut last = 0;
        for i in 1..=100 {
            counter.store(i, std::sync::atomic::Ordering::SeqCst);
            last = w.mark_changed();
        }
        rt.block_on(w.written(last)).unwrap();
        let text = std::fs::read_to_string(w.path()).unwrap();
        assert_eq!(text, "100");
        w.stop();
    }

    #[test]
    fn writer_reports_a_failed_write() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file's parent should be: every write fails.
        std::fs::write(dir.path().join("config"), b"not a directory").unwrap();
        let w = MetadataWriter::start(ConfigFile::new(dir.path(), "m.json"), || "x".into());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let g = w.mark_changed();
        let err = rt.block_on(w.written(g)).unwrap_err();
        assert!(err.contains("m.json"), "{err}");
        assert!(w.flush_now().is_err());
        w.stop();
    }

    #[test]
    fn a_save_the_full_disk_refuses_keeps_the_old_content() {
        let dir = tempfile::tempdir().unwrap();
        let f = ConfigFile::new(dir.path(), "x.json");
        f.save("one").unwrap();
        basalt_store::faults::fill_disk_under(dir.path());
        assert!(f.save("two").is_err());
        // Unchanged content needs no write, so it succeeds on a full disk.
        f.save("one").unwrap();
        basalt_store::faults::free_disk_under(dir.path());
        let text = |s: &str| Ok::<_, String>(s.to_string());
        assert_eq!(f.load(text).unwrap(), "one");
        assert!(!dir.path().join("config/x.json.tmp").exists());
        assert!(!dir.path().join("config/x.json.bak.tmp").exists());
    }

    #[test]
    fn loading_the_tables_again_rewrites_no_file() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::config::BrokerConfig::default();
        let inodes = || {
            ["topics.json", "subscriptionGroup.json"].map(|n| {
                std::fs::metadata(dir.path().join("config").join(n))
                    .map(|m| m.ino())
                    .ok()
            })
        };
        let load_both = || {
            let topics = crate::metadata::topics::TopicConfigManager::load(dir.path(), &cfg);
            let groups = crate::metadata::groups::SubscriptionGroupManager::load(
                dir.path(),
                cfg.max_subscription_group_count,
                cfg.max_queue_nums_per_topic,
            );
            topics.persist_and_stop();
            groups.persist_and_stop();
        };
        load_both();
        let first = inodes();
        assert!(first.iter().all(Option::is_some), "{first:?}");
        // A broker starting on a full disk has no block for a rewrite: a
        // second start must find nothing to change (a rewrite is a rename,
        // a new inode).
        load_both();
        assert_eq!(inodes(), first, "a metadata file was replaced at start-up");
    }
}
