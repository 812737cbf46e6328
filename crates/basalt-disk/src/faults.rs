//! Faults of the real disk, for process-level tests that run real files:
//! fsyncs under a directory fail with EIO, or block reservations under it
//! fail with ENOSPC. One atomic load per sync or reservation when unused.
//!
//! These are process-wide by nature (a test of a whole broker cannot hand
//! it a disk value). Tests that can choose their disk use the simulated
//! one ([`crate::sim::SimDisk`]), whose faults belong to the disk value.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::error::{DiskError, DiskResult};

static ANY: AtomicBool = AtomicBool::new(false);
static FAILING_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static ANY_FULL: AtomicBool = AtomicBool::new(false);
static FULL_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// From now on, every fsync of a file under `dir` fails with EIO.
pub fn fail_fsyncs_under(dir: &Path) {
    FAILING_DIRS.lock().push(dir.to_path_buf());
    ANY.store(true, Ordering::SeqCst);
}

/// Stops failing fsyncs under `dir`.
pub fn clear(dir: &Path) {
    let mut dirs = FAILING_DIRS.lock();
    dirs.retain(|d| d != dir);
    ANY.store(!dirs.is_empty(), Ordering::SeqCst);
}

/// From now on, reserving blocks for a file under `dir` fails with ENOSPC.
pub fn fill_disk_under(dir: &Path) {
    FULL_DIRS.lock().push(dir.to_path_buf());
    ANY_FULL.store(true, Ordering::SeqCst);
}

/// Space is back under `dir`.
pub fn free_disk_under(dir: &Path) {
    let mut dirs = FULL_DIRS.lock();
    dirs.retain(|d| d != dir);
    ANY_FULL.store(!dirs.is_empty(), Ordering::SeqCst);
}

/// Called before each real fsync of `path`.
pub fn check_fsync(path: &Path) -> DiskResult<()> {
    if !ANY.load(Ordering::Relaxed) {
        return Ok(());
    }
    if FAILING_DIRS.lock().iter().any(|d| path.starts_with(d)) {
        return Err(DiskError::eio(path));
    }
    Ok(())
}

/// Called before each real reservation of `bytes` for `path`; `allocated`
/// says how many bytes already have blocks (reserving those succeeds, as on
/// a real full disk).
pub fn check_reserve(path: &Path, bytes: u64, allocated: impl FnOnce() -> u64) -> DiskResult<()> {
    if !ANY_FULL.load(Ordering::Relaxed) {
        return Ok(());
    }
    if FULL_DIRS.lock().iter().any(|d| path.starts_with(d)) && allocated() < bytes {
        return Err(DiskError::no_space(path, bytes));
    }
    Ok(())
}
