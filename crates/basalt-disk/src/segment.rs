//! A segment: one fixed-size file of a log, mapped into memory.
//!
//! The bytes live at [`Segment::as_ptr`]: the file's shared mapping on the
//! real disk, the simulated page cache on the simulated one. Hot paths copy
//! straight into that memory; nothing is dispatched per write. Durability is
//! explicit: [`Segment::sync_range`] is the only way bytes become durable.
//!
//! Writers: with `&mut Segment` writes are safe ([`Segment::write`]).
//! Shared segments (`Arc`) are written through the `unsafe`
//! [`Segment::write_at`], whose caller keeps the single-writer discipline
//! (one writer, writing only bytes no reader looks at).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::MmapRaw;

use crate::error::{DiskError, DiskResult};
use crate::real;
use crate::sim::{SimBuf, SimHandle};

/// OS page size: the unit of `msync` and of block reservation steps.
pub const PAGE_SIZE: usize = 4096;

/// Bytes populated per `madvise` call: 64 pages, well under a millisecond
/// of the mmap lock each (see [`Segment::prefault`]).
const POPULATE_STEP: usize = 64 * PAGE_SIZE;

/// How a segment uses the kernel. Only the real disk looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentOptions {
    /// Keep the descriptor open: syncs are `fdatasync` on it. Without it
    /// syncs are `msync(MS_SYNC)` of the pages of the range, and the rare
    /// calls that need a descriptor open the file for their duration.
    pub keep_fd: bool,
    /// `MADV_RANDOM`: no read-ahead on faults.
    pub random_access: bool,
}

enum Backing {
    Mapped {
        _map: MmapRaw,
        file: Option<File>,
    },
    Sim {
        buf: Arc<SimBuf>,
        disk: SimHandle,
        ino: u64,
    },
}

/// One mapped file. Owns its mapping (or simulated page cache); the pointer
/// stays valid and fixed for the segment's life, `len` bytes long.
pub struct Segment {
    path: PathBuf,
    len: usize,
    ptr: *mut u8,
    backing: Backing,
}

// SAFETY: the pointer refers to memory owned by `backing` (a shared file
// mapping or a heap buffer kept alive by the Arc). Concurrent access is
// governed by the contracts of the unsafe accessors below.
unsafe impl Send for Segment {}
// SAFETY: as for Send above.
unsafe impl Sync for Segment {}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("simulated", &matches!(self.backing, Backing::Sim { .. }))
            .finish()
    }
}

impl Segment {
    pub(crate) fn mapped(path: PathBuf, file: File, opts: SegmentOptions) -> DiskResult<Segment> {
        let map = MmapRaw::map_raw(&file).map_err(|e| DiskError::io(&path, e))?;
        let len = map.len();
        let ptr = map.as_mut_ptr();
        if opts.random_access && len > 0 {
            // SAFETY: madvise on our own mapping's range; advice only.
            let _ = unsafe { libc::madvise(ptr as *mut libc::c_void, len, libc::MADV_RANDOM) };
        }
        let file = opts.keep_fd.then_some(file);
        Ok(Segment {
            path,
            len,
            ptr,
            backing: Backing::Mapped { _map: map, file },
        })
    }

