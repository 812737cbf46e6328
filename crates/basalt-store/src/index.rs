//! IndexFile: lookup of messages by key (docs/storage-format.md#indexfile).
//!
//! A file is a 40-byte header, a table of `slot_num` i32 hash slots, and
//! `index_num` 20-byte entries `[key hash i32][phys i64][time diff s i32][prev i32]`.
//! Each slot holds the number of the newest entry in its bucket; entries chain
//! to older ones through `prev`. Entry 0 is never used; counting starts at 1.
//!
//! One writer (the dispatch thread) adds entries; readers follow chains.
//! Slots and counts are published with atomic stores after the entry they
//! point to is complete, so a reader never follows a half-written entry.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

use basalt_common::hash::index_key_hash;
use basalt_disk::{Disk, Segment, SegmentOptions};
use parking_lot::RwLock;

use crate::error::{Result, StoreError};

pub const HEADER_SIZE: usize = 40;
/// Index files keep their descriptor: a flush is one `fdatasync`.
const SEGMENT: SegmentOptions = SegmentOptions {
    keep_fd: true,
    random_access: false,
};
const SLOT_SIZE: usize = 4;
const ENTRY_SIZE: usize = 20;

/// Bytes of an index file with these dimensions.
pub fn index_file_size(slot_num: usize, index_num: usize) -> usize {
    HEADER_SIZE + slot_num * SLOT_SIZE + index_num * ENTRY_SIZE
}

/// One index file. See the module documentation.
pub struct IndexFile {
    path: PathBuf,
    disk: Disk,
    /// The mapped file (kept descriptor: flushes are `fdatasync`).
    map: Segment,
    slot_num: usize,
    index_num: usize,
    begin_timestamp: AtomicI64,
    end_timestamp: AtomicI64,
    begin_phy_offset: AtomicI64,
    end_phy_offset: AtomicI64,
    hash_slot_count: AtomicI32,
    index_count: AtomicI32,
    /// Blocks allocated on disk: entries may be written through the mapping.
    reserved: std::sync::atomic::AtomicBool,
}

// SAFETY: the mapping is only written by the single dispatch thread; readers
// read slots/counts through atomics and entries only after a Release store of
// the slot that points at them.
unsafe impl Send for IndexFile {}
// SAFETY: as for Send above.
unsafe impl Sync for IndexFile {}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("path", &self.path)
            .field("index_count", &self.index_count())
            .finish()
    }
}

impl IndexFile {
    /// Creates an empty index file whose entries continue after `prev`
    /// (end offsets carried over so dedupe keeps working across files). Its
    /// blocks are reserved on disk first; on a full disk this fails with
    /// [`StoreError::NoSpace`] and leaves no file behind.
    pub fn create(
        path: &Path,
        slot_num: usize,
        index_num: usize,
        begin_phy_offset: i64,
        begin_timestamp: i64,
    ) -> Result<IndexFile> {
        Self::create_on(
            &Disk::Real,
            path,
            slot_num,
            index_num,
            begin_phy_offset,
            begin_timestamp,
        )
    }

