//! The ledger's memory-mapped segments ([`LedgerSegment`]) and lists of them
//! (DLedger's `MmapFile` / `MmapFileList`).
//!
//! A [`LedgerSegmentList`] is a directory of equally sized files named by the global
//! byte offset of their first byte (20 digits), contiguous: file `k + 1` starts
//! where file `k` ends.
//!
//! # Concurrency
//!
//! One writer (the ledger runtime) writes through raw pointers; readers on other
//! threads read through shared slices. This is sound because the ranges never
//! overlap in time: readers only read what the writer published as immutable
//! (committed entries, which are never rewritten or zeroed), and the writer only
//! writes past the published end or zeroes ranges that were never published. A file
//! that is deleted stays mapped until the last reader drops its `Arc`.
//!
//! # Disk space
//!
//! Nothing is written through a mapping whose blocks are not allocated on disk:
//! on a full disk the kernel would have no block for the page and the write would
//! kill the process with SIGBUS. New files get their blocks when created
//! (`fallocate`; a file that cannot get them is removed again and the creation
//! fails with an error that [`LedgerStoreError::is_no_space`] recognises); files found
//! on disk, and ranges punched by a cut, are reserved again by
//! [`LedgerSegment::ensure_reserved`] before the writer writes there.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::error::{LedgerStoreError, io_err};

/// One mapped data or index file of the ledger (a segment of the log). Owns the
/// file and its mapping; bytes below what the writer has published are never
/// rewritten. See the module documentation for the concurrency contract.
pub struct LedgerSegment {
    path: PathBuf,
    start: i64,
    size: i64,
    file: File,
    map: MmapRaw,
    /// Every block of the file is allocated on disk (module docs).
    reserved: AtomicBool,
}

// SAFETY: the raw mapping is owned by this value and lives as long as it; it
// is shared between the writer and readers under the contract in the module
// documentation (the single writer writes only above what it has published;
// readers read only below it).
unsafe impl Send for LedgerSegment {}
// SAFETY: as for Send above.
unsafe impl Sync for LedgerSegment {}

impl std::fmt::Debug for LedgerSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerSegment")
            .field("path", &self.path)
            .field("start", &self.start)
            .finish()
    }
}

/// `{dir}/{start:020}`.
pub fn file_name(dir: &Path, start: i64) -> PathBuf {
    dir.join(format!("{start:020}"))
}

