//! Basalt's storage I/O layer, below the message store and the ledger store.
//!
//! [`Disk`] is the whole surface: segments (create, open, extend, write at
//! an offset, read, sync a range), directories (create durably, list, sync),
//! small files (read, atomic replace, marker), and deletion. It has two
//! implementations chosen by value, not by trait object:
//!
//! * [`Disk::Real`] — files, `mmap`, `fallocate`, `fdatasync`/`msync` and
//!   directory fsyncs, as the stores always did;
//! * [`Disk::Sim`] — the [`sim::SimDisk`]: a seeded in-memory disk that keeps
//!   the durable image apart from unsynced writes and loses, keeps or tears
//!   unsynced sectors at a power loss, and injects sync failures, ENOSPC and
//!   bit flips.
//!
//! Writes to segments are a `memcpy` into [`Segment::as_ptr`] in both cases;
//! the enum is matched only on syncs and file-level operations.

pub mod error;
pub mod faults;
pub mod read_only;
mod real;
pub mod segment;
pub mod sim;

use std::path::{Path, PathBuf};

pub use error::{DiskError, DiskResult, is_no_space};
pub use read_only::ReadOnlyMap;
pub use real::temp_path;
pub use segment::{PAGE_SIZE, Segment, SegmentOptions};
pub use sim::{FaultDraws, SimDisk, SimFaults, SimHandle, SimStats};

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub path: PathBuf,
    pub is_dir: bool,
}

/// Which disk the files live on. Cheap to clone; the default is the real one.
#[derive(Debug, Clone, Default)]
pub enum Disk {
    #[default]
    Real,
    Sim(SimHandle),
}

impl Disk {
    /// Whether this is the real disk.
    pub fn is_real(&self) -> bool {
        matches!(self, Disk::Real)
    }

    /// Creates the segment file `path` of `size` bytes (or opens it and sets
    /// its length to `size` if it exists), reserves blocks for its first
    /// `reserve` bytes and maps it. Returns whether the file was created.
    /// A file it created is removed again when reserving fails.
    pub fn create_segment(
        &self,
        path: &Path,
        size: usize,
        reserve: usize,
        opts: SegmentOptions,
    ) -> DiskResult<(Segment, bool)> {
        match self {
            Disk::Real => create_real_segment(path, size, reserve, opts),
            Disk::Sim(h) => h.create_segment(path, size, reserve),
        }
    }

    /// Maps the existing segment file `path` at its current length.
    pub fn open_segment(&self, path: &Path, opts: SegmentOptions) -> DiskResult<Segment> {
        match self {
            Disk::Real => {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .map_err(|e| DiskError::io(path, e))?;
                Segment::mapped(path.to_path_buf(), file, opts)
            }
            Disk::Sim(h) => h.open_segment(path),
        }
    }

