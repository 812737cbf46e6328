//! Small filesystem helpers with the durability rules the store relies on.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use basalt_disk::Disk;

use crate::error::{Result, StoreError};

/// fsyncs a directory on the real disk (see [`basalt_disk::Disk::sync_dir`]).
pub fn fsync_dir(dir: &Path) -> Result<()> {
    Ok(Disk::Real.sync_dir(dir)?)
}

/// Creates `dir` and its parents on the real disk, fsyncing the parent of
/// each created level.
pub fn create_dir_all_durable(dir: &Path) -> Result<()> {
    Ok(Disk::Real.create_dir_all_durable(dir)?)
}

/// Replaces `path` with `bytes` atomically on the real disk (see
/// [`basalt_disk::Disk::atomic_replace`]).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(Disk::Real.atomic_replace(path, bytes)?)
}

/// Creates `path` as an empty file if it does not exist and makes its name
/// durable (the abort marker: only its existence matters).
pub fn create_marker(path: &Path) -> Result<()> {
    Ok(Disk::Real.create_marker(path)?)
}

/// Whether an I/O error means the disk or the quota is full.
pub fn is_no_space(e: &std::io::Error) -> bool {
    basalt_disk::is_no_space(e)
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
        // RocketMQ locks the same file with a POSIX record lock on its first
        // byte (FileChannel.tryLock), which flock does not see: take that
        // one too, so neither broker opens a store the other is running on.
        lock_first_byte(&file).map_err(|err| match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EACCES) => StoreError::Locked {
                path: path.to_path_buf(),
            },
            _ => StoreError::io(path, err),
        })?;
        Ok(LockFile {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A non-blocking POSIX write lock on byte 0 of `file` (held until the file
/// is closed).
fn lock_first_byte(file: &File) -> std::io::Result<()> {
    // SAFETY: an all-zero `flock` struct is valid; the fields are set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 1;
    // SAFETY: fcntl on a descriptor we own with a pointer to a live struct.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &fl) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Share of the filesystem holding `path` that is in use, in percent.
pub fn disk_used_percent(path: &Path) -> Option<u32> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct we pass; the path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a struct we own.
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
    use std::fs;

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
    fn failed_atomic_write_keeps_old_content_and_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("meta.json");
        atomic_write(&p, b"one").unwrap();
        // A directory where the temp file should go makes the write fail
        // before the rename, as a full disk would.
        fs::create_dir(dir.path().join("meta.json.tmp")).unwrap();
        assert!(atomic_write(&p, b"two").is_err());
        assert_eq!(fs::read(&p).unwrap(), b"one");
    }

    #[test]
    fn marker_is_empty_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abort");
        create_marker(&p).unwrap();
        create_marker(&p).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().len(), 0);
    }

    #[test]
    fn reserve_allocates_blocks_and_keeps_data() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("seg");
        {
            use std::os::unix::fs::FileExt;
            let f = File::create(&p).unwrap();
            f.set_len(1 << 20).unwrap();
            f.write_all_at(b"keep", 4096).unwrap();
        }
        let opts = basalt_disk::SegmentOptions::default();
        let (_seg, fresh) = Disk::Real
            .create_segment(&p, 1 << 20, 1 << 20, opts)
            .unwrap();
        assert!(!fresh);
        // st_blocks counts 512-byte units.
        assert!(fs::metadata(&p).unwrap().blocks() * 512 >= 1 << 20);
        assert_eq!(&fs::read(&p).unwrap()[4096..4100], b"keep");
    }

    #[test]
    fn no_space_is_recognised() {
        let e = StoreError::io("x", std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(e.is_no_space());
        let e = StoreError::io("x", std::io::Error::from_raw_os_error(libc::EIO));
        assert!(!e.is_no_space());
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