impl LedgerSegment {
    /// Opens (creating or extending to `size` if needed) and maps a file. A file it
    /// creates gets its blocks allocated first; on a full disk it is removed again
    /// and the error says so ([`LedgerStoreError::is_no_space`]).
    pub fn open(dir: &Path, start: i64, size: i64) -> Result<LedgerSegment, LedgerStoreError> {
        let path = file_name(dir, start);
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        let (file, fresh) = match options.clone().create_new(true).open(&path) {
            Ok(f) => (f, true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (
                options.open(&path).map_err(|e| io_err(&path, "open", e))?,
                false,
            ),
            Err(e) => return Err(io_err(&path, "create", e)),
        };
        let sized = (|| {
            let len = file.metadata().map_err(|e| io_err(&path, "stat", e))?.len();
            if len > size as u64 {
                return Err(LedgerStoreError::Corrupt {
                    path: path.clone(),
                    offset: size as u64,
                    reason: format!("file is {len} bytes, larger than the configured {size}"),
                });
            }
            if len != size as u64 {
                // A file created but not yet extended when the process died, or a new file.
                file.set_len(size as u64)
                    .map_err(|e| io_err(&path, "set_len", e))?;
            }
            if fresh {
                reserve(&file, &path, 0, size)?;
            }
            Ok(())
        })();
        if let Err(e) = sized {
            if fresh {
                let _ = fs::remove_file(&path);
            }
            return Err(e);
        }
        let map = MmapOptions::new()
            .len(size as usize)
            .map_raw(&file)
            .map_err(|e| io_err(&path, "mmap", e))?;
        Ok(LedgerSegment {
            path,
            start,
            size,
            file,
            map,
            reserved: AtomicBool::new(fresh),
        })
    }

    /// Whether every block of the file is known to be allocated.
    pub fn is_reserved(&self) -> bool {
        self.reserved.load(Ordering::Acquire)
    }

    /// Allocates the file's blocks if that is not known to be done (a file found on
    /// disk, or one a cut punched holes into). Writer only, before it writes.
    pub fn ensure_reserved(&self) -> Result<(), LedgerStoreError> {
        if self.is_reserved() {
            return Ok(());
        }
        reserve(&self.file, &self.path, 0, self.size)?;
        self.reserved.store(true, Ordering::Release);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Global offset of the first byte.
    pub fn start(&self) -> i64 {
        self.start
    }

    /// Global offset just past the last byte.
    pub fn end(&self) -> i64 {
        self.start + self.size
    }

    pub fn size(&self) -> i64 {
        self.size
    }

    /// Bytes `[off, off + len)` of the file.
    ///
    /// # Safety
    /// No one may write the range while the returned slice lives (module docs).
    pub unsafe fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(
            off + len <= self.size as usize,
            "slice past the end of {:?}",
            self.path
        );
        // SAFETY: in bounds (checked above) and, by the caller's contract, not
        // written concurrently.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off), len) }
    }

    /// Copies `bytes` to `off`. Only the single writer calls this, on ranges no
    /// reader holds (module docs).
    pub fn write(&self, off: usize, bytes: &[u8]) {
        debug_assert!(
            self.is_reserved(),
            "write into {:?} before its blocks were reserved",
            self.path
        );
        assert!(
            off + bytes.len() <= self.size as usize,
            "write past the end of {:?}",
            self.path
        );
        // SAFETY: in bounds; the writer owns the range exclusively (module docs).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(off),
                bytes.len(),
            );
        }
    }

    /// Zeroes `[off, off + len)` (writer only, unpublished range).
    pub fn zero(&self, off: usize, len: usize) {
        assert!(
            off + len <= self.size as usize,
            "zero past the end of {:?}",
            self.path
        );
        // SAFETY: as for `write`.
        unsafe { std::ptr::write_bytes(self.map.as_mut_ptr().add(off), 0, len) }
    }

    /// Makes `[off, end of file)` read as zeros without writing every page: the
    /// range is deallocated (punched) where the file system allows it, zeroed
    /// otherwise. Writer only, unpublished range. Durable after [`Self::sync_all`].
    pub fn clear_from(&self, off: usize) -> Result<(), LedgerStoreError> {
        let len = self.size as usize - off.min(self.size as usize);
        if len == 0 {
            return Ok(());
        }
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on an open descriptor; the kernel also drops the
        // punched pages from every mapping.
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off as libc::off_t,
                len as libc::off_t,
            )
        };
        if r == 0 {
            // The punched range has no blocks any more: reserve again before the
            // writer writes there.
            self.reserved.store(false, Ordering::Release);
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => {
                self.ensure_reserved()?;
                self.zero(off, len);
                Ok(())
            }
            _ => Err(io_err(&self.path, "punch hole", e)),
        }
    }

    /// Faults `[off, off + len)` in as writable without changing its bytes
    /// (`MADV_POPULATE_WRITE`), so appends there do not stall on page faults and
    /// block allocation. Safe to run beside the writer. Returns false where the
    /// kernel does not support it.
    pub fn prefault(&self, off: usize, len: usize) -> bool {
        let page = 4096;
        let start = off / page * page;
        let end = (off + len).min(self.size as usize);
        if end <= start {
            return true;
        }
        // SAFETY: an advice on a range of our own mapping; it does not change
        // the contents.
        let r = unsafe {
            libc::madvise(
                self.map.as_mut_ptr().add(start) as *mut libc::c_void,
                end - start,
                libc::MADV_POPULATE_WRITE,
            )
        };
        r == 0
    }

    /// Makes `[off, off + len)` durable (msync).
    pub fn sync_range(&self, off: usize, len: usize) -> Result<(), LedgerStoreError> {
        if len == 0 {
            return Ok(());
        }
        self.map
            .flush_range(off, len)
            .map_err(|e| io_err(&self.path, "msync", e))
    }

    /// Makes the whole file and its length durable.
    pub fn sync_all(&self) -> Result<(), LedgerStoreError> {
        self.map
            .flush()
            .map_err(|e| io_err(&self.path, "msync", e))?;
        self.file
            .sync_all()
            .map_err(|e| io_err(&self.path, "fsync", e))
    }
}

