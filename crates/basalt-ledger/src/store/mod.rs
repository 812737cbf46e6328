//! The ledger store: DLedger's `DLedgerMmapFileStore` layout with Basalt's checks.
//!
//! A ledger directory holds
//!
//! * `data/` — mapped data files of `data_file_size` bytes named by their start
//!   offset; entries in the 48-byte-header layout of [`crate::entry`], a blank
//!   `[-1][remaining]` where an entry would not fit;
//! * `index/` — mapped index files of 32-byte units, unit `k` at byte `k * 32`;
//! * `checkpoint` — `endIndex` (durable, with its index unit, when written) and
//!   `committedIndex`;
//! * `currterm` — term, vote and leader.
//!
//! One writer ([`LedgerStore`], owned by the runtime) appends, truncates and
//! prepares syncs; any number of [`LedgerReader`]s read **committed** entries
//! concurrently, zero-copy from the mappings. Committed bytes are never rewritten,
//! which is what makes the sharing sound (see [`mapped`]).
//!
//! Recovery ([`LedgerStore::open`]) trusts what the checkpoint says is durable,
//! scans every entry after it (magic, size, index continuity, term order, position,
//! body CRC, index unit), rewrites index units that do not match, and cuts the torn
//! tail: the first bad entry and everything after it. Damage inside the region the
//! checkpoint says is durable is not a torn write: opening fails with an error that
//! names the file and offset.

pub mod error;
pub mod faults;
pub mod mapped;
pub mod meta;
mod room;
mod scan;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use bytes::Bytes;
use parking_lot::RwLock;

use crate::core::{HardState, LogRead};
use crate::entry::{
    BLANK_MAGIC, Entry, EntryHeader, EntryKind, HEADER_SIZE, INDEX_UNIT_SIZE, IndexUnit, place,
};

pub use error::LedgerStoreError;
pub use mapped::{LedgerSegment, LedgerSegmentList, SegmentSlice, sync_dir};
pub use meta::LedgerCheckpoint;
use scan::{DataSource, Stop, scan};

const UNIT: i64 = INDEX_UNIT_SIZE as i64;

/// Where and how big.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub dir: PathBuf,
    pub data_file_size: i64,
    pub index_file_size: i64,
}

/// What [`LedgerStore::open`] found.
#[derive(Debug, Clone)]
pub struct Recovered {
    pub hard_state: HardState,
    pub checkpoint: Option<LedgerCheckpoint>,
    /// The checkpoint's committed index, clamped to the recovered end.
    pub committed_index: i64,
    /// Index units rewritten from the data.
    pub index_units_fixed: u64,
    /// Where the torn tail was cut, and why.
    pub cut: Option<(i64, String)>,
}

type Files = Arc<[Arc<LedgerSegment>]>;

/// State shared between the writer and the readers.
struct Shared {
    data: RwLock<Files>,
    index: RwLock<Files>,
    data_file_size: i64,
    index_file_size: i64,
    begin_index: AtomicI64,
    begin_pos: AtomicI64,
    committed_index: AtomicI64,
    /// Byte position just past the last committed entry.
    committed_pos: AtomicI64,
    poisoned: AtomicBool,
}

fn find(files: &[Arc<LedgerSegment>], file_size: i64, pos: i64) -> Option<&Arc<LedgerSegment>> {
    let first = files.first()?.start();
    if pos < first {
        return None;
    }
    files.get(((pos - first) / file_size) as usize)
}

/// A committed entry, its body shared with the mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    pub index: i64,
    pub term: i64,
    /// Byte position of the entry header; the body starts at `pos + 48`.
    pub pos: i64,
    pub kind: EntryKind,
    pub body: Bytes,
}

impl LedgerEntry {
    /// Position of the body (RocketMQ's physical offset of the record it holds).
    pub fn body_pos(&self) -> i64 {
        self.pos + HEADER_SIZE as i64
    }

    /// Position just after the entry.
    pub fn end_pos(&self) -> i64 {
        self.body_pos() + self.body.len() as i64
    }
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("range {pos}+{len} is not committed (committed up to byte {committed_pos})")]
    NotCommitted {
        pos: i64,
        len: usize,
        committed_pos: i64,
    },
    #[error("index {index} is not committed (committed index {committed_index})")]
    IndexNotCommitted { index: i64, committed_index: i64 },
    #[error("position {0} is before the first retained byte")]
    BeforeBegin(i64),
    #[error("range {pos}+{len} crosses a file boundary")]
    CrossesFile { pos: i64, len: usize },
    #[error("corrupt ledger file {path:?} at offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// Reads committed entries and bytes, from any thread, zero-copy. Cheap to clone.
#[derive(Clone)]
pub struct LedgerReader {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LedgerReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerReader")
            .field("committed_index", &self.committed_index())
            .finish()
    }
}

impl LedgerReader {
    pub fn committed_index(&self) -> i64 {
        self.shared.committed_index.load(Ordering::Acquire)
    }

    /// Byte position just past the last committed entry.
    pub fn committed_pos(&self) -> i64 {
        self.shared.committed_pos.load(Ordering::Acquire)
    }

    pub fn begin_index(&self) -> i64 {
        self.shared.begin_index.load(Ordering::Acquire)
    }

    /// `len` committed bytes at `pos` (within one data file), sharing the mapping.
    /// The broker serves pulls from this: a record at `entry.body_pos()`.
    pub fn read(&self, pos: i64, len: usize) -> Result<Bytes, ReadError> {
        let committed_pos = self.committed_pos();
        if pos < 0 || pos + len as i64 > committed_pos {
            return Err(ReadError::NotCommitted {
                pos,
                len,
                committed_pos,
            });
        }
        let files = self.shared.data.read().clone();
        let f = find(&files, self.shared.data_file_size, pos).ok_or(ReadError::BeforeBegin(pos))?;
        let off = (pos - f.start()) as usize;
        if off + len > f.size() as usize {
            return Err(ReadError::CrossesFile { pos, len });
        }
        Ok(Bytes::from_owner(SegmentSlice {
            file: f.clone(),
            off,
            len,
        }))
    }

