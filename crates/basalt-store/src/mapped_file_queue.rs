//! An ordered run of equally sized [`MappedFile`]s that together form one
//! logical log: the CommitLog, or one ConsumeQueue.
//!
//! Invariant: files are contiguous — file *k* starts at `first.start + k * size`
//! — so finding the file for an offset is a division. Only the tail file is
//! written; files leave from the head (expiry) or the tail (truncation).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};

use crate::error::{Result, StoreError};
use crate::mapped_file::{MappedFile, MappedFilePolicy, PAGE_SIZE, parse_file_name};
use crate::signal::Signal;
use crate::transient_pool::TransientStorePool;
use basalt_disk::Disk;

/// How much of a new file the allocator maps into memory at a time, ahead
/// of the writer (see [`MappedFile::prefault`]).
const PREFAULT_CHUNK: usize = 16 << 20;

/// After a file could not be created for lack of space, further attempts
/// fail at once for this long: on a full disk every put would otherwise
/// create, fail to allocate and remove a file (and the kernel may force a
/// journal commit each time before it gives up).
const NO_SPACE_BACKOFF_MS: i64 = 500;

/// See the module documentation.
pub struct MappedFileQueue {
    /// The disk the files live on.
    disk: Disk,
    dir: PathBuf,
    file_size: usize,
    /// How the files reserve blocks and keep descriptors.
    policy: MappedFilePolicy,
    files: RwLock<Vec<Arc<MappedFile>>>,
    /// Global offset up to which data is on disk.
    flushed_where: AtomicI64,
    /// Global offset up to which data is visible in the files.
    committed_where: AtomicI64,
    pool: Option<Arc<TransientStorePool>>,
    allocator: Mutex<Option<Allocator>>,
    /// Until when (ms since the epoch) creating a file is not tried again
    /// after the disk was found full.
    no_space_until: AtomicI64,
    /// A file (and maybe its directory) was created without the directory
    /// fsyncs (see [`MappedFilePolicy::sync_dir_on_create`]).
    dir_sync_pending: AtomicBool,
    /// Held while a file is created: the allocator and the writer may both
    /// create the same file, and a creation that fails removes the file it
    /// made, which must never be one the other is about to use.
    create_lock: Mutex<()>,
}

impl std::fmt::Debug for MappedFileQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFileQueue")
            .field("dir", &self.dir)
            .field("file_size", &self.file_size)
            .field("files", &self.files.read().len())
            .finish()
    }
}

impl MappedFileQueue {
    pub fn new(dir: impl Into<PathBuf>, file_size: usize) -> Self {
        MappedFileQueue {
            disk: Disk::Real,
            dir: dir.into(),
            file_size,
            policy: MappedFilePolicy::WHOLE,
            files: RwLock::new(Vec::new()),
            flushed_where: AtomicI64::new(0),
            committed_where: AtomicI64::new(0),
            pool: None,
            allocator: Mutex::new(None),
            no_space_until: AtomicI64::new(0),
            dir_sync_pending: AtomicBool::new(false),
            create_lock: Mutex::new(()),
        }
    }

