//! The process's allocator (mimalloc) and how it gives memory back.
//!
//! Left alone, mimalloc keeps what a busy moment allocated: it asks for
//! transparent huge pages on its arenas, so a sparse heap (a few KiB touched
//! here and there by thousands of connections) is backed by whole 2 MiB
//! pages; pages freed by another thread than their owner return to the
//! arena only when the owner next allocates; and emptied arena memory is
//! purged (returned to the OS) only when the allocator is next called. A
//! broker that went quiet kept its peak for good. So:
//!
//! * [`disable_transparent_huge_pages`] turns THP off for the process (an
//!   idle connection cost about 200 KB with it, 25 KB without);
//! * [`on_worker_park`], run by every tokio worker as it goes idle, collects
//!   that worker's heap, handing its empty pages back to the arena;
//! * a trimmer thread then purges the arenas, once the workers have been
//!   quiet for [`PURGE_AFTER`], so memory goes back to the OS within
//!   about a second of the last activity, and at most once per that period
//!   under steady load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// A thread-caching allocator: the broker and the bench allocate per message
/// on several threads, where glibc's malloc contends.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

unsafe extern "C" {
    /// mimalloc: collects the calling thread's heap (its empty pages go back
    /// to the arena); with `force`, also purges every arena at once.
    fn mi_collect(force: bool);
}

/// How long after a worker went idle the arenas are purged.
pub const PURGE_AFTER: Duration = Duration::from_millis(500);

/// For `tokio::runtime::Builder::on_thread_park`: the worker has nothing to
/// do, so it hands its empty pages back and asks for a purge soon.
pub fn on_worker_park() {
    // SAFETY: mi_collect only walks the calling thread's own heap (and the
    // arenas, under mimalloc's own locking).
    unsafe { mi_collect(false) };
    trimmer().request_purge();
}

/// The thread that purges the arenas: woken by the first idle worker after
/// a purge, it waits [`PURGE_AFTER`] and purges once.
struct Trimmer {
    requested: &'static AtomicBool,
    thread: Option<Thread>,
}

impl Trimmer {
    fn request_purge(&self) {
        if self.requested.load(Ordering::Relaxed) || self.requested.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(t) = &self.thread {
            t.unpark();
        }
    }
}

fn trimmer() -> &'static Trimmer {
    static TRIMMER: OnceLock<Trimmer> = OnceLock::new();
    TRIMMER.get_or_init(|| {
        static REQUESTED: AtomicBool = AtomicBool::new(false);
        let spawned = std::thread::Builder::new()
            .name("basalt-mem-trim".into())
            .spawn(|| purge_loop(&REQUESTED));
        let thread = match spawned {
            Ok(handle) => Some(handle.thread().clone()),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the memory trimmer; freed memory is kept");
                None
            }
        };
        Trimmer {
            requested: &REQUESTED,
            thread,
        }
    })
}

fn purge_loop(requested: &AtomicBool) {
    loop {
        while !requested.load(Ordering::Acquire) {
            std::thread::park();
        }
        let deadline = Instant::now() + PURGE_AFTER;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            std::thread::park_timeout(left);
        }
        requested.store(false, Ordering::Release);
        // SAFETY: as above; `force` purges the arenas program-wide.
        unsafe { mi_collect(true) };
    }
}