    /// [`IndexFile::create`] on `disk`.
    pub fn create_on(
        disk: &Disk,
        path: &Path,
        slot_num: usize,
        index_num: usize,
        begin_phy_offset: i64,
        begin_timestamp: i64,
    ) -> Result<IndexFile> {
        let size = index_file_size(slot_num, index_num);
        if disk.exists(path) {
            return Err(StoreError::io(
                path,
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        let (seg, _) = disk.create_segment(path, size, size, SEGMENT)?;
        let f = Self::map(disk, path, seg, slot_num, index_num);
        f.reserved.store(true, Ordering::Release);
        f.begin_phy_offset
            .store(begin_phy_offset, Ordering::Release);
        f.end_phy_offset.store(begin_phy_offset, Ordering::Release);
        f.begin_timestamp.store(begin_timestamp, Ordering::Release);
        f.end_timestamp.store(begin_timestamp, Ordering::Release);
        f.index_count.store(1, Ordering::Release);
        f.write_header();
        Ok(f)
    }

    /// Opens an existing index file and reads its header.
    pub fn open(path: &Path, slot_num: usize, index_num: usize) -> Result<IndexFile> {
        Self::open_on(&Disk::Real, path, slot_num, index_num)
    }

    /// [`IndexFile::open`] on `disk`.
    pub fn open_on(
        disk: &Disk,
        path: &Path,
        slot_num: usize,
        index_num: usize,
    ) -> Result<IndexFile> {
        let size = index_file_size(slot_num, index_num);
        let seg = disk.open_segment(path, SEGMENT)?;
        let len = seg.len();
        if len == 0 {
            // Made but never sized: the process died between creating the
            // file and setting its length. Nothing was indexed in it.
            return Err(StoreError::Corrupt {
                what: "index file",
                path: path.to_path_buf(),
                offset: 0,
                reason: "empty: created but never sized (a crash during its creation)".into(),
            });
        }
        if len != size {
            return Err(StoreError::Layout {
                path: path.to_path_buf(),
                reason: format!("index file is {len} bytes, expected {size}"),
            });
        }
        let f = Self::map(disk, path, seg, slot_num, index_num);
        let h = f.bytes(0, HEADER_SIZE);
        let be64 = |a: usize| i64::from_be_bytes(h[a..a + 8].try_into().expect("8 bytes"));
        let be32 = |a: usize| i32::from_be_bytes(h[a..a + 4].try_into().expect("4 bytes"));
        let count = be32(36);
        if count < 1 || count as usize > index_num {
            return Err(StoreError::Corrupt {
                what: "index file header",
                path: path.to_path_buf(),
                offset: 36,
                reason: format!("index count {count} outside 1..={index_num}"),
            });
        }
        f.begin_timestamp.store(be64(0), Ordering::Release);
        f.end_timestamp.store(be64(8), Ordering::Release);
        f.begin_phy_offset.store(be64(16), Ordering::Release);
        f.end_phy_offset.store(be64(24), Ordering::Release);
        f.hash_slot_count.store(be32(32), Ordering::Release);
        f.index_count.store(count, Ordering::Release);
        Ok(f)
    }

    fn map(disk: &Disk, path: &Path, map: Segment, slot_num: usize, index_num: usize) -> IndexFile {
        IndexFile {
            path: path.to_path_buf(),
            disk: disk.clone(),
            map,
            slot_num,
            index_num,
            begin_timestamp: AtomicI64::new(0),
            end_timestamp: AtomicI64::new(0),
            begin_phy_offset: AtomicI64::new(0),
            end_phy_offset: AtomicI64::new(0),
            hash_slot_count: AtomicI32::new(0),
            index_count: AtomicI32::new(1),
            reserved: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn bytes(&self, at: usize, len: usize) -> &[u8] {
        assert!(at + len <= self.map.len());
        // SAFETY: in bounds of the mapping, which lives as long as self.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(at), len) }
    }

    fn write(&self, at: usize, data: &[u8]) {
        assert!(at + data.len() <= self.map.len());
        // SAFETY: single writer (dispatch thread); in bounds.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.as_ptr().add(at), data.len())
        };
    }

    /// Slot values are big-endian on disk like everything else.
    fn slot_load(&self, idx: usize) -> i32 {
        i32::from_be(self.slot(idx).load(Ordering::Acquire))
    }

    fn slot_store(&self, idx: usize, v: i32) {
        self.slot(idx).store(v.to_be(), Ordering::Release);
    }

    fn slot(&self, idx: usize) -> &AtomicI32 {
        let at = HEADER_SIZE + idx * SLOT_SIZE;
        assert!(at + 4 <= self.map.len());
        // SAFETY: 4-byte aligned (mapping is page aligned, 40 and 4·idx are
        // multiples of 4), in bounds, and only ever accessed atomically.
        unsafe { &*(self.map.as_ptr().add(at) as *const AtomicI32) }
    }

    fn write_header(&self) {
        let mut h = [0u8; HEADER_SIZE];
        h[0..8].copy_from_slice(&self.begin_timestamp.load(Ordering::Acquire).to_be_bytes());
        h[8..16].copy_from_slice(&self.end_timestamp.load(Ordering::Acquire).to_be_bytes());
        h[16..24].copy_from_slice(&self.begin_phy_offset.load(Ordering::Acquire).to_be_bytes());
        h[24..32].copy_from_slice(&self.end_phy_offset.load(Ordering::Acquire).to_be_bytes());
        h[32..36].copy_from_slice(&self.hash_slot_count.load(Ordering::Acquire).to_be_bytes());
        h[36..40].copy_from_slice(&self.index_count.load(Ordering::Acquire).to_be_bytes());
        self.write(0, &h);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn index_count(&self) -> i32 {
        self.index_count.load(Ordering::Acquire)
    }
    pub fn begin_timestamp(&self) -> i64 {
        self.begin_timestamp.load(Ordering::Acquire)
    }
    pub fn end_timestamp(&self) -> i64 {
        self.end_timestamp.load(Ordering::Acquire)
    }
    pub fn end_phy_offset(&self) -> i64 {
        self.end_phy_offset.load(Ordering::Acquire)
    }
    pub fn is_full(&self) -> bool {
        self.index_count() as usize >= self.index_num
    }

    /// Reserves the blocks of a file found on disk before entries are added
    /// to it (see [`crate::mapped_file`]). Dispatch thread only.
    pub fn ensure_reserved(&self) -> Result<()> {
        if self.reserved.load(Ordering::Acquire) {
            return Ok(());
        }
        self.map.reserve(0, self.map.len(), false)?;
        self.reserved.store(true, Ordering::Release);
        Ok(())
    }
    /// Whether the file's time span overlaps `[begin, end]`.
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (b, e) = (self.begin_timestamp(), self.end_timestamp());
        (begin < b && end > e) || (begin >= b && begin <= e) || (end >= b && end <= e)
    }

    /// Adds `key` → `phy_offset`. Returns false when the file is full.
    /// Dispatch thread only.
    pub fn put_key(&self, key: &str, phy_offset: i64, store_timestamp: i64) -> bool {
        debug_assert!(
            self.reserved.load(Ordering::Acquire),
            "index file not reserved"
        );
        let count = self.index_count();
        if count as usize >= self.index_num {
            return false;
        }
        let hash = index_key_hash(key);
        let slot_idx = hash as usize % self.slot_num;
        let mut prev = self.slot_load(slot_idx);
        if prev <= 0 || prev > count {
            prev = 0;
        }
        let begin = self.begin_timestamp();
        let time_diff = if begin <= 0 {
            0
        } else {
            ((store_timestamp - begin) / 1000).clamp(0, i32::MAX as i64) as i32
        };
        let mut e = [0u8; ENTRY_SIZE];
        e[0..4].copy_from_slice(&hash.to_be_bytes());
        e[4..12].copy_from_slice(&phy_offset.to_be_bytes());
        e[12..16].copy_from_slice(&time_diff.to_be_bytes());
        e[16..20].copy_from_slice(&prev.to_be_bytes());
        let at = HEADER_SIZE + self.slot_num * SLOT_SIZE + count as usize * ENTRY_SIZE;
        self.write(at, &e);
        // Publish: the slot now points at a complete entry.
        self.slot_store(slot_idx, count);
        if count <= 1 {
            self.begin_phy_offset.store(phy_offset, Ordering::Release);
            self.begin_timestamp
                .store(store_timestamp, Ordering::Release);
        }
        if prev == 0 {
            self.hash_slot_count.fetch_add(1, Ordering::AcqRel);
        }
        self.end_phy_offset.store(phy_offset, Ordering::Release);
        self.end_timestamp.store(store_timestamp, Ordering::Release);
        self.index_count.store(count + 1, Ordering::Release);
        self.write_header();
        true
    }

    /// Rebuilds every hash chain of the file over its entries that look
    /// intact, ignoring the stored links. After a power loss the unsynced
    /// entries of the newest file may be lost or torn while the header and
    /// a slot pointing at them persisted: the chain then ended at a zeroed
    /// entry and hid the fsynced entries behind it (soak seed 18700). An
    /// entry is kept unless it is all zeros or has a negative hash, offset
    /// or time (re-dispatched entries may lie below the file's first
    /// offset, so the range is not checked); a torn one that passes costs a
    /// lookup a record whose key it re-checks. Recovery only (one pass).
    pub fn relink(&self) {
        let count = self.index_count().max(1);
        let base = HEADER_SIZE + self.slot_num * SLOT_SIZE;
        let mut heads = vec![0i32; self.slot_num];
        for k in 1..count {
            let at = base + k as usize * ENTRY_SIZE;
            let e = self.bytes(at, ENTRY_SIZE);
            let h = i32::from_be_bytes(e[0..4].try_into().expect("4 bytes"));
            let phy = i64::from_be_bytes(e[4..12].try_into().expect("8 bytes"));
            let diff = i32::from_be_bytes(e[12..16].try_into().expect("4 bytes"));
            if e.iter().all(|b| *b == 0) || diff < 0 || phy < 0 || h < 0 {
                continue;
            }
            let slot = h as usize % self.slot_num;
            self.write(at + 16, &heads[slot].to_be_bytes());
            heads[slot] = k;
        }
        let mut used = 0;
        for (i, head) in heads.iter().enumerate() {
            self.slot_store(i, *head);
            used += i32::from(*head != 0);
        }
        self.hash_slot_count.store(used, Ordering::Release);
        self.write_header();
    }

    /// CommitLog offsets of entries whose key hash equals `key`'s and whose
    /// time is in `[begin, end]`, newest first, at most `max`. Hash collisions
    /// are possible: callers re-check the real key.
    pub fn select_phy_offsets(
        &self,
        key: &str,
        max: usize,
        begin: i64,
        end: i64,
        out: &mut Vec<i64>,
    ) {
        let hash = index_key_hash(key);
        let slot_idx = hash as usize % self.slot_num;
        let count = self.index_count();
        let mut next = self.slot_load(slot_idx);
        if next <= 0 || next > count || count <= 1 {
            return;
        }
        let base = HEADER_SIZE + self.slot_num * SLOT_SIZE;
        let file_begin = self.begin_timestamp();
        for _ in 0..self.index_num {
            if out.len() >= max {
                break;
            }
            let e = self.bytes(base + next as usize * ENTRY_SIZE, ENTRY_SIZE);
            let h = i32::from_be_bytes(e[0..4].try_into().expect("4 bytes"));
            let phy = i64::from_be_bytes(e[4..12].try_into().expect("8 bytes"));
            let diff = i32::from_be_bytes(e[12..16].try_into().expect("4 bytes"));
            let prev = i32::from_be_bytes(e[16..20].try_into().expect("4 bytes"));
            if diff < 0 {
                break;
            }
            let time = file_begin + diff as i64 * 1000;
            if h == hash && time >= begin && time <= end {
                out.push(phy);
            }
            if prev <= 0 || prev > count || prev == next || time < begin {
                break;
            }
            next = prev;
        }
    }

    /// fsyncs the file.
    pub fn flush(&self) -> Result<()> {
        Ok(self.map.sync_all()?)
    }

    pub fn destroy(&self) -> Result<()> {
        self.disk.remove_file(&self.path)?;
        Ok(())
    }
}

/// The message fields the index needs.
#[derive(Debug, Clone, Copy)]
pub struct IndexRequest<'a> {
    pub topic: &'a str,
    pub physical_offset: i64,
    pub store_timestamp: i64,
    pub uniq_key: Option<&'a str>,
    /// Space-separated business keys.
    pub keys: Option<&'a str>,
}

/// The chain of index files, oldest first. The newest one takes new entries.
#[derive(Debug)]
pub struct IndexService {
    disk: Disk,
    dir: PathBuf,
    slot_num: usize,
    index_num: usize,
    files: RwLock<Vec<Arc<IndexFile>>>,
    /// Messages below this CommitLog offset are already indexed.
    indexed_below: AtomicI64,
    /// After a new file could not be created for lack of space, until when
    /// (ms since the epoch) entries are dropped without trying again.
    no_space_until: AtomicI64,
    /// Messages left out of the index because the disk was full.
    skipped: AtomicI64,
}

impl IndexService {
    pub fn new(dir: PathBuf, slot_num: usize, index_num: usize) -> Self {
        IndexService {
            disk: Disk::Real,
            dir,
            slot_num,
            index_num,
            files: RwLock::new(Vec::new()),
            indexed_below: AtomicI64::new(0),
            no_space_until: AtomicI64::new(0),
            skipped: AtomicI64::new(0),
        }
    }

    /// Index files live on `disk` (default: the real one).
    pub fn with_disk(mut self, disk: Disk) -> Self {
        self.disk = disk;
        self
    }

    /// Opens every index file (named by a 17-digit timestamp), oldest first.
    pub fn load(&self) -> Result<()> {
        self.disk.create_dir_all_durable(&self.dir)?;
        let mut names = Vec::new();
        for e in self.disk.list_dir(&self.dir)? {
            let name = e.name;
            if name.len() == 17 && name.bytes().all(|b| b.is_ascii_digit()) {
                names.push(name);
            }
        }
        names.sort();
        let mut files = Vec::new();
        for n in names {
            let p = self.dir.join(&n);
            match IndexFile::open_on(&self.disk, &p, self.slot_num, self.index_num) {
                Ok(f) => files.push(Arc::new(f)),
                Err(e @ StoreError::Corrupt { .. }) => {
                    // An index file is derived data; losing it costs lookups,
                    // not messages. Recovery re-indexes what it can.
                    tracing::error!(error = %e, "dropping unreadable index file");
                    let _ = self.disk.remove_file(&p);
                }
                Err(e) => return Err(e),
            }
        }
        let below = files
            .iter()
            .rev()
            .find(|f| f.index_count() > 1)
            .map(|f| f.end_phy_offset() + 1)
            .unwrap_or(0);
        self.indexed_below.store(below, Ordering::Release);
        *self.files.write() = files;
        Ok(())
    }

    /// After recovery cut the CommitLog at `end`, entries for offsets at or
    /// past it must be written again when those offsets are reused.
    pub fn clamp_indexed_below(&self, end: i64) {
        self.indexed_below.fetch_min(end, Ordering::AcqRel);
    }

    /// Abnormal recovery re-dispatching from `scan_from`: everything from
    /// there is indexed again, and the newest file's chains are relinked
    /// over its intact entries (see [`IndexFile::relink`]). Older files
    /// were fsynced whole when the next one was made.
    pub fn recover_after_crash(&self, scan_from: i64) {
        self.clamp_indexed_below(scan_from);
        if let Some(f) = self.files.read().last() {
            f.relink();
        }
    }

    pub fn files(&self) -> Vec<Arc<IndexFile>> {
        self.files.read().clone()
    }

    /// Indexes one message's unique key and keys. Dispatch thread only.
    ///
    /// The index is a lookup aid derived from the CommitLog: when the disk
    /// has no room for a new index file, the message is left out of the
    /// index (it stays consumable, only not findable by key) rather than
    /// holding up dispatch, and so consumption, until space is freed.
    pub fn build_index(&self, req: &IndexRequest<'_>) -> Result<()> {
        if req.physical_offset < self.indexed_below.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.put_keys(req) {
            Ok(()) => {}
            Err(e) if e.is_no_space() => {
                let n = self.skipped.fetch_add(1, Ordering::Relaxed);
                if n % 10_000 == 0 {
                    tracing::warn!(error = %e, skipped = n + 1,
                        "disk full: messages are left out of the key index until space is freed");
                }
            }
            Err(e) => return Err(e),
        }
        self.indexed_below
            .store(req.physical_offset + 1, Ordering::Release);
        Ok(())
    }

    /// Messages left out of the index because the disk was full.
    pub fn skipped_for_space(&self) -> i64 {
        self.skipped.load(Ordering::Relaxed)
    }

    fn put_keys(&self, req: &IndexRequest<'_>) -> Result<()> {
        let mut key = String::with_capacity(req.topic.len() + 40);
        if let Some(u) = req.uniq_key.filter(|u| !u.is_empty()) {
            self.put(&mut key, req.topic, u, req)?;
        }
        if let Some(keys) = req.keys {
            for k in keys.split(basalt_common::constants::property::KEY_SEPARATOR) {
                if !k.is_empty() {
                    self.put(&mut key, req.topic, k, req)?;
                }
            }
        }
        Ok(())
    }

    fn put(&self, buf: &mut String, topic: &str, k: &str, req: &IndexRequest<'_>) -> Result<()> {
        buf.clear();
        buf.push_str(topic);
        buf.push('#');
        buf.push_str(k);
        let mut file = self.writable_file(req.physical_offset, req.store_timestamp)?;
        if !file.put_key(buf, req.physical_offset, req.store_timestamp) {
            file.flush()?;
            file = self.roll(file.end_phy_offset(), file.end_timestamp())?;
            if !file.put_key(buf, req.physical_offset, req.store_timestamp) {
                return Err(StoreError::Config(
                    "index file cannot hold a single entry (maxIndexNum too small)".into(),
                ));
            }
        }
        Ok(())
    }

    fn writable_file(&self, phys: i64, ts: i64) -> Result<Arc<IndexFile>> {
        let last = self.files.read().last().cloned();
        if let Some(f) = last
            && !f.is_full()
        {
            f.ensure_reserved()?;
            return Ok(f);
        }
        let (p, t) = self
            .files
            .read()
            .last()
            .map(|f| (f.end_phy_offset(), f.end_timestamp()))
            .unwrap_or((phys, ts));
        self.roll(p, t)
    }

    fn roll(&self, begin_phy: i64, begin_ts: i64) -> Result<Arc<IndexFile>> {
        // The disk's clock (names and the full-disk backoff replay under
        // the simulator).
        let now = self.disk.now_millis();
        if now < self.no_space_until.load(Ordering::Acquire) {
            return Err(StoreError::NoSpace {
                path: self.dir.clone(),
                bytes: index_file_size(self.slot_num, self.index_num) as u64,
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            });
        }
        let f = self.create_next(now, begin_phy, begin_ts);
        if let Err(e) = &f
            && e.is_no_space()
        {
            self.no_space_until.store(now + 1000, Ordering::Release);
        }
        f
    }

    fn create_next(&self, mut now: i64, begin_phy: i64, begin_ts: i64) -> Result<Arc<IndexFile>> {
        self.disk.create_dir_all_durable(&self.dir)?;
        let path = loop {
            let p = self.dir.join(local_time_name(now));
            if !self.disk.exists(&p) {
                break p;
            }
            now += 1;
        };
        let f = Arc::new(IndexFile::create_on(
            &self.disk,
            &path,
            self.slot_num,
            self.index_num,
            begin_phy,
            begin_ts,
        )?);
        self.disk.sync_dir(&self.dir)?;
        self.files.write().push(Arc::clone(&f));
        Ok(f)
    }

    /// CommitLog offsets of messages of `topic` with key `key` stored in
    /// `[begin, end]`, newest first, at most `max`.
    pub fn query_offsets(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin: i64,
        end: i64,
    ) -> Vec<i64> {
        let full = format!("{topic}#{key}");
        let mut out = Vec::new();
        for f in self.files().iter().rev() {
            if out.len() >= max {
                break;
            }
            if f.is_time_matched(begin, end) {
                f.select_phy_offsets(&full, max, begin, end, &mut out);
            }
            if f.begin_timestamp() < begin {
                break;
            }
        }
        // After an abnormal recovery a message may be indexed twice.
        let mut seen = std::collections::HashSet::with_capacity(out.len());
        out.retain(|phy| seen.insert(*phy));
        out
    }

    /// fsyncs the newest file; returns the store time it now covers.
    pub fn flush(&self) -> Result<i64> {
        let last = self.files.read().last().cloned();
        match last {
            Some(f) => {
                let ts = f.end_timestamp();
                f.flush()?;
                Ok(ts)
            }
            None => Ok(0),
        }
    }

    /// Deletes files whose every entry points below `commit_log_min` (never
    /// the newest file).
    pub fn delete_expired(&self, commit_log_min: i64) -> Result<usize> {
        let files = self.files();
        let mut n = 0;
        for f in files.iter().take(files.len().saturating_sub(1)) {
            if f.end_phy_offset() < commit_log_min {
                self.files.write().retain(|x| !Arc::ptr_eq(x, f));
                f.destroy()?;
                n += 1;
            } else {
                break;
            }
        }
        if n > 0 {
            self.disk.sync_dir(&self.dir)?;
        }
        Ok(n)
    }
}

/// `yyyyMMddHHmmssSSS` in local time, as RocketMQ names index files.
pub fn local_time_name(millis: i64) -> String {
    let secs = (millis / 1000) as libc::time_t;
    // SAFETY: localtime_r writes into the zeroed tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers refer to values we own for the call's duration.
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if !ok {
        return format!("{:017}", millis);
    }
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        millis % 1000
    )
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod sim_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_and_query_with_collisions_and_roll() {
        let dir = tempfile::tempdir().unwrap();
        // 4 slots force collisions; 8 entries per file force rolls.
        let svc = IndexService::new(dir.path().to_path_buf(), 4, 8);
        svc.load().unwrap();
        let t0 = 1_700_000_000_000;
        for i in 0..20i64 {
            let key = format!("k{}", i % 5);
            svc.build_index(&IndexRequest {
                topic: "T",
                physical_offset: i * 100,
                store_timestamp: t0 + i * 1000,
                uniq_key: None,
                keys: Some(&key),
            })
            .unwrap();
        }
        assert!(svc.files().len() >= 3);
        let mut hits = svc.query_offsets("T", "k3", 100, t0, t0 + 100_000);
        hits.sort();
        assert_eq!(hits, vec![300, 800, 1300, 1800]);
        // Time window cuts older entries.
        let hits = svc.query_offsets("T", "k3", 100, t0 + 10_000, t0 + 100_000);
        assert!(hits.iter().all(|p| *p >= 1300), "{hits:?}");
        // Re-dispatch of an indexed message adds nothing.
        svc.build_index(&IndexRequest {
            topic: "T",
            physical_offset: 300,
            store_timestamp: t0,
            uniq_key: None,
            keys: Some("k3"),
        })
        .unwrap();
        assert_eq!(svc.query_offsets("T", "k3", 100, t0, t0 + 100_000).len(), 4);

        // Reload from disk.
        for f in svc.files() {
            f.flush().unwrap();
        }
        drop(svc);
        let svc = IndexService::new(dir.path().to_path_buf(), 4, 8);
        svc.load().unwrap();
        assert_eq!(svc.query_offsets("T", "k3", 100, t0, t0 + 100_000).len(), 4);
    }

    #[test]
    fn header_layout_matches_spec() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("20240101000000000");
        let f = IndexFile::create(&p, 10, 10, 0, 0).unwrap();
        assert!(f.put_key("T#a", 4242, 1_700_000_000_000));
        f.flush().unwrap();
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len(), 40 + 40 + 200);
        // index count = 2 (entry 1 used), slot count = 1
        assert_eq!(&raw[32..36], &1i32.to_be_bytes());
        assert_eq!(&raw[36..40], &2i32.to_be_bytes());
        let hash = index_key_hash("T#a");
        let slot = 40 + (hash as usize % 10) * 4;
        assert_eq!(&raw[slot..slot + 4], &1i32.to_be_bytes());
        let entry = 40 + 40 + 20;
        assert_eq!(&raw[entry..entry + 4], &hash.to_be_bytes());
        assert_eq!(&raw[entry + 4..entry + 12], &4242i64.to_be_bytes());
    }

    #[test]
    fn local_time_name_has_17_digits() {
        let n = local_time_name(1_700_000_000_123);
        assert_eq!(n.len(), 17);
        assert!(n.ends_with("123"));
    }
}
