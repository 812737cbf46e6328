//! ConsumeQueue: the per topic-queue index into the CommitLog
//! (docs/storage-format.md#consumequeue).
//!
//! Unit *n* (20 bytes: `[physical offset i64][size i32][tags code i64]`) sits at
//! logical byte offset `n * 20`; files hold a fixed number of units and are
//! named by the logical byte offset of their first unit.
//!
//! One writer (the dispatch thread) appends units in queue-offset order; any
//! number of readers read units below the committed position.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::error::{Result, StoreError};
use crate::mapped_file::{MappedFile, MappedFilePolicy};
use crate::mapped_file_queue::MappedFileQueue;

pub use crate::consume_queue_table::{ConsumeQueueTable, SyncDebt};

/// Bytes per ConsumeQueue unit.
pub const UNIT_SIZE: usize = 20;

/// A filler unit: fills positions that have no message (before the first file
/// of a queue that starts past offset 0, or a gap found during recovery).
const FILLER: CqUnit = CqUnit {
    physical_offset: 0,
    size: i32::MAX,
    tags_code: 0,
};

/// One decoded ConsumeQueue unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqUnit {
    pub physical_offset: i64,
    pub size: i32,
    pub tags_code: i64,
}

impl CqUnit {
    pub fn encode(&self, out: &mut [u8]) {
        debug_assert_eq!(out.len(), UNIT_SIZE);
        out[0..8].copy_from_slice(&self.physical_offset.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..20].copy_from_slice(&self.tags_code.to_be_bytes());
    }

    pub fn decode(b: &[u8]) -> CqUnit {
        CqUnit {
            physical_offset: i64::from_be_bytes(b[0..8].try_into().expect("8 bytes")),
            size: i32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
            tags_code: i64::from_be_bytes(b[12..20].try_into().expect("8 bytes")),
        }
    }

    /// Recovery's validity rule: `offset >= 0 && size > 0`.
    pub fn is_valid(&self) -> bool {
        self.physical_offset >= 0 && self.size > 0
    }

    pub fn is_filler(&self) -> bool {
        *self == FILLER
    }

    /// CommitLog offset just past the unit's record; saturating, as a torn
    /// unit read at recovery may hold any offset.
    pub fn end(&self) -> i64 {
        self.physical_offset.saturating_add(self.size as i64)
    }
}

/// A run of consecutive units borrowed from one ConsumeQueue file.
#[derive(Debug, Clone)]
pub struct UnitRun {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
    /// Queue offset of the first unit.
    pub start_offset: i64,
}

impl UnitRun {
    pub fn len(&self) -> usize {
        self.len / UNIT_SIZE
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The units, in order.
    pub fn iter(&self) -> impl Iterator<Item = CqUnit> + '_ {
        let bytes = self
            .file
            .slice(self.pos, self.len)
            .expect("unit run was committed when created");
        bytes.chunks_exact(UNIT_SIZE).map(CqUnit::decode)
    }
}

/// The valid units at the start of one ConsumeQueue file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsedPrefix {
    /// Bytes of valid units from the start of the file (a multiple of 20).
    pub len: usize,
    /// Physical end of the last real (non-filler) unit among them.
    pub max_physic_offset: Option<i64>,
    /// Valid-looking units after the first invalid one, in the file's
    /// written ranges: damage in the middle rather than a torn tail.
    pub stray_units: u64,
    /// Whether any byte past `len` is not zero (a torn or invalid unit):
    /// when false, a cut at `len` has nothing to clear.
    pub dirty_tail: bool,
}

/// Finds the used part of a ConsumeQueue file without touching the rest:
/// units are read in order up to the first invalid one (RocketMQ's rule,
/// [`CqUnit::is_valid`]), and only inside the range the file system reports
/// as written (`SEEK_DATA`/`SEEK_HOLE`): bytes in a hole are zeros by
/// definition and are never read, so a queue file holding one unit costs one
/// page of page cache at start, not the file's size in zero-filled pages.
/// Stray valid units after the end are counted only in written ranges too.
pub fn used_prefix(f: &MappedFile) -> UsedPrefix {
    used_prefix_after(f, None)
}

