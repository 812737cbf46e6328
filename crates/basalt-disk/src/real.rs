//! The real disk: plain files, `fallocate`, `fsync` of files and
//! directories, rename for atomic replacement.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{DiskError, DiskResult};

/// fsyncs a directory so that entries created, renamed or removed in it
/// survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> DiskResult<()> {
    let f = File::open(dir).map_err(|e| DiskError::io(dir, e))?;
    f.sync_all().map_err(|e| DiskError::io(dir, e))
}

/// `syncfs(2)` of the file system holding `dir` (see [`crate::Disk::sync_tree`]).
pub(crate) fn sync_tree(dir: &Path) -> DiskResult<()> {
    crate::faults::check_fsync(dir)?;
    let f = File::open(dir).map_err(|e| DiskError::io(dir, e))?;
    // SAFETY: syncfs on a descriptor we own for the duration of the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(DiskError::io(dir, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Creates `dir` and its parents, fsyncing the parent of each created level.
pub(crate) fn create_dir_all_durable(dir: &Path) -> DiskResult<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dir_all_durable(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(DiskError::io(dir, e)),
    }
    if let Some(parent) = dir.parent()
        && !parent.as_os_str().is_empty()
    {
        sync_dir(parent)?;
    }
    Ok(())
}

/// The directory holding `path` ("." for a bare name).
pub(crate) fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `path` with ".tmp" appended to its name: where atomic replacement
/// writes before renaming.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Write a temp file, fsync it, rename it over `path`, fsync the directory.
/// A failure before the rename removes the temp file.
pub(crate) fn atomic_replace(path: &Path, bytes: &[u8]) -> DiskResult<()> {
    let tmp = temp_path(path);
    let written = (|| {
        crate::faults::check_reserve(&tmp, bytes.len() as u64, || 0)?;
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| DiskError::io(&tmp, e))?;
        f.write_all(bytes)
            .map_err(|e| DiskError::io_or_no_space(&tmp, bytes.len() as u64, e))?;
        crate::faults::check_fsync(&tmp)?;
        f.sync_all().map_err(|e| DiskError::io(&tmp, e))
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path).map_err(|e| DiskError::io(path, e))?;
    sync_dir(parent_of(path))
}

/// Creates `path` empty if missing and makes its name durable.
pub(crate) fn create_marker(path: &Path) -> DiskResult<()> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| DiskError::io(path, e))?;
    sync_dir(parent_of(path))
}

/// Allocates the blocks of `[from, to)` of `file` (`fallocate`), so writing
/// them through a shared mapping can never SIGBUS for lack of space. The
/// caller knows `[0, from)` is allocated already; asking only for the new
/// range keeps a queue that grows page by page from re-walking its whole
/// extent map each time. Where the file system has no `fallocate`, holes are
/// filled with written zeros (the whole range for a `fresh` file).
pub(crate) fn reserve_blocks(
    file: &File,
    path: &Path,
    from: u64,
    to: u64,
    fresh: bool,
) -> DiskResult<()> {
    if to <= from {
        return Ok(());
    }
    crate::faults::check_reserve(path, to, || if fresh { 0 } else { allocated_bytes(file) })?;
    // SAFETY: plain syscall on a descriptor we own.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            0,
            from as libc::off_t,
            (to - from) as libc::off_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
            let holes = if fresh {
                vec![(from, to)]
            } else {
                holes(file, from, to)
            };
            for (a, b) in holes {
                write_zeros(file, a, b).map_err(|e| DiskError::io_or_no_space(path, to, e))?;
            }
            Ok(())
        }
        _ => Err(DiskError::io_or_no_space(path, to, err)),
    }
}

/// Bytes of `file` that have blocks allocated.
pub(crate) fn allocated_bytes(file: &File) -> u64 {
    use std::os::unix::fs::MetadataExt;
    file.metadata().map(|m| m.blocks() * 512).unwrap_or(0)
}

/// The holes of `[from, len)` of `file`; none when the file system cannot
/// tell.
fn holes(file: &File, from: u64, len: u64) -> Vec<(u64, u64)> {
    let fd = file.as_raw_fd();
    let mut out = Vec::new();
    let mut at: u64 = from;
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

/// Byte ranges of `[from, size)` of the file open as `fd` that hold data
/// (`SEEK_DATA`/`SEEK_HOLE`); the whole range when the file system cannot say.
pub(crate) fn seek_data_ranges(fd: libc::c_int, from: usize, size: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = from as libc::off_t;
    while (at as usize) < size {
        // SAFETY: plain lseek on a descriptor the caller owns.
        let data = unsafe { libc::lseek(fd, at, libc::SEEK_DATA) };
        if data < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
                break; // no more data
            }
            return vec![(from, size)];
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        let hole = if hole < 0 { size as libc::off_t } else { hole };
        let (s, e) = ((data as usize).max(from), (hole as usize).min(size));
        if s >= size {
            break;
        }
        if e > s {
            out.push((s, e));
        }
        at = hole;
    }
    out
}
