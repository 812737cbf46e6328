//! Crash recovery (docs/storage-format.md#recovery).
//!
//! * **Normal** (the abort file is absent: the last run shut down cleanly):
//!   validate the last three CommitLog files and cut anything invalid at the
//!   tail; ConsumeQueues are trusted up to their last valid unit and whatever
//!   the CommitLog holds past them is dispatched on start.
//! * **Abnormal** (the abort file is present): start at the CommitLog file
//!   whose first record is older than the checkpoint (minus 3 s), validate
//!   every record from there and re-dispatch it into the ConsumeQueues and the
//!   index (both skip what they already have).
//!
//! Either way: the first invalid record (bad magic, bad length, bad CRC,
//! wrong PHYSICALOFFSET, zeros, no CRC trailer where the checkpoint's
//! [`crate::checkpoint::TrailerRule`] says one was written) ends the log and everything after it is cut —
//! unless a valid record follows it, which means damage in the middle of the
//! log: that is an error naming the file and offset, never a silent drop.
//!
//! The checkpoint's CommitLog durable offset refines that rule. Everything
//! below it was fsynced; past it the device may have kept a later page of
//! the unsynced tail and lost an earlier one. So damage at or past the
//! durable offset is cut, with a warning naming the file, the offset and the
//! bytes cut, even when valid records follow; only damage below it is
//! refused as middle corruption. With no durable offset (a checkpoint
//! written by RocketMQ or older Basalt) the rule above stands alone. After
//! an abnormal recovery the files kept are fsynced, and the durable offset
//! restarts at the recovered end.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use basalt_common::record::{self, RecordHead, RecordView};

use crate::checkpoint::Checkpoint;
use crate::commit_log::{CommitLog, TopicQueueTable};
use crate::consume_queue::ConsumeQueueTable;
use crate::dispatch::{DispatchRequest, Dispatcher};
use crate::error::{Result, StoreError};
use crate::mapped_file::MappedFile;
use crate::record_check::RecordCheck;

/// Why a scan of a file stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanStop {
    /// The file ended with a filler (or exactly): the log goes on in the next file.
    EndOfFile,
    /// The never-written zero area starts here.
    Zeros { pos: usize },
    /// Something that is not a valid record starts here.
    Invalid { pos: usize, reason: String },
}