    /// The committed entry at `index`, checked (header against its index unit, body
    /// CRC).
    pub fn entry(&self, index: i64) -> Result<LedgerEntry, ReadError> {
        let committed_index = self.committed_index();
        if index > committed_index {
            return Err(ReadError::IndexNotCommitted {
                index,
                committed_index,
            });
        }
        if index < self.begin_index() || index < 0 {
            return Err(ReadError::BeforeBegin(index));
        }
        let unit_pos = index * UNIT;
        let index_files = self.shared.index.read().clone();
        let uf = find(&index_files, self.shared.index_file_size, unit_pos)
            .ok_or(ReadError::BeforeBegin(index))?;
        let uoff = (unit_pos - uf.start()) as usize;
        // SAFETY: units of committed entries are never rewritten.
        let unit =
            IndexUnit::decode(unsafe { uf.slice(uoff, INDEX_UNIT_SIZE) }).ok_or_else(|| {
                ReadError::Corrupt {
                    path: uf.path().to_path_buf(),
                    offset: uoff as u64,
                    reason: format!("no index unit for committed index {index}"),
                }
            })?;
        let files = self.shared.data.read().clone();
        let f = find(&files, self.shared.data_file_size, unit.pos)
            .ok_or(ReadError::BeforeBegin(unit.pos))?;
        let off = (unit.pos - f.start()) as usize;
        let corrupt = |reason: String| ReadError::Corrupt {
            path: f.path().to_path_buf(),
            offset: off as u64,
            reason,
        };
        if off + unit.size as usize > f.size() as usize || unit.size < HEADER_SIZE as i32 {
            return Err(corrupt(format!(
                "index unit of {index} points past the file"
            )));
        }
        // SAFETY: committed bytes are immutable.
        let hb = unsafe { f.slice(off, HEADER_SIZE) };
        let h = EntryHeader::decode(hb).map_err(|e| corrupt(e.to_string()))?;
        if !unit.matches(&h) {
            return Err(corrupt(format!(
                "entry header does not match index unit {index}"
            )));
        }
        let body = Bytes::from_owner(SegmentSlice {
            file: f.clone(),
            off: off + HEADER_SIZE,
            len: h.body_len as usize,
        });
        h.check_body(&body).map_err(|e| corrupt(e.to_string()))?;
        Ok(LedgerEntry {
            index,
            term: h.term,
            pos: h.pos,
            kind: h.kind(),
            body,
        })
    }

    /// Committed entries from `from` on, at most `max_entries` and about
    /// `max_bytes` (at least one entry when one is committed).
    pub fn entries(
        &self,
        from: i64,
        max_entries: usize,
        max_bytes: usize,
    ) -> Result<Vec<LedgerEntry>, ReadError> {
        let committed = self.committed_index();
        let mut out = Vec::new();
        let mut bytes = 0;
        let mut i = from.max(self.begin_index()).max(0);
        while i <= committed && out.len() < max_entries && (out.is_empty() || bytes < max_bytes) {
            let e = self.entry(i)?;
            bytes += e.body.len() + HEADER_SIZE;
            out.push(e);
            i += 1;
        }
        Ok(out)
    }
}

/// Syncs prepared by the writer, run on a blocking thread.
#[derive(Default)]
pub struct SyncJob {
    checkpoint: Option<(PathBuf, LedgerCheckpoint)>,
    ranges: Vec<(Arc<LedgerSegment>, usize, usize)>,
    fsync: Vec<Arc<LedgerSegment>>,
    dirs: Vec<PathBuf>,
}

impl SyncJob {
    /// Performs the syncs (and, first, a checkpoint rewrite lowered by a
    /// truncation).
    pub fn run(&self) -> Result<(), LedgerStoreError> {
        if let Some((dir, c)) = &self.checkpoint {
            match meta::store_checkpoint(dir, *c) {
                Ok(()) => {}
                // What matters is that the checkpoint claims no more than the log
                // holds: with no room for a new one, none at all claims nothing.
                Err(e) if e.is_no_space() => meta::remove_checkpoint(dir)?,
                Err(e) => return Err(e),
            }
        }
        for (f, off, len) in &self.ranges {
            f.sync_range(*off, *len)?;
        }
        for f in &self.fsync {
            f.sync_all()?;
        }
        for d in &self.dirs {
            sync_dir(d)?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.checkpoint.is_none()
            && self.ranges.is_empty()
            && self.fsync.is_empty()
            && self.dirs.is_empty()
    }
}

/// A checkpoint write prepared by the writer: syncs the index units, then replaces
/// the `checkpoint` file.
pub struct CheckpointJob {
    sync: SyncJob,
    dir: PathBuf,
    checkpoint: LedgerCheckpoint,
}

impl CheckpointJob {
    pub fn run(&self) -> Result<(), LedgerStoreError> {
        self.sync.run()?;
        meta::store_checkpoint(&self.dir, self.checkpoint)
    }

    pub fn checkpoint(&self) -> LedgerCheckpoint {
        self.checkpoint
    }
}

/// Bytes modified since the last sync of one file list.
#[derive(Default)]
struct Dirty {
    range: Option<(i64, i64)>,
    fsync: Vec<Arc<LedgerSegment>>,
    dir: bool,
}

impl Dirty {
    fn mark(&mut self, lo: i64, hi: i64) {
        self.range = Some(match self.range {
            Some((a, b)) => (a.min(lo), b.max(hi)),
            None => (lo, hi),
        });
    }

