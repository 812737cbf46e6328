//! Fault injection for tests: make fsyncs of files under a directory fail, to
//! prove that a failed fsync poisons the store. Costs one atomic load per
//! fsync when unused.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::error::{Result, StoreError};

static ANY: AtomicBool = AtomicBool::new(false);
static FAILING_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

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
