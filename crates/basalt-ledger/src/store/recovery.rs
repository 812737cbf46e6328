//! Recovery: what [`LedgerStore::open`] does before the store takes writes.
//!
//! 1. It trusts what the checkpoint says is durable: the scan starts at the data
//!    file two files before the one holding the checkpoint's `endIndex` (as
//!    DLedger scans its last three files), or at the first file without a
//!    checkpoint. Older files are checked on every read and by
//!    [`super::check_ledger_dir`].
//! 2. It scans every entry from there (magic, size, index continuity, term order,
//!    position, body CRC, index unit) and rewrites index units that do not match
//!    their entry.
//! 3. It cuts the torn tail: the first bad entry and everything after it, and the
//!    index after the last good entry's unit. Damage inside the region the
//!    checkpoint says is durable is not a torn write: opening fails with an error
//!    that names the file and offset. So does a log that ends cleanly (zeros,
//!    or no more files) before the checkpoint's entry: every truncation keeps
//!    what the checkpoint claims, and a reset makes it claim nothing before
//!    it removes anything (`super::reset`).
//! 4. It makes everything it kept durable (it may have been in the page cache of
//!    a crashed process only), then publishes the checkpoint's committed index,
//!    clamped to the recovered end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64};

use basalt_disk::Disk;
use parking_lot::RwLock;

use super::scan::{Stop, scan};
use super::{
    Dirty, HEADER_SIZE, LedgerCheckpoint, LedgerSegmentList, LedgerStore, LedgerStoreError,
    ListSource, Shared, StoreOptions, UNIT, first_entry, meta, read_unit,
};
use crate::core::HardState;
use crate::entry::{EntryHeader, IndexUnit};

/// What [`LedgerStore::open`] found. A report for the caller; the store itself
/// already holds the recovered state.
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

/// The bounds of the log the recovery scan kept.
#[derive(Debug, Clone, Copy)]
struct LogBounds {
    begin_index: i64,
    begin_pos: i64,
    end_index: i64,
    end_term: i64,
    end_pos: i64,
}

impl LogBounds {
    /// No entry: the log is empty, the next entry goes to `end_pos`.
    fn empty(end_pos: i64) -> LogBounds {
        LogBounds {
            begin_index: -1,
            begin_pos: end_pos,
            end_index: -1,
            end_term: -1,
            end_pos,
        }
    }
}

/// What the recovery scan decided: the bounds to keep, the index units it
/// rewrote, and where (and why) the torn tail starts.
#[derive(Debug, Clone)]
struct ScanOutcome {
    bounds: LogBounds,
    index_units_fixed: u64,
    cut: Option<(i64, String)>,
}

impl LedgerStore {
    /// Opens (creating if needed) and recovers a ledger directory on the real
    /// disk, then makes everything it kept durable.
    pub fn open(opts: StoreOptions) -> Result<(LedgerStore, Recovered), LedgerStoreError> {
        LedgerStore::open_on(Disk::Real, opts)
    }

    /// [`LedgerStore::open`] on `disk` (the simulated disk in the simulator).
    pub fn open_on(
        disk: Disk,
        opts: StoreOptions,
    ) -> Result<(LedgerStore, Recovered), LedgerStoreError> {
        check_options(&opts)?;
        disk.create_dir_all_durable(&opts.dir)?;
        let mut data = LedgerSegmentList::load(&disk, &opts.dir.join("data"), opts.data_file_size)?;
        let mut index =
            LedgerSegmentList::load(&disk, &opts.dir.join("index"), opts.index_file_size)?;
        let hard_state = meta::load_hard_state(&disk, &opts.dir)?;
        let checkpoint = meta::load_checkpoint(&disk, &opts.dir)?;
        let ck_end = checkpoint.map(|c| c.end_index).unwrap_or(-1);
        let crc_from = super::checker::crc_rule(checkpoint.as_ref());
        if let Some((reset_index, reset_pos)) = checkpoint.and_then(|c| c.reset) {
            remove_reset_leftovers(&mut data, &mut index, reset_index, reset_pos, crc_from)?;
        }

        let outcome = scan_log(&data, &mut index, ck_end, crc_from, opts.data_file_size)?;
        let bounds = outcome.bounds;
        for stray in data.strays().iter().chain(index.strays()) {
            tracing::warn!(file = %stray.display(), "removing a ledger file found after a gap (an unsynced creation or removal)");
        }
        data.remove_strays()?;
        index.remove_strays()?;
        cut_after(&mut data, &mut index, &bounds)?;
        make_durable(&data, &index)?;
        disk.sync_dir(&opts.dir)?;
        let crc_from = establish_crc_rule(&disk, &opts, checkpoint, bounds.end_pos)?;

        let committed_index = checkpoint
            .map(|c| c.committed_index)
            .unwrap_or(-1)
            .min(bounds.end_index);
        let mut store = LedgerStore::recovered(opts, disk, data, index, bounds);
        store.reset.marker_on_disk = checkpoint.is_some_and(|c| c.reset.is_some());
        store.header_crc_from = crc_from;
        store.set_committed(committed_index);
        Ok((
            store,
            Recovered {
                hard_state,
                checkpoint,
                committed_index,
                index_units_fixed: outcome.index_units_fixed,
                cut: outcome.cut,
            },
        ))
    }

