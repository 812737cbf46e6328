//! Timer messages (RocketMQ 5's timing wheel): a message with
//! `TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`, `TIMER_DELAY_MS` or
//! `__STARTDELIVERTIME` waits in the timer topic until its time, then a copy
//! goes to its real topic (docs/storage-format.md#timers).
//!
//! * [`admission`] — what a send does with those properties;
//! * [`enqueue`] — every broker feeds its TimerLog and wheel from its own
//!   timer queue, so a follower can take over at once;
//! * [`delivery`] — the broker taking sends delivers each slot once it is
//!   over; the others confirm that the copies of each slot exist;
//! * [`copies`] — a delivered copy, and how to tell whether one exists.
//!
//! **Exactly once.** A copy carries `BSLT_TIMER_ORIGIN`, the CommitLog
//! offset of its timer message, which every member of a group shares. The
//! read time `R` (every slot before it delivered) moves only after the
//! slot's copies are stored as durably as a send; the checkpoint records it
//! only once the log is durable past them. When delivery starts — at start,
//! after a crash, on a new ledger leader — timers whose message is older
//! than that start may have been delivered already: for those, the index
//! is asked for a copy (`REAL_TOPIC#UNIQ_KEY` with the right origin) before
//! a copy is written.

pub mod admission;
pub mod copies;
pub mod delivery;
pub mod enqueue;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use basalt_common::constants::topic as reserved;
use basalt_common::time::now_millis;
use basalt_store::timer::{RecoveredTimers, TimerCheckpoint, TimerConfig, TimerLog, TimingWheel};
use basalt_store::{MessageStore, StoreError};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::clients::waiters::PullWaiters;
use crate::writer::MessageWriter;

/// The wheel and the positions that move with it. Invariants: every
/// pending timer sits in a slot at or after `read_ms`; new entries go to
/// slots at or after `collect_ms` (`read_ms + precision` while the slot
/// `read_ms` is being delivered, else `read_ms`); every message of the
/// timer queue before `enqueue_next` has its TimerLog entry.
#[derive(Debug)]
pub(crate) struct WheelState {
    pub(crate) wheel: TimingWheel,
    /// Every slot before it is delivered (or, on a follower, confirmed).
    pub(crate) read_ms: i64,
    /// New entries go to slots at or after it.
    pub(crate) collect_ms: i64,
    /// Next timer-queue offset to enqueue.
    pub(crate) enqueue_next: i64,
    /// Read times not yet checkpointed, each with the log offset its
    /// copies end below: it may be checkpointed once that is durable.
    pub(crate) read_marks: VecDeque<(i64, i64)>,
    /// The read time the last checkpoint recorded.
    pub(crate) checkpointed_read_ms: i64,
}

impl WheelState {
    /// Moves the read time to `to` (slots before it are done).
    pub(crate) fn advance_read(&mut self, to: i64, log_mark: i64) {
        debug_assert!(to >= self.read_ms, "the read time only moves forward");
        self.read_ms = to;
        self.collect_ms = to;
        self.read_marks.push_back((to, log_mark));
    }
}

/// Counters for runtime info.
#[derive(Debug, Default)]
pub struct TimerStats {
    pub enqueued: AtomicU64,
    pub delivered: AtomicU64,
    /// Timers found already delivered (a copy existed) when a run started.
    pub already_delivered: AtomicU64,
    /// Timers that could not be delivered: message expired or unusable.
    pub dropped: AtomicU64,
    /// Per-second rates, sampled by the checkpoint task.
    pub enqueue_tps: AtomicU64,
    pub dequeue_tps: AtomicU64,
}