/// [`used_prefix`] of a file whose predecessor's last real unit ends at
/// `prev_end` (None: no predecessor, or only fillers): the file's first
/// real unit must not point below it either. Units straddle sectors, and
/// the unsynced first unit of a new file can persist torn to a low offset
/// just as one in the middle of a file can (the soak found them at queue
/// offset 16, the first unit of the second 16-unit file: seeds 12694,
/// 14709, 19817).
pub fn used_prefix_after(f: &MappedFile, prev_end: Option<i64>) -> UsedPrefix {
    let raw = f.raw();
    let ranges = f.data_ranges(0);
    // Units are written from the start without gaps: the used part can only
    // lie in the written range that starts at 0.
    let written = match ranges.first() {
        Some(&(0, end)) => end,
        _ => 0,
    };
    let mut pos = 0;
    let mut max_physic_offset = None;
    let mut end_before = prev_end;
    while pos + UNIT_SIZE <= raw.len() {
        let u = unit_below(raw, pos, written);
        if !u.is_valid() {
            break;
        }
        // Units follow the CommitLog: a real unit pointing below the end
        // of the one before it is a torn write (half old zeros, half new
        // bytes), not a unit; it ends the used part like an invalid one
        // (the power-loss simulator's soak found one, seed 2267, kept by
        // recovery because it lowered the queue's physical end).
        if !u.is_filler() && end_before.is_some_and(|end| u.physical_offset < end) {
            break;
        }
        if !u.is_filler() {
            max_physic_offset = Some(u.end());
            end_before = max_physic_offset;
        }
        pos += UNIT_SIZE;
    }
    let mut stray_units = 0;
    let after = pos + UNIT_SIZE;
    for &(from, to) in &ranges {
        let from = from.max(after).next_multiple_of(UNIT_SIZE);
        if from >= to {
            continue;
        }
        stray_units += raw[from..to]
            .chunks_exact(UNIT_SIZE)
            .filter(|c| CqUnit::decode(c).is_valid())
            .count() as u64;
    }
    let dirty_tail = ranges.iter().any(|&(from, to)| {
        let from = from.max(pos);
        from < to && raw[from..to.min(raw.len())].iter().any(|&b| b != 0)
    });
    UsedPrefix {
        len: pos,
        max_physic_offset,
        stray_units,
        dirty_tail,
    }
}

/// The unit at `pos`, reading only bytes below `written` (those past it lie
/// in a hole and are zeros).
fn unit_below(raw: &[u8], pos: usize, written: usize) -> CqUnit {
    if pos + UNIT_SIZE <= written {
        return CqUnit::decode(&raw[pos..pos + UNIT_SIZE]);
    }
    let mut b = [0u8; UNIT_SIZE];
    if pos < written {
        b[..written - pos].copy_from_slice(&raw[pos..written]);
    }
    CqUnit::decode(&b)
}

/// Physical end of the last valid real (non-filler) unit among the
/// committed units of `f`.
fn last_real_unit_end(f: &MappedFile) -> Option<i64> {
    let bytes = f.slice_from(0)?;
    bytes
        .chunks_exact(UNIT_SIZE)
        .rev()
        .map(CqUnit::decode)
        .find(|u| u.is_valid() && !u.is_filler())
        .map(|u| u.end())
}

/// See the module documentation.
#[derive(Debug)]
pub struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    files: MappedFileQueue,
    /// Logical byte offset of the first unit consumers may read.
    min_logic_offset: AtomicI64,
    /// CommitLog offset just past the last indexed message (dedupe on re-dispatch).
    max_physic_offset: AtomicI64,
    /// Where a cut during recovery leaves its sync (shared with the table).
    debt: Arc<SyncDebt>,
}

impl ConsumeQueue {
    pub fn new(root: &Path, topic: &str, queue_id: i32, file_size: usize) -> Self {
        Self::new_on(&basalt_disk::Disk::Real, root, topic, queue_id, file_size)
    }

    /// [`ConsumeQueue::new`] with its files on `disk`.
    pub fn new_on(
        disk: &basalt_disk::Disk,
        root: &Path,
        topic: &str,
        queue_id: i32,
        file_size: usize,
    ) -> Self {
        let dir = root.join(topic).join(queue_id.to_string());
        ConsumeQueue {
            topic: topic.to_string(),
            queue_id,
            files: MappedFileQueue::new(dir, file_size)
                .with_policy(MappedFilePolicy::CONSUME_QUEUE)
                .with_disk(disk.clone()),
            min_logic_offset: AtomicI64::new(0),
            max_physic_offset: AtomicI64::new(-1),
            debt: Arc::new(SyncDebt::default()),
        }
    }

    /// Cuts made while `debt` defers syncs owe them to it (see
    /// [`SyncDebt`]); the table's queues share its debt.
    pub fn sharing_debt(mut self, debt: Arc<SyncDebt>) -> Self {
        self.debt = debt;
        self
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }
    pub fn dir(&self) -> &Path {
        self.files.dir()
    }
    pub fn files(&self) -> &MappedFileQueue {
        &self.files
    }

