//! A full disk for tests: creating files (allocating their blocks) and
//! rewriting metadata under the given directories fails with ENOSPC. Costs one
//! atomic load per file creation or metadata write when unused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

static ANY: AtomicBool = AtomicBool::new(false);
static FULL: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// From now on the disk under `dir` is full.
pub fn fill_disk_under(dir: &Path) {
    FULL.lock().push(dir.to_path_buf());
    ANY.store(true, Ordering::SeqCst);
}

/// Space is back under `dir`.
pub fn free_disk_under(dir: &Path) {
    let mut dirs = FULL.lock();
    dirs.retain(|d| d != dir);
    ANY.store(!dirs.is_empty(), Ordering::SeqCst);
}

pub(crate) fn disk_full(path: &Path) -> bool {
    ANY.load(Ordering::Relaxed) && FULL.lock().iter().any(|d| path.starts_with(d))
}
