//! Opening the timer state after a clean stop or a crash.
//!
//! The CommitLog, through the timer topic's queue 0, is the source of truth
//! for which timers exist; the TimerLog and the wheel are derived from it.
//! With a checkpoint `(P, E, R)`:
//!
//! 1. the TimerLog is scanned from its first retained entry to `P` (every
//!    entry checked) and cut at `P`: entries after it were not known to be
//!    on disk and are enqueued again from the queue, starting at `E`;
//! 2. entries at the tail that point past the end of the queue, or at a
//!    message the queue no longer has there (the CommitLog lost its tail),
//!    are cut too, and enqueueing restarts at the first of them;
//! 3. the wheel is rebuilt from the entries whose slot is at or after `R`,
//!    each entry's `prev` link checked against the slot's newest entry.
//!
//! Anything that does not fit — no checkpoint next to a TimerLog, damage
//! before `P`, a TimerLog shorter than `P`, a segment of the wrong size, a
//! slot that does not match the configured precision or wheel — throws the
//! TimerLog away and rebuilds it from the queue's first offset; the timers
//! already delivered are then recognised by their delivered copies (the
//! broker checks for a copy before it delivers a timer older than its run).

use std::sync::Arc;

use super::TimerConfig;
use super::checkpoint::TimerCheckpoint;
use super::entry::ENTRY_SIZE;
use super::log::{TimerLog, TimerLogScanStop};
use super::wheel::TimingWheel;
use crate::consume_queue::ConsumeQueue;
use crate::error::{Result, StoreError};

/// What recovery found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimerRecoveryReport {
    /// Entries read from the TimerLog.
    pub entries_scanned: u64,
    /// Entries placed in the wheel (pending timers).
    pub entries_pending: u64,
    /// Entries cut from the tail (past the checkpoint or the queue).
    pub entries_cut: u64,
    /// Why the TimerLog was rebuilt from the queue, if it was.
    pub rebuilt_because: Option<String>,
}

/// The timer state, ready for the broker's services.
#[derive(Debug)]
pub struct RecoveredTimers {
    pub log: TimerLog,
    pub wheel: TimingWheel,
    /// Every slot before it is delivered.
    pub read_ms: i64,
    /// Next timer-queue offset to enqueue.
    pub enqueue_next: i64,
    pub report: TimerRecoveryReport,
}

/// Opens and recovers the timer state of the store at `cfg.root`.
/// `queue` is the timer topic's queue 0, if it exists. Blocking.
pub fn recover(
    cfg: &TimerConfig,
    queue: Option<&Arc<ConsumeQueue>>,
    now_ms: i64,
) -> Result<RecoveredTimers> {
    let p = cfg.precision_ms;
    let fresh_read = now_ms.div_euclid(p) * p;
    let checkpoint = match TimerCheckpoint::load_on(&cfg.disk, &cfg.checkpoint_path()) {
        Ok(c) => c,
        Err(e @ StoreError::Corrupt { .. }) => {
            tracing::error!(error = %e, "timer checkpoint unreadable");
            None
        }
        Err(e) => return Err(e),
    };
    let log = TimerLog::new(cfg.log_dir(), cfg.segment_size).with_disk(cfg.disk.clone());
    let (qmin, qmax) = queue
        .map(|q| (q.min_offset(), q.max_offset()))
        .unwrap_or((0, 0));
    let load = log.load();
    let attempt = match (load, checkpoint) {
        (Err(e @ StoreError::Layout { .. }), _) => Err(format!("{e}")),
        (Err(e), _) => return Err(e),
        (Ok(()), None) if log.end() > 0 => Err("a TimerLog without its checkpoint".to_string()),
        (Ok(()), None) => {
            let wheel = TimingWheel::new(p, cfg.slot_count());
            let report = TimerRecoveryReport::default();
            return Ok(RecoveredTimers {
                log,
                wheel,
                read_ms: fresh_read,
                enqueue_next: qmin,
                report,
            });
        }
        (Ok(()), Some(c)) => rebuild_from_log(cfg, &log, &c, queue),
    };
    match attempt {
        Ok(r) => Ok(r.into_recovered(log)),
        Err(why) => {
            tracing::error!(reason = %why, dir = %cfg.log_dir().display(),
                "rebuilding the TimerLog from the timer topic's queue");
            drop(log);
            remove_log_dir(cfg)?;
            let log = TimerLog::new(cfg.log_dir(), cfg.segment_size).with_disk(cfg.disk.clone());
            log.load()?;
            let read_ms = checkpoint
                .map(|c| c.read_ms.div_euclid(p) * p)
                .unwrap_or(fresh_read);
            Ok(RecoveredTimers {
                log,
                wheel: TimingWheel::new(p, cfg.slot_count()),
                read_ms,
                enqueue_next: qmin.min(qmax),
                report: TimerRecoveryReport {
                    rebuilt_because: Some(why),
                    ..Default::default()
                },
            })
        }
    }
}

/// Deletes the TimerLog directory (it is derived data) and makes that
/// durable.
fn remove_log_dir(cfg: &TimerConfig) -> Result<()> {
    if !cfg.disk.remove_dir(&cfg.log_dir(), true)? {
        return Ok(());
    }
    Ok(cfg.disk.sync_dir(&cfg.root)?)
}

/// A recovery from the TimerLog itself, before it is handed out.
struct FromLog {
    wheel: TimingWheel,
    read_ms: i64,
    enqueue_next: i64,
    report: TimerRecoveryReport,
}