/// The broker's timer messages: state, services and figures. See the
/// module documentation.
pub struct TimerService {
    pub(crate) cfg: TimerConfig,
    pub(crate) flush_interval: Duration,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) writer: MessageWriter,
    pub(crate) waiters: Arc<PullWaiters>,
    pub(crate) store_host: SocketAddr,
    /// Appended only by the enqueue task, under `state`.
    pub(crate) log: TimerLog,
    pub(crate) state: Mutex<WheelState>,
    pub(crate) stats: TimerStats,
    /// The delivery task re-plans (an entry for an earlier slot, a mode change).
    pub(crate) wake_delivery: Notify,
    /// The enqueue task retries (the read time moved: room in the wheel).
    pub(crate) wake_enqueue: Notify,
    /// Log offset the current delivery run started at (−1: not delivering).
    pub(crate) run_start: AtomicI64,
    pub(crate) shutting_down: Arc<AtomicBool>,
}

impl std::fmt::Debug for TimerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerService")
            .field("root", &self.cfg.root)
            .finish_non_exhaustive()
    }
}

/// What the service is made of besides its recovered state.
pub struct TimerParts {
    pub cfg: TimerConfig,
    pub flush_interval: Duration,
    pub store: Arc<MessageStore>,
    pub writer: MessageWriter,
    pub waiters: Arc<PullWaiters>,
    pub store_host: SocketAddr,
    pub shutting_down: Arc<AtomicBool>,
}

impl TimerService {
    /// Recovers the timer state of `store` (blocking).
    pub fn recover(cfg: &TimerConfig, store: &MessageStore) -> Result<RecoveredTimers, StoreError> {
        let queue = store.get_consume_queue(reserved::TIMER_TOPIC, 0);
        let r = basalt_store::timer::recover(cfg, queue.as_ref(), now_millis())?;
        tracing::info!(
            pending = r.wheel.pending(),
            read_ms = r.read_ms,
            enqueue_next = r.enqueue_next,
            scanned = r.report.entries_scanned,
            cut = r.report.entries_cut,
            rebuilt = r.report.rebuilt_because.as_deref().unwrap_or("no"),
            wheel_bytes = r.wheel.memory_bytes(),
            "timer state recovered"
        );
        Ok(r)
    }

    pub fn new(parts: TimerParts, r: RecoveredTimers) -> TimerService {
        let read_ms = r.read_ms;
        TimerService {
            cfg: parts.cfg,
            flush_interval: parts.flush_interval,
            store: parts.store,
            writer: parts.writer,
            waiters: parts.waiters,
            store_host: parts.store_host,
            log: r.log,
            state: Mutex::new(WheelState {
                wheel: r.wheel,
                read_ms,
                collect_ms: read_ms,
                enqueue_next: r.enqueue_next,
                read_marks: VecDeque::new(),
                checkpointed_read_ms: read_ms,
            }),
            stats: TimerStats::default(),
            wake_delivery: Notify::new(),
            wake_enqueue: Notify::new(),
            run_start: AtomicI64::new(-1),
            shutting_down: parts.shutting_down,
        }
    }