    pub fn load(&self) -> Result<()> {
        self.files.load()
    }

    /// Finds the end of valid units (reading from the third-last file, up to
    /// the first invalid unit, as RocketMQ does) and cuts everything after
    /// it. Only the used part of each file is read (see [`used_prefix`]).
    /// Returns the number of valid-looking units dropped after the cut.
    pub fn recover(&self) -> Result<u64> {
        let files = self.files.files();
        if files.is_empty() {
            return Ok(0);
        }
        let start = files.len().saturating_sub(3);
        let mut valid_end = files[start].start_offset();
        let mut max_phys = -1i64;
        let mut dropped = 0u64;
        // Units follow the CommitLog across file boundaries too.
        let mut prev_end = start
            .checked_sub(1)
            .and_then(|i| last_real_unit_end(&files[i]));
        // The last file ends in zeros past its used part (the usual case):
        // setting its positions is the whole cut, without the second walk of
        // its written ranges (a file open and seeks) a general cut makes.
        let mut clean_last = None;
        for (i, f) in files.iter().enumerate().skip(start) {
            let used = used_prefix_after(f, prev_end);
            if let Some(p) = used.max_physic_offset {
                max_phys = p;
                prev_end = Some(p);
            }
            valid_end = f.start_offset() + used.len as i64;
            if used.len < f.size() {
                dropped = used.stray_units;
                if i + 1 == files.len() && !used.dirty_tail {
                    clean_last = Some((f, used.len));
                }
                break;
            }
        }
        match clean_last {
            Some((f, len)) => f.set_positions(len),
            None => self.cut_durably(valid_end)?,
        }
        self.files.set_flushed_and_committed(valid_end);
        if max_phys < 0 {
            max_phys = self.scan_max_physic_offset();
        }
        self.max_physic_offset.store(max_phys, Ordering::Release);
        if dropped > 0 {
            tracing::warn!(topic = %self.topic, queue = self.queue_id, dropped, "cut invalid ConsumeQueue units");
        }
        let first = self.files.min_offset();
        if self.min_logic_offset.load(Ordering::Acquire) < first {
            self.min_logic_offset.store(first, Ordering::Release);
        }
        Ok(dropped)
    }

    /// Physical end of the newest real unit (used when the last files hold
    /// only fillers); -1 if there is none.
    fn scan_max_physic_offset(&self) -> i64 {
        self.files
            .files()
            .iter()
            .rev()
            .find_map(|f| last_real_unit_end(f))
            .unwrap_or(-1)
    }

    /// Appends the unit for queue offset `cq_offset`. Dispatch thread only.
    ///
    /// A unit whose message ends at or before the last indexed one is a
    /// repeat (re-dispatch during recovery) and is skipped. A gap is filled
    /// with filler units so that position keeps equal to queue offset.
    pub fn put_unit(&self, cq_offset: i64, unit: CqUnit) -> Result<()> {
        let end = unit.physical_offset + unit.size as i64;
        if end <= self.max_physic_offset.load(Ordering::Acquire) {
            return Ok(());
        }
        let expect = cq_offset * UNIT_SIZE as i64;
        let file_size = self.files.file_size() as i64;
        if self.files.is_empty() {
            // The first file of a queue may start past 0 (cleanup removed the
            // older ones before a restart wiped the directory, or a slave
            // starts mid-way): units before `expect` in it are fillers.
            let start = expect - expect % file_size;
            self.files.create_file(start)?;
            self.min_logic_offset.store(expect, Ordering::Release);
        }
        let mut current = self.files.max_wrote_offset();
        if expect < current {
            // Units from `cq_offset` on point below this record (it is no
            // repeat), yet queue offsets follow the log: they are torn. A
            // re-dispatched unit torn over zeros to a low offset passed as
            // the queue's first unit and was kept below the re-dispatched
            // region; skipping the record left it in place (soak seeds
            // 6915, 10339). The log is the truth: they are cut.
            tracing::warn!(topic = %self.topic, queue = self.queue_id, cq_offset, current = current / UNIT_SIZE as i64,
                "ConsumeQueue units past this offset point below its record; cutting them");
            self.cut_durably(expect)?;
            current = expect;
        }
        if expect > current && current != self.files.first().map(|f| f.start_offset()).unwrap_or(0)
        {
            tracing::error!(topic = %self.topic, queue = self.queue_id, expected = cq_offset,
                have = current / UNIT_SIZE as i64, "gap in ConsumeQueue; filling with filler units");
        }
        while current < expect {
            self.append_raw_unit(FILLER)?;
            current += UNIT_SIZE as i64;
        }
        self.append_raw_unit(unit)?;
        self.max_physic_offset.store(end, Ordering::Release);
        Ok(())
    }