/// Allocates the blocks of `[off, off + len)` of `file` (`fallocate`), keeping
/// whatever they hold. Where the file system cannot, the range is written with
/// zeros instead — only for a new file (`off == 0` of a file the caller created),
/// since zeros would overwrite data.
fn reserve(file: &File, path: &Path, off: i64, len: i64) -> Result<(), LedgerStoreError> {
    use std::os::fd::AsRawFd;
    if super::faults::disk_full(path) {
        return Err(io_err(
            path,
            "fallocate",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        ));
    }
    // SAFETY: plain syscall on an open descriptor.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, off as libc::off_t, len as libc::off_t) };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
            use std::os::unix::fs::FileExt;
            let zeros = vec![0u8; 1 << 20];
            let mut at = off as u64;
            let end = (off + len) as u64;
            while at < end {
                let n = ((end - at) as usize).min(zeros.len());
                file.write_all_at(&zeros[..n], at)
                    .map_err(|e| io_err(path, "write zeros", e))?;
                at += n as u64;
            }
            Ok(())
        }
        _ => Err(io_err(path, "fallocate", e)),
    }
}

/// A byte range of a [`LedgerSegment`] that keeps the mapping alive; the owner
/// behind zero-copy [`bytes::Bytes`]. Only made for published (immutable) ranges.
pub struct SegmentSlice {
    pub(crate) file: Arc<LedgerSegment>,
    pub(crate) off: usize,
    pub(crate) len: usize,
}

impl AsRef<[u8]> for SegmentSlice {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: a `SegmentSlice` is only made for published (immutable) ranges.
        unsafe { self.file.slice(self.off, self.len) }
    }
}

/// Contiguous equally sized [`LedgerSegment`]s in one directory. Owns the
/// segments; keeps them gap-free, each named by its start offset.
#[derive(Debug, Clone)]
pub struct LedgerSegmentList {
    dir: PathBuf,
    file_size: i64,
    files: Vec<Arc<LedgerSegment>>,
}