    pub(crate) fn precision(&self) -> i64 {
        self.cfg.precision_ms
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Starts enqueueing, delivery (or confirmation) and checkpoints.
    pub fn start(self: &Arc<Self>) -> Vec<JoinHandle<()>> {
        vec![
            tokio::spawn(Arc::clone(self).run_enqueue()),
            tokio::spawn(Arc::clone(self).run_delivery()),
            tokio::spawn(Arc::clone(self).run_checkpoints()),
        ]
    }

    /// Every flush interval: TimerLog fsync, checkpoint, delivered
    /// segments deleted, rates sampled.
    async fn run_checkpoints(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.flush_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut enq, mut deq) = (0u64, 0u64);
        let mut last = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let me = Arc::clone(&self);
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || me.checkpoint()).await {
                tracing::error!(error = %e, "timer checkpoint failed");
            }
            let secs = last.elapsed().as_secs_f64().max(0.001);
            last = tokio::time::Instant::now();
            let (e, d) = (
                self.stats.enqueued.load(Ordering::Relaxed),
                self.stats.delivered.load(Ordering::Relaxed),
            );
            let rate = |now: u64, before: u64| ((now - before) as f64 / secs).round() as u64;
            self.stats
                .enqueue_tps
                .store(rate(e, enq), Ordering::Relaxed);
            self.stats
                .dequeue_tps
                .store(rate(d, deq), Ordering::Relaxed);
            (enq, deq) = (e, d);
        }
    }

    /// fsyncs the TimerLog, then records how far it and delivery got
    /// (blocking). A failed fsync poisons the store, as any other does.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        let (log_end, enqueue_next, marks) = {
            let s = self.state.lock();
            (
                self.log.end(),
                s.enqueue_next,
                s.read_marks.iter().copied().collect::<Vec<_>>(),
            )
        };
        if let Err(e) = self.log.flush() {
            self.store.health().poison(&e);
            return Err(e);
        }
        let durable = self.writer.durable_end();
        let (read_ms, used) = {
            let s = self.state.lock();
            let used = marks.iter().take_while(|(_, m)| *m <= durable).count();
            let read = marks[..used]
                .last()
                .map(|(r, _)| *r)
                .unwrap_or(s.checkpointed_read_ms);
            (read, used)
        };
        let c = TimerCheckpoint {
            log_end,
            enqueue_next,
            read_ms,
        };
        // A failed save (a full disk cannot take the temp file) leaves the
        // previous checkpoint in place: recovery from it redoes more work but
        // loses nothing, so the store is not poisoned, and the next tick
        // tries again. The read marks stay until a save succeeds.
        c.save_on(&self.cfg.disk, &self.cfg.checkpoint_path())?;
        {
            let mut s = self.state.lock();
            s.read_marks.drain(..used);
            s.checkpointed_read_ms = read_ms;
        }
        self.log.delete_delivered(read_ms)?;
        Ok(())
    }

    /// Final checkpoint at shutdown (blocking).
    pub fn shutdown(&self) {
        if let Err(e) = self.checkpoint() {
            tracing::error!(error = %e, "final timer checkpoint failed");
        }
        self.log.shutdown();
    }

    /// Runtime-info entries: RocketMQ's `timerReadBehind` (seconds the
    /// oldest due timer has waited past its slot), `timerOffsetBehind` (timer-queue messages
    /// not yet enqueued), `timerCongestNum` (timers waiting), the enqueue and
    /// dequeue rates, and Basalt's own.
    pub fn runtime_info(&self) -> Vec<(String, String)> {
        let now = now_millis();
        let p = self.precision();
        let (read_ms, enqueue_next, pending, next) = {
            let s = self.state.lock();
            let next = s
                .wheel
                .next_pending(s.read_ms, s.read_ms + s.wheel.span_ms());
            (s.read_ms, s.enqueue_next, s.wheel.pending(), next)
        };
        // How long the oldest timer that is due has been due.
        let behind = next
            .map(|t| now - basalt_store::timer::slot_due_ms(t, p))
            .unwrap_or(0)
            .max(0);
        let queue_max = self
            .store
            .get_consume_queue(reserved::TIMER_TOPIC, 0)
            .map(|q| q.max_offset())
            .unwrap_or(0);
        let next_due = next
            .map(|t| basalt_store::timer::slot_due_ms(t, p).to_string())
            .unwrap_or_default();
        let mode = if self.run_start.load(Ordering::Acquire) >= 0 {
            "deliver"
        } else {
            "confirm"
        };
        let st = &self.stats;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        vec![
            ("timerReadBehind".into(), (behind / 1000).to_string()),
            (
                "timerOffsetBehind".into(),
                (queue_max - enqueue_next).max(0).to_string(),
            ),
            ("timerCongestNum".into(), pending.to_string()),
            ("timerEnqueueTps".into(), n(&st.enqueue_tps)),
            ("timerDequeueTps".into(), n(&st.dequeue_tps)),
            ("timerNextDueMs".into(), next_due),
            ("timerReadTimeMs".into(), read_ms.to_string()),
            ("timerMode".into(), mode.into()),
            ("timerDelivered".into(), n(&st.delivered)),
            ("timerAlreadyDelivered".into(), n(&st.already_delivered)),
            ("timerDropped".into(), n(&st.dropped)),
            ("timerPrecisionMs".into(), p.to_string()),
        ]
    }
}