    fn take(&mut self, list: &LedgerSegmentList, job: &mut SyncJob) {
        if let Some((lo, hi)) = self.range.take() {
            job.ranges.extend(list.ranges(lo, hi));
        }
        job.fsync.append(&mut self.fsync);
        if std::mem::take(&mut self.dir) {
            job.dirs.push(list.dir().to_path_buf());
        }
    }
}

/// The writer side of a ledger directory. See the module documentation.
pub struct LedgerStore {
    opts: StoreOptions,
    data: LedgerSegmentList,
    index: LedgerSegmentList,
    shared: Arc<Shared>,
    begin_index: i64,
    end_index: i64,
    end_term: i64,
    end_pos: i64,
    data_dirty: Dirty,
    index_dirty: Dirty,
    /// `endIndex` of the last checkpoint written (or loaded).
    checkpoint_end: i64,
    committed_for_checkpoint: i64,
    /// A truncation went below the checkpoint: the next sync lowers it first.
    lower_checkpoint: Option<LedgerCheckpoint>,
    /// The last entries written, with their bodies as given (shared, not copied):
    /// pushes to followers read them from here. Contiguous, ending at `end_index`.
    tail: std::collections::VecDeque<Entry>,
    tail_bytes: usize,
    /// Data pages up to here were (or are being) faulted in.
    prefaulted_until: i64,
    prefault_enabled: bool,
}

/// Bytes of recent entries kept in memory for pushes.
const TAIL_CACHE_BYTES: usize = 16 * 1024 * 1024;
/// Data pages are faulted in this far ahead of the write position, in chunks.
const PREFAULT_AHEAD: i64 = 8 * 1024 * 1024;
const PREFAULT_CHUNK: i64 = 4 * 1024 * 1024;

/// Pages to fault in ahead of the writer, on a thread of their own.
pub struct PrefaultJob {
    ranges: Vec<(Arc<LedgerSegment>, usize, usize)>,
}

impl PrefaultJob {
    /// Faults the ranges in; false if the kernel cannot (then nothing is lost but
    /// the head start).
    pub fn run(&self) -> bool {
        self.ranges
            .iter()
            .all(|(f, off, len)| f.prefault(*off, *len))
    }
}

struct ListSource<'a>(&'a LedgerSegmentList);

impl DataSource for ListSource<'_> {
    fn file_of(&self, pos: i64) -> Option<(PathBuf, i64, i64)> {
        self.0
            .find(pos)
            .map(|f| (f.path().to_path_buf(), f.start(), f.end()))
    }

    fn bytes(&self, pos: i64, len: usize) -> Option<&[u8]> {
        let f = self.0.find(pos)?;
        let off = (pos - f.start()) as usize;
        if off + len > f.size() as usize {
            return None;
        }
        // SAFETY: used by the writer, or before any reader exists.
        Some(unsafe { f.slice(off, len) })
    }

    fn end(&self) -> i64 {
        self.0.files().last().map(|f| f.end()).unwrap_or(0)
    }
}

fn corrupt_at(list: &LedgerSegmentList, pos: i64, reason: String) -> LedgerStoreError {
    match list.find(pos) {
        Some(f) => LedgerStoreError::Corrupt {
            path: f.path().to_path_buf(),
            offset: (pos - f.start()) as u64,
            reason,
        },
        None => LedgerStoreError::Corrupt {
            path: list.dir().to_path_buf(),
            offset: pos.max(0) as u64,
            reason,
        },
    }
}

fn read_unit(index: &LedgerSegmentList, i: i64) -> Option<IndexUnit> {
    index
        .read(i * UNIT, INDEX_UNIT_SIZE)
        .and_then(|b| IndexUnit::decode(&b))
}

/// The first entry header of the data files (after a leading blank, if any).
fn first_entry(data: &LedgerSegmentList) -> Option<EntryHeader> {
    let src = ListSource(data);
    let start = data.files().first()?.start();
    scan(&src, start, None, -1, |_, _| false).first
}

