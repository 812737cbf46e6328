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
/// the new content, never a mix. A failure before the rename (a full disk)
/// leaves the old content and removes the temp file, so it holds no blocks.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = temp_path(path);
    let written = (|| {
        crate::faults::check_reserve(&tmp, bytes.len() as u64, || 0)?;
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| StoreError::io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| StoreError::io(&tmp, e))?;
        f.sync_all().map_err(|e| StoreError::io(&tmp, e))
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))?;
    fsync_dir(dir)
}

/// Creates `path` as an empty file if it does not exist and makes its name
/// durable. It takes an inode but no data block, so it works on a full disk
/// (the abort marker: only its existence matters).
pub fn create_marker(path: &Path) -> Result<()> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fsync_dir(dir)
}

/// Whether an I/O error means the disk or the quota is full.
pub fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Allocates the blocks of `file`'s first `len` bytes on disk
/// (`fallocate`), so that writing them through a shared mapping can never
/// fault with SIGBUS for lack of space: when the disk is full, this call
/// fails instead, with [`StoreError::NoSpace`]. Blocks already allocated
/// are kept as they are (existing data is never touched).
///
/// Where the file system has no `fallocate`, the holes are filled with
/// written zeros; a `fresh` file (created empty by the caller) is zeroed
/// whole, since a file system without `fallocate` may not report holes
/// either.
pub fn reserve_blocks(file: &File, path: &Path, len: u64, fresh: bool) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    crate::faults::check_reserve(path, len, || {
        use std::os::unix::fs::MetadataExt;
        if fresh {
            return 0;
        }
        file.metadata().map(|m| m.blocks() * 512).unwrap_or(0)
    })?;
    // SAFETY: plain syscall on a descriptor we own.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
            let holes = if fresh {
                vec![(0, len)]
            } else {
                holes(file, len)
            };
            for (from, to) in holes {
                write_zeros(file, from, to).map_err(|e| no_space_or_io(path, len, e))?;
            }
            Ok(())
        }
        _ => Err(no_space_or_io(path, len, err)),
    }
}

fn no_space_or_io(path: &Path, bytes: u64, e: std::io::Error) -> StoreError {
    if is_no_space(&e) {
        StoreError::NoSpace {
            path: path.to_path_buf(),
            bytes,
            source: e,
        }
    } else {
        StoreError::io(path, e)
    }
}

/// The holes of `[0, len)` of `file` (`SEEK_HOLE`/`SEEK_DATA`); none when
/// the file system cannot tell.
fn holes(file: &File, len: u64) -> Vec<(u64, u64)> {
    let fd = file.as_raw_fd();
    let mut out = Vec::new();
    let mut at: u64 = 0;
    while at < len {
        // SAFETY: plain lseek on a descriptor we own.
        let hole = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_HOLE) };
        if hole < 0 || hole as u64 >= len {
            break;
        }
        // SAFETY: as above.
        let data = unsafe { libc::lseek(fd, hole, libc::SEEK_DATA) };
        let end = if data < 0 {
            len
        } else {
            (data as u64).min(len)
        };
        out.push((hole as u64, end));
        at = end;
    }
    out
}

fn write_zeros(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = ((to - at) as usize).min(zeros.len());
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
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
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&p)
            .unwrap();
        f.set_len(1 << 20).unwrap();
        {
            use std::os::unix::fs::FileExt;
            f.write_all_at(b"keep", 4096).unwrap();
        }
        reserve_blocks(&f, &p, 1 << 20, false).unwrap();
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
