//! Background services of the store (seed 004): CommitLog flush (group commit
//! for SYNC_FLUSH, interval flush for ASYNC_FLUSH), CommitLog commit (transient
//! store pool), ConsumeQueue/index flush with the checkpoint, and cleanup of
//! expired files.
//!
//! Every service sleeps on a [`Signal`] or a timer and does nothing while the
//! store is idle.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use basalt_common::config::FlushDiskType;

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::consume_queue::ConsumeQueueTable;
use crate::dispatch::Dispatcher;
use crate::health::Health;
use crate::index::IndexService;
use crate::signal::Signal;

/// A named background thread with a stop flag and its own wake-up signal.
pub struct ServiceThread {
    name: &'static str,
    stop: Arc<AtomicBool>,
    /// Every signal the service may sleep on; all are notified on stop.
    wakes: Vec<Arc<Signal>>,
    thread: Option<JoinHandle<()>>,
}

impl ServiceThread {
    fn spawn(
        name: &'static str,
        wakes: Vec<Arc<Signal>>,
        body: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
    ) -> ServiceThread {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("basalt-{name}"))
            .spawn(move || body(s))
            .expect("spawn store service thread");
        ServiceThread {
            name,
            stop,
            wakes,
            thread: Some(thread),
        }
    }

    /// Asks the service to finish its last round and waits for it.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Release);
        for w in &self.wakes {
            w.notify();
        }
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!(service = self.name, "store service panicked");
        }
    }
}