impl LedgerStore {
    /// Opens (creating if needed) and recovers a ledger directory, then makes
    /// everything it kept durable.
    pub fn open(opts: StoreOptions) -> Result<(LedgerStore, Recovered), LedgerStoreError> {
        if opts.data_file_size < 2 * (HEADER_SIZE as i64 + 8)
            || opts.index_file_size % UNIT != 0
            || opts.index_file_size <= 0
        {
            return Err(LedgerStoreError::Invalid(format!(
                "file sizes {} / {}",
                opts.data_file_size, opts.index_file_size
            )));
        }
        std::fs::create_dir_all(&opts.dir)
            .map_err(|e| error::io_err(&opts.dir, "create_dir_all", e))?;
        let mut data = LedgerSegmentList::load(&opts.dir.join("data"), opts.data_file_size)?;
        let mut index = LedgerSegmentList::load(&opts.dir.join("index"), opts.index_file_size)?;
        let hard_state = meta::load_hard_state(&opts.dir)?;
        let checkpoint = meta::load_checkpoint(&opts.dir)?;
        let ck_end = checkpoint.map(|c| c.end_index).unwrap_or(-1);

        let first = first_entry(&data);
        let mut fixed = 0u64;
        let mut cut = None;
        let (begin_index, begin_pos, end_index, end_term, end_pos) = match first {
            None => {
                // No entry at all: keep a leading blank (a reset log) if there is one.
                let start = data.files().first().map(|f| f.start()).unwrap_or(0);
                let src = ListSource(&data);
                let s = scan(&src, start, None, -1, |_, _| true);
                if let Stop::Damage { pos, reason } = &s.stop {
                    if ck_end >= 0 {
                        return Err(corrupt_at(&data, *pos, reason.clone()));
                    }
                    cut = Some((*pos, reason.clone()));
                }
                (-1, s.end_pos, -1, -1, s.end_pos)
            }
            Some(first) => {
                // Entries well before the checkpoint's durable end are trusted: scan
                // from the data file two files before the one holding it (as DLedger
                // scans its last three files), or everything without a checkpoint.
                // Older files are checked on every read and by `check_ledger_dir`.
                let files = data.files();
                let first_start = files[0].start();
                let start_pos = match (ck_end >= first.index)
                    .then(|| read_unit(&index, ck_end))
                    .flatten()
                {
                    Some(u) if u.pos >= first_start => {
                        let k = ((u.pos - first_start) / opts.data_file_size) as usize;
                        files[k.saturating_sub(2).min(files.len() - 1)].start()
                    }
                    _ => first_start,
                };
                let (expected, prev_term) = (None, -1);
                let src = ListSource(&data);
                let mut fixes: Vec<IndexUnit> = Vec::new();
                let s = scan(&src, start_pos, expected, prev_term, |h, _| {
                    let want = IndexUnit::of(h);
                    if read_unit(&index, h.index) != Some(want) {
                        fixes.push(want);
                    }
                    true
                });
                for u in &fixes {
                    let (f, _) = index.ensure(u.index * UNIT)?;
                    f.ensure_reserved()?;
                    f.write((u.index * UNIT - f.start()) as usize, &u.encode());
                }
                fixed = fixes.len() as u64;
                let last = s.last;
                if let Stop::Damage { pos, reason } = &s.stop {
                    // The index the damaged entry should have had (the first scanned
                    // one counts as inside the durable region when unknown).
                    let damaged_index = last.map(|l| l.index + 1).unwrap_or(if ck_end >= 0 {
                        ck_end
                    } else {
                        first.index
                    });
                    if damaged_index <= ck_end {
                        return Err(corrupt_at(
                            &data,
                            *pos,
                            format!(
                                "{reason} (index {damaged_index}, inside the durable region up to {ck_end})"
                            ),
                        ));
                    }
                    tracing::warn!(pos, reason = %reason, "cutting the torn tail of the ledger");
                    cut = Some((*pos, reason.clone()));
                }
                match last {
                    Some(l) => (first.index, first.pos, l.index, l.term, s.end_pos),
                    None if start_pos == first_start => (-1, s.end_pos, -1, -1, s.end_pos),
                    None => {
                        return Err(corrupt_at(
                            &data,
                            start_pos,
                            "no valid entry where the recovery scan starts".into(),
                        ));
                    }
                }
            }
        };
        // Cut the data after the last good entry, and the index after its unit.
        let data_deleted = data.cut(end_pos)?;
        if end_index >= 0 {
            index.cut((end_index + 1) * UNIT)?;
        } else {
            index.clear()?;
        }
        let _ = data_deleted;
        // Everything kept is durable from here on (it may have been in the page
        // cache of a crashed process only).
        for f in data.files().iter().chain(index.files()) {
            f.sync_all()?;
        }
        sync_dir(data.dir())?;
        sync_dir(index.dir())?;
        sync_dir(&opts.dir)?;

        let committed_index = checkpoint
            .map(|c| c.committed_index)
            .unwrap_or(-1)
            .min(end_index);
        let shared = Arc::new(Shared {
            data: RwLock::new(data.files().to_vec().into()),
            index: RwLock::new(index.files().to_vec().into()),
            data_file_size: opts.data_file_size,
            index_file_size: opts.index_file_size,
            begin_index: AtomicI64::new(begin_index),
            begin_pos: AtomicI64::new(begin_pos),
            committed_index: AtomicI64::new(-1),
            committed_pos: AtomicI64::new(begin_pos),
            poisoned: AtomicBool::new(false),
        });
        let mut store = LedgerStore {
            opts,
            data,
            index,
            shared,
            begin_index,
            end_index,
            end_term,
            end_pos,
            data_dirty: Dirty::default(),
            index_dirty: Dirty::default(),
            checkpoint_end: ck_end.min(end_index),
            committed_for_checkpoint: committed_index,
            lower_checkpoint: None,
            tail: std::collections::VecDeque::new(),
            tail_bytes: 0,
            prefaulted_until: end_pos,
            prefault_enabled: true,
        };
        store.set_committed(committed_index);
        Ok((
            store,
            Recovered {
                hard_state,
                checkpoint,
                committed_index,
                index_units_fixed: fixed,
                cut,
            },
        ))
    }