impl LedgerSegmentList {
    /// Loads every file of `dir` (created if missing); checks names, sizes and
    /// contiguity.
    pub fn load(dir: &Path, file_size: i64) -> Result<LedgerSegmentList, LedgerStoreError> {
        fs::create_dir_all(dir).map_err(|e| io_err(dir, "create_dir_all", e))?;
        let mut starts = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| io_err(dir, "read_dir", e))? {
            let entry = entry.map_err(|e| io_err(dir, "read_dir", e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".tmp") {
                continue;
            }
            let start: i64 = match (name.len(), name.parse()) {
                (20, Ok(s)) => s,
                _ => {
                    return Err(LedgerStoreError::Corrupt {
                        path: entry.path(),
                        offset: 0,
                        reason: "unexpected file name (want a 20-digit offset)".into(),
                    });
                }
            };
            if start % file_size != 0 {
                return Err(LedgerStoreError::Corrupt {
                    path: entry.path(),
                    offset: 0,
                    reason: format!(
                        "offset {start} is not a multiple of the file size {file_size}"
                    ),
                });
            }
            starts.push(start);
        }
        starts.sort_unstable();
        for w in starts.windows(2) {
            if w[1] != w[0] + file_size {
                return Err(LedgerStoreError::Corrupt {
                    path: file_name(dir, w[1]),
                    offset: 0,
                    reason: format!("gap: previous file starts at {}", w[0]),
                });
            }
        }
        let mut files = Vec::with_capacity(starts.len());
        for s in starts {
            files.push(Arc::new(LedgerSegment::open(dir, s, file_size)?));
        }
        Ok(LedgerSegmentList {
            dir: dir.to_path_buf(),
            file_size,
            files,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn file_size(&self) -> i64 {
        self.file_size
    }

    pub fn files(&self) -> &[Arc<LedgerSegment>] {
        &self.files
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The file holding global offset `pos`.
    pub fn find(&self, pos: i64) -> Option<&Arc<LedgerSegment>> {
        let first = self.files.first()?.start();
        if pos < first {
            return None;
        }
        let k = ((pos - first) / self.file_size) as usize;
        self.files.get(k)
    }

    /// The file holding `pos`, creating files up to it. Returns whether files were
    /// created (the directory then needs a sync).
    pub fn ensure(&mut self, pos: i64) -> Result<(Arc<LedgerSegment>, bool), LedgerStoreError> {
        let mut created = false;
        if self.files.is_empty() {
            let start = pos - pos % self.file_size;
            self.files.push(Arc::new(LedgerSegment::open(
                &self.dir,
                start,
                self.file_size,
            )?));
            created = true;
        }
        loop {
            if let Some(f) = self.find(pos) {
                return Ok((f.clone(), created));
            }
            let next = self.files.last().map(|f| f.end()).unwrap_or(0);
            if pos < self.files[0].start() {
                return Err(LedgerStoreError::Corrupt {
                    path: self.dir.clone(),
                    offset: pos as u64,
                    reason: format!("position {pos} is before the first file"),
                });
            }
            self.files.push(Arc::new(LedgerSegment::open(
                &self.dir,
                next,
                self.file_size,
            )?));
            created = true;
        }
    }

    /// Reads bytes at a global offset (copying), for the writer and recovery.
    pub fn read(&self, pos: i64, len: usize) -> Option<Vec<u8>> {
        let f = self.find(pos)?;
        let off = (pos - f.start()) as usize;
        if off + len > f.size() as usize {
            return None;
        }
        // SAFETY: called by the writer (or before readers exist): nothing else writes.
        Some(unsafe { f.slice(off, len) }.to_vec())
    }

    /// Clears everything from `pos` to the end of its file (see
    /// [`LedgerSegment::clear_from`]) and deletes the files that start at or after
    /// `pos`. Returns whether files were deleted.
    pub fn cut(&mut self, pos: i64) -> Result<bool, LedgerStoreError> {
        let mut deleted = false;
        while let Some(last) = self.files.last() {
            if last.start() < pos {
                break;
            }
            let path = last.path().to_path_buf();
            self.files.pop();
            fs::remove_file(&path).map_err(|e| io_err(&path, "remove", e))?;
            deleted = true;
        }
        if let Some(f) = self.find(pos).cloned() {
            f.clear_from((pos - f.start()) as usize)?;
        }
        Ok(deleted)
    }

    /// Deletes every file.
    pub fn clear(&mut self) -> Result<(), LedgerStoreError> {
        for f in self.files.drain(..) {
            let path = f.path().to_path_buf();
            fs::remove_file(&path).map_err(|e| io_err(&path, "remove", e))?;
        }
        Ok(())
    }

    /// Deletes the first file.
    pub fn remove_first(&mut self) -> Result<(), LedgerStoreError> {
        if !self.files.is_empty() {
            let f = self.files.remove(0);
            let path = f.path().to_path_buf();
            fs::remove_file(&path).map_err(|e| io_err(&path, "remove", e))?;
        }
        Ok(())
    }

    /// Takes the first file out of the list without deleting it (the caller
    /// deletes it, off the writer's path).
    pub fn detach_first(&mut self) -> Option<Arc<LedgerSegment>> {
        (!self.files.is_empty()).then(|| self.files.remove(0))
    }

    /// The files overlapping `[from, to)` with the overlapping byte ranges.
    pub fn ranges(&self, from: i64, to: i64) -> Vec<(Arc<LedgerSegment>, usize, usize)> {
        let mut out = Vec::new();
        for f in &self.files {
            let lo = from.max(f.start());
            let hi = to.min(f.end());
            if lo < hi {
                out.push((f.clone(), (lo - f.start()) as usize, (hi - lo) as usize));
            }
        }
        out
    }
}

/// fsyncs a directory (after creating, renaming or deleting files in it).
pub fn sync_dir(dir: &Path) -> Result<(), LedgerStoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, "fsync dir", e))
}