impl Drop for ServiceThread {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Starts the CommitLog flush service for the configured flush type.
///
/// * SYNC_FLUSH: group commit. The service sleeps until an append arrives,
///   then fsyncs everything written so far; appends made during an fsync are
///   covered by the next one. One fsync serves every waiter it covers.
/// * ASYNC_FLUSH: every `flushIntervalCommitLog`, fsync if at least
///   `flushCommitLogLeastPages` pages are dirty, or anything once per
///   `flushCommitLogThoroughInterval`. Sleeps without timeout while clean.
pub fn start_flush_service(
    commit_log: Arc<CommitLog>,
    checkpoint: Arc<Checkpoint>,
) -> ServiceThread {
    let wake = Arc::new(Signal::new());
    let stop_wake = Arc::clone(&wake);
    let cfg = commit_log.config().clone();
    let wakes = vec![Arc::clone(&wake), Arc::clone(&commit_log.flush_signal)];
    ServiceThread::spawn("flush", wakes, move |stop| {
        let mut last_thorough = Instant::now();
        let mut group = GroupCommit::default();
        loop {
            let stopping = stop.load(Ordering::Acquire);
            if stopping {
                // Final flush of everything.
                flush_commit_log(&commit_log, &checkpoint, 0);
                return;
            }
            if commit_log.health().is_poisoned() {
                stop_wake.wait(None);
                continue;
            }
            let dirty = commit_log
                .files()
                .committed_where()
                .max(commit_log.max_offset())
                > commit_log.flushed_offset();
            match cfg.flush_disk_type {
                FlushDiskType::SyncFlush => {
                    if !dirty {
                        wait_either(&commit_log.flush_signal, &stop, None);
                        continue;
                    }
                    group.gather(&commit_log, &stop);
                    let started = Instant::now();
                    let count = commit_log.put_stats().0;
                    flush_commit_log(&commit_log, &checkpoint, 0);
                    group.flushed(count, started.elapsed());
                }
                FlushDiskType::AsyncFlush => {
                    if !dirty {
                        wait_either(&commit_log.flush_signal, &stop, None);
                        continue;
                    }
                    stop_wake.wait(Some(cfg.flush_interval_commit_log));
                    if stop.load(Ordering::Acquire) {
                        continue;
                    }
                    let thorough =
                        last_thorough.elapsed() >= cfg.flush_commit_log_thorough_interval;
                    let least = if thorough {
                        last_thorough = Instant::now();
                        0
                    } else {
                        cfg.flush_commit_log_least_pages
                    };
                    flush_commit_log(&commit_log, &checkpoint, least);
                }
            }
        }
    })
}

/// One CommitLog flush, noted in the checkpoint's memory: the store time
/// of the last flushed record, and the durable offset. Both are set only
/// after the fsync returned, so the checkpoint never claims more than is on
/// disk; the file itself is written by the ConsumeQueue flush service, so
/// a flush costs no extra fsync. A failed flush poisons the store (in
/// [`CommitLog::flush_noting`]) and notes nothing.
fn flush_commit_log(commit_log: &CommitLog, checkpoint: &Checkpoint, least_pages: usize) {
    let _ = commit_log.flush_noting(least_pages, |flushed, ts| {
        note_flush(commit_log, checkpoint, flushed, ts)
    });
}

/// Notes a CommitLog flush that reached `flushed` in the checkpoint's
/// memory, before the flush wakes its waiters (see
/// [`CommitLog::flush_noting`]).
pub(crate) fn note_flush(
    commit_log: &CommitLog,
    checkpoint: &Checkpoint,
    flushed: i64,
    ts: Option<i64>,
) {
    if let Some(ts) = ts {
        checkpoint.set_physic_msg_timestamp(ts);
    }
    // A poisoned store claims nothing new: its files may not be what
    // a flush covered (a CommitLog deletion whose fsync failed can come
    // back at a power loss with a tail no flush reached; soak seed 17218).
    if !commit_log.health().is_poisoned() {
        checkpoint.advance_commit_log_durable_offset(flushed);
    }
}

/// Group commit pacing for SYNC_FLUSH.
///
/// Writers waiting for an fsync are released together when it completes and
/// then append again at once. Starting the next fsync the moment the first of
/// them appends would cover only a few; instead the flusher waits until as
/// many appends as the last fsync covered have arrived, for at most half the
/// last fsync's duration (capped at 1 ms). One writer is never delayed (it
/// covered one append, and one is enough); a crowd is gathered into one fsync.
#[derive(Debug, Default)]
struct GroupCommit {
    /// Appends made before the last fsync started.
    count_at_last: u64,
    /// Appends the last fsync covered.
    last_batch: u64,
    /// How long the last fsync took.
    last_fsync: Duration,
}

impl GroupCommit {
    fn gather(&self, commit_log: &CommitLog, stop: &AtomicBool) {
        if self.last_batch <= 1 {
            return;
        }
        let budget = (self.last_fsync / 2).min(Duration::from_millis(1));

        let deadline = Instant::now() + budget;
        // Appends wake this thread only when the count is reached, not one
        // by one.
        let target = self.count_at_last + self.last_batch;
        commit_log.set_flush_wake_at(target);
        loop {
            let now = Instant::now();
            if commit_log.put_stats().0 >= target || now >= deadline || stop.load(Ordering::Acquire)
            {
                break;
            }
            commit_log.flush_signal.wait(Some(deadline - now));
        }
        commit_log.set_flush_wake_at(0);
    }