    /// A reader sharing this store.
    pub fn reader(&self) -> LedgerReader {
        LedgerReader {
            shared: self.shared.clone(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.opts.dir
    }

    pub fn is_poisoned(&self) -> bool {
        self.shared.poisoned.load(Ordering::Acquire)
    }

    /// Refuses every write from now on (after a failed write or sync).
    pub fn poison(&self) {
        self.shared.poisoned.store(true, Ordering::Release);
    }

    fn check_writable(&self) -> Result<(), LedgerStoreError> {
        if self.is_poisoned() {
            Err(LedgerStoreError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn publish_files(&self) {
        *self.shared.data.write() = self.data.files().to_vec().into();
        *self.shared.index.write() = self.index.files().to_vec().into();
    }

    /// Appends entries whose headers are final (index, term, position, CRC).
    pub fn append(&mut self, entries: &[(EntryHeader, &[u8])]) -> Result<(), LedgerStoreError> {
        self.check_writable()?;
        if let (Some((first, _)), Some((last, _))) = (entries.first(), entries.last()) {
            // Every byte below is written into reserved blocks, or nothing is.
            let end = last.pos + last.size as i64;
            let from = self.end_pos.min(first.pos);
            if from >= self.data.files().first().map(|f| f.start()).unwrap_or(from) {
                self.ensure_room(from, end, first.index, last.index)?;
            }
        }
        // The tail cache must stay contiguous with the log end.
        if self
            .tail
            .back()
            .is_some_and(|e| e.index() != self.end_index)
        {
            self.tail.clear();
            self.tail_bytes = 0;
        }
        let mut files_changed = false;
        for (h, body) in entries {
            if self.end_index >= 0 && h.index != self.end_index + 1 {
                return Err(LedgerStoreError::Invalid(format!(
                    "append of index {} after {}",
                    h.index, self.end_index
                )));
            }
            if body.len() != h.body_len as usize {
                return Err(LedgerStoreError::Invalid(format!(
                    "body length {} != header {}",
                    body.len(),
                    h.body_len
                )));
            }
            let size = h.size as i64;
            let pos = place(self.end_pos, size, self.opts.data_file_size)
                .map_err(|e| LedgerStoreError::Invalid(e.to_string()))?;
            if pos != h.pos {
                return Err(LedgerStoreError::Invalid(format!(
                    "entry {} placed at {} but the store puts it at {pos}",
                    h.index, h.pos
                )));
            }
            if pos != self.end_pos {
                // Close the current file with a blank.
                let (f, created) = self.data.ensure(self.end_pos)?;
                files_changed |= created;
                let off = (self.end_pos - f.start()) as usize;
                let rest = (f.end() - self.end_pos) as i32;
                let mut blank = [0u8; 8];
                blank[0..4].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
                blank[4..8].copy_from_slice(&rest.to_be_bytes());
                f.write(off, &blank);
                self.data_dirty.mark(self.end_pos, self.end_pos + 8);
            }
            let (f, created) = self.data.ensure(pos)?;
            files_changed |= created;
            self.data_dirty.dir |= created;
            let off = (pos - f.start()) as usize;
            f.write(off, &h.encode());
            f.write(off + HEADER_SIZE, body);
            self.data_dirty.mark(pos, pos + size);

            let unit_pos = h.index * UNIT;
            let (uf, created) = self.index.ensure(unit_pos)?;
            files_changed |= created;
            self.index_dirty.dir |= created;
            uf.write((unit_pos - uf.start()) as usize, &IndexUnit::of(h).encode());
            self.index_dirty.mark(unit_pos, unit_pos + UNIT);

            if self.end_index < 0 {
                self.begin_index = h.index;
                self.shared.begin_index.store(h.index, Ordering::Release);
                self.shared.begin_pos.store(pos, Ordering::Release);
                if self.shared.committed_index.load(Ordering::Acquire) < 0 {
                    self.shared.committed_pos.store(pos, Ordering::Release);
                }
            }
            self.end_index = h.index;
            self.end_term = h.term;
            self.end_pos = pos + size;
        }
        if files_changed {
            self.publish_files();
        }
        Ok(())
    }

    /// Appends whole entries (the leader's after stamping, or the leader's received
    /// by a follower) and keeps them in the tail cache.
    pub fn append_entries(&mut self, entries: &[Entry]) -> Result<(), LedgerStoreError> {
        let v: Vec<(EntryHeader, &[u8])> =
            entries.iter().map(|e| (e.header, &e.body[..])).collect();
        self.append(&v)?;
        for e in entries {
            self.tail_bytes += e.body.len() + HEADER_SIZE;
            self.tail.push_back(e.clone());
        }
        while self.tail_bytes > TAIL_CACHE_BYTES
            && let Some(e) = self.tail.pop_front()
        {
            self.tail_bytes -= e.body.len() + HEADER_SIZE;
        }
        Ok(())
    }

    fn cached(&self, index: i64) -> Option<&Entry> {
        let first = self.tail.front()?.index();
        if index < first {
            return None;
        }
        self.tail.get((index - first) as usize)
    }

    fn drop_tail_from(&mut self, index: i64) {
        while self.tail.back().is_some_and(|e| e.index() >= index) {
            if let Some(e) = self.tail.pop_back() {
                self.tail_bytes -= e.body.len() + HEADER_SIZE;
            }
        }
    }

    fn unit_end_pos(&self, index: i64) -> Option<i64> {
        read_unit(&self.index, index).map(|u| u.pos + u.size as i64)
    }

    /// Removes every entry from `next_index` on; the next entry goes to `next_pos`
    /// (see `LedgerCommand::Truncate`). Never called for committed entries.
    pub fn truncate(&mut self, next_index: i64, next_pos: i64) -> Result<(), LedgerStoreError> {
        self.check_writable()?;
        let committed = self.shared.committed_index.load(Ordering::Acquire);
        assert!(
            next_index > committed,
            "truncating committed entry {next_index} (committed {committed})"
        );
        self.drop_tail_from(next_index);
        // Cut pages are gone: fault them in again from the new end.
        self.prefaulted_until = self.prefaulted_until.min(next_pos);
        let prev = next_index - 1;
        let keep_prefix = self.end_index >= 0
            && prev >= self.begin_index
            && prev <= self.end_index
            && self.unit_end_pos(prev) == Some(next_pos);
        if keep_prefix {
            if let Some(f) = self.data.find(next_pos).cloned() {
                self.data_dirty.fsync.push(f);
            }
            self.data_dirty.dir |= self.data.cut(next_pos)?;
            if let Some(f) = self.index.find(next_index * UNIT).cloned() {
                self.index_dirty.fsync.push(f);
            }
            self.index_dirty.dir |= self.index.cut(next_index * UNIT)?;
            self.end_index = prev;
            self.end_term = read_unit(&self.index, prev).map(|u| u.term).unwrap_or(-1);
            self.end_pos = next_pos;
        } else {
            // Start over at the leader's position.
            self.tail.clear();
            self.tail_bytes = 0;
            self.data.clear()?;
            self.index.clear()?;
            self.data_dirty = Dirty {
                dir: true,
                ..Dirty::default()
            };
            self.index_dirty = Dirty {
                dir: true,
                ..Dirty::default()
            };
            let (f, _) = self.data.ensure(next_pos)?;
            if next_pos > f.start() {
                let mut blank = [0u8; 8];
                blank[0..4].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
                blank[4..8].copy_from_slice(&((next_pos - f.start()) as i32).to_be_bytes());
                f.write(0, &blank);
                self.data_dirty.mark(f.start(), f.start() + 8);
            }
            self.begin_index = -1;
            self.end_index = -1;
            self.end_term = -1;
            self.end_pos = next_pos;
            self.shared.begin_index.store(-1, Ordering::Release);
            self.shared.begin_pos.store(next_pos, Ordering::Release);
            self.shared.committed_pos.store(next_pos, Ordering::Release);
        }
        if prev < self.checkpoint_end {
            // The checkpoint must never claim more than the log holds.
            self.checkpoint_end = prev.max(-1);
            self.lower_checkpoint = Some(LedgerCheckpoint {
                end_index: self.checkpoint_end,
                committed_index: self.committed_for_checkpoint,
            });
        }
        self.publish_files();
        Ok(())
    }

    /// The next chunk of data pages to fault in, when the writer comes within
    /// `PREFAULT_AHEAD` of what was faulted (creating the next data file ahead of
    /// time if the chunk reaches into it).
    pub fn prefault_job(&mut self) -> Option<PrefaultJob> {
        if !self.prefault_enabled
            || self.is_poisoned()
            || self.end_pos + PREFAULT_AHEAD <= self.prefaulted_until
        {
            return None;
        }
        let from = self.prefaulted_until.max(self.end_pos);
        let to = from + PREFAULT_CHUNK;
        let mut created = false;
        let mut failed = false;
        for pos in [from, to - 1] {
            match self
                .data
                .ensure(pos)
                .and_then(|(f, c)| f.ensure_reserved().map(|_| c))
            {
                Ok(c) => created |= c,
                Err(e) => {
                    // Skip this chunk (the writer reserves what it writes on its
                    // own): a full disk costs one warning per chunk, not per append.
                    tracing::warn!(error = %e, "cannot create the next data file ahead of time");
                    failed = true;
                    break;
                }
            }
        }
        if created {
            self.data_dirty.dir = true;
            self.publish_files();
        }
        self.prefaulted_until = to;
        if failed {
            return None;
        }
        Some(PrefaultJob {
            ranges: self.data.ranges(from, to),
        })
    }

    /// Stops prefaulting (the kernel does not support it).
    pub fn disable_prefault(&mut self) {
        self.prefault_enabled = false;
    }

    /// Everything written since the last call, to be synced by [`SyncJob::run`].
    /// Index units are synced by checkpoints (recovery rebuilds newer ones).
    pub fn prepare_sync(&mut self) -> SyncJob {
        let mut job = SyncJob {
            checkpoint: self
                .lower_checkpoint
                .take()
                .map(|c| (self.opts.dir.clone(), c)),
            ..SyncJob::default()
        };
        self.data_dirty.take(&self.data, &mut job);
        // Punched or deleted index files must reach the disk with the truncation.
        job.fsync.append(&mut self.index_dirty.fsync);
        if self.index_dirty.dir {
            self.index_dirty.dir = false;
            job.dirs.push(self.index.dir().to_path_buf());
        }
        job
    }

    /// A checkpoint claiming `durable_index` (entries durable as reported by
    /// completed syncs) and `committed_index`; syncs the index units first.
    pub fn prepare_checkpoint(
        &mut self,
        durable_index: i64,
        committed_index: i64,
    ) -> CheckpointJob {
        let mut sync = SyncJob::default();
        self.index_dirty.take(&self.index, &mut sync);
        let end = durable_index.min(self.end_index);
        self.checkpoint_end = end;
        self.committed_for_checkpoint = committed_index;
        CheckpointJob {
            sync,
            dir: self.opts.dir.clone(),
            checkpoint: LedgerCheckpoint {
                end_index: end,
                committed_index,
            },
        }
    }

    /// Publishes the committed index to readers.
    pub fn set_committed(&mut self, index: i64) {
        if index < 0 || index > self.end_index {
            return;
        }
        if let Some(end) = self.unit_end_pos(index) {
            // Position first: a reader that sees the index also sees its bytes.
            self.shared.committed_pos.store(end, Ordering::Release);
            self.shared.committed_index.store(index, Ordering::Release);
        }
    }

    /// Deletes data files that lie entirely before `pos` and before the committed
    /// position, and the index files before the new first entry. Returns the new
    /// begin index.
    pub fn purge_before(&mut self, pos: i64) -> Result<i64, LedgerStoreError> {
        self.check_writable()?;
        let limit = pos.min(self.shared.committed_pos.load(Ordering::Acquire));
        let mut removed = false;
        while self.data.files().len() > 1 && self.data.files()[0].end() <= limit {
            self.data.remove_first()?;
            removed = true;
        }
        if !removed {
            return Ok(self.begin_index);
        }
        let Some(first) = first_entry(&self.data) else {
            return Ok(self.begin_index);
        };
        while self.index.files().len() > 1 && self.index.files()[0].end() <= first.index * UNIT {
            self.index.remove_first()?;
        }
        self.begin_index = first.index;
        self.shared
            .begin_index
            .store(first.index, Ordering::Release);
        self.shared.begin_pos.store(first.pos, Ordering::Release);
        self.publish_files();
        sync_dir(self.data.dir())?;
        sync_dir(self.index.dir())?;
        Ok(first.index)
    }
}

impl LogRead for LedgerStore {
    fn begin_index(&self) -> i64 {
        if self.end_index < 0 {
            -1
        } else {
            self.begin_index
        }
    }

    fn end_index(&self) -> i64 {
        self.end_index
    }

    fn end_pos(&self) -> i64 {
        self.end_pos
    }

    fn term_at(&self, index: i64) -> Option<i64> {
        if index < self.begin_index || index > self.end_index || index < 0 {
            return None;
        }
        if let Some(e) = self.cached(index) {
            return Some(e.term());
        }
        read_unit(&self.index, index).map(|u| u.term)
    }

    fn entry(&self, index: i64) -> Result<Option<Entry>, String> {
        if index < self.begin_index || index > self.end_index || index < 0 {
            return Ok(None);
        }
        if let Some(e) = self.cached(index) {
            return Ok(Some(e.clone()));
        }
        let unit =
            read_unit(&self.index, index).ok_or_else(|| format!("no index unit for {index}"))?;
        let hb = self
            .data
            .read(unit.pos, HEADER_SIZE)
            .ok_or_else(|| format!("entry {index} at {} is outside the data files", unit.pos))?;
        let h =
            EntryHeader::decode(&hb).map_err(|e| format!("entry {index} at {}: {e}", unit.pos))?;
        if !unit.matches(&h) {
            return Err(format!(
                "entry {index} at {} does not match its index unit",
                unit.pos
            ));
        }
        let body = self
            .data
            .read(unit.pos + HEADER_SIZE as i64, h.body_len as usize)
            .ok_or_else(|| format!("body of {index} is outside the data files"))?;
        h.check_body(&body)
            .map_err(|e| format!("entry {index} at {}: {e}", unit.pos))?;
        Ok(Some(Entry {
            header: h,
            body: Bytes::from(body),
        }))
    }
}

/// Scans `bytes` as consecutive data files of `file_size` bytes starting at
/// position 0; returns where the valid entries end and how many there are. For
/// fuzzing the scanner.
pub fn scan_bytes(bytes: &[u8], file_size: i64) -> (i64, u64) {
    struct Mem<'a>(&'a [u8], i64);
    impl DataSource for Mem<'_> {
        fn file_of(&self, pos: i64) -> Option<(PathBuf, i64, i64)> {
            if pos < 0 || pos >= self.end() {
                return None;
            }
            let start = pos - pos % self.1;
            Some((PathBuf::from("mem"), start, start + self.1))
        }
        fn bytes(&self, pos: i64, len: usize) -> Option<&[u8]> {
            let (_, _, end) = self.file_of(pos)?;
            if pos + len as i64 > end {
                return None;
            }
            self.0.get(pos as usize..pos as usize + len)
        }
        fn end(&self) -> i64 {
            (self.0.len() as i64 / self.1) * self.1
        }
    }
    let src = Mem(bytes, file_size.max(1));
    let mut n = 0u64;
    let s = scan(&src, 0, None, -1, |_, _| {
        n += 1;
        true
    });
    (s.end_pos, n)
}

// ---- the operator check ------------------------------------------------------------

/// What [`check_ledger_dir`] found.
#[derive(Debug, Clone, Default)]
pub struct LedgerCheckReport {
    pub data_files: usize,
    pub index_files: usize,
    pub entries: u64,
    pub noop_entries: u64,
    /// Bytes of valid entries (headers included).
    pub bytes: u64,
    pub first_index: i64,
    pub last_index: i64,
    /// Position just after the last valid entry.
    pub end_pos: i64,
    /// `(term, first index of the term, entries)` in log order.
    pub terms: Vec<(i64, i64, u64)>,
    /// The first thing that is not a valid entry, blank or zero tail.
    pub first_bad: Option<BadSpot>,
    /// Index units that do not describe their entry.
    pub index_mismatches: u64,
    pub checkpoint: Option<LedgerCheckpoint>,
    pub hard_state: Option<HardState>,
}

impl LedgerCheckReport {
    /// No damage found. (After a crash, a torn unsynced tail shows up as damage at
    /// the end of the log; the next start cuts it.)
    pub fn is_ok(&self) -> bool {
        self.first_bad.is_none()
    }
}

impl std::fmt::Display for LedgerCheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "data files:       {}", self.data_files)?;
        writeln!(f, "index files:      {}", self.index_files)?;
        writeln!(
            f,
            "entries:          {} ({} no-op), {} bytes",
            self.entries, self.noop_entries, self.bytes
        )?;
        writeln!(
            f,
            "indexes:          {}..={}",
            self.first_index, self.last_index
        )?;
        writeln!(f, "end position:     {}", self.end_pos)?;
        for (term, first, n) in &self.terms {
            writeln!(f, "term {term:>10}:  {n} entries from index {first}")?;
        }
        writeln!(f, "index mismatches: {}", self.index_mismatches)?;
        if let Some(c) = &self.checkpoint {
            writeln!(
                f,
                "checkpoint:       endIndex={} committedIndex={}",
                c.end_index, c.committed_index
            )?;
        }
        if let Some(h) = &self.hard_state {
            writeln!(
                f,
                "term file:        term={} votedFor={:?} leader={:?}",
                h.term, h.voted_for, h.leader
            )?;
        }
        match &self.first_bad {
            None => write!(f, "damage:           none"),
            Some(b) => write!(
                f,
                "damage:           {:?} at offset {}: {}",
                b.path, b.offset, b.reason
            ),
        }
    }
}