    /// Files are created and opened under `policy` (default
    /// [`MappedFilePolicy::WHOLE`]).
    pub fn with_policy(mut self, policy: MappedFilePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Files live on `disk` (default: the real one).
    pub fn with_disk(mut self, disk: Disk) -> Self {
        self.disk = disk;
        self
    }

    /// The disk the files live on.
    pub fn disk(&self) -> &Disk {
        &self.disk
    }

    /// Appends of new files borrow write buffers from `pool`.
    pub fn with_pool(mut self, pool: Arc<TransientStorePool>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Starts a background thread that creates (and, with `warm`, pre-faults)
    /// the next file before the writer needs it.
    pub fn start_allocator(self: &Arc<Self>, warm: bool) {
        // On the simulated disk the writer creates its files itself: a
        // thread racing it would make a seeded run unrepeatable.
        if !self.disk.is_real() {
            return;
        }
        let mut slot = self.allocator.lock();
        if slot.is_none() {
            let a = Allocator::start(Arc::downgrade(self), warm);
            // Prepare the file the writer needs first: the first one of an
            // empty log, or the one after a full tail.
            let next = match self.last() {
                None => Some(0),
                Some(f) if f.is_full() => Some(f.end_offset()),
                Some(_) => None,
            };
            if let Some(start) = next {
                a.request(self.dir.clone(), start, self.file_size);
            }
            *slot = Some(a);
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// Maps every file in the directory. Names must be 20-digit offsets, sizes
    /// must equal the configured file size, and the files must be contiguous.
    /// Positions are set to "full"; recovery corrects the tail. Nothing in
    /// the files is read.
    pub fn load(&self) -> Result<()> {
        self.disk.create_dir_all_durable(&self.dir)?;
        let mut found = Vec::new();
        for entry in self.disk.list_dir(&self.dir)? {
            let Some(start) = parse_file_name(&entry.name) else {
                continue;
            };
            found.push((start, entry.path));
        }
        found.sort();
        // A name found here may be only in the page cache: its creator may
        // have crashed, or failed, before the directory fsync. Make the
        // names durable before anything written into them counts (the
        // power-loss simulator found acknowledged records in a file whose
        // name a power loss then took away). Queues whose owner syncs new
        // directories itself are left to it.
        if !found.is_empty() && self.policy.sync_dir_on_create {
            self.disk.sync_dir(&self.dir)?;
        }
        let mut files = Vec::with_capacity(found.len());
        let mut found = found.into_iter();
        while let Some((start, path)) = found.next() {
            if start % self.file_size as i64 != 0 {
                return Err(StoreError::Layout {
                    path,
                    reason: format!(
                        "start offset {start} is not a multiple of the file size {}",
                        self.file_size
                    ),
                });
            }
            if let Some((prev, _)) = files.last() {
                let prev_end = prev + self.file_size as i64;
                if prev_end != start && !self.policy.sync_dir_on_create {
                    // Files of a queue whose names are synced only at its
                    // flush (a ConsumeQueue: derived data) are created
                    // unsynced one after the other, and a power loss keeps
                    // or loses each name on its own. What follows a gap was
                    // never covered by a flush: recovery dispatches it again
                    // from the CommitLog (the soak found this, seed 1842).
                    let stale: Vec<PathBuf> = std::iter::once(path)
                        .chain(found.by_ref().map(|(_, p)| p))
                        .collect();
                    for p in stale.iter().rev() {
                        tracing::warn!(file = %p.display(), prev_end,
                            "file after a gap in a queue whose names were not yet synced: deleting it");
                        self.disk.remove_file(p)?;
                        self.disk.sync_dir(&self.dir)?;
                    }
                    break;
                }
                if prev_end != start {
                    return Err(StoreError::Layout {
                        path,
                        reason: format!(
                            "gap in the log: previous file ends at {prev_end}, this one starts at {start}"
                        ),
                    });
                }
            }
            files.push((start, path));
        }
        // A short last file (a crash while it was being created or a cut
        // tail) is extended with zeros: its missing part reads as a torn tail.
        if let Some((_, path)) = files.last() {
            let len = self.disk.file_len(path)?.unwrap_or(0);
            if len < self.file_size as u64 {
                tracing::warn!(file = %path.display(), len, expected = self.file_size,
                    "last file is short; extending it with zeros");
                self.disk.extend(path, self.file_size as u64)?;
            }
        }
        let files = files
            .into_iter()
            .map(|(start, path)| {
                MappedFile::open_on(&self.disk, &path, start, self.file_size, self.policy)
                    .map(Arc::new)
            })
            .collect::<Result<Vec<_>>>()?;
        *self.files.write() = files;
        Ok(())
    }

    /// A snapshot of the files, oldest first.
    pub fn files(&self) -> Vec<Arc<MappedFile>> {
        self.files.read().clone()
    }

    pub fn file_count(&self) -> usize {
        self.files.read().len()
    }

    pub fn first(&self) -> Option<Arc<MappedFile>> {
        self.files.read().first().cloned()
    }

    pub fn last(&self) -> Option<Arc<MappedFile>> {
        self.files.read().last().cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.files.read().is_empty()
    }

    /// The file holding global offset `offset`.
    pub fn find_by_offset(&self, offset: i64) -> Option<Arc<MappedFile>> {
        let files = self.files.read();
        let first = files.first()?;
        if offset < first.start_offset() {
            return None;
        }
        let idx = ((offset - first.start_offset()) / self.file_size as i64) as usize;
        let f = files.get(idx)?;
        debug_assert!(f.start_offset() <= offset && offset < f.end_offset());
        Some(Arc::clone(f))
    }

    /// Offset of the first byte still on disk (0 when empty).
    pub fn min_offset(&self) -> i64 {
        self.first().map(|f| f.start_offset()).unwrap_or(0)
    }

    /// Offset just past the last readable byte (0 when empty).
    pub fn max_offset(&self) -> i64 {
        self.last()
            .map(|f| f.start_offset() + f.committed_position() as i64)
            .unwrap_or(0)
    }

    /// Offset just past the last appended byte, readable or not.
    pub fn max_wrote_offset(&self) -> i64 {
        self.last()
            .map(|f| f.start_offset() + f.wrote_position() as i64)
            .unwrap_or(0)
    }

    pub fn flushed_where(&self) -> i64 {
        self.flushed_where.load(Ordering::Acquire)
    }

    pub fn committed_where(&self) -> i64 {
        self.committed_where.load(Ordering::Acquire)
    }

    /// Sets where flushing and committing resume (after recovery).
    pub fn set_flushed_and_committed(&self, offset: i64) {
        self.flushed_where.store(offset, Ordering::Release);
        self.committed_where.store(offset, Ordering::Release);
    }

    /// Called by the writer after it appended `[old_pos, new_pos)` to `file`:
    /// when that crossed into a new chunk, the allocator thread maps the
    /// chunk after the next one, so the writer finds its pages in memory.
    pub fn prefault_ahead(&self, file: &Arc<MappedFile>, old_pos: usize, new_pos: usize) {
        let chunk = new_pos / PREFAULT_CHUNK;
        if chunk == old_pos / PREFAULT_CHUNK || self.pool.is_some() {
            return;
        }
        if let Some(a) = self.allocator.lock().as_ref() {
            a.request_prefault(Arc::clone(file), (chunk + 2) * PREFAULT_CHUNK);
        }
    }

    /// Adds the file that starts at `start` as the new tail, taking it from the
    /// allocator when it was prepared ahead of time. Writer only.
    pub fn create_file(&self, start: i64) -> Result<Arc<MappedFile>> {
        {
            let files = self.files.read();
            if let Some(last) = files.last() {
                assert_eq!(
                    last.end_offset(),
                    start,
                    "new file must follow the tail of {}",
                    self.dir.display()
                );
            }
        }
        let prepared = self
            .allocator
            .lock()
            .as_ref()
            .and_then(|a| a.take(start, self.pool.is_some()));
        let file = match prepared {
            Some(f) => f,
            None => self.create_here(start)?,
        };
        // The new name must survive a crash before anything in it counts:
        // now, or before the owner relies on it (`sync_new_dirs`).
        if self.policy.sync_dir_on_create {
            self.disk.sync_dir(&self.dir).map_err(StoreError::from)?;
        } else {
            self.dir_sync_pending.store(true, Ordering::Release);
        }
        self.files.write().push(Arc::clone(&file));
        if let Some(a) = self.allocator.lock().as_ref() {
            a.request(
                self.dir.clone(),
                start + self.file_size as i64,
                self.file_size,
            );
        }
        Ok(file)
    }

    /// Creates the file at `start` on the writer's thread (the allocator had
    /// none ready), failing at once while a recent attempt found the disk full.
    fn create_here(&self, start: i64) -> Result<Arc<MappedFile>> {
        // The disk's clock: under the simulator a backoff read off the wall
        // clock made whether a put drew a fault depend on its speed.
        let now = self.disk.now_millis();
        if now < self.no_space_until.load(Ordering::Acquire) {
            return Err(StoreError::NoSpace {
                path: self.dir.join(crate::mapped_file::file_name(start)),
                bytes: self.file_size as u64,
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            });
        }
        match self.make_file(start) {
            Ok(f) => Ok(Arc::new(f)),
            Err(e) => {
                if e.is_no_space() {
                    self.no_space_until
                        .store(now + NO_SPACE_BACKOFF_MS, Ordering::Release);
                }
                Err(e)
            }
        }
    }

    /// Creates, reserves and maps the file at `start` (see [`MappedFile::create`]).
    fn make_file(&self, start: i64) -> Result<MappedFile> {
        let _creating = self.create_lock.lock();
        if self.policy.sync_dir_on_create {
            self.disk.create_dir_all_durable(&self.dir)?;
        } else {
            self.disk.create_dir_all(&self.dir)?;
        }
        MappedFile::create_on(
            &self.disk,
            &self.dir,
            start,
            self.file_size,
            self.pool.as_ref(),
            self.policy,
        )
    }

    /// fsyncs the directory and its `ancestors` nearest parents if a file
    /// was created here without it since the last call (see
    /// [`MappedFilePolicy::sync_dir_on_create`]), so the new names survive a
    /// crash. Parents are included because the directory itself may have
    /// been made with the file.
    pub fn sync_new_dirs(&self, ancestors: usize) -> Result<()> {
        if !self.dir_sync_pending.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let synced = (|| {
            let mut dir = self.dir.as_path();
            self.disk.sync_dir(dir)?;
            for _ in 0..ancestors {
                match dir.parent() {
                    Some(p) if !p.as_os_str().is_empty() => {
                        self.disk.sync_dir(p)?;
                        dir = p;
                    }
                    _ => break,
                }
            }
            Ok(())
        })();
        if synced.is_err() {
            self.dir_sync_pending.store(true, Ordering::Release);
        }
        synced
    }

    /// The tail file, creating the first one (at `start_if_empty`) or the next
    /// one when the tail is full. Its blocks are reserved as its policy says
    /// before it is returned (see [`MappedFile::ensure_reserved_until`]).
    /// Writer only.
    pub fn last_writable(&self, start_if_empty: i64) -> Result<Arc<MappedFile>> {
        self.last_writable_for(start_if_empty, 1)
    }

    /// [`MappedFileQueue::last_writable`] for an append of `len` bytes: the
    /// blocks of the returned file are reserved at least up to its write
    /// position plus `len` (or to its end). Writer only.
    pub fn last_writable_for(&self, start_if_empty: i64, len: usize) -> Result<Arc<MappedFile>> {
        let f = match self.last() {
            None => self.create_file(start_if_empty)?,
            Some(f) if f.is_full() => self.create_file(f.end_offset())?,
            Some(f) => f,
        };
        let end = (f.wrote_position() + len).min(f.size());
        f.ensure_reserved_until(end)?;
        Ok(f)
    }

    /// Cuts the log at `offset`: the file holding it keeps `[start, offset)`
    /// and has its stale tail zeroed; later files are deleted.
    pub fn truncate_dirty(&self, offset: i64) -> Result<()> {
        let mut remove = Vec::new();
        {
            let files = self.files.read();
            for f in files.iter() {
                if f.end_offset() <= offset {
                    continue;
                }
                if f.start_offset() <= offset {
                    let pos = (offset - f.start_offset()) as usize;
                    zero_dirty_tail(f, pos);
                    f.set_positions(pos);
                } else {
                    remove.push(Arc::clone(f));
                }
            }
        }
        if !remove.is_empty() {
            self.files
                .write()
                .retain(|f| !remove.iter().any(|r| Arc::ptr_eq(r, f)));
            // Newest first, each deletion made durable before the next: a
            // crash in between leaves a shorter log, never a gap in it.
            for f in remove.iter().rev() {
                tracing::warn!(file = %f.path().display(), "deleting file past the end of the log");
                f.destroy()?;
                self.disk.sync_dir(&self.dir).map_err(StoreError::from)?;
            }
        }
        if self.flushed_where() > offset {
            self.flushed_where.store(offset, Ordering::Release);
        }
        if self.committed_where() > offset {
            self.committed_where.store(offset, Ordering::Release);
        }
        Ok(())
    }

    /// Copies write-buffer contents into the files (transient pool mode).
    /// Returns true when nothing was left to commit.
    pub fn commit(&self, least_pages: usize) -> Result<bool> {
        let mut progressed = false;
        loop {
            let at = self.committed_where();
            let Some(f) = self.find_by_offset(at).or_else(|| self.first_if_at(at)) else {
                return Ok(!progressed);
            };
            let pos = f.commit(least_pages)?;
            let new_where = f.start_offset() + pos as i64;
            if new_where != at {
                progressed = true;
            }
            self.committed_where.store(new_where, Ordering::Release);
            if pos < f.size() {
                return Ok(!progressed);
            }
        }
    }

    /// fsyncs what is committed but not yet flushed, if at least `least_pages`
    /// pages wait (0: anything). Returns the new flushed offset.
    pub fn flush(&self, least_pages: usize) -> Result<i64> {
        loop {
            let at = self.flushed_where();
            let Some(f) = self.find_by_offset(at).or_else(|| self.first_if_at(at)) else {
                return Ok(at);
            };
            let pos = f.flush(least_pages)?;
            let new_where = f.start_offset() + pos as i64;
            self.flushed_where.store(new_where, Ordering::Release);
            if pos < f.size() {
                return Ok(new_where);
            }
            // The file is complete; carry on into the next one, if any.
            if self.find_by_offset(new_where).is_none() {
                return Ok(new_where);
            }
        }
    }

    /// With an empty log both positions are 0 but no file holds offset 0 yet.
    fn first_if_at(&self, at: i64) -> Option<Arc<MappedFile>> {
        self.first().filter(|f| f.start_offset() >= at)
    }

    /// Deletes files (never the tail one) last modified more than
    /// `reserved` ago, or all but the tail when `force`; at most `max_files`,
    /// pausing `interval` between deletions. Returns the files deleted.
    pub fn delete_expired_by_time(
        &self,
        reserved: Duration,
        force: bool,
        max_files: usize,
        interval: Duration,
        keep_from: i64,
    ) -> Result<usize> {
        let files = self.files();
        if files.len() <= 1 {
            return Ok(0);
        }
        let now = SystemTime::now();
        let mut victims = Vec::new();
        for f in &files[..files.len() - 1] {
            if victims.len() >= max_files || f.start_offset() + self.file_size() as i64 > keep_from
            {
                break;
            }
            let expired = match f.last_modified() {
                Some(m) => now
                    .duration_since(m)
                    .map(|age| age >= reserved)
                    .unwrap_or(false),
                None => false,
            };
            if expired || force {
                victims.push(Arc::clone(f));
            } else {
                // Files are in age order; the first young one ends the run.
                break;
            }
        }
        self.remove_head(&victims, interval)?;
        Ok(victims.len())
    }

    /// Deletes the given files, which must be a prefix of the queue.
    pub fn remove_head(&self, victims: &[Arc<MappedFile>], interval: Duration) -> Result<()> {
        if victims.is_empty() {
            return Ok(());
        }
        {
            let files = self.files.read();
            for (a, b) in victims.iter().zip(files.iter()) {
                assert!(Arc::ptr_eq(a, b), "only the head of a log may be deleted");
            }
        }
        // Oldest first, each deletion made durable before the next: names
        // removed together persist in any order at a power loss, and a
        // lost removal between two kept ones left a gap in the log that
        // recovery refuses (the power-loss simulator's soak found this).
        for (i, f) in victims.iter().enumerate() {
            self.files.write().retain(|x| !Arc::ptr_eq(x, f));
            tracing::info!(file = %f.path().display(), "deleting expired file");
            f.destroy()?;
            self.disk.sync_dir(&self.dir).map_err(StoreError::from)?;
            if i + 1 < victims.len() && !interval.is_zero() {
                std::thread::sleep(interval);
            }
        }
        Ok(())
    }

    /// Removes every file (topic deletion).
    pub fn destroy_all(&self) -> Result<()> {
        let files = std::mem::take(&mut *self.files.write());
        for f in files {
            f.destroy()?;
        }
        self.set_flushed_and_committed(0);
        match self.disk.remove_dir(&self.dir, false) {
            Ok(_) => Ok(()),
            Err(basalt_disk::DiskError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::DirectoryNotEmpty =>
            {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Stops the allocator thread and removes a file it prepared but nobody used.
    pub fn shutdown(&self) {
        let end = self.last().map(|f| f.end_offset()).unwrap_or(0);
        if let Some(a) = self.allocator.lock().take() {
            a.stop(end);
        }
    }
}

impl Drop for MappedFileQueue {
    fn drop(&mut self) {
        let end = self
            .files
            .get_mut()
            .last()
            .map(|f| f.end_offset())
            .unwrap_or(0);
        if let Some(a) = self.allocator.get_mut().take() {
            a.stop(end);
        }
    }
}

/// Zeroes the pages after `pos` that hold anything, so that stale bytes past
/// a cut can never be read back as records. Holes are skipped and pages that
/// are already all zero are only read.
fn zero_dirty_tail(f: &MappedFile, pos: usize) {
    let raw = f.raw();
    let size = raw.len();
    for (start, end) in f.data_ranges(pos) {
        let mut p = start;
        while p < end {
            let page_end = ((p / PAGE_SIZE + 1) * PAGE_SIZE).min(end).min(size);
            if raw[p..page_end].iter().any(|b| *b != 0) {
                f.zero_range(p, page_end - p);
            }
            p = page_end;
        }
    }
}

/// Background creator of the next file (RocketMQ's AllocateMappedFileService).
struct Allocator {
    shared: Arc<AllocatorShared>,
    thread: Option<JoinHandle<()>>,
}

struct AllocatorShared {
    request: Mutex<Option<(PathBuf, i64, usize)>>,
    /// A range of the file being written to map ahead of the writer.
    prefault: Mutex<Option<(Arc<MappedFile>, usize)>>,
    ready: Mutex<Option<Arc<MappedFile>>>,
    signal: Signal,
    stop: std::sync::atomic::AtomicBool,
}

impl Allocator {
    fn start(queue: std::sync::Weak<MappedFileQueue>, warm: bool) -> Allocator {
        let shared = Arc::new(AllocatorShared {
            request: Mutex::new(None),
            prefault: Mutex::new(None),
            ready: Mutex::new(None),
            signal: Signal::new(),
            stop: std::sync::atomic::AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("basalt-allocate".into())
            .spawn(move || {
                while !s.stop.load(Ordering::Acquire) {
                    s.signal.wait(None);
                    let ahead = s.prefault.lock().take();
                    if let Some((f, from)) = ahead {
                        f.prefault(from, PREFAULT_CHUNK);
                    }
                    let Some((dir, start, size)) = s.request.lock().take() else {
                        continue;
                    };
                    let Some(q) = queue.upgrade() else {
                        return;
                    };
                    debug_assert_eq!((q.dir.as_path(), q.file_size), (dir.as_path(), size));
                    let created = q.make_file(start);
                    drop(q);
                    match created {
                        Ok(f) => {
                            if warm {
                                f.warm();
                            } else {
                                f.prefault(0, PREFAULT_CHUNK * 2);
                            }
                            *s.ready.lock() = Some(Arc::new(f));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "could not pre-allocate the next file; the writer will create it")
                        }
                    }
                }
            })
            .expect("spawn allocator thread");
        Allocator {
            shared,
            thread: Some(thread),
        }
    }

    fn request_prefault(&self, f: Arc<MappedFile>, from: usize) {
        *self.shared.prefault.lock() = Some((f, from));
        self.shared.signal.notify();
    }

    fn request(&self, dir: PathBuf, start: i64, size: usize) {
        *self.shared.request.lock() = Some((dir, start, size));
        self.shared.signal.notify();
    }

    /// The prepared file for `start`, if that is what was prepared.
    ///
    /// A prepared file for another offset is dropped from the slot but never
    /// deleted here: the writer may have created the same file itself while
    /// the allocator was slow, and then it holds data. Unused files are
    /// removed by [`Allocator::stop`] only if they lie past the log's end.
    fn take(&self, start: i64, wants_buffer: bool) -> Option<Arc<MappedFile>> {
        let mut ready = self.shared.ready.lock();
        match ready.take() {
            Some(f) if f.start_offset() == start && (!wants_buffer || f.has_write_buffer()) => {
                Some(f)
            }
            Some(other) if other.start_offset() > start => {
                // Prepared ahead of time for a later roll: keep it.
                *ready = Some(other);
                None
            }
            _ => None,
        }
    }

    /// Stops the thread. A prepared file that starts at or after `log_end`
    /// holds nothing and would look like an empty tail on the next start, so
    /// it is removed.
    fn stop(mut self, log_end: i64) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.signal.notify();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(f) = self.shared.ready.lock().take()
            && f.start_offset() >= log_end
            && f.wrote_position() == 0
        {
            let _ = f.destroy();
        }
    }
}

#[cfg(test)]
#[path = "mapped_file_queue_tests.rs"]
mod tests;