    fn append_raw_unit(&self, unit: CqUnit) -> Result<()> {
        let f = self.files.last_writable_for(0, UNIT_SIZE)?;
        let placed = f.append_with(UNIT_SIZE, |dst| unit.encode(dst));
        debug_assert!(
            placed.is_some(),
            "ConsumeQueue file sizes are multiples of 20"
        );
        placed.map(|_| ()).ok_or_else(|| StoreError::Layout {
            path: f.path().to_path_buf(),
            reason: "ConsumeQueue file size is not a multiple of 20".into(),
        })
    }

    /// Queue offset one past the last unit (the next one to be written).
    pub fn max_offset(&self) -> i64 {
        self.files.max_offset() / UNIT_SIZE as i64
    }

    /// First queue offset consumers may read.
    pub fn min_offset(&self) -> i64 {
        self.min_logic_offset.load(Ordering::Acquire) / UNIT_SIZE as i64
    }

    /// CommitLog offset just past the last message indexed here.
    pub fn max_physic_offset(&self) -> i64 {
        self.max_physic_offset.load(Ordering::Acquire)
    }

    /// The unit at queue offset `offset`, if it exists and is readable.
    pub fn unit_at(&self, offset: i64) -> Option<CqUnit> {
        if offset < 0 {
            return None;
        }
        let pos = offset * UNIT_SIZE as i64;
        let f = self.files.find_by_offset(pos)?;
        let b = f.slice((pos - f.start_offset()) as usize, UNIT_SIZE)?;
        Some(CqUnit::decode(b))
    }

    /// Units from queue offset `offset` to the end of the file holding it.
    pub fn units_from(&self, offset: i64) -> Option<UnitRun> {
        if offset < self.min_offset() || offset < 0 {
            return None;
        }
        let pos = offset * UNIT_SIZE as i64;
        let f = self.files.find_by_offset(pos)?;
        let in_file = (pos - f.start_offset()) as usize;
        let committed = f.committed_position();
        if in_file >= committed {
            return None;
        }
        Some(UnitRun {
            pos: in_file,
            len: committed - in_file,
            start_offset: offset,
            file: f,
        })
    }

    /// Queue offset of the first unit of the file after the one holding `offset`.
    pub fn roll_next_file(&self, offset: i64) -> i64 {
        let units = (self.files.file_size() / UNIT_SIZE) as i64;
        offset + units - offset % units
    }