    pub(crate) fn simulated(path: PathBuf, buf: Arc<SimBuf>, disk: SimHandle, ino: u64) -> Segment {
        Segment {
            path,
            len: buf.len(),
            ptr: buf.ptr(),
            backing: Backing::Sim { buf, disk, ino },
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the segment.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the segment lives on the simulated disk.
    pub fn is_simulated(&self) -> bool {
        matches!(self.backing, Backing::Sim { .. })
    }

    /// The first byte. Valid for `len()` bytes while the segment lives.
    /// Dereferencing it is up to the caller (see [`Segment::write_at`]).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Copies `data` to `[pos, pos + data.len())`.
    ///
    /// # Safety
    /// The range is inside the segment, no other thread writes it or reads
    /// it (nor holds a slice of it from [`Segment::slice`]) during the call.
    pub unsafe fn write_at(&self, pos: usize, data: &[u8]) {
        debug_assert!(pos + data.len() <= self.len, "write past the segment's end");
        // SAFETY: in bounds and unshared, per the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(pos), data.len()) };
    }

    /// Zeroes `[pos, pos + len)`.
    ///
    /// # Safety
    /// As for [`Segment::write_at`].
    pub unsafe fn zero(&self, pos: usize, len: usize) {
        assert!(pos + len <= self.len, "zero range past the segment's end");
        // SAFETY: in bounds and unshared, per the caller's contract.
        unsafe { std::ptr::write_bytes(self.ptr.add(pos), 0, len) };
    }

    /// Borrows `[pos, pos + len)`.
    ///
    /// # Safety
    /// The range is inside the segment and nobody writes it while the
    /// slice lives.
    pub unsafe fn slice(&self, pos: usize, len: usize) -> &[u8] {
        debug_assert!(pos + len <= self.len, "read past the segment's end");
        // SAFETY: in bounds and not written while borrowed, per the contract.
        unsafe { std::slice::from_raw_parts(self.ptr.add(pos), len) }
    }

    /// Safe write for an exclusively held segment.
    pub fn write(&mut self, pos: usize, data: &[u8]) {
        assert!(pos + data.len() <= self.len, "write past the segment's end");
        // SAFETY: `&mut self`: no other reference to the segment exists.
        unsafe { self.write_at(pos, data) }
    }

    /// Safe read of an exclusively held segment.
    pub fn read(&mut self, pos: usize, len: usize) -> &[u8] {
        assert!(pos + len <= self.len, "read past the segment's end");
        // SAFETY: `&mut self`: nobody else can write while the slice lives.
        unsafe { self.slice(pos, len) }
    }

    /// Writes `data` at `pos` through the file (pwrite), not the mapping:
    /// the transient-pool commit path.
    ///
    /// # Safety
    /// As for [`Segment::write_at`]: nobody reads or writes the range during
    /// the call (the simulated disk copies into memory readers can see).
    pub unsafe fn pwrite(&self, pos: usize, data: &[u8]) -> DiskResult<()> {
        match &self.backing {
            Backing::Mapped { .. } => self.with_fd(|f| {
                use std::os::unix::fs::FileExt;
                f.write_all_at(data, pos as u64)
                    .map_err(|e| DiskError::io(&self.path, e))
            })?,
            Backing::Sim { .. } => {
                // SAFETY: the caller's contract covers the range.
                unsafe { self.write_at(pos, data) };
                Ok(())
            }
        }
    }

    /// Makes `[from, to)` durable: `fdatasync` with a kept descriptor, or
    /// `msync(MS_SYNC)` of the pages holding the range. A failure means the
    /// range may or may not be on disk: the caller must stop acknowledging.
    pub fn sync_range(&self, from: usize, to: usize) -> DiskResult<()> {
        let to = to.min(self.len);
        if from >= to {
            return Ok(());
        }
        if let Backing::Mapped { .. } = &self.backing {
            crate::faults::check_fsync(&self.path)?;
        }
        match &self.backing {
            Backing::Mapped {
                file: Some(file), ..
            } => file.sync_data().map_err(|e| DiskError::io(&self.path, e)),
            Backing::Mapped { file: None, .. } => {
                let start = from - from % PAGE_SIZE;
                // SAFETY: msync on a page-aligned range inside our own mapping.
                let rc = unsafe {
                    libc::msync(
                        self.ptr.add(start) as *mut libc::c_void,
                        to - start,
                        libc::MS_SYNC,
                    )
                };
                if rc != 0 {
                    return Err(DiskError::io(&self.path, std::io::Error::last_os_error()));
                }
                Ok(())
            }
            Backing::Sim { buf, disk, ino } => disk.sync_segment(&self.path, *ino, buf, from, to),
        }
    }

    /// Makes the whole segment durable.
    pub fn sync_all(&self) -> DiskResult<()> {
        self.sync_range(0, self.len)
    }

    /// Makes the whole file durable with its metadata (length, punched
    /// holes): `msync` of the mapping, then `fsync` of the file. For the
    /// rare syncs after a cut or at recovery; appends use
    /// [`Segment::sync_range`].
    pub fn sync_file(&self) -> DiskResult<()> {
        match &self.backing {
            Backing::Mapped { file, .. } => {
                crate::faults::check_fsync(&self.path)?;
                if file.is_none() && self.len > 0 {
                    // SAFETY: msync of our own whole mapping.
                    let rc = unsafe {
                        libc::msync(self.ptr as *mut libc::c_void, self.len, libc::MS_SYNC)
                    };
                    if rc != 0 {
                        return Err(DiskError::io(&self.path, std::io::Error::last_os_error()));
                    }
                }
                self.with_fd(|f| f.sync_all().map_err(|e| DiskError::io(&self.path, e)))?
            }
            Backing::Sim { buf, disk, ino } => {
                disk.sync_segment(&self.path, *ino, buf, 0, self.len)
            }
        }
    }

    /// Makes `[from, len)` read as zeros by deallocating its blocks
    /// (`fallocate` punch hole, size kept). Returns `Ok(false)` where the file
    /// system cannot punch: then nothing changed and the caller zeroes the
    /// range itself. After a punch the range has no blocks: reserve them
    /// again ([`Segment::reserve`]) before writing there. Durable after
    /// [`Segment::sync_file`].
    ///
    /// # Safety
    /// As for [`Segment::write_at`] over `[from, len)`.
    pub unsafe fn punch_hole(&self, from: usize) -> DiskResult<bool> {
        if from >= self.len {
            return Ok(true);
        }
        let len = self.len - from;
        match &self.backing {
            Backing::Mapped { .. } => self.with_fd(|f| {
                use std::os::unix::io::AsRawFd;
                // SAFETY: plain syscall on a descriptor we hold; the kernel
                // drops the punched pages from every mapping.
                let rc = unsafe {
                    libc::fallocate(
                        f.as_raw_fd(),
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        from as libc::off_t,
                        len as libc::off_t,
                    )
                };
                if rc == 0 {
                    return Ok(true);
                }
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => Ok(false),
                    _ => Err(DiskError::io(&self.path, e)),
                }
            })?,
            Backing::Sim { disk, ino, .. } => {
                // SAFETY: the caller's contract covers the range.
                unsafe { self.zero(from, len) };
                disk.unreserve_from(&self.path, *ino, from)?;
                Ok(true)
            }
        }
    }

    /// Reserves blocks for `[from, to)` so writes through the mapping cannot
    /// fault for lack of space ([`DiskError::NoSpace`] on a full disk,
    /// nothing changed). The caller vouches that `[0, from)` is reserved
    /// already (pass 0 when it does not know). `fresh`: the file was just
    /// created.
    pub fn reserve(&self, from: usize, to: usize, fresh: bool) -> DiskResult<()> {
        match &self.backing {
            Backing::Mapped { .. } => self
                .with_fd(|f| real::reserve_blocks(f, &self.path, from as u64, to as u64, fresh))?,
            Backing::Sim { disk, ino, .. } => disk.reserve(&self.path, *ino, to),
        }
    }

    /// Bytes of the file with blocks allocated (diagnostics, fault checks).
    pub fn allocated(&self) -> u64 {
        match &self.backing {
            Backing::Mapped { .. } => self.with_fd(real::allocated_bytes).unwrap_or(0),
            Backing::Sim { disk, ino, .. } => disk.allocated(*ino),
        }
    }

    /// Runs `f` with the descriptor: the kept one or one opened for the call.
    fn with_fd<R>(&self, f: impl FnOnce(&File) -> R) -> DiskResult<R> {
        match &self.backing {
            Backing::Mapped {
                file: Some(file), ..
            } => Ok(f(file)),
            _ => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&self.path)
                    .map_err(|e| DiskError::io(&self.path, e))?;
                Ok(f(&file))
            }
        }
    }

    /// Pre-faults every page for writing (`MADV_POPULATE_WRITE`, or a
    /// touch per page on older kernels). Real disk only; the file must not
    /// be in use yet.
    pub fn populate_write(&self) {
        if !matches!(self.backing, Backing::Mapped { .. }) || self.len == 0 {
            return;
        }
        if !self.madvise_stepped(0, self.len, libc::MADV_POPULATE_WRITE) {
            for off in (0..self.len).step_by(PAGE_SIZE) {
                // SAFETY: in bounds; writing zeros over the zeros of a fresh,
                // unused file changes nothing.
                unsafe { std::ptr::write_volatile(self.ptr.add(off), 0) };
            }
        }
    }

    /// Faults `[from, from + len)` in as writable without changing its
    /// bytes (`MADV_POPULATE_WRITE`), so later writes there do not stall on
    /// page faults. Safe beside the writer. Returns false where the kernel
    /// cannot; the simulated disk has nothing to fault in.
    pub fn populate_write_range(&self, from: usize, len: usize) -> bool {
        if !matches!(self.backing, Backing::Mapped { .. }) {
            return true;
        }
        let start = from - from % PAGE_SIZE;
        let end = (from + len).min(self.len);
        if end <= start {
            return true;
        }
        self.madvise_stepped(start, end - start, libc::MADV_POPULATE_WRITE)
    }

    /// Maps `[from, from + len)` as clean pages without writing (best
    /// effort, `MADV_POPULATE_READ`). `from` must be page aligned.
    pub fn prefault(&self, from: usize, len: usize) {
        if !matches!(self.backing, Backing::Mapped { .. }) || from >= self.len {
            return;
        }
        let len = len.min(self.len - from);
        let _ = self.madvise_stepped(from, len, libc::MADV_POPULATE_READ);
    }

    /// Populates `[from, from + len)` of the mapping with `advice`
    /// (`MADV_POPULATE_READ` or `_WRITE`, which leave the bytes as they
    /// are) in steps of [`POPULATE_STEP`]. The kernel holds the process's
    /// mmap lock for the whole of one call, and a new page-cache page costs
    /// ~10 µs to zero-fill; one call over megabytes held it for tens of
    /// milliseconds, long enough that an `mmap` (the allocator's, or a new
    /// file's) queued behind it and every page fault of every thread queued
    /// behind that. False if the kernel refused (too old for the advice).
    fn madvise_stepped(&self, from: usize, len: usize, advice: libc::c_int) -> bool {
        debug_assert_eq!(from % PAGE_SIZE, 0);
        debug_assert!(from + len <= self.len);
        let end = from + len;
        let mut at = from;
        while at < end {
            let step = POPULATE_STEP.min(end - at);
            // SAFETY: advice on a range inside our own mapping; both
            // populate advices fault pages in and leave the contents.
            let rc = unsafe { libc::madvise(self.ptr.add(at) as *mut libc::c_void, step, advice) };
            if rc != 0 {
                return false;
            }
            at += step;
        }
        true
    }

    /// Ranges of `[from, len)` that hold data, holes skipped. The simulated
    /// disk has no holes: the whole range.
    pub fn data_ranges(&self, from: usize) -> Vec<(usize, usize)> {
        if from >= self.len {
            return Vec::new();
        }
        match &self.backing {
            Backing::Mapped { .. } => {
                use std::os::unix::io::AsRawFd;
                self.with_fd(|f| real::seek_data_ranges(f.as_raw_fd(), from, self.len))
                    .unwrap_or_else(|_| vec![(from, self.len)])
            }
            Backing::Sim { .. } => vec![(from, self.len)],
        }
    }

    /// Pages resident in the page cache (`mincore`), `None` when unknown.
    pub fn resident_pages(&self) -> Option<usize> {
        if !matches!(self.backing, Backing::Mapped { .. }) {
            return None;
        }
        let mut vec = vec![0u8; self.len.div_ceil(PAGE_SIZE)];
        // SAFETY: mincore on our own page-aligned mapping; `vec` has one
        // byte per page of it.
        let rc =
            unsafe { libc::mincore(self.ptr as *mut libc::c_void, self.len, vec.as_mut_ptr()) };
        (rc == 0).then(|| vec.iter().filter(|b| *b & 1 == 1).count())
    }
}
