//! Small filesystem helpers with the durability rules the store relies on.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// fsyncs a directory so that entries created, renamed or removed in it survive
/// a crash.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(|e| StoreError::io(dir, e))?;
    f.sync_all().map_err(|e| StoreError::io(dir, e))
}

/// Creates `dir` and its parents, fsyncing the parent of each created level.
pub fn create_dir_all_durable(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dir_all_durable(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(StoreError::io(dir, e)),
    }
    if let Some(parent) = dir.parent()
        && !parent.as_os_str().is_empty()
    {
        fsync_dir(parent)?;
    }
    Ok(())
}

/// Replaces `path` with `bytes` atomically: write a temp file, fsync it,
/// rename over `path`, fsync the directory. A crash leaves either the old or
/// the new content, never a mix.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = temp_path(path);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| StoreError::io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| StoreError::io(&tmp, e))?;
        f.sync_all().map_err(|e| StoreError::io(&tmp, e))?;
    }
    fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))?;
    fsync_dir(dir)
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// An exclusive advisory lock on a file, held while the value lives.
#[derive(Debug)]
pub struct LockFile {
    _file: File,
    path: PathBuf,
}

impl LockFile {
    /// Takes the lock or fails at once if another process holds it.
    pub fn acquire(path: &Path) -> Result<LockFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(StoreError::Locked {
                    path: path.to_path_buf(),
                });
            }
            return Err(StoreError::io(path, err));
        }
        Ok(LockFile {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Share of the filesystem holding `path` that is in use, in percent.
pub fn disk_used_percent(path: &Path) -> Option<u32> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct we pass; the path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 || st.f_blocks == 0 {
        return None;
    }
    // As df(1) counts: blocks reserved for root are neither used nor
    // available to us, so they are left out of both sides.
    let used = st.f_blocks.saturating_sub(st.f_bfree) as f64;
    let avail = st.f_bavail as f64;
    if used + avail <= 0.0 {
        return None;
    }
    Some(((used / (used + avail)) * 100.0).round() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("meta.json");
        atomic_write(&p, b"one").unwrap();
        atomic_write(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(!dir.path().join("meta.json.tmp").exists());
    }

    #[test]
    fn lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        let held = LockFile::acquire(&p).unwrap();
        assert!(matches!(
            LockFile::acquire(&p),
            Err(StoreError::Locked { .. })
        ));
        drop(held);
        LockFile::acquire(&p).unwrap();
    }

    #[test]
    fn disk_usage_is_a_percentage() {
        let u = disk_used_percent(Path::new("/")).unwrap();
        assert!(u <= 100);
    }
}
