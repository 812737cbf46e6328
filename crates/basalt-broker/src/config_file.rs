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
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
}

impl ConfigFile {
    pub fn new(root: &Path, name: &str) -> Self {
        ConfigFile {
            path: root.join("config").join(name),
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
}