    /// The writer over what recovery kept; nothing committed yet.
    fn recovered(
        opts: StoreOptions,
        disk: Disk,
        data: LedgerSegmentList,
        index: LedgerSegmentList,
        b: LogBounds,
    ) -> LedgerStore {
        let shared = Arc::new(Shared {
            data: RwLock::new(data.files().to_vec().into()),
            index: RwLock::new(index.files().to_vec().into()),
            data_file_size: opts.data_file_size,
            index_file_size: opts.index_file_size,
            begin_index: AtomicI64::new(b.begin_index),
            begin_pos: AtomicI64::new(b.begin_pos),
            committed_index: AtomicI64::new(-1),
            committed_pos: AtomicI64::new(b.begin_pos),
            poisoned: AtomicBool::new(false),
        });
        LedgerStore {
            opts,
            disk,
            data,
            index,
            shared,
            begin_index: b.begin_index,
            end_index: b.end_index,
            end_term: b.end_term,
            end_pos: b.end_pos,
            data_dirty: Dirty::default(),
            index_dirty: Dirty::default(),
            tail: std::collections::VecDeque::new(),
            tail_bytes: 0,
            prefaulted_until: b.end_pos,
            prefault_enabled: true,
            reset: Default::default(),
            header_crc_from: i64::MAX,
        }
    }
}

/// The checkpoint names a reset whose removals may not all have reached the
/// disk: unless the log begins with the reset's entry (`reset_index` at
/// `reset_pos`, written after the removals were durable), every file is a
/// leftover of the old log, however many of them a power loss kept, and goes.
/// (A run of old entries kept would be a log missing its head, entries the
/// cluster committed; as a leader it would hand that on.)
fn remove_reset_leftovers(
    data: &mut LedgerSegmentList,
    index: &mut LedgerSegmentList,
    reset_index: i64,
    reset_pos: i64,
    crc_from: i64,
) -> Result<(), LedgerStoreError> {
    let begins_new_log =
        first_entry(data, crc_from).is_some_and(|h| h.index == reset_index && h.pos == reset_pos);
    if begins_new_log || (data.is_empty() && index.is_empty()) {
        return Ok(());
    }
    tracing::warn!(
        dir = %data.dir().display(),
        "removing what an interrupted reset of the ledger left behind"
    );
    data.clear()?;
    index.clear()
}