    fn flushed(&mut self, count_at_start: u64, took: Duration) {
        self.last_batch = count_at_start.saturating_sub(self.count_at_last);
        self.count_at_last = count_at_start;
        self.last_fsync = took;
    }
}

/// Sleeps on `signal` (appends) until notified, the timeout, or stop. The
/// stop path notifies the service's own signal, so the data signal is checked
/// with a short bound only while stopping is requested.
fn wait_either(signal: &Signal, stop: &AtomicBool, timeout: Option<Duration>) {
    if stop.load(Ordering::Acquire) {
        return;
    }
    signal.wait(timeout);
}

/// Starts the commit service of the transient store pool: every
/// `commitIntervalCommitLog`, copy at least `commitCommitLogLeastPages` pages
/// (or anything once per thorough interval) from write buffers into files.
pub fn start_commit_service(commit_log: Arc<CommitLog>) -> ServiceThread {
    let wake = Arc::new(Signal::new());
    let stop_wake = Arc::clone(&wake);
    let cfg = commit_log.config().clone();
    let wakes = vec![Arc::clone(&wake), Arc::clone(&commit_log.commit_signal)];
    ServiceThread::spawn("commit", wakes, move |stop| {
        let mut last_thorough = Instant::now();
        loop {
            if stop.load(Ordering::Acquire) {
                if let Err(e) = commit_log.commit(0) {
                    tracing::error!(error = %e, "final commit failed");
                }
                return;
            }
            let pending = commit_log.max_wrote_offset() > commit_log.files().committed_where();
            if !pending {
                wait_either(&commit_log.commit_signal, &stop, None);
                continue;
            }
            stop_wake.wait(Some(cfg.commit_interval_commit_log));
            let thorough = last_thorough.elapsed() >= cfg.commit_commit_log_thorough_interval;
            let least = if thorough {
                last_thorough = Instant::now();
                0
            } else {
                cfg.commit_commit_log_least_pages
            };
            if let Err(e) = commit_log.commit(least) {
                tracing::error!(error = %e, "commit of the write buffer failed");
                commit_log.health().poison(&e);
            }
        }
    })
}

/// Starts the ConsumeQueue flush service: every `flushIntervalConsumeQueue`
/// fsync queues with at least `flushConsumeQueueLeastPages` dirty pages (all
/// dirty ones once per thorough interval), the newest index file, then write
/// the checkpoint.
pub fn start_consume_queue_flush_service(
    commit_log: Arc<CommitLog>,
    dispatcher: Arc<Dispatcher>,
    checkpoint: Arc<Checkpoint>,
    health: Arc<Health>,
) -> ServiceThread {
    let wake = Arc::new(Signal::new());
    let stop_wake = Arc::clone(&wake);
    let cfg = commit_log.config().clone();
    // What is on disk already: an unchanged checkpoint is not rewritten
    // (a store opened on a full disk has no block for a new one). Sampled
    // here, not when the thread first runs: by then a put may have moved
    // the durable offset, and whether the last round rewrites the
    // checkpoint would depend on thread timing (it made the power-loss
    // simulator's replays draw their faults in different orders).
    let mut last_written = CheckpointWritten {
        times: checkpoint_content(&checkpoint),
        no_space: false,
    };
    ServiceThread::spawn("flush-cq", vec![Arc::clone(&wake)], move |stop| {
        let mut last_thorough = Instant::now();
        loop {
            let stopping = stop.load(Ordering::Acquire);
            if !stopping {
                stop_wake.wait(Some(cfg.flush_interval_consume_queue));
            }
            let stopping = stop.load(Ordering::Acquire);
            if health.is_poisoned() && !stopping {
                continue;
            }
            let thorough =
                stopping || last_thorough.elapsed() >= cfg.flush_consume_queue_thorough_interval;
            let least = if thorough {
                last_thorough = Instant::now();
                0
            } else {
                cfg.flush_consume_queue_least_pages
            };
            if let Err(e) =
                flush_queues_and_checkpoint(&dispatcher, &checkpoint, least, &mut last_written)
            {
                health.poison(&e);
            }
            if stopping {
                return;
            }
        }
    })
}

/// What the ConsumeQueue flush service last wrote into the checkpoint.
#[derive(Debug)]
pub(crate) struct CheckpointWritten {
    /// The content of the last checkpoint written.
    times: CheckpointContent,
    /// The last write failed for lack of space (logged once).
    no_space: bool,
}

impl CheckpointWritten {
    /// Nothing written yet: the next round writes the checkpoint.
    pub(crate) fn nothing() -> Self {
        CheckpointWritten {
            times: (i64::MIN, i64::MIN, i64::MIN, None),
            no_space: false,
        }
    }
}

/// Flushes every queue. Many queues are flushed from several threads at
/// once, so the file system commits their fsyncs together (one journal
/// commit covers many files) instead of one after another: at shutdown a
/// broker with 20,000 queues holding a unit each otherwise spends one
/// journal commit per queue.
fn flush_all_queues(
    queues: &[Arc<crate::consume_queue::ConsumeQueue>],
    least_pages: usize,
) -> crate::error::Result<()> {
    const PER_THREAD: usize = 256;
    const MAX_THREADS: usize = 16;
    if queues.len() <= PER_THREAD {
        return queues
            .iter()
            .try_for_each(|q| q.flush(least_pages).map(|_| ()));
    }
    let threads = queues.len().div_ceil(PER_THREAD).min(MAX_THREADS);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> crate::error::Result<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(q) = queues.get(i) else {
                            return Ok(());
                        };
                        q.flush(least_pages)?;
                    }
                })
            })
            .collect();
        let mut result = Ok(());
        for h in handles {
            let r = h.join().unwrap_or_else(|_| {
                Err(crate::error::StoreError::Config(
                    "ConsumeQueue flush thread panicked".into(),
                ))
            });
            if result.is_ok() {
                result = r;
            }
        }
        result
    })
}