/// Walks the records of `raw` (one CommitLog file starting at global offset
/// `base`) from `from`, calling `visit` for each valid record (one that
/// passes `check`).
pub fn scan_file(
    raw: &[u8],
    base: i64,
    from: usize,
    check: &RecordCheck,
    mut visit: impl FnMut(&RecordView<'_>) -> Result<()>,
) -> Result<ScanStop> {
    let size = raw.len();
    let mut pos = from;
    loop {
        if pos + record::BLANK_LEN > size {
            // Writers always leave room for a filler, so a clean file never
            // ends here unless it is exactly full.
            if pos == size {
                return Ok(ScanStop::EndOfFile);
            }
            return Ok(ScanStop::Invalid {
                pos,
                reason: format!("{} bytes left, too few for a record or filler", size - pos),
            });
        }
        match record::peek_head(&raw[pos..]) {
            Some(RecordHead::Message { total_size }) => {
                if pos + total_size > size {
                    return Ok(ScanStop::Invalid {
                        pos,
                        reason: format!(
                            "record of {total_size} bytes runs past the end of the file"
                        ),
                    });
                }
                let view = match RecordView::parse(&raw[pos..pos + total_size], check.crc) {
                    Ok(v) => v,
                    Err(e) => {
                        return Ok(ScanStop::Invalid {
                            pos,
                            reason: e.to_string(),
                        });
                    }
                };
                let expect = base + pos as i64;
                if view.physical_offset != expect {
                    return Ok(ScanStop::Invalid {
                        pos,
                        reason: format!(
                            "record says it is at offset {} but sits at {expect}",
                            view.physical_offset
                        ),
                    });
                }
                if let Some(reason) = check.damage(&view) {
                    return Ok(ScanStop::Invalid { pos, reason });
                }
                visit(&view)?;
                pos += total_size;
            }
            Some(RecordHead::Blank) => {
                let declared = record::read_i32(raw, pos) as i64;
                if declared != (size - pos) as i64 {
                    return Ok(ScanStop::Invalid {
                        pos,
                        reason: format!(
                            "end-of-file filler declares {declared} bytes but {} remain",
                            size - pos
                        ),
                    });
                }
                return Ok(ScanStop::EndOfFile);
            }
            Some(RecordHead::Zeros) => return Ok(ScanStop::Zeros { pos }),
            Some(RecordHead::Garbage { magic, total_size }) => {
                return Ok(ScanStop::Invalid {
                    pos,
                    reason: format!("no record here: size {total_size}, magic {magic:#010x}"),
                });
            }
            None => unreachable!("checked 8 bytes are available"),
        }
    }
}

/// The global offset of a valid record that starts after `pos` in file
/// `files[idx]`, or at the start of a later file — proof that the log is
/// damaged in the middle rather than torn at the end.
pub fn find_valid_record_after(files: &[Arc<MappedFile>], idx: usize, pos: usize) -> Option<i64> {
    let f = &files[idx];
    let raw = f.raw();
    for (start, end) in f.data_ranges(pos + 1) {
        if let Some(found) = find_valid_record_in(raw, f.start_offset(), start.max(pos + 1), end) {
            return Some(found);
        }
    }
    files[idx + 1..]
        .iter()
        .find(|g| valid_record_at(g.raw(), g.start_offset(), 0))
        .map(|g| g.start_offset())
}

/// The first position in `raw[from..to)` (a file starting at global `base`)
/// where a valid record (CRC checked, PHYSICALOFFSET equal to its position)
/// starts, as a global offset.
pub fn find_valid_record_in(raw: &[u8], base: i64, from: usize, to: usize) -> Option<i64> {
    let to = to.min(raw.len());
    if from + 4 >= to {
        return None;
    }
    // A record's magic sits 4 bytes into it; search from the first place a
    // record starting at or after `from` could have its magic.
    let search_from = from + 4;
    let window = &raw[search_from..to];
    let mut best: Option<i64> = None;
    for magic in [record::MAGIC_V1, record::MAGIC_V2] {
        let needle = magic.to_be_bytes();
        for hit in memchr::memmem::find_iter(window, &needle) {
            let at = search_from + hit - 4;
            if valid_record_at(raw, base, at) {
                let g = base + at as i64;
                best = Some(best.map_or(g, |b| b.min(g)));
                break;
            }
        }
    }
    best
}

/// Whether a valid record whose PHYSICALOFFSET matches starts at `at`.
pub fn valid_record_at(raw: &[u8], base: i64, at: usize) -> bool {
    match RecordView::parse(&raw[at.min(raw.len())..], true) {
        Ok(v) => v.physical_offset == base + at as i64,
        Err(_) => false,
    }
}

/// What recovery found and did.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub abnormal: bool,
    /// Where scanning started.
    pub scan_from: i64,
    /// The end of the valid log.
    pub log_end: i64,
    /// Bytes cut off the tail of the CommitLog.
    pub cut_bytes: i64,
    /// Why the scan stopped where it did (for the log).
    pub stop: String,
    pub records_scanned: u64,
    pub bytes_scanned: u64,
    pub consume_queue_units_dropped: u64,
    /// The checkpoint's CommitLog durable offset (None: unknown).
    pub durable_offset: Option<i64>,
    /// Damage at or past the durable offset with valid records after it:
    /// an unsynced tail that reached the disk out of order, cut.
    pub cut_past_durable: bool,
    /// Where re-dispatch stopped because the disk had no room for a
    /// ConsumeQueue file: dispatch resumes there once the store runs.
    pub dispatch_stopped_at: Option<i64>,
    pub elapsed: Duration,
    /// Time spent in each phase, in order (logged at start).
    pub phases: Phases,
}