/// A damaged spot: file, offset in the file, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSpot {
    pub path: PathBuf,
    pub offset: u64,
    pub reason: String,
}

struct ReadOnlyFiles {
    files: Vec<(PathBuf, i64, memmap2::Mmap)>,
    file_size: i64,
}

impl ReadOnlyFiles {
    fn load(dir: &Path) -> Result<ReadOnlyFiles, LedgerStoreError> {
        let mut names = Vec::new();
        if dir.exists() {
            for e in std::fs::read_dir(dir).map_err(|e| error::io_err(dir, "read_dir", e))? {
                let e = e.map_err(|e| error::io_err(dir, "read_dir", e))?;
                let name = e.file_name().to_string_lossy().to_string();
                if let (20, Ok(start)) = (name.len(), name.parse::<i64>()) {
                    names.push((start, e.path()));
                }
            }
        }
        names.sort();
        let mut files = Vec::new();
        let mut file_size = 0;
        for (start, path) in names {
            let f = std::fs::File::open(&path).map_err(|e| error::io_err(&path, "open", e))?;
            let len = f
                .metadata()
                .map_err(|e| error::io_err(&path, "stat", e))?
                .len() as i64;
            if file_size == 0 {
                file_size = len;
            }
            if len != file_size {
                return Err(LedgerStoreError::Corrupt {
                    path,
                    offset: 0,
                    reason: format!("file is {len} bytes, others {file_size}"),
                });
            }
            if let Some((_, prev, _)) = files.last()
                && start != prev + file_size
            {
                return Err(LedgerStoreError::Corrupt {
                    path,
                    offset: 0,
                    reason: format!("gap after the file starting at {prev}"),
                });
            }
            if len == 0 {
                continue;
            }
            // SAFETY: read-only mapping for a check; a concurrent writer can only
            // make the report stale, never unsound reads of our own memory.
            let map =
                unsafe { memmap2::Mmap::map(&f) }.map_err(|e| error::io_err(&path, "mmap", e))?;
            files.push((path, start, map));
        }
        Ok(ReadOnlyFiles { files, file_size })
    }

