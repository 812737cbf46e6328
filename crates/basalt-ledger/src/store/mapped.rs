//! The ledger's segments ([`LedgerSegment`]) and lists of them (DLedger's
//! `MmapFile` / `MmapFileList`), on Basalt's storage I/O layer
//! ([`basalt_disk`]): the real disk (mmap, `msync`, `fsync`, `fallocate`) or
//! the simulated one.
//!
//! A [`LedgerSegmentList`] is a directory of equally sized files named by the global
//! byte offset of their first byte (20 digits), contiguous: file `k + 1` starts
//! where file `k` ends.
//!
//! # Concurrency
//!
//! One writer (the [`super::LedgerStore`], which owns the lists; they are not
//! `Clone`) writes through the `unsafe` [`LedgerSegment::write`]; readers on
//! other threads read through the `unsafe` [`LedgerSegment::slice`]. This is
//! sound because the ranges never overlap in time: readers only read what the
//! writer published as immutable (committed entries, which are never rewritten
//! or zeroed), and the writer only writes past the published end or clears
//! ranges that were never published. A file that is deleted stays mapped until
//! the last reader drops its `Arc`.
//!
//! # Disk space
//!
//! Nothing is written through a mapping whose blocks are not allocated on disk:
//! on a full disk the kernel would have no block for the page and the write would
//! kill the process with SIGBUS. New files get their blocks when created (a file
//! that cannot get them is removed again and the creation fails with an error
//! that [`LedgerStoreError::is_no_space`] recognises); files found on disk, and
//! ranges punched by a cut, are reserved again by
//! [`LedgerSegment::ensure_reserved`] before the writer writes there.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use basalt_disk::{Disk, Segment, SegmentOptions};

use super::error::LedgerStoreError;

/// One mapped data or index file of the ledger (a segment of the log). Owns its
/// [`Segment`]; bytes below what the writer has published are never rewritten.
/// See the module documentation for the concurrency contract.
pub struct LedgerSegment {
    seg: Segment,
    start: i64,
    /// Every block of the file is allocated on disk (module docs).
    reserved: AtomicBool,
}

impl std::fmt::Debug for LedgerSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerSegment")
            .field("path", &self.seg.path())
            .field("start", &self.start)
            .finish()
    }
}

/// `{dir}/{start:020}`.
pub fn file_name(dir: &Path, start: i64) -> PathBuf {
    dir.join(format!("{start:020}"))
}

/// The ledger maps without a kept descriptor: range syncs are `msync`, the
/// rare whole-file syncs, punches and reservations open the file for the call.
const OPTIONS: SegmentOptions = SegmentOptions {
    keep_fd: false,
    random_access: false,
};

impl LedgerSegment {
    /// Opens (creating or extending to `size` if needed) and maps a file. A file it
    /// creates gets its blocks allocated first; on a full disk it is removed again
    /// and the error says so ([`LedgerStoreError::is_no_space`]).
    fn open(
        disk: &Disk,
        dir: &Path,
        start: i64,
        size: i64,
    ) -> Result<LedgerSegment, LedgerStoreError> {
        let path = file_name(dir, start);
        let existing = disk.file_len(&path)?;
        if let Some(len) = existing
            && len > size as u64
        {
            return Err(LedgerStoreError::Corrupt {
                path,
                offset: size as u64,
                reason: format!("file is {len} bytes, larger than the configured {size}"),
            });
        }
        // A file found on disk is reserved lazily, before the writer writes there.
        let reserve = if existing.is_none() { size as usize } else { 0 };
        let (seg, fresh) = disk.create_segment(&path, size as usize, reserve, OPTIONS)?;
        Ok(LedgerSegment {
            seg,
            start,
            reserved: AtomicBool::new(fresh),
        })
    }

    /// Whether every block of the file is known to be allocated.
    pub fn is_reserved(&self) -> bool {
        self.reserved.load(Ordering::Acquire)
    }

    /// Allocates the file's blocks if that is not known to be done (a file found on
    /// disk, or one a cut punched holes into). Writer only, before it writes.
    pub(crate) fn ensure_reserved(&self) -> Result<(), LedgerStoreError> {
        if self.is_reserved() {
            return Ok(());
        }
        self.seg.reserve(0, self.seg.len(), false)?;
        self.reserved.store(true, Ordering::Release);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        self.seg.path()
    }

    /// Global offset of the first byte.
    pub fn start(&self) -> i64 {
        self.start
    }

    /// Global offset just past the last byte.
    pub fn end(&self) -> i64 {
        self.start + self.size()
    }

