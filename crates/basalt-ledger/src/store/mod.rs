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
//! The parts, by responsibility:
//!
//! * `recovery` — [`LedgerStore::open`]: checkpoint trust, the recovery scan,
//!   index-unit repair and the torn-tail cut;
//! * `writer` — the writer's operations: append, truncate, prefault, sync
//!   and checkpoint preparation, and its [`LogRead`](crate::core::LogRead) view;
//! * `reset` — a truncation that keeps nothing: the checkpoint stops claiming
//!   the old entries durably before any of them is removed;
//! * `purge` — retention's purge: the writer detaches old files, a
//!   [`PurgeJob`] deletes them on a blocking thread;
//! * `reader` — [`LedgerReader`], [`LedgerEntry`], [`ReadError`];
//! * `jobs` — [`SyncJob`], [`CheckpointJob`], [`PrefaultJob`]: I/O the writer
//!   prepares and a blocking thread runs;
//! * `checker` — [`check_ledger_dir`], the offline check for operators, and
//!   [`scan_bytes`] for fuzzing the scanner;
//! * `view` — [`LedgerFilesView`], read-only entry lookups for offline tools;
//! * [`mapped`], [`meta`], [`error`] — segments and their lists, metadata
//!   files, errors.
//!
//! Every file goes through [`basalt_disk::Disk`]: [`LedgerStore::open`] uses the
//! real disk, [`LedgerStore::open_on`] any (the simulator's). Real-disk faults
//! for process-level tests (full disk, failing fsyncs) are [`faults`], the I/O
//! layer's.

pub mod error;
pub mod mapped;
pub mod meta;

pub use basalt_disk::faults;

mod checker;
mod jobs;
mod purge;
mod reader;
mod recovery;
mod reset;
mod room;
mod scan;
mod view;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64};

use parking_lot::RwLock;

use crate::entry::{Entry, EntryHeader, HEADER_SIZE, INDEX_UNIT_SIZE, IndexUnit};

pub use checker::{BadSpot, LedgerCheckReport, check_ledger_dir, check_ledger_dir_on, scan_bytes};
pub use error::LedgerStoreError;
pub use jobs::{CheckpointJob, PrefaultJob, SyncJob};
pub use mapped::{LedgerSegment, LedgerSegmentList, SegmentSlice};
pub use meta::LedgerCheckpoint;
pub use purge::PurgeJob;
pub use reader::{LedgerDataFile, LedgerEntry, LedgerReader, ReadError};
pub use recovery::Recovered;
pub use view::{LedgerFilesView, ViewedEntry};

use jobs::Dirty;
use scan::{DataSource, scan};

const UNIT: i64 = INDEX_UNIT_SIZE as i64;

/// Where and how big: the ledger directory and the sizes of its data and index
/// files. The sizes must match the files already in the directory.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub dir: PathBuf,
    pub data_file_size: i64,
    pub index_file_size: i64,
}

type Files = Arc<[Arc<LedgerSegment>]>;

/// State shared between the writer and the readers. The writer stores a
/// committed position before the committed index, so a reader that sees the
/// index also sees its bytes.
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

/// The file of `files` (equally sized, contiguous) holding `pos`.
fn find(files: &[Arc<LedgerSegment>], file_size: i64, pos: i64) -> Option<&Arc<LedgerSegment>> {
    let first = files.first()?.start();
    if pos < first {
        return None;
    }
    files.get(((pos - first) / file_size) as usize)
}

/// The writer side of a ledger directory. See the module documentation.
///
/// Owns the data and index segments; keeps the log contiguous (`begin_index..=
/// end_index`, the next entry at `end_pos`), never rewrites committed entries, and
/// never lets the checkpoint claim more than the log holds.
pub struct LedgerStore {
    opts: StoreOptions,
    disk: basalt_disk::Disk,
    data: LedgerSegmentList,
    index: LedgerSegmentList,
    shared: Arc<Shared>,
    begin_index: i64,
    end_index: i64,
    end_term: i64,
    end_pos: i64,
    data_dirty: Dirty,
    index_dirty: Dirty,
    /// The last entries written, with their bodies as given (shared, not copied):
    /// pushes to followers read them from here. Contiguous, ending at `end_index`.
    tail: std::collections::VecDeque<Entry>,
    tail_bytes: usize,
    /// Data pages up to here were (or are being) faulted in.
    prefaulted_until: i64,
    prefault_enabled: bool,
    /// A reset waiting for its sync (see `reset`).
    reset: reset::ResetState,
    /// The header-CRC rule every checkpoint it writes carries: entries at or
    /// past this position are written with their header CRC (set at open).
    header_crc_from: i64,
}

/// Bytes of recent entries kept in memory for pushes.
const TAIL_CACHE_BYTES: usize = 16 * 1024 * 1024;
/// Data pages are faulted in this far ahead of the write position, in chunks.
const PREFAULT_AHEAD: i64 = 8 * 1024 * 1024;
const PREFAULT_CHUNK: i64 = 4 * 1024 * 1024;

/// A segment list seen by the scanner (used by the writer, or before any reader
/// exists).
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

/// The index unit of entry `i`, if there is a valid one.
fn read_unit(index: &LedgerSegmentList, i: i64) -> Option<IndexUnit> {
    index
        .read(i.checked_mul(UNIT)?, INDEX_UNIT_SIZE)
        .and_then(|b| IndexUnit::decode(&b))
}

/// The first entry header of the data files (after a leading blank, if any),
/// under the header-CRC rule from `crc_from`.
fn first_entry(data: &LedgerSegmentList, crc_from: i64) -> Option<EntryHeader> {
    let src = ListSource(data);
    let start = data.files().first()?.start();
    scan(&src, crc_from, start, None, -1, |_, _| false).first
}