/// Named durations of the phases of a start, in order.
#[derive(Debug, Clone, Default)]
pub struct Phases(pub Vec<(&'static str, Duration)>);

impl Phases {
    /// Records the time since `*since` as `name` and restarts the clock.
    pub fn lap(&mut self, name: &'static str, since: &mut Instant) {
        let now = Instant::now();
        self.0.push((name, now - *since));
        *since = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, d)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}={}ms", d.as_millis())?;
        }
        Ok(())
    }
}

/// What the re-dispatch of an abnormal recovery did.
#[derive(Debug, Default)]
struct Redispatched {
    /// The first record not dispatched (the disk was full).
    stopped_at: Option<i64>,
    /// Next queue offset of every topic queue with records left undispatched:
    /// their ConsumeQueues end short of them, and new puts must not reuse
    /// their offsets.
    next_offsets: HashMap<(String, i32), i64>,
}

/// The dispatcher thread of an abnormal recovery: dispatches the records whose
/// positions arrive on `rx`. When the disk has no room for a ConsumeQueue
/// file it stops dispatching (the store must still open on a full disk) and
/// only notes the queue offsets the remaining records hold.
fn redispatch(
    files: &[Arc<MappedFile>],
    rx: std::sync::mpsc::Receiver<(usize, Vec<usize>)>,
    dispatcher: &Dispatcher,
) -> Result<Redispatched> {
    let mut out = Redispatched::default();
    for (i, positions) in rx {
        let raw = files[i].raw();
        for pos in positions {
            let view = RecordView::parse(&raw[pos..], false).map_err(|e| {
                StoreError::Config(format!("re-parse of a checked record failed: {e}"))
            })?;
            let req = match DispatchRequest::from_record(&view, &dispatcher.delays) {
                Ok(req) => req,
                Err(_) => {
                    // Unplaceable: dispatch_record counts it, logs it and passes over it.
                    dispatcher.dispatch_record(&view, false)?;
                    continue;
                }
            };
            if out.stopped_at.is_none() {
                match dispatcher.dispatch(&req, false) {
                    Ok(()) => continue,
                    Err(e) if e.is_no_space() => {
                        tracing::warn!(offset = req.commit_log_offset, error = %e,
                            "disk full: recovery leaves the rest to dispatch once there is room");
                        out.stopped_at = Some(req.commit_log_offset);
                    }
                    Err(e) => return Err(e),
                }
            }
            if basalt_common::sysflag::is_consumable(req.sys_flag) {
                let next = out
                    .next_offsets
                    .entry((req.topic.to_string(), req.queue_id))
                    .or_insert(0);
                *next = (*next).max(req.consume_queue_offset + 1);
            }
        }
    }
    Ok(out)
}