    /// Sets the length of `path` to `len` (zeros past the old end) and makes
    /// it durable. For a short last segment found at start-up.
    pub fn extend(&self, path: &Path, len: u64) -> DiskResult<()> {
        match self {
            Disk::Real => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| DiskError::io(path, e))?;
                f.set_len(len).map_err(|e| DiskError::io(path, e))?;
                f.sync_all().map_err(|e| DiskError::io(path, e))
            }
            Disk::Sim(h) => h.extend(path, len as usize),
        }
    }

    /// The length of file `path`, `None` when there is no such file.
    pub fn file_len(&self, path: &Path) -> DiskResult<Option<u64>> {
        match self {
            Disk::Real => match std::fs::metadata(path) {
                Ok(m) if m.is_file() => Ok(Some(m.len())),
                Ok(_) => Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(DiskError::io(path, e)),
            },
            Disk::Sim(h) => h.file_len(path),
        }
    }

    /// Whether `path` exists (file or directory).
    pub fn exists(&self, path: &Path) -> bool {
        match self {
            Disk::Real => path.exists(),
            Disk::Sim(h) => matches!(h.exists(path), Ok(Some(_))),
        }
    }

    /// The whole content of a small file, `None` when it does not exist.
    pub fn read_file(&self, path: &Path) -> DiskResult<Option<Vec<u8>>> {
        match self {
            Disk::Real => match std::fs::read(path) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(DiskError::io(path, e)),
            },
            Disk::Sim(h) => h.read_file(path),
        }
    }

    /// Replaces `path` with `bytes` atomically: temp file, fsync, rename,
    /// fsync of the directory. After a crash the file has the old or the new
    /// content, never a mix; a failure before the rename leaves the old one.
    pub fn atomic_replace(&self, path: &Path, bytes: &[u8]) -> DiskResult<()> {
        match self {
            Disk::Real => real::atomic_replace(path, bytes),
            Disk::Sim(h) => h.atomic_replace(path, bytes),
        }
    }

    /// Creates `path` empty if missing and makes its name durable.
    pub fn create_marker(&self, path: &Path) -> DiskResult<()> {
        match self {
            Disk::Real => real::create_marker(path),
            Disk::Sim(h) => h.create_marker(path),
        }
    }

    /// fsyncs directory `dir`: entries created, renamed or removed in it
    /// survive a crash from then on.
    pub fn sync_dir(&self, dir: &Path) -> DiskResult<()> {
        match self {
            Disk::Real => real::sync_dir(dir),
            Disk::Sim(h) => h.sync_dir(dir),
        }
    }

    /// Makes every file and name under `dir` durable at once: on the real
    /// disk one `syncfs(2)` of the file system holding `dir` (which writes
    /// back the whole file system: at least everything under `dir`, names
    /// included, with one journal commit and one device flush instead of
    /// one per file); on the simulated disk every unsynced byte and name
    /// under `dir`. Linux reports write-back errors to `syncfs` from 5.8
    /// on; an older kernel may return success after a failed write-back.
    /// Writes made while it runs may or may not be covered.
    pub fn sync_tree(&self, dir: &Path) -> DiskResult<()> {
        match self {
            Disk::Real => real::sync_tree(dir),
            Disk::Sim(h) => h.sync_tree(dir),
        }
    }

    /// Creates `dir` and its parents, syncing the parent of each level made.
    pub fn create_dir_all_durable(&self, dir: &Path) -> DiskResult<()> {
        match self {
            Disk::Real => real::create_dir_all_durable(dir),
            Disk::Sim(h) => h.create_dir_all(dir, true),
        }
    }

    /// Creates `dir` and its parents without syncing anything: the names
    /// are durable only after the owner syncs the parents.
    pub fn create_dir_all(&self, dir: &Path) -> DiskResult<()> {
        match self {
            Disk::Real => std::fs::create_dir_all(dir).map_err(|e| DiskError::io(dir, e)),
            Disk::Sim(h) => h.create_dir_all(dir, false),
        }
    }

    /// A read-only view of the whole file `path` (offline tools).
    pub fn map_read_only(&self, path: &Path) -> DiskResult<ReadOnlyMap> {
        match self {
            Disk::Real => read_only::map_real(path),
            Disk::Sim(h) => match h.read_file(path)? {
                Some(bytes) => Ok(ReadOnlyMap::Copied(bytes)),
                None => Err(DiskError::not_found(path)),
            },
        }
    }

    /// The entries of `dir`, in no particular order.
    pub fn list_dir(&self, dir: &Path) -> DiskResult<Vec<DirEntry>> {
        match self {
            Disk::Real => {
                let mut out = Vec::new();
                for e in std::fs::read_dir(dir).map_err(|e| DiskError::io(dir, e))? {
                    let e = e.map_err(|e| DiskError::io(dir, e))?;
                    let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                    out.push(DirEntry {
                        name: e.file_name().to_string_lossy().into_owned(),
                        path: e.path(),
                        is_dir,
                    });
                }
                Ok(out)
            }
            Disk::Sim(h) => h.list_dir(dir),
        }
    }

    /// Unlinks file `path`. `Ok(false)` when it did not exist. Durable after
    /// the next [`Disk::sync_dir`] of its directory.
    pub fn remove_file(&self, path: &Path) -> DiskResult<bool> {
        match self {
            Disk::Real => match std::fs::remove_file(path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(DiskError::io(path, e)),
            },
            Disk::Sim(h) => h.remove_file(path),
        }
    }

    /// Removes directory `dir` (empty unless `recursive`). `Ok(false)` when
    /// it did not exist.
    pub fn remove_dir(&self, dir: &Path, recursive: bool) -> DiskResult<bool> {
        match self {
            Disk::Real => {
                let r = if recursive {
                    std::fs::remove_dir_all(dir)
                } else {
                    std::fs::remove_dir(dir)
                };
                match r {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                    Err(e) => Err(DiskError::io(dir, e)),
                }
            }
            Disk::Sim(h) => h.remove_dir(dir, recursive),
        }
    }

    /// The store's clock, ms since the Unix epoch: the wall clock on the
    /// real disk, the simulated disk's own clock on the simulated one (so
    /// that store timestamps, and the file names and recovery starts made
    /// from them, replay with a simulator seed).
    pub fn now_millis(&self) -> i64 {
        match self {
            Disk::Real => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
            Disk::Sim(h) => h.disk().now_millis(),
        }
    }

    /// Last modification time of `path` (the simulated disk has none).
    pub fn modified(&self, path: &Path) -> Option<std::time::SystemTime> {
        match self {
            Disk::Real => std::fs::metadata(path).ok()?.modified().ok(),
            Disk::Sim(_) => None,
        }
    }
}

fn create_real_segment(
    path: &Path,
    size: usize,
    reserve: usize,
    opts: SegmentOptions,
) -> DiskResult<(Segment, bool)> {
    use std::fs::OpenOptions;
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    let (file, fresh) = match options.clone().create_new(true).open(path) {
        Ok(f) => (f, true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (
            options.open(path).map_err(|e| DiskError::io(path, e))?,
            false,
        ),
        Err(e) => return Err(DiskError::io(path, e)),
    };
    let sized = (|| {
        let len = file.metadata().map_err(|e| DiskError::io(path, e))?.len();
        if len != size as u64 {
            file.set_len(size as u64)
                .map_err(|e| DiskError::io(path, e))?;
        }
        real::reserve_blocks(&file, path, 0, reserve as u64, fresh)
    })();
    if let Err(e) = sized {
        if fresh {
            let _ = std::fs::remove_file(path);
        }
        return Err(e);
    }
    Ok((Segment::mapped(path.to_path_buf(), file, opts)?, fresh))
}

#[cfg(test)]
mod tests;