/// Sets the header-CRC rule before the first append: every entry this store
/// writes from `end_pos` on carries its header CRC, so the rule starts at the
/// earlier of the checkpoint's rule and `end_pos`. The checkpoint is replaced
/// (keeping what it claims) when the rule moves. On a full disk the old file
/// stands and the open goes on: every later checkpoint carries the rule (it
/// is true of everything this store writes), but until one lands a torn
/// header without its CRC past the old rule is not caught. Returns the rule.
fn establish_crc_rule(
    disk: &Disk,
    opts: &StoreOptions,
    checkpoint: Option<LedgerCheckpoint>,
    end_pos: i64,
) -> Result<i64, LedgerStoreError> {
    let old = checkpoint.and_then(|c| c.header_crc_from);
    let rule = old.unwrap_or(i64::MAX).min(end_pos);
    if old != Some(rule) {
        let c = LedgerCheckpoint {
            header_crc_from: Some(rule),
            ..checkpoint.unwrap_or(LedgerCheckpoint {
                end_index: -1,
                committed_index: -1,
                reset: None,
                header_crc_from: None,
            })
        };
        match meta::store_checkpoint(disk, &opts.dir, c) {
            Ok(()) => {}
            Err(e) if e.is_no_space() => {
                tracing::warn!(dir = %opts.dir.display(), error = %e, "the ledger checkpoint cannot take the header-CRC rule yet (disk full); the next checkpoint carries it");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(rule)
}

/// Refuses file sizes the layout cannot work with.
fn check_options(opts: &StoreOptions) -> Result<(), LedgerStoreError> {
    if opts.data_file_size < 2 * (HEADER_SIZE as i64 + 8)
        || opts.index_file_size % UNIT != 0
        || opts.index_file_size <= 0
    {
        return Err(LedgerStoreError::Invalid(format!(
            "file sizes {} / {}",
            opts.data_file_size, opts.index_file_size
        )));
    }
    Ok(())
}

/// Scans the data after what the checkpoint says is durable, repairing index
/// units on the way.
fn scan_log(
    data: &LedgerSegmentList,
    index: &mut LedgerSegmentList,
    ck_end: i64,
    crc_from: i64,
    data_file_size: i64,
) -> Result<ScanOutcome, LedgerStoreError> {
    match first_entry(data, crc_from) {
        None => scan_without_entries(data, ck_end, crc_from),
        Some(first) => scan_entries(data, index, first, (ck_end, crc_from), data_file_size),
    }
}

/// No entry at all: keep a leading blank (a reset log) if there is one.
fn scan_without_entries(
    data: &LedgerSegmentList,
    ck_end: i64,
    crc_from: i64,
) -> Result<ScanOutcome, LedgerStoreError> {
    let start = data.files().first().map(|f| f.start()).unwrap_or(0);
    let src = ListSource(data);
    let s = scan(&src, crc_from, start, None, -1, |_, _| true);
    let mut cut = None;
    if let Stop::Damage { pos, reason } = &s.stop {
        if ck_end >= 0 {
            return Err(corrupt_at(data, *pos, reason.clone()));
        }
        cut = Some((*pos, reason.clone()));
    }
    if ck_end >= 0 {
        return Err(ends_before_checkpoint(data, s.end_pos, -1, ck_end));
    }
    Ok(ScanOutcome {
        bounds: LogBounds::empty(s.end_pos),
        index_units_fixed: 0,
        cut,
    })
}

/// Scans from [`scan_start`], rewrites the index units that do not match, and
/// judges where the scan stopped. `(ck_end, crc_from)`: the checkpoint's
/// durable entry and its header-CRC rule.
fn scan_entries(
    data: &LedgerSegmentList,
    index: &mut LedgerSegmentList,
    first: EntryHeader,
    (ck_end, crc_from): (i64, i64),
    data_file_size: i64,
) -> Result<ScanOutcome, LedgerStoreError> {
    let first_start = data.files()[0].start();
    let start_pos = scan_start(data, index, first.index, ck_end, data_file_size);
    let src = ListSource(data);
    // The checkpoint's entry, where its (synced) index unit puts it: the scan
    // must pass it, or the log is damaged inside the durable region (a bad
    // header before it makes every later index look like a torn tail).
    let ck_unit = (ck_end >= 0)
        .then(|| read_unit(index, ck_end))
        .flatten()
        .filter(|u| u.pos >= start_pos);
    let mut ck_seen = false;
    let mut fixes: Vec<IndexUnit> = Vec::new();
    let s = scan(&src, crc_from, start_pos, None, -1, |h, _| {
        let want = IndexUnit::of(h);
        ck_seen |= ck_unit == Some(want);
        if read_unit(index, h.index) != Some(want) {
            fixes.push(want);
        }
        true
    });
    // Judge before changing anything: a refused log is left as it was.
    let mut cut = None;
    if let Stop::Damage { pos, reason } = &s.stop {
        check_torn_tail(data, s.last, first.index, ck_end, *pos, reason)?;
        tracing::warn!(pos, reason = %reason, "cutting the torn tail of the ledger");
        cut = Some((*pos, reason.clone()));
    }
    if let Some(u) = ck_unit
        && !ck_seen
    {
        return Err(corrupt_at(
            data,
            u.pos,
            format!(
                "the checkpoint's durable entry {ck_end} is not at {} where its index unit puts it",
                u.pos
            ),
        ));
    }
    // A clean end before the checkpoint's entry: durable entries are gone.
    // (A purge may have removed the claimed entry with the head: then the log
    // starts after it. A reset makes its checkpoint claim nothing first.)
    if let Some(l) = s.last
        && first.index <= ck_end
        && l.index < ck_end
    {
        return Err(ends_before_checkpoint(data, l.end_pos(), l.index, ck_end));
    }
    let index_units_fixed = repair_index_units(index, &fixes)?;
    let bounds = match s.last {
        Some(l) => LogBounds {
            begin_index: first.index,
            begin_pos: first.pos,
            end_index: l.index,
            end_term: l.term,
            // Right after the last entry: a blank after it closed its file for
            // an entry that did not survive, and the leader places the next
            // entry after the last one, not after that blank.
            end_pos: l.end_pos(),
        },
        None if start_pos == first_start => LogBounds::empty(s.end_pos),
        None => {
            return Err(corrupt_at(
                data,
                start_pos,
                "no valid entry where the recovery scan starts".into(),
            ));
        }
    };
    Ok(ScanOutcome {
        bounds,
        index_units_fixed,
        cut,
    })
}

/// Where the recovery scan starts: entries well before the checkpoint's durable
/// end are trusted, so the data file two files before the one holding it (as
/// DLedger scans its last three files), or the first file without a usable
/// checkpoint.
fn scan_start(
    data: &LedgerSegmentList,
    index: &LedgerSegmentList,
    first_index: i64,
    ck_end: i64,
    data_file_size: i64,
) -> i64 {
    let files = data.files();
    let first_start = files[0].start();
    match (ck_end >= first_index)
        .then(|| read_unit(index, ck_end))
        .flatten()
    {
        Some(u) if u.pos >= first_start => {
            let k = ((u.pos - first_start) / data_file_size) as usize;
            files[k.saturating_sub(2).min(files.len() - 1)].start()
        }
        _ => first_start,
    }
}

/// Writes the index units the scan found missing or wrong; returns how many.
fn repair_index_units(
    index: &mut LedgerSegmentList,
    fixes: &[IndexUnit],
) -> Result<u64, LedgerStoreError> {
    for u in fixes {
        index.prepend_to(u.index * UNIT)?;
        let (f, _) = index.ensure(u.index * UNIT)?;
        f.ensure_reserved()?;
        // SAFETY: recovery runs before the store (and any reader) exists.
        unsafe { f.write((u.index * UNIT - f.start()) as usize, &u.encode()) };
    }
    Ok(fixes.len() as u64)
}

/// Damage at `pos` is a torn tail only past the durable region: inside it,
/// opening fails.
fn check_torn_tail(
    data: &LedgerSegmentList,
    last: Option<EntryHeader>,
    first_index: i64,
    ck_end: i64,
    pos: i64,
    reason: &str,
) -> Result<(), LedgerStoreError> {
    // The index the damaged entry should have had (the first scanned one counts
    // as inside the durable region when unknown).
    let damaged_index =
        last.map(|l| l.index + 1)
            .unwrap_or(if ck_end >= 0 { ck_end } else { first_index });
    if damaged_index <= ck_end {
        return Err(corrupt_at(
            data,
            pos,
            format!("{reason} (index {damaged_index}, inside the durable region up to {ck_end})"),
        ));
    }
    Ok(())
}

/// Cuts the data after the last good entry, and the index after its unit.
fn cut_after(
    data: &mut LedgerSegmentList,
    index: &mut LedgerSegmentList,
    b: &LogBounds,
) -> Result<(), LedgerStoreError> {
    // SAFETY: recovery runs before the store (and any reader) exists.
    unsafe { data.cut(b.end_pos) }?;
    if b.end_index >= 0 {
        // SAFETY: as above.
        unsafe { index.cut((b.end_index + 1) * UNIT) }?;
    } else {
        index.clear()?;
    }
    Ok(())
}

/// Everything kept is durable from here on (it may have been in the page cache
/// of a crashed process only).
fn make_durable(
    data: &LedgerSegmentList,
    index: &LedgerSegmentList,
) -> Result<(), LedgerStoreError> {
    for f in data.files().iter().chain(index.files()) {
        f.sync_all()?;
    }
    data.sync_dir()?;
    index.sync_dir()
}

/// The log ends cleanly at `end_pos` (after entry `last`, -1 for none) before
/// the checkpoint's durable entry `ck_end`.
fn ends_before_checkpoint(
    data: &LedgerSegmentList,
    end_pos: i64,
    last: i64,
    ck_end: i64,
) -> LedgerStoreError {
    corrupt_at(
        data,
        end_pos,
        format!("the log ends after index {last}, before the checkpoint's durable entry {ck_end}"),
    )
}

/// A corruption error naming the file holding `pos` (or the directory).
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