/// Recovers the CommitLog, ConsumeQueues and index. See the module docs.
pub fn recover(
    commit_log: &CommitLog,
    consume_queues: &ConsumeQueueTable,
    dispatcher: &Dispatcher,
    checkpoint: &Checkpoint,
    mut abnormal: bool,
) -> Result<RecoveryReport> {
    let started = Instant::now();
    // Queue cuts owe their syncs to the first flush round (one file-system
    // sync for all) instead of one msync each here.
    let _defer = consume_queues.defer_syncs();
    // ConsumeQueues first, in parallel: each keeps its valid prefix.
    let mut lap = started;
    let mut report = RecoveryReport {
        consume_queue_units_dropped: recover_consume_queues(consume_queues)?,
        ..Default::default()
    };
    report.phases.lap("queue_ends", &mut lap);

    if report.consume_queue_units_dropped > 0 && !abnormal {
        tracing::warn!(
            dropped = report.consume_queue_units_dropped,
            "ConsumeQueue units were cut after a clean shutdown; re-dispatching from the checkpoint"
        );
        abnormal = true;
    }
    report.abnormal = abnormal;

    let files = commit_log.files().files();
    let check = RecordCheck::for_recovery(commit_log.config(), checkpoint);
    if files.is_empty() {
        commit_log.set_recovered_end(0);
        checkpoint.reset_commit_log_durable_offset(Some(0));
        finish_queues(commit_log, consume_queues, dispatcher, 0)?;
        report.elapsed = started.elapsed();
        return Ok(report);
    }

    let start_idx = if abnormal {
        start_file_for_checkpoint(&files, checkpoint)
    } else {
        files.len().saturating_sub(3)
    };
    report.scan_from = files[start_idx].start_offset();
    if abnormal {
        // What follows cuts queue units and the index before re-dispatching;
        // a store that is about to be refused must be left as it was (the
        // operator's `basalt store repair` plans from it), so the end of
        // the log is judged first, at the cost of one more scan.
        prejudge_stop(&files, start_idx, &check, checkpoint)?;
        report.phases.lap("prejudge", &mut lap);
    }
    if abnormal && let Some(index) = &dispatcher.index {
        // An index file's header (with the offset it has indexed up to) may
        // have reached the disk while the entries it counts did not: sectors
        // of an unsynced file persist in any order. So nothing re-dispatched
        // counts as indexed already; entries that did survive are found
        // twice, and lookups drop the duplicates.
        // And a torn unsynced entry may end a chain that fsynced entries
        // follow: the newest file's chains are relinked (soak seed 18700).
        index.recover_after_crash(report.scan_from);
    }
    if abnormal {
        // Likewise a ConsumeQueue's unsynced tail may have persisted torn or
        // out of order (units straddle sectors): units pointing into the
        // re-dispatched region are cut and written again from the log.
        for cq in consume_queues.all() {
            cq.truncate_dirty(report.scan_from)?;
        }
        // And the queues kept below the scan must keep their names (seed
        // 8523 of the soak): made durable with the cuts, before the
        // checkpoint moves.
        consume_queues.owe_names();
        report.phases.lap("cut_from_scan", &mut lap);
    }

    let mut log_end = files.last().map(|f| f.end_offset()).unwrap_or(0);
    let mut stopped_at: Option<(usize, usize)> = None;
    let mut redispatched = Redispatched::default();
    // After a crash the records are re-dispatched. Checking them (CRC) and
    // dispatching them (ConsumeQueue and index writes) run on two threads:
    // this one scans and sends the positions of valid records, in order, to
    // a dispatcher thread, which parses them again without the CRC.
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Vec<usize>)>(16);
        let dispatch_thread = abnormal.then(|| {
            let files = &files;
            scope.spawn(move || redispatch(files, rx, dispatcher))
        });
        const BATCH: usize = 4096;
        let mut send_err = false;
        for (i, f) in files.iter().enumerate().skip(start_idx) {
            let raw = f.raw();
            let base = f.start_offset();
            let mut batch = Vec::with_capacity(BATCH);
            let stop = scan_file(raw, base, 0, &check, |view| {
                report.records_scanned += 1;
                report.bytes_scanned += view.total_size() as u64;
                if abnormal {
                    batch.push((view.physical_offset - base) as usize);
                    if batch.len() == BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                        send_err |= tx.send((i, full)).is_err();
                    }
                }
                Ok(())
            })?;
            if abnormal && !batch.is_empty() {
                send_err |= tx.send((i, batch)).is_err();
            }
            match stop {
                ScanStop::EndOfFile => continue,
                ScanStop::Zeros { pos } => {
                    report.stop = format!("end of data in {} at {pos}", f.path().display());
                    log_end = f.start_offset() + pos as i64;
                    stopped_at = Some((i, pos));
                    break;
                }
                ScanStop::Invalid { pos, reason } => {
                    tracing::warn!(file = %f.path().display(), pos, %reason, "invalid record: the log ends here");
                    report.stop = format!("{reason} in {} at {pos}", f.path().display());
                    log_end = f.start_offset() + pos as i64;
                    stopped_at = Some((i, pos));
                    break;
                }
            }
        }
        drop(tx);
        if let Some(t) = dispatch_thread {
            redispatched = t
                .join()
                .map_err(|_| StoreError::Config("recovery dispatch thread panicked".into()))??;
        }
        if send_err {
            return Err(StoreError::Config(
                "recovery dispatch thread stopped early".into(),
            ));
        }
        Ok(())
    })?;

    report
        .phases
        .lap(if abnormal { "scan_redispatch" } else { "scan" }, &mut lap);
    let wrote_end = commit_log.files().max_wrote_offset();
    report.cut_bytes = (wrote_end - log_end).max(0);
    report.durable_offset = checkpoint.commit_log_durable_offset();
    if let Some((i, pos)) = stopped_at {
        judge_stop(&files, i, pos, &mut report, true)?;
    }
    commit_log.truncate(log_end)?;
    commit_log.set_recovered_end(log_end);
    if abnormal {
        make_kept_durable(&commit_log.files().files(), report.scan_from, log_end)?;
    }
    report.phases.lap("cut_log", &mut lap);
    checkpoint.reset_commit_log_durable_offset(Some(log_end));
    report.log_end = log_end;
    report.dispatch_stopped_at = redispatched.stopped_at;
    finish_queues(commit_log, consume_queues, dispatcher, log_end)?;
    if !redispatched.next_offsets.is_empty() {
        commit_log.raise_queue_offsets(&redispatched.next_offsets);
    }
    report.phases.lap("finish_queues", &mut lap);
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Scans `files[start_idx..]` for the end of the valid log and judges it
/// (see [`judge_stop`]) without changing anything: an error is the refusal
/// the full recovery would reach.
fn prejudge_stop(
    files: &[Arc<MappedFile>],
    start_idx: usize,
    check: &RecordCheck,
    checkpoint: &Checkpoint,
) -> Result<()> {
    for (i, f) in files.iter().enumerate().skip(start_idx) {
        let stop = scan_file(f.raw(), f.start_offset(), 0, check, |_| Ok(()))?;
        let (pos, stop) = match stop {
            ScanStop::EndOfFile => continue,
            ScanStop::Zeros { pos } => (
                pos,
                format!("end of data in {} at {pos}", f.path().display()),
            ),
            ScanStop::Invalid { pos, reason } => {
                (pos, format!("{reason} in {} at {pos}", f.path().display()))
            }
        };
        let mut scratch = RecoveryReport {
            stop,
            durable_offset: checkpoint.commit_log_durable_offset(),
            ..RecoveryReport::default()
        };
        return judge_stop(files, i, pos, &mut scratch, false);
    }
    Ok(())
}