    fn find(&self, pos: i64) -> Option<&(PathBuf, i64, memmap2::Mmap)> {
        let first = self.files.first()?.1;
        if pos < first || self.file_size == 0 {
            return None;
        }
        self.files.get(((pos - first) / self.file_size) as usize)
    }
}

impl DataSource for ReadOnlyFiles {
    fn file_of(&self, pos: i64) -> Option<(PathBuf, i64, i64)> {
        self.find(pos)
            .map(|(p, s, _)| (p.clone(), *s, *s + self.file_size))
    }

    fn bytes(&self, pos: i64, len: usize) -> Option<&[u8]> {
        let (_, start, map) = self.find(pos)?;
        let off = (pos - start) as usize;
        map.get(off..off + len)
    }

    fn end(&self) -> i64 {
        self.files
            .last()
            .map(|(_, s, _)| s + self.file_size)
            .unwrap_or(0)
    }
}

/// Checks a ledger directory without modifying it: every entry of every data file
/// (magic, size, position, index continuity, term order, body CRC) and its index
/// unit. For the operator tool `basalt store check`.
pub fn check_ledger_dir(dir: &Path) -> Result<LedgerCheckReport, LedgerStoreError> {
    let data = ReadOnlyFiles::load(&dir.join("data"))?;
    let index = ReadOnlyFiles::load(&dir.join("index"))?;
    let mut r = LedgerCheckReport {
        data_files: data.files.len(),
        index_files: index.files.len(),
        first_index: -1,
        last_index: -1,
        checkpoint: meta::load_checkpoint(dir)?,
        hard_state: if dir.join(meta::TERM_FILE).exists() {
            Some(meta::load_hard_state(dir)?)
        } else {
            None
        },
        ..LedgerCheckReport::default()
    };
    let start = data.files.first().map(|f| f.1).unwrap_or(0);
    let mut terms: Vec<(i64, i64, u64)> = Vec::new();
    let mut mismatches = 0u64;
    let mut entries = 0u64;
    let mut noops = 0u64;
    let mut bytes = 0u64;
    let s = scan(&data, start, None, -1, |h, _| {
        entries += 1;
        bytes += h.size as u64;
        if h.kind() == EntryKind::Noop {
            noops += 1;
        }
        match terms.last_mut() {
            Some(t) if t.0 == h.term => t.2 += 1,
            _ => terms.push((h.term, h.index, 1)),
        }
        let unit = index
            .bytes(h.index * UNIT, INDEX_UNIT_SIZE)
            .and_then(IndexUnit::decode);
        if unit != Some(IndexUnit::of(h)) {
            mismatches += 1;
        }
        true
    });
    r.entries = entries;
    r.noop_entries = noops;
    r.bytes = bytes;
    r.terms = terms;
    r.index_mismatches = mismatches;
    r.first_index = s.first.map(|h| h.index).unwrap_or(-1);
    r.last_index = s.last.map(|h| h.index).unwrap_or(-1);
    r.end_pos = s.end_pos;
    if let Stop::Damage { pos, reason } = s.stop {
        let (path, offset) = match data.find(pos) {
            Some((p, st, _)) => (p.clone(), (pos - st) as u64),
            None => (dir.join("data"), pos as u64),
        };
        r.first_bad = Some(BadSpot {
            path,
            offset,
            reason,
        });
    }
    Ok(r)
}