/// (physic, logics, index) times and the CommitLog durable offset.
type CheckpointContent = (i64, i64, i64, Option<i64>);

fn checkpoint_content(checkpoint: &Checkpoint) -> CheckpointContent {
    (
        checkpoint.physic_msg_timestamp(),
        checkpoint.logics_msg_timestamp(),
        checkpoint.index_msg_timestamp(),
        checkpoint.commit_log_durable_offset(),
    )
}

/// One round of the ConsumeQueue flush service; with `least_pages == 0`
/// everything dispatched is flushed and the checkpoint's ConsumeQueue and
/// index times advance to what was dispatched before the round began.
///
/// A checkpoint that cannot be written for lack of space is not an error:
/// the old one stays (recovery then starts a little earlier, which is always
/// correct) and the next round tries again. Failed fsyncs are errors.
pub(crate) fn flush_queues_and_checkpoint(
    dispatcher: &Dispatcher,
    checkpoint: &Checkpoint,
    least_pages: usize,
    last_written: &mut CheckpointWritten,
) -> crate::error::Result<()> {
    // Sampled before flushing: the flush then covers everything up to it.
    let dispatched_ts = dispatcher.last_store_timestamp();
    // What crash recovery cut in the queues, and their names, become
    // durable before any time in the checkpoint moves (one file-system
    // sync; see `SyncDebt`).
    dispatcher.consume_queues.pay_sync_debt()?;
    flush_all_queues(&dispatcher.consume_queues.all(), least_pages)?;
    if least_pages == 0 {
        if let Some(index) = &dispatcher.index {
            index.flush()?;
        }
        if dispatched_ts > 0 {
            checkpoint.set_logics_msg_timestamp(dispatched_ts);
            if dispatcher.index.is_some() {
                checkpoint.set_index_msg_timestamp(dispatched_ts);
            }
        }
    }
    let now = checkpoint_content(checkpoint);
    if now != last_written.times {
        match checkpoint.flush() {
            Ok(()) => {
                if std::mem::take(&mut last_written.no_space) {
                    tracing::info!("checkpoint written again after the disk was full");
                }
                last_written.times = now;
            }
            Err(e) if e.is_no_space() => {
                if !std::mem::replace(&mut last_written.no_space, true) {
                    tracing::warn!(error = %e, "disk full: the checkpoint keeps its last content until space is freed");
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Starts the cleanup service: every `diskCheckInterval` (1 s) it samples
/// the disk usage (which decides whether puts are refused, see
/// [`crate::disk_space`]); every `cleanResourceInterval`, or at once when the
/// disk is above `diskSpaceCleanForciblyRatio`, it runs a cleanup round.
pub fn start_cleanup_service(
    commit_log: Arc<CommitLog>,
    queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<IndexService>>,
    dispatch: Arc<crate::dispatch::DispatchService>,
) -> ServiceThread {
    let wake = Arc::new(Signal::new());
    let stop_wake = Arc::clone(&wake);
    let cfg = commit_log.config().clone();
    let tick = cfg.disk_check_interval.min(cfg.clean_resource_interval);
    ServiceThread::spawn("cleanup", vec![Arc::clone(&wake)], move |stop| {
        let mut last_round = Instant::now();
        loop {
            stop_wake.wait(Some(tick));
            if stop.load(Ordering::Acquire) {
                return;
            }
            commit_log.disk().sample();
            let pressure =
                cfg.clean_file_forcibly_enable && commit_log.disk().wants_forced_cleanup();
            if !pressure && last_round.elapsed() < cfg.clean_resource_interval {
                continue;
            }
            last_round = Instant::now();
            if let Err(e) = clean_once(
                &commit_log,
                &queues,
                index.as_deref(),
                dispatch.dispatched(),
                false,
            ) {
                tracing::error!(error = %e, "cleanup failed");
            }
        }
    })
}

/// One cleanup round. With `force`, expired-or-not does not matter (manual
/// cleanup by an operator). Files holding records at or past `dispatched`
/// are kept whatever their age: their ConsumeQueue units are not written
/// yet, and deleting them would lose those messages for consumers and leave
/// the queues short of the offsets producers were given. Returns the
/// CommitLog files deleted.
///
/// Expired files go at `deleteWhen`, or at any hour above
/// `diskMaxUsedSpaceRatio`. Above `diskSpaceCleanForciblyRatio` (with
/// `cleanFileForciblyEnable`), the oldest files go whether expired or not,
/// one at a time while usage stays above the ratio.
pub fn clean_once(
    commit_log: &CommitLog,
    queues: &ConsumeQueueTable,
    index: Option<&IndexService>,
    dispatched: i64,
    force: bool,
) -> crate::error::Result<usize> {
    let cfg = commit_log.config();
    let disk = commit_log.disk();
    disk.sample();
    let over_max = disk.over_max_used();
    let time_up = is_delete_hour(&cfg.delete_when);
    let mut deleted = 0;
    // Records the broker's schedulers still need (pending timers, delay
    // levels, transaction halves) are kept like undispatched ones.
    let keep_from = commit_log.retention().keep_from(dispatched);
    if time_up || over_max || force {
        deleted = commit_log
            .files()
            .delete_expired_by_time(
                cfg.file_reserved_time,
                force,
                cfg.delete_files_batch_max,
                cfg.delete_commit_log_files_interval,
                keep_from,
            )
            .inspect_err(|e| poison_on_failed_delete(commit_log, e))?;
        if deleted > 0 && over_max {
            tracing::warn!(
                deleted,
                used_percent = disk.used_percent(),
                ratio = cfg.disk_max_used_space_ratio,
                "disk usage above diskMaxUsedSpaceRatio: deleted expired CommitLog files"
            );
        }
    }
    if cfg.clean_file_forcibly_enable && !force {
        deleted += delete_under_pressure(commit_log, keep_from, deleted)?;
        if disk.is_full() && keep_from < dispatched && deleted == 0 {
            deleted += delete_past_floors(commit_log, dispatched)?;
        }
    }
    let min = commit_log.min_offset();
    for q in queues.all() {
        q.delete_expired(min)?;
    }
    if let Some(index) = index {
        index.delete_expired(min)?;
    }
    Ok(deleted)
}

/// A CommitLog deletion whose directory fsync (or unlink) failed may be
/// undone by a power loss: the old head file comes back with its unsynced
/// tail torn, and recovery, which ends the log at the first damage, would
/// then cut every later file, fsynced records included (the power-loss
/// simulator found this, seed 12509 of the soak). So it poisons the store
/// like any failed fsync: nothing is acknowledged after it.
fn poison_on_failed_delete(commit_log: &CommitLog, e: &crate::error::StoreError) {
    commit_log.health().poison(e);
}

/// Deletes the oldest CommitLog files, expired or not, one at a time while
/// the disk stays above `diskSpaceCleanForciblyRatio`, up to the batch limit
/// minus `already` deleted this round. Never the newest file, never one
/// holding records at or past `keep_from` (not dispatched yet, or still
/// needed by a retention floor).
fn delete_under_pressure(
    commit_log: &CommitLog,
    keep_from: i64,
    already: usize,
) -> crate::error::Result<usize> {
    let cfg = commit_log.config();
    let disk = commit_log.disk();
    let mut n = 0;
    while already + n < cfg.delete_files_batch_max && disk.wants_forced_cleanup() {
        if n > 0 && !cfg.delete_commit_log_files_interval.is_zero() {
            std::thread::sleep(cfg.delete_commit_log_files_interval);
        }
        let min = commit_log.min_offset();
        let gone = commit_log
            .files()
            .delete_expired_by_time(Duration::ZERO, true, 1, Duration::ZERO, keep_from)
            .inspect_err(|e| poison_on_failed_delete(commit_log, e))?;
        if gone == 0 {
            note_held(commit_log, keep_from);
            break;
        }
        n += gone;
        tracing::warn!(
            used_percent = disk.used_percent(),
            diskSpaceCleanForciblyRatio = cfg.disk_space_clean_forcibly_ratio,
            from = min,
            to = commit_log.min_offset(),
            "disk space low: deleted the oldest CommitLog file before it expired"
        );
        disk.sample();
    }
    Ok(n)
}

/// Logs, once per floor value, that forced cleanup stopped at a retention
/// floor.
fn note_held(commit_log: &CommitLog, keep_from: i64) {
    static LAST: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-1);
    let Some((floor, holder)) = commit_log.retention().lowest() else {
        return;
    };
    if floor == keep_from && LAST.swap(floor, Ordering::Relaxed) != floor {
        tracing::warn!(
            used_percent = commit_log.disk().used_percent(),
            floor,
            holder,
            "disk space low: forced cleanup keeps the CommitLog from the oldest scheduled message still waiting"
        );
    }
}

/// The disk is full (sends refused, scheduled deliveries too) and nothing
/// below the retention floors is left to delete: the oldest CommitLog file
/// goes anyway, after every holder that still needs part of it has logged
/// what it loses (docs/disk-space.md#messages-waiting-for-their-time).
/// Never the newest file, never one dispatch has not passed.
fn delete_past_floors(commit_log: &CommitLog, dispatched: i64) -> crate::error::Result<usize> {
    let files = commit_log.files().files();
    let [head, _, ..] = files.as_slice() else {
        return Ok(0);
    };
    let from = head.start_offset();
    let to = from + commit_log.files().file_size() as i64;
    if to > dispatched {
        return Ok(0);
    }
    let lost = commit_log.retention().drop_range(from, to);
    let gone = commit_log
        .files()
        .delete_expired_by_time(Duration::ZERO, true, 1, Duration::ZERO, dispatched)
        .inspect_err(|e| poison_on_failed_delete(commit_log, e))?;
    tracing::error!(
        used_percent = commit_log.disk().used_percent(),
        from,
        to,
        lost,
        "disk full and nothing else to delete: deleted a CommitLog file still holding scheduled messages"
    );
    commit_log.disk().sample();
    Ok(gone)
}

/// Whether the local hour is one of `delete_when`'s (`"04"`, `"04;16"`).
/// Ledger mode's retention asks this too.
pub fn is_delete_hour(delete_when: &str) -> bool {
    let now = basalt_common::time::now_millis();
    let secs = (now / 1000) as libc::time_t;
    // SAFETY: localtime_r writes into the zeroed tm we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers refer to values we own for the call's duration.
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return false;
    }
    delete_when
        .split(';')
        .filter_map(|h| h.trim().parse::<i32>().ok())
        .any(|h| h == tm.tm_hour)
}
