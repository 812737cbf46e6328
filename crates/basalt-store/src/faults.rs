//! Fault injection for tests: make fsyncs of files under a directory fail
//! (to prove that a failed fsync poisons the store), or make block
//! reservations of new files fail as on a full disk (to prove that a full
//! disk is a clean refusal). Costs one atomic load per fsync or reservation
//! when unused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::error::{Result, StoreError};

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

/// From now on, reserving blocks for a file under `dir` fails with ENOSPC,
/// as on a full disk.
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

/// Called before each fsync.
pub(crate) fn check_fsync(path: &Path) -> Result<()> {
    if !ANY.load(Ordering::Relaxed) {
        return Ok(());
    }
    if FAILING_DIRS.lock().iter().any(|d| path.starts_with(d)) {
        return Err(StoreError::io(
            path,
            std::io::Error::from_raw_os_error(libc::EIO),
        ));
    }
    Ok(())
}

/// Called before each block reservation of `bytes` for `path`. `allocated`
/// tells how many bytes of the file already have blocks (as on a real full
/// disk, reserving what is allocated already succeeds).
pub(crate) fn check_reserve(
    path: &Path,
    bytes: u64,
    allocated: impl FnOnce() -> u64,
) -> Result<()> {
    if !ANY_FULL.load(Ordering::Relaxed) {
        return Ok(());
    }
    if FULL_DIRS.lock().iter().any(|d| path.starts_with(d)) && allocated() < bytes {
        return Err(StoreError::NoSpace {
            path: path.to_path_buf(),
            bytes,
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        });
    }
    Ok(())
}