/// Decides what the stop of the scan at `pos` in `files[i]` means, against
/// the checkpoint's durable offset (see the module docs): a torn or
/// out-of-order tail to cut (Ok; logged when `log_cut`), or damage in the
/// middle (the error).
fn judge_stop(
    files: &[Arc<MappedFile>],
    i: usize,
    pos: usize,
    report: &mut RecoveryReport,
    log_cut: bool,
) -> Result<()> {
    let f = &files[i];
    let offset = f.start_offset() + pos as i64;
    let next_valid = find_valid_record_after(files, i, pos);
    match (next_valid, report.durable_offset) {
        (Some(next_valid), Some(durable)) if offset >= durable => {
            if !log_cut {
                return Ok(());
            }
            tracing::warn!(
                file = %f.path().display(),
                file_offset = pos,
                offset,
                durable,
                next_valid,
                cut_bytes = report.cut_bytes,
                stop = %report.stop,
                "damage past the durable offset (an unsynced tail written out of order): cutting the log here"
            );
            report.cut_past_durable = true;
            Ok(())
        }
        (Some(next_valid), durable) => Err(StoreError::MiddleCorruption {
            path: f.path().to_path_buf(),
            offset,
            file_offset: pos,
            reason: match durable {
                Some(d) => format!("{} (inside the durable region up to {d})", report.stop),
                None => report.stop.clone(),
            },
            next_valid,
        }),
        // Nothing valid follows, but the checkpoint says these bytes were
        // fsynced: acknowledged data is damaged or missing. Cutting would
        // drop it silently (the power-loss simulator found this), so it is
        // refused; `basalt store repair --truncate-at` cuts it if the
        // operator chooses to.
        (None, Some(durable)) if offset < durable => Err(StoreError::Corrupt {
            what: "CommitLog",
            path: f.path().to_path_buf(),
            offset: pos as i64,
            reason: format!(
                "{} at global offset {offset}, inside the durable region up to {durable}: data that was fsynced is damaged or missing",
                report.stop
            ),
        }),
        (None, _) => Ok(()),
    }
}