impl FromLog {
    fn into_recovered(self, log: TimerLog) -> RecoveredTimers {
        RecoveredTimers {
            log,
            wheel: self.wheel,
            read_ms: self.read_ms,
            enqueue_next: self.enqueue_next,
            report: self.report,
        }
    }
}

fn rebuild_from_log(
    cfg: &TimerConfig,
    log: &TimerLog,
    c: &TimerCheckpoint,
    queue: Option<&Arc<ConsumeQueue>>,
) -> std::result::Result<FromLog, String> {
    let p = cfg.precision_ms;
    if c.read_ms % p != 0 {
        return Err(format!(
            "the checkpoint's read time {} is not a multiple of timerPrecisionMs {p}",
            c.read_ms
        ));
    }
    let start = log.min_offset();
    if c.log_end < start || c.log_end % ENTRY_SIZE as i64 != 0 {
        return Err(format!(
            "the checkpoint's TimerLog position {} is not in the TimerLog (first entry at {start})",
            c.log_end
        ));
    }
    let mut report = TimerRecoveryReport::default();
    match log.scan(start, c.log_end, |_, _| report.entries_scanned += 1) {
        TimerLogScanStop::Limit => {}
        TimerLogScanStop::End(pos) => {
            return Err(format!(
                "the TimerLog ends at {pos}, before the checkpoint's {}",
                c.log_end
            ));
        }
        TimerLogScanStop::Invalid { pos, reason } => return Err(format!("at {pos}: {reason}")),
    }
    // What lies past the checkpoint is not known to be on disk: count it
    // (a torn entry too) and cut it.
    let mut past = 0u64;
    let torn = matches!(
        log.scan(c.log_end, i64::MAX, |_, _| past += 1),
        TimerLogScanStop::Invalid { .. }
    );
    log.truncate(c.log_end).map_err(|e| e.to_string())?;
    report.entries_cut = past + u64::from(torn);
    let (end, first_cut) = cut_entries_past_queue(log, queue, &mut report)?;
    let (qmin, qmax) = queue
        .map(|q| (q.min_offset(), q.max_offset()))
        .unwrap_or((0, 0));
    let mut enqueue_next = match first_cut {
        Some(q) => q.min(c.enqueue_next),
        None if end > start => {
            log.read(end - ENTRY_SIZE as i64)
                .map_err(|e| e.to_string())?
                .queue_offset
                + 1
        }
        None => c.enqueue_next,
    };
    enqueue_next = enqueue_next.clamp(qmin.min(qmax), qmax);
    let wheel = rebuild_wheel(cfg, log, start, end, c.read_ms, &mut report)?;
    Ok(FromLog {
        wheel,
        read_ms: c.read_ms,
        enqueue_next,
        report,
    })
}

/// Cuts tail entries that point past the queue's end or at a message the
/// queue no longer holds at their offset. Returns the new end and the
/// queue offset of the first entry cut.
fn cut_entries_past_queue(
    log: &TimerLog,
    queue: Option<&Arc<ConsumeQueue>>,
    report: &mut TimerRecoveryReport,
) -> std::result::Result<(i64, Option<i64>), String> {
    let start = log.min_offset();
    let mut end = log.end();
    let mut first_cut = None;
    while end > start {
        let e = log
            .read(end - ENTRY_SIZE as i64)
            .map_err(|e| e.to_string())?;
        let held = queue.and_then(|q| {
            (e.queue_offset < q.max_offset())
                .then(|| q.unit_at(e.queue_offset))
                .flatten()
        });
        // Below the queue's minimum the message expired; that is no reason
        // to cut (delivery passes over it).
        let expired = queue.is_some_and(|q| e.queue_offset < q.min_offset());
        if expired || held.is_some_and(|u| u.physical_offset == e.phys && u.size == e.size) {
            break;
        }
        first_cut = Some(e.queue_offset);
        end -= ENTRY_SIZE as i64;
        report.entries_cut += 1;
    }
    if first_cut.is_some() {
        tracing::warn!(
            end,
            "TimerLog entries point past the timer queue (the CommitLog lost its tail); cut"
        );
        log.truncate(end).map_err(|e| e.to_string())?;
    }
    Ok((end, first_cut))
}

/// Places every entry in `[start, end)` whose slot is at or after
/// `read_ms`, checking each entry's link against the slot.
fn rebuild_wheel(
    cfg: &TimerConfig,
    log: &TimerLog,
    start: i64,
    end: i64,
    read_ms: i64,
    report: &mut TimerRecoveryReport,
) -> std::result::Result<TimingWheel, String> {
    let mut wheel = TimingWheel::new(cfg.precision_ms, cfg.slot_count());
    let mut err = None;
    let stop = log.scan(start, end, |pos, e| {
        if err.is_some() || e.slot_ms < read_ms {
            return;
        }
        match wheel.prev_for(e.slot_ms) {
            Ok(prev) if prev == e.prev => {
                let _ = wheel.place(e.slot_ms, pos);
                report.entries_pending += 1;
            }
            Ok(prev) => {
                err = Some(format!(
                    "entry at {pos} links to {} but its slot's newest entry is {prev}",
                    e.prev
                ))
            }
            Err(why) => {
                err = Some(format!(
                    "entry at {pos} for slot {} does not fit the wheel: {why:?}",
                    e.slot_ms
                ))
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    match stop {
        TimerLogScanStop::Limit => Ok(wheel),
        other => Err(format!("TimerLog changed during recovery: {other:?}")),
    }
}

#[cfg(test)]
mod tests;