    pub fn size(&self) -> i64 {
        self.seg.len() as i64
    }

    /// Bytes `[off, off + len)` of the file.
    ///
    /// # Safety
    /// No one may write the range while the returned slice lives (module docs).
    pub unsafe fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(
            off + len <= self.seg.len(),
            "slice past the end of {:?}",
            self.path()
        );
        // SAFETY: in bounds (checked above) and, by the caller's contract, not
        // written concurrently.
        unsafe { self.seg.slice(off, len) }
    }

    /// Copies `bytes` to `off`.
    ///
    /// # Safety
    /// Only the single writer calls this, on a range no reader reads (nothing
    /// published) and into reserved blocks (module docs).
    pub(crate) unsafe fn write(&self, off: usize, bytes: &[u8]) {
        debug_assert!(
            self.is_reserved(),
            "write into {:?} before its blocks were reserved",
            self.path()
        );
        assert!(
            off + bytes.len() <= self.seg.len(),
            "write past the end of {:?}",
            self.path()
        );
        // SAFETY: in bounds; the writer owns the range exclusively (contract).
        unsafe { self.seg.write_at(off, bytes) }
    }

    /// Makes `[off, end of file)` read as zeros without writing every page: the
    /// range is deallocated (punched) where the file system allows it, zeroed
    /// otherwise. Durable after [`Self::sync_all`].
    ///
    /// # Safety
    /// As for [`Self::write`]: writer only, on an unpublished range.
    pub(crate) unsafe fn clear_from(&self, off: usize) -> Result<(), LedgerStoreError> {
        let off = off.min(self.seg.len());
        if off == self.seg.len() {
            return Ok(());
        }
        // SAFETY: the caller's contract covers `[off, end)`.
        if unsafe { self.seg.punch_hole(off) }? {
            // The punched range has no blocks any more: reserve again before the
            // writer writes there.
            self.reserved.store(false, Ordering::Release);
            return Ok(());
        }
        self.ensure_reserved()?;
        // SAFETY: as above.
        unsafe { self.seg.zero(off, self.seg.len() - off) };
        Ok(())
    }

    /// Faults `[off, off + len)` in as writable without changing its bytes, so
    /// appends there do not stall on page faults and block allocation. Safe to
    /// run beside the writer. Returns false where the kernel does not support it.
    pub fn prefault(&self, off: usize, len: usize) -> bool {
        self.seg.populate_write_range(off, len)
    }

    /// Makes `[off, off + len)` durable (msync).
    pub fn sync_range(&self, off: usize, len: usize) -> Result<(), LedgerStoreError> {
        Ok(self.seg.sync_range(off, off + len)?)
    }

    /// Makes the whole file and its length durable (msync, then fsync).
    pub fn sync_all(&self) -> Result<(), LedgerStoreError> {
        Ok(self.seg.sync_file()?)
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

/// Contiguous equally sized [`LedgerSegment`]s in one directory of one disk.
/// Owns the segments; keeps them gap-free, each named by its start offset. Not
/// `Clone`: the one list of a directory belongs to its single writer.
#[derive(Debug)]
pub struct LedgerSegmentList {
    disk: Disk,
    dir: PathBuf,
    file_size: i64,
    files: Vec<Arc<LedgerSegment>>,
    /// Files found after a gap at load, not part of the list.
    strays: Vec<PathBuf>,
}

impl LedgerSegmentList {
    /// Loads the files of `dir` (created if missing; durable with the store's
    /// directory sync at recovery): checks names and sizes, and keeps the
    /// contiguous run from the first file; files after a gap are
    /// [`LedgerSegmentList::strays`].
    pub fn load(
        disk: &Disk,
        dir: &Path,
        file_size: i64,
    ) -> Result<LedgerSegmentList, LedgerStoreError> {
        disk.create_dir_all(dir)?;
        let mut starts = Vec::new();
        for entry in disk.list_dir(dir)? {
            if entry.name.ends_with(".tmp") {
                continue;
            }
            let start: i64 = match (entry.name.len(), entry.name.parse()) {
                (20, Ok(s)) if !entry.is_dir => s,
                _ => {
                    return Err(LedgerStoreError::Corrupt {
                        path: entry.path,
                        offset: 0,
                        reason: "unexpected file name (want a 20-digit offset)".into(),
                    });
                }
            };
            if start % file_size != 0 {
                return Err(LedgerStoreError::Corrupt {
                    path: entry.path,
                    offset: 0,
                    reason: format!(
                        "offset {start} is not a multiple of the file size {file_size}"
                    ),
                });
            }
            starts.push(start);
        }
        starts.sort_unstable();
        // Files after a gap are names a power loss kept out of order (a
        // creation or removal that was not synced): left for recovery to judge.
        let contiguous = starts
            .windows(2)
            .position(|w| w[1] != w[0] + file_size)
            .map_or(starts.len(), |k| k + 1);
        let strays = starts[contiguous..]
            .iter()
            .map(|s| file_name(dir, *s))
            .collect();
        let mut files = Vec::with_capacity(contiguous);
        for s in &starts[..contiguous] {
            files.push(Arc::new(LedgerSegment::open(disk, dir, *s, file_size)?));
        }
        Ok(LedgerSegmentList {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            file_size,
            files,
            strays,
        })
    }

    /// Files found after a gap at load (see [`LedgerSegmentList::load`]).
    pub fn strays(&self) -> &[PathBuf] {
        &self.strays
    }

    /// Deletes the files found after a gap that are still not part of the
    /// list. Recovery calls it once it has judged the log.
    pub(crate) fn remove_strays(&mut self) -> Result<(), LedgerStoreError> {
        for path in std::mem::take(&mut self.strays) {
            if !self.files.iter().any(|f| f.path() == path) {
                self.disk.remove_file(&path)?;
            }
        }
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The disk the files are on.
    pub fn disk(&self) -> &Disk {
        &self.disk
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

    fn open_file(&self, start: i64) -> Result<Arc<LedgerSegment>, LedgerStoreError> {
        Ok(Arc::new(LedgerSegment::open(
            &self.disk,
            &self.dir,
            start,
            self.file_size,
        )?))
    }

    /// The file holding `pos`, creating files up to it. Returns whether files were
    /// created (the directory then needs a sync).
    pub fn ensure(&mut self, pos: i64) -> Result<(Arc<LedgerSegment>, bool), LedgerStoreError> {
        let mut created = false;
        if self.files.is_empty() {
            let file = self.open_file(pos - pos % self.file_size)?;
            self.files.push(file);
            created = true;
        }
        loop {
            if let Some(f) = self.find(pos) {
                return Ok((f.clone(), created));
            }
            if pos < self.files[0].start() {
                return Err(LedgerStoreError::Corrupt {
                    path: self.dir.clone(),
                    offset: pos as u64,
                    reason: format!("position {pos} is before the first file"),
                });
            }
            let next = self.files.last().map(|f| f.end()).unwrap_or(0);
            let file = self.open_file(next)?;
            self.files.push(file);
            created = true;
        }
    }

    /// Creates the files from the one holding `pos` up to the first file, when
    /// `pos` lies before it (recovery: a power loss during a reset kept a
    /// later index file and lost an earlier one). Returns whether files were
    /// created.
    pub(crate) fn prepend_to(&mut self, pos: i64) -> Result<bool, LedgerStoreError> {
        let Some(first) = self.files.first().map(|f| f.start()) else {
            return Ok(false);
        };
        let mut start = first;
        let mut created = false;
        while pos < start {
            start -= self.file_size;
            let file = self.open_file(start)?;
            self.files.insert(0, file);
            created = true;
        }
        Ok(created)
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
    ///
    /// # Safety
    /// Nothing from `pos` on is published to readers (the writer cuts only
    /// uncommitted entries, or before readers exist).
    pub(crate) unsafe fn cut(&mut self, pos: i64) -> Result<bool, LedgerStoreError> {
        let mut deleted = false;
        while let Some(last) = self.files.last() {
            if last.start() < pos {
                break;
            }
            let path = last.path().to_path_buf();
            self.files.pop();
            self.disk.remove_file(&path)?;
            deleted = true;
        }
        if let Some(f) = self.find(pos).cloned() {
            // SAFETY: `[pos, end)` is unpublished, per the caller's contract.
            unsafe { f.clear_from((pos - f.start()) as usize) }?;
        }
        Ok(deleted)
    }

    /// Deletes every file.
    pub(crate) fn clear(&mut self) -> Result<(), LedgerStoreError> {
        for f in self.files.drain(..) {
            self.disk.remove_file(f.path())?;
        }
        Ok(())
    }

    /// fsyncs the list's directory (after creating or deleting files in it).
    pub fn sync_dir(&self) -> Result<(), LedgerStoreError> {
        Ok(self.disk.sync_dir(&self.dir)?)
    }

    /// Takes every file out of the list without deleting it (the caller
    /// deletes them once that is safe).
    pub(crate) fn detach_all(&mut self) -> Vec<Arc<LedgerSegment>> {
        std::mem::take(&mut self.files)
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