    /// Drops every unit whose message does not end at or before `phys` (the
    /// CommitLog was cut there, or is dispatched again from there): those
    /// that start at or after it, and a unit that claims to run past it.
    /// No record straddles a CommitLog file start, and a record straddling
    /// the log's end is not in the log; a unit that does is a torn one,
    /// such as a filler (`size` 0x7fffffff) whose last bytes were lost,
    /// which then poses as a record of 2 GiB at offset 0, hides every unit
    /// re-dispatched after it as a repeat, and leaves its queue empty (the
    /// soak found it, seeds 6206, 12522).
    pub fn truncate_dirty(&self, phys: i64) -> Result<()> {
        if self.max_physic_offset() <= phys && self.max_physic_offset() >= 0 {
            return Ok(());
        }
        // Binary search for the first unit ending past `phys`. Units of a
        // recovered queue follow the CommitLog (see `used_prefix`), so
        // their ends rise with their offsets.
        let min = self.files.min_offset() / UNIT_SIZE as i64;
        let max = self.max_offset();
        let mut lo = min;
        let mut hi = max;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let keep = match self.effective_unit(mid, max) {
                Some(u) => u.end() <= phys,
                None => true,
            };
            if keep {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo < max {
            tracing::warn!(topic = %self.topic, queue = self.queue_id, from = lo, to = max,
                "cutting ConsumeQueue units past the end of the CommitLog");
            self.cut_durably(lo * UNIT_SIZE as i64)?;
        }
        let mut new_max = -1;
        if lo > min
            && let Some(u) = self.unit_at(lo - 1).filter(|u| !u.is_filler())
        {
            new_max = u.end();
        }
        self.max_physic_offset.store(new_max, Ordering::Release);
        Ok(())
    }

    /// Cuts the files at byte `at` and makes the zeroed tail durable: at
    /// once, or during recovery by the debt's payment (see [`SyncDebt`]),
    /// which comes before the checkpoint moves past the cut.
    /// Recovery cuts units that may be on the device (a power loss kept
    /// them); past the queue's new end no flush ever syncs that range
    /// again, so a later power loss brought the cut units back, and a
    /// recovery that started its scan after them kept them: units pointing
    /// at records of other queues (the soak found it once store times came
    /// from the simulated clock, seed 3320). A crash before the payment
    /// recovers from the same checkpoint, which cuts them again.
    fn cut_durably(&self, at: i64) -> Result<()> {
        self.files.truncate_dirty(at)?;
        if self.debt.is_deferring() {
            self.debt.owe();
            return Ok(());
        }
        if let Some(f) = self.files.find_by_offset(at) {
            f.sync_whole()?;
        }
        Ok(())
    }

    /// The physical offset that orders unit `idx`: its own, or for a filler the
    /// next real unit's (fillers stand in for messages just before it), so
    /// that binary searches stay monotone. `None` past the last real unit.
    fn effective_physical_offset(&self, idx: i64, max: i64) -> Option<i64> {
        self.effective_unit(idx, max).map(|u| u.physical_offset)
    }

    /// The unit that orders unit `idx` (see
    /// [`ConsumeQueue::effective_physical_offset`]).
    fn effective_unit(&self, idx: i64, max: i64) -> Option<CqUnit> {
        let mut i = idx;
        while i < max {
            let u = self.unit_at(i)?;
            if !u.is_filler() {
                return Some(u);
            }
            i += 1;
        }
        None
    }

    /// Moves the min offset to the first unit whose message is still in the
    /// CommitLog (which now starts at `commit_log_min`). Fillers before that
    /// unit stand for no message and are passed over too, as RocketMQ's
    /// `correctMinOffset` passes over them (their offset, 0, is below any
    /// CommitLog start past 0). A min offset left on a filler that ends its
    /// file answered the first pull with `NoMatchedMessage`: after a power
    /// loss took the unsynced unit of a message that cleanup had already
    /// deleted, re-dispatch filled its slot (the last of a 16-unit file in
    /// the soak's seeds 5609, 18685) and the min offset stopped there.
    pub fn correct_min_offset(&self, commit_log_min: i64) {
        let first = self.files.min_offset() / UNIT_SIZE as i64;
        let max = self.max_offset();
        let mut lo = first.max(self.min_offset());
        let mut hi = max;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.effective_physical_offset(mid, max) {
                Some(p) if p < commit_log_min => lo = mid + 1,
                None => lo = mid + 1,
                _ => hi = mid,
            }
        }
        while lo < max && self.unit_at(lo).is_some_and(|u| u.is_filler()) {
            lo += 1;
        }
        let new_min = lo * UNIT_SIZE as i64;
        if new_min > self.min_logic_offset.load(Ordering::Acquire) {
            self.min_logic_offset.store(new_min, Ordering::Release);
        }
    }

    /// Deletes whole files whose every unit points before `commit_log_min`
    /// (never the last file). Returns the number of files deleted.
    pub fn delete_expired(&self, commit_log_min: i64) -> Result<usize> {
        let files = self.files.files();
        let mut victims = Vec::new();
        for f in files.iter().take(files.len().saturating_sub(1)) {
            let Some(bytes) = f.slice_from(0) else { break };
            let last = bytes
                .chunks_exact(UNIT_SIZE)
                .rev()
                .map(CqUnit::decode)
                .find(|u| !u.is_filler());
            match last {
                Some(u) if u.end() <= commit_log_min => victims.push(Arc::clone(f)),
                None => victims.push(Arc::clone(f)),
                _ => break,
            }
        }
        self.files
            .remove_head(&victims, std::time::Duration::ZERO)?;
        self.correct_min_offset(commit_log_min);
        Ok(victims.len())
    }

    /// fsyncs dirty units if at least `least_pages` pages wait, after the
    /// directories of files created since the last flush (the queue's, its
    /// topic's and the root: any may be new), so the checkpoint the flush
    /// service writes next never counts units in a file a crash could lose.
    pub fn flush(&self, least_pages: usize) -> Result<i64> {
        self.files.sync_new_dirs(2)?;
        self.files.flush(least_pages)
    }

    /// Deletes the queue's files and directory.
    pub fn destroy(&self) -> Result<()> {
        self.files.destroy_all()?;
        self.max_physic_offset.store(-1, Ordering::Release);
        self.min_logic_offset.store(0, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
#[path = "consume_queue_tests.rs"]
mod tests;
