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
//! * the heap asks for no transparent huge pages (mimalloc's `no_thp`
//!   feature, in the workspace Cargo.toml): with them an idle connection
//!   cost about 200 KB, without them 25 KB. THP is not turned off for the
//!   whole process: that would also take large folios away from the mapped
//!   CommitLog;
//! * [`on_worker_park`], run by every tokio worker as it goes idle, collects
//!   that worker's heap (at most every [`COLLECT_EVERY`]), handing its empty
//!   pages back to the arena;
//! * a trimmer thread purges the arenas [`PURGE_AFTER`] after a worker
//!   collected, so memory goes back to the OS within about a second of the
//!   last activity, and at most once per that period under steady load.

use std::cell::Cell;
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

/// Least time between two heap collections of one worker. Collecting on
/// every park would hand pages back that the next request takes again;
/// collecting at most this often keeps that churn small, and a worker that
/// parks within this time of its last collection collects on a later park
/// (the broker's own timers wake its workers every second or so).
pub const COLLECT_EVERY: Duration = Duration::from_millis(100);

/// For `tokio::runtime::Builder::on_thread_park`: the worker has nothing to
/// do, so it hands its empty pages back (at most every [`COLLECT_EVERY`])
/// and asks for a purge soon.
pub fn on_worker_park() {
    thread_local! {
        static LAST_COLLECT: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    let due = LAST_COLLECT
        .get()
        .is_none_or(|t| now.duration_since(t) >= COLLECT_EVERY);
    if !due {
        return;
    }
    LAST_COLLECT.set(Some(now));
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
