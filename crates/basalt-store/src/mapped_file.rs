//! One preallocated, memory-mapped file of a log (CommitLog or ConsumeQueue).
//!
//! A `MappedFile` keeps three positions, all byte offsets inside the file:
//!
//! * `wrote` — bytes appended so far (into the mapping, or into the write
//!   buffer when the transient store pool is on);
//! * `committed` — bytes visible in the mapping; readers never look past it;
//! * `flushed` — bytes known to be on disk.
//!
//! Invariant: `flushed <= committed <= wrote <= size`. Each position only
//! grows, except when recovery or truncation resets all three at once.
//!
//! Nothing is written into bytes whose blocks are not reserved on disk
//! (below `reserved_to`): a store on a full disk must fail cleanly when it
//! needs room, never with SIGBUS when the kernel cannot find a block for a
//! page written through the mapping. How much is reserved at a time is the
//! file's [`MappedFilePolicy`]: a CommitLog file reserves all of itself when
//! created; a ConsumeQueue file reserves one page at a time just ahead of its
//! writer, so a queue holding one unit costs one block, not the whole file.
//! Files found on disk are reserved by [`MappedFile::ensure_reserved_until`]
//! before the writer first writes into them.
//!
//! There is exactly one writer per file at a time (the CommitLog append lock,
//! or the single dispatch thread for a ConsumeQueue), and it writes only at or
//! after `wrote`; readers read only below `committed`. So readers and the
//! writer never touch the same bytes, which is what makes the shared raw
//! mapping sound.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::SystemTime;

use basalt_disk::{Disk, Segment, SegmentOptions};
use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::{Result, StoreError};
use crate::transient_pool::TransientStorePool;

pub use crate::mapped_file_policy::MappedFilePolicy;

/// OS page size used for "least pages" flush thresholds.
pub const PAGE_SIZE: usize = basalt_disk::PAGE_SIZE;

/// A write buffer of the transient store pool: appends land here first and a
/// commit service copies them into the file.
pub type WriteBuffer = Box<[u8]>;

/// See the module documentation.
pub struct MappedFile {
    /// The disk the file lives on (the path is the segment's: one copy per
    /// file, which with many queues is memory that counts).
    disk: Disk,
    policy: MappedFilePolicy,
    start_offset: i64,
    size: usize,
    /// The mapped bytes (real mapping or simulated page cache).
    seg: Segment,
    wrote: AtomicUsize,
    committed: AtomicUsize,
    flushed: AtomicUsize,
    /// Store timestamp of the last record appended (CommitLog only).
    store_timestamp: AtomicI64,
    /// Raw pointer into `write_buffer`'s allocation, null when there is none.
    buffer_ptr: *mut u8,
    /// Owns the write buffer until it is fully committed and handed back.
    write_buffer: Mutex<Option<WriteBuffer>>,
    /// Where the write buffer goes back to.
    pool: Option<Arc<TransientStorePool>>,
    deleted: AtomicBool,
    /// Bytes from the start of the file whose blocks are known to be
    /// allocated on disk (see the module docs).
    reserved_to: AtomicUsize,
    /// Debug check that appends never overlap (single writer).
    #[cfg(debug_assertions)]
    writing: AtomicBool,
}

// SAFETY: the raw pointers refer to memory owned by this value (the mapping
// and the write buffer). Access follows the single-writer / readers-below-
// `committed` discipline described in the module docs, with positions
// published through atomics (Release on write, Acquire on read).
unsafe impl Send for MappedFile {}
// SAFETY: as for Send above.
unsafe impl Sync for MappedFile {}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path())
            .field("start_offset", &self.start_offset)
            .field("size", &self.size)
            .field("wrote", &self.wrote_position())
            .field("committed", &self.committed_position())
            .field("flushed", &self.flushed_position())
            .finish()
    }
}

/// The 20-digit zero-padded name of a file starting at `offset`.
pub fn file_name(offset: i64) -> String {
    format!("{offset:020}")
}