/// fsyncs the CommitLog files an abnormal recovery scanned from
/// `scan_from` and kept (`files`, after the cut at `log_end`): they may
/// have been only in the page cache of the crashed process, and the
/// durable offset restarts at `log_end`. The file the cut falls in is
/// synced even when the cut is at its very start: its zeroed tail must
/// reach the disk before new records overwrite it, or a power loss can
/// mix the cut record's old sectors with the new ones and bring a cut
/// record back (the power-loss simulator found this, soak seed 8197).
fn make_kept_durable(files: &[Arc<MappedFile>], scan_from: i64, log_end: i64) -> Result<()> {
    for f in files
        .iter()
        .filter(|f| f.start_offset() >= scan_from && f.start_offset() <= log_end)
    {
        f.sync_whole()?;
    }
    Ok(())
}

/// Recovery when the records live outside the CommitLog: ConsumeQueues keep
/// their valid prefix and nothing is cut against the (empty) CommitLog.
pub fn recover_consume_queues_only(consume_queues: &ConsumeQueueTable) -> Result<RecoveryReport> {
    let started = Instant::now();
    let dropped = recover_consume_queues(consume_queues)?;
    Ok(RecoveryReport {
        consume_queue_units_dropped: dropped,
        stop: "external log".into(),
        elapsed: started.elapsed(),
        ..Default::default()
    })
}

/// Cuts ConsumeQueue units and index watermarks past `log_end`, rebuilds the
/// topic queue table and corrects min offsets.
fn finish_queues(
    commit_log: &CommitLog,
    consume_queues: &ConsumeQueueTable,
    dispatcher: &Dispatcher,
    log_end: i64,
) -> Result<()> {
    let min = commit_log.min_offset();
    let mut table = TopicQueueTable::default();
    for cq in consume_queues.all() {
        cq.truncate_dirty(log_end)?;
        cq.correct_min_offset(min);
        table.set(cq.topic(), cq.queue_id(), cq.max_offset());
    }
    if let Some(index) = &dispatcher.index {
        index.clamp_indexed_below(log_end);
    }
    commit_log.set_topic_queue_table(table);
    Ok(())
}

/// Index of the newest file whose first record was stored at least 3 s
/// before the checkpoint's oldest time (RocketMQ's `isMappedFileMatchedRecover`).
fn start_file_for_checkpoint(files: &[Arc<MappedFile>], cp: &Checkpoint) -> usize {
    let min_ts = cp.min_timestamp();
    if min_ts <= 0 {
        return 0;
    }
    let limit = min_ts - 3000;
    for (i, f) in files.iter().enumerate().rev() {
        if let Ok(v) = RecordView::parse(f.raw(), false)
            && v.store_timestamp != 0
            && v.store_timestamp <= limit
        {
            return i;
        }
    }
    0
}

fn recover_consume_queues(table: &ConsumeQueueTable) -> Result<u64> {
    let queues = table.all();
    if queues.is_empty() {
        return Ok(0);
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let chunk = queues.len().div_ceil(workers);
    std::thread::scope(|s| {
        let handles: Vec<_> = queues
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || -> Result<u64> {
                    let mut dropped = 0;
                    for q in part {
                        dropped += q.recover()?;
                    }
                    Ok(dropped)
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h.join().map_err(|_| {
                StoreError::Config("ConsumeQueue recovery thread panicked".into())
            })??;
        }
        Ok(total)
    })
}