/// Parses a 20-digit file name back into its start offset.
pub fn parse_file_name(name: &str) -> Option<i64> {
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

impl MappedFile {
    /// Creates (or reopens and extends) the file for `start_offset` in `dir`
    /// with `size` bytes, reserves its blocks on disk and maps it. Positions
    /// start at 0. With a pool that has a buffer to lend, appends go to that
    /// buffer until committed.
    ///
    /// On a full disk this fails with [`StoreError::NoSpace`] and a file it
    /// created is removed again: nothing half-made is left behind.
    pub fn create(
        dir: &Path,
        start_offset: i64,
        size: usize,
        pool: Option<&Arc<TransientStorePool>>,
    ) -> Result<MappedFile> {
        Self::create_with(dir, start_offset, size, pool, MappedFilePolicy::WHOLE)
    }

    /// [`MappedFile::create`] under `policy`: only the policy's first step
    /// of blocks is reserved now (the file itself is `size` bytes, sparse).
    pub fn create_with(
        dir: &Path,
        start_offset: i64,
        size: usize,
        pool: Option<&Arc<TransientStorePool>>,
        policy: MappedFilePolicy,
    ) -> Result<MappedFile> {
        Self::create_on(&Disk::Real, dir, start_offset, size, pool, policy)
    }

    /// [`MappedFile::create_with`] on `disk`.
    pub fn create_on(
        disk: &Disk,
        dir: &Path,
        start_offset: i64,
        size: usize,
        pool: Option<&Arc<TransientStorePool>>,
        policy: MappedFilePolicy,
    ) -> Result<MappedFile> {
        let reserve = policy.reserve_target(1, size, 0);
        let path = dir.join(file_name(start_offset));
        let (seg, _fresh) = disk.create_segment(&path, size, reserve, segment_options(policy))?;
        let write_buffer = pool.and_then(|p| p.borrow());
        let mut mf = Self::map(disk, seg, start_offset, size, write_buffer, policy);
        mf.pool = pool.cloned();
        mf.reserved_to.store(reserve, Ordering::Release);
        Ok(mf)
    }

    /// Opens an existing file of exactly `size` bytes. Positions are set to
    /// `size` (everything counts as written) until recovery says otherwise.
    pub fn open(path: &Path, start_offset: i64, size: usize) -> Result<MappedFile> {
        Self::open_with(path, start_offset, size, MappedFilePolicy::WHOLE)
    }

    /// [`MappedFile::open`] under `policy`. Maps the file and reads nothing.
    pub fn open_with(
        path: &Path,
        start_offset: i64,
        size: usize,
        policy: MappedFilePolicy,
    ) -> Result<MappedFile> {
        Self::open_on(&Disk::Real, path, start_offset, size, policy)
    }

    /// [`MappedFile::open_with`] on `disk`.
    pub fn open_on(
        disk: &Disk,
        path: &Path,
        start_offset: i64,
        size: usize,
        policy: MappedFilePolicy,
    ) -> Result<MappedFile> {
        let seg = disk.open_segment(path, segment_options(policy))?;
        if seg.len() != size {
            return Err(StoreError::Layout {
                path: path.to_path_buf(),
                reason: format!("file is {} bytes, expected {size}", seg.len()),
            });
        }
        let mf = Self::map(disk, seg, start_offset, size, None, policy);
        mf.set_positions(size);
        Ok(mf)
    }

    fn map(
        disk: &Disk,
        seg: Segment,
        start_offset: i64,
        size: usize,
        write_buffer: Option<WriteBuffer>,
        policy: MappedFilePolicy,
    ) -> MappedFile {
        let (buffer_ptr, write_buffer) = match write_buffer {
            Some(mut b) => {
                assert!(b.len() >= size, "write buffer smaller than the file");
                (b.as_mut_ptr(), Some(b))
            }
            None => (std::ptr::null_mut(), None),
        };
        MappedFile {
            disk: disk.clone(),
            policy,
            start_offset,
            size,
            seg,
            wrote: AtomicUsize::new(0),
            committed: AtomicUsize::new(0),
            flushed: AtomicUsize::new(0),
            store_timestamp: AtomicI64::new(0),
            buffer_ptr,
            write_buffer: Mutex::new(write_buffer),
            pool: None,
            deleted: AtomicBool::new(false),
            reserved_to: AtomicUsize::new(0),
            #[cfg(debug_assertions)]
            writing: AtomicBool::new(false),
        }
    }

    pub fn path(&self) -> &Path {
        self.seg.path()
    }
    /// Global offset of the file's first byte (its name).
    /// The disk the file lives on.
    pub fn disk(&self) -> &Disk {
        &self.disk
    }
    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }
    /// Global offset just past the file's last byte.
    pub fn end_offset(&self) -> i64 {
        self.start_offset + self.size as i64
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn wrote_position(&self) -> usize {
        self.wrote.load(Ordering::Acquire)
    }
    /// Bytes readers may read: everything below is complete and visible.
    pub fn committed_position(&self) -> usize {
        self.committed.load(Ordering::Acquire)
    }
    pub fn flushed_position(&self) -> usize {
        self.flushed.load(Ordering::Acquire)
    }
    pub fn remaining(&self) -> usize {
        self.size - self.wrote_position()
    }
    pub fn is_full(&self) -> bool {
        self.wrote_position() == self.size
    }
    pub fn has_write_buffer(&self) -> bool {
        !self.buffer_ptr.is_null() && self.write_buffer.lock().is_some()
    }
    pub fn store_timestamp(&self) -> i64 {
        self.store_timestamp.load(Ordering::Acquire)
    }
    pub fn set_store_timestamp(&self, ts: i64) {
        self.store_timestamp.store(ts, Ordering::Release);
    }
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Whether all of the file's blocks are known to be allocated on disk.
    pub fn is_reserved(&self) -> bool {
        self.reserved_to() == self.size
    }

    /// Bytes from the start whose blocks are known to be allocated.
    pub fn reserved_to(&self) -> usize {
        self.reserved_to.load(Ordering::Acquire)
    }

    /// Reserves the blocks of the whole file (see
    /// [`MappedFile::ensure_reserved_until`]).
    pub fn ensure_reserved(&self) -> Result<()> {
        self.ensure_reserved_until(self.size)
    }

    /// Makes sure the blocks of `[0, end)` are allocated on disk before the
    /// writer writes there, reserving the policy's next step when they are
    /// not (a file found on disk may be sparse: written by an older version,
    /// or extended after a crash). Cheap once done. Fails with
    /// [`StoreError::NoSpace`] on a full disk, leaving the file as it was.
    /// Writer only.
    pub fn ensure_reserved_until(&self, end: usize) -> Result<()> {
        let reserved = self.reserved_to();
        if end <= reserved {
            return Ok(());
        }
        let target = self.policy.reserve_target(end, self.size, reserved);
        self.seg.reserve(reserved, target, false)?;
        self.reserved_to.store(target, Ordering::Release);
        Ok(())
    }

    /// Sets all three positions (recovery and truncation only).
    pub fn set_positions(&self, pos: usize) {
        assert!(
            pos <= self.size,
            "position {pos} past file size {}",
            self.size
        );
        self.wrote.store(pos, Ordering::Release);
        self.committed.store(pos, Ordering::Release);
        self.flushed.store(pos, Ordering::Release);
    }

    /// Appends `len` bytes produced by `fill` at the write position and
    /// returns the position they start at, or `None` if they do not fit.
    ///
    /// Single writer only (see module docs); `fill` must write all `len` bytes.
    pub fn append_with(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> Option<usize> {
        #[cfg(debug_assertions)]
        assert!(
            !self.writing.swap(true, Ordering::AcqRel),
            "concurrent appends to {}",
            self.path().display()
        );
        let pos = self.wrote.load(Ordering::Acquire);
        let result = if pos + len > self.size {
            None
        } else {
            debug_assert!(
                pos + len <= self.reserved_to(),
                "append into {} before its blocks were reserved",
                self.path().display()
            );
            let base = if self.buffer_ptr.is_null() {
                self.seg.as_ptr()
            } else {
                self.buffer_ptr
            };
            // SAFETY: [pos, pos+len) is inside the allocation (checked above),
            // at or after `wrote`, so no reader looks at it (readers stay below
            // `committed <= wrote`) and no other writer exists.
            let dst = unsafe { std::slice::from_raw_parts_mut(base.add(pos), len) };
            fill(dst);
            self.wrote.store(pos + len, Ordering::Release);
            if self.buffer_ptr.is_null() {
                self.committed.store(pos + len, Ordering::Release);
            }
            Some(pos)
        };
        #[cfg(debug_assertions)]
        self.writing.store(false, Ordering::Release);
        result
    }

    /// Appends `data` verbatim; see [`MappedFile::append_with`].
    pub fn append(&self, data: &[u8]) -> Option<usize> {
        self.append_with(data.len(), |dst| dst.copy_from_slice(data))
    }

    /// Marks the rest of the file as written without writing it (after an
    /// end-of-file filler, or when rolling a ConsumeQueue).
    pub fn fill_to_end(&self) {
        self.wrote.store(self.size, Ordering::Release);
        if self.buffer_ptr.is_null() {
            self.committed.store(self.size, Ordering::Release);
        }
    }

    /// The committed bytes `[pos, pos + len)`, borrowed from the mapping.
    pub fn slice(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let committed = self.committed_position();
        if pos.checked_add(len)? > committed {
            return None;
        }
        // SAFETY: the range is below `committed`, so it is fully written and no
        // writer touches it; the mapping lives as long as `self`.
        Some(unsafe { std::slice::from_raw_parts(self.seg.as_ptr().add(pos), len) })
    }

    /// All committed bytes from `pos`.
    pub fn slice_from(&self, pos: usize) -> Option<&[u8]> {
        let committed = self.committed_position();
        if pos > committed {
            return None;
        }
        self.slice(pos, committed - pos)
    }

    /// The committed bytes `[pos, pos + len)` as `Bytes` that share the
    /// mapping (no copy); the file stays mapped while they live.
    pub fn bytes(self: &Arc<Self>, pos: usize, len: usize) -> Option<Bytes> {
        self.slice(pos, len)?;
        Some(Bytes::from_owner(MappedSlice {
            file: Arc::clone(self),
            pos,
            len,
        }))
    }

    /// Reads raw bytes of the mapping regardless of positions. For recovery and
    /// the offline checker only, when no writer is running.
    pub fn raw(&self) -> &[u8] {
        // SAFETY: the whole mapping is valid for `size` bytes; callers use this
        // only when no append can run concurrently.
        unsafe { std::slice::from_raw_parts(self.seg.as_ptr(), self.size) }
    }

    /// Zeroes `[pos, pos + len)` in the mapping (truncation of a dirty tail),
    /// so a later scan cannot mistake stale bytes for records. The range must
    /// be at or past the write position, where no reader looks.
    pub fn zero_range(&self, pos: usize, len: usize) {
        assert!(
            pos + len <= self.size,
            "zero range past the end of the file"
        );
        // SAFETY: in bounds; callers guarantee no concurrent writer or reader
        // of this range (truncation happens at start-up or under the writer).
        unsafe { std::ptr::write_bytes(self.seg.as_ptr().add(pos), 0, len) };
    }

    /// Writes an end-of-file filler at the write position and marks the file
    /// full. Single writer only.
    pub fn append_blank(&self) {
        let remaining = self.remaining();
        assert!(
            remaining >= basalt_common::record::BLANK_LEN,
            "no room for the end-of-file filler in {}",
            self.path().display()
        );
        let mut header = [0u8; basalt_common::record::BLANK_LEN];
        basalt_common::record::encode_blank(&mut header, remaining);
        let pos = self.wrote_position();
        let base = if self.buffer_ptr.is_null() {
            self.seg.as_ptr()
        } else {
            self.buffer_ptr
        };
        // SAFETY: 8 bytes at the write position, inside the file (checked).
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), base.add(pos), header.len()) };
        if !self.buffer_ptr.is_null() {
            // A reused write buffer holds bytes of an older file; the commit
            // copies the whole tail, so make it zeros like a fresh file.
            let tail = pos + header.len();
            // SAFETY: [tail, size) is inside the buffer and past `wrote`.
            unsafe { std::ptr::write_bytes(base.add(tail), 0, self.size - tail) };
        }
        self.fill_to_end();
    }

    /// Copies appended-but-uncommitted bytes from the write buffer into the
    /// file if at least `least_pages` pages are waiting (0: any). Returns the
    /// committed position. Without a write buffer this is a no-op.
    ///
    /// Called by one committing thread at a time.
    pub fn commit(&self, least_pages: usize) -> Result<usize> {
        if self.buffer_ptr.is_null() {
            return Ok(self.committed_position());
        }
        let mut guard = self.write_buffer.lock();
        if guard.is_none() {
            return Ok(self.committed_position());
        }
        let committed = self.committed.load(Ordering::Acquire);
        let wrote = self.wrote.load(Ordering::Acquire);
        if wrote > committed && able_to(self.size, committed, wrote, least_pages) {
            // SAFETY: [committed, wrote) was fully written before `wrote` was
            // published (Release/Acquire); the writer only writes at >= wrote.
            let src = unsafe {
                std::slice::from_raw_parts(self.buffer_ptr.add(committed), wrote - committed)
            };
            // SAFETY: [committed, wrote) of the file is past `committed`, so
            // no reader looks at it, and committing is single-threaded.
            unsafe { self.seg.pwrite(committed, src)? };
            self.committed.store(wrote, Ordering::Release);
        }
        // A full, fully committed file needs its buffer no more.
        if self.committed.load(Ordering::Acquire) == self.size
            && let Some(buf) = guard.take()
        {
            drop(guard);
            self.return_buffer(buf);
        }
        Ok(self.committed_position())
    }

    fn return_buffer(&self, buf: WriteBuffer) {
        if let Some(pool) = &self.pool {
            pool.give_back(buf);
        }
    }

    /// fsyncs the file if at least `least_pages` committed pages are not yet
    /// flushed (0: any). Returns the flushed position. A failed fsync is an
    /// error the caller must treat as fatal for writes (poison the store).
    pub fn flush(&self, least_pages: usize) -> Result<usize> {
        let committed = self.committed.load(Ordering::Acquire);
        let flushed = self.flushed.load(Ordering::Acquire);
        if committed > flushed && able_to(self.size, flushed, committed, least_pages) {
            self.sync_range(flushed, committed)?;
            self.flushed.store(committed, Ordering::Release);
        }
        Ok(self.flushed_position())
    }

    /// Makes `[from, to)` durable (see [`Segment::sync_range`]).
    fn sync_range(&self, from: usize, to: usize) -> Result<()> {
        Ok(self.seg.sync_range(from, to)?)
    }

    /// fsyncs the whole file whatever the positions say (recovery: what it
    /// kept may have been only in a crashed process's page cache).
    pub fn sync_whole(&self) -> Result<()> {
        self.sync_range(0, self.size)
    }

    /// Pre-faults every page and allocates the file's blocks on disk, so
    /// appends neither stall on page faults that zero-fill memory nor make
    /// fsyncs allocate blocks (RocketMQ's `warmMappedFile`). The zeros are
    /// written back here, once, so the pages are clean when appends begin and
    /// a later fsync writes only what was appended.
    pub fn warm(&self) {
        self.seg.populate_write();
        if let Err(e) = self.sync_range(0, self.size) {
            tracing::warn!(file = %self.path().display(), error = %e, "fsync while warming a new file failed");
        }
    }

    /// Maps the pages of `[from, from + len)` of a new (sparse) file into
    /// the page cache as clean zero pages, without writing anything to disk.
    /// Otherwise the first append to each page faults into a read-ahead that
    /// zero-fills a large folio while the writer holds the put lock, and
    /// every other writer waits (it was a third of the broker's CPU and most
    /// of its p99 under load). The first write to a page still takes a cheap
    /// write-protect fault. Best effort: kernels without MADV_POPULATE_READ
    /// skip it. `from` must be page aligned.
    pub fn prefault(&self, from: usize, len: usize) {
        debug_assert_eq!(from % PAGE_SIZE, 0);
        self.seg.prefault(from, len);
    }

    /// Byte ranges from `from` to the end of the file that hold data, holes
    /// skipped (`SEEK_DATA`/`SEEK_HOLE`): scanning the never-written tail of
    /// a sparse 1 GiB file would otherwise fault in and zero-fill every page.
    /// Pages written through the mapping count as data (ext4 reports
    /// delayed-allocation ranges as data). Without SEEK_DATA support the
    /// whole range is returned.
    pub fn data_ranges(&self, from: usize) -> Vec<(usize, usize)> {
        self.seg.data_ranges(from)
    }

    /// Pages of the file that are in the page cache (`mincore` over the
    /// mapping), or `None` if the kernel cannot say. Diagnostics and tests.
    pub fn resident_pages(&self) -> Option<usize> {
        self.seg.resident_pages()
    }

    /// Last modification time of the file on disk.
    pub fn last_modified(&self) -> Option<SystemTime> {
        self.disk.modified(self.path())
    }

    /// Unlinks the file. The mapping stays valid for holders of an `Arc`.
    pub fn destroy(&self) -> Result<()> {
        if self.deleted.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(buf) = self.write_buffer.lock().take() {
            self.return_buffer(buf);
        }
        self.disk.remove_file(self.path())?;
        Ok(())
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if let Some(buf) = self.write_buffer.get_mut().take() {
            self.return_buffer(buf);
        }
    }
}

/// Whether `[from, to)` in a file of `size` bytes is worth committing or
/// flushing: the file is full, or `least_pages` pages are waiting (0: any byte).
fn able_to(size: usize, from: usize, to: usize, least_pages: usize) -> bool {
    if to == size {
        return true;
    }
    if least_pages == 0 {
        return to > from;
    }
    to / PAGE_SIZE - from / PAGE_SIZE >= least_pages
}

/// Owner of a zero-copy `Bytes` view into a mapped file.
struct MappedSlice {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
}

impl AsRef<[u8]> for MappedSlice {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: checked committed when created; committed bytes never change
        // while anyone can read them, and the Arc keeps the mapping alive.
        unsafe { std::slice::from_raw_parts(self.file.seg.as_ptr().add(self.pos), self.len) }
    }
}

/// The segment options a policy asks for.
fn segment_options(policy: MappedFilePolicy) -> SegmentOptions {
    SegmentOptions {
        keep_fd: policy.keep_fd,
        random_access: policy.random_access,
    }
}

#[cfg(test)]
#[path = "mapped_file_tests.rs"]
mod tests;
