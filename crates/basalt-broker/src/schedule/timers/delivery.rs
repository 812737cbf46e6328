//! Reading the wheel: on the broker that takes sends, each slot is
//! delivered once it is over; on the others each slot is confirmed (its
//! copies found in the log) a little after, so that the read time, the
//! TimerLog's retention and the admin figures follow the leader's.
//!
//! A delivery *run* starts whenever the broker starts taking sends (at
//! start, or as a new ledger leader) and after a put whose outcome is not
//! known. It first waits until nothing is in flight below some log offset
//! `S` and the index covers everything below it; timers whose message lies
//! below `S` may have been delivered before the run, so each is looked up
//! before its copy is written. The task sleeps until the next slot with
//! timers is over, and is woken early when an earlier slot gets one.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use basalt_common::time::now_millis;
use basalt_store::timer::TimerEntry;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::TimerService;
use super::copies::{PutOutcome, put_copy};

/// How long after a slot is over a follower looks for its copies.
const FOLLOWER_GRACE_MS: i64 = 2000;
/// Timers prepared and put together.
const CHUNK: usize = 256;
/// Longest wait for the log to settle when a run starts.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The slot is over and holds timers.
    Slot(i64),
    /// Nothing is due before this time.
    WaitUntil(i64),
    /// No timer waits.
    Idle,
}

type WritableChanges = Option<watch::Receiver<bool>>;

impl TimerService {
    /// Delivers while this broker takes sends, confirms otherwise; for ever.
    pub(crate) async fn run_delivery(self: Arc<Self>) {
        let mut changes = self.writer.writable_changes();
        loop {
            if self.is_shutting_down() {
                return;
            }
            if self.writer.is_writable() {
                self.deliver_while_writable(&mut changes).await;
            } else {
                self.run_start.store(-1, Ordering::Release);
                self.confirm_while_follower(&mut changes).await;
            }
        }
    }

    /// Plans the next step: skips empty slots, marks a due slot as being
    /// read (new entries go after it), moves the read time up to the clock
    /// when nothing is due. `grace_ms` delays what counts as over.
    fn plan(&self, grace_ms: i64) -> Step {
        let p = self.precision();
        let now = now_millis() - grace_ms;
        let over = now.div_euclid(p) * p;
        let mark = self.writer.written_end();
        let mut moved = false;
        let step = {
            let mut s = self.state.lock();
            match s.wheel.next_pending(s.read_ms, over) {
                Some(t) => {
                    if t > s.read_ms {
                        s.advance_read(t, mark);
                        moved = true;
                    }
                    s.collect_ms = t + p;
                    Step::Slot(t)
                }
                None => {
                    if over > s.read_ms {
                        s.advance_read(over, mark);
                        moved = true;
                    }
                    let (r, span) = (s.read_ms, s.wheel.span_ms());
                    match s.wheel.next_pending(r, r + span) {
                        Some(t) => Step::WaitUntil(t + p + grace_ms),
                        None => Step::Idle,
                    }
                }
            }
        };
        if moved {
            self.wake_enqueue.notify_one();
        }
        step
    }

    /// Sleeps until `until_ms`, a wake-up, or a change of writability.
    async fn wait(&self, until_ms: i64, changes: &mut WritableChanges) {
        let woken = self.wake_delivery.notified();
        let timer = async {
            if until_ms == i64::MAX {
                std::future::pending::<()>().await;
            }
            let ms = (until_ms - now_millis()).max(0) as u64;
            tokio::time::sleep(Duration::from_millis(ms)).await;
        };
        let changed = async {
            match changes.as_mut() {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = woken => {}
            _ = timer => {}
            ok = changed => if !ok { *changes = None },
        }
    }

    async fn deliver_while_writable(self: &Arc<Self>, changes: &mut WritableChanges) {
        let Some(start) = self.writer.settled_end(SETTLE_TIMEOUT).await else {
            self.wait(now_millis() + 500, changes).await;
            return;
        };
        self.run_start.store(start, Ordering::Release);
        if !self.store.config().message_index_enable {
            tracing::warn!(
                "messageIndexEnable=false: timers due around a restart or fail-over may be delivered twice"
            );
        }
        tracing::info!(start, "timer delivery starts");
        loop {
            if self.is_shutting_down() || !self.writer.is_writable() {
                self.run_start.store(-1, Ordering::Release);
                return;
            }
            match self.plan(0) {
                Step::Slot(t) => {
                    if let Err(why) = self.deliver_slot(t, start).await {
                        tracing::warn!(slot = t, reason = %why, "timer delivery stopped; starting a new run");
                        {
                            let mut s = self.state.lock();
                            s.collect_ms = s.read_ms;
                        }
                        self.run_start.store(-1, Ordering::Release);
                        self.wait(now_millis() + 1000, changes).await;
                        return;
                    }
                }
                Step::WaitUntil(ms) => self.wait(ms, changes).await,
                Step::Idle => self.wait(i64::MAX, changes).await,
            }
        }
    }

    /// The entries of `slot`, oldest first (blocking). A broken chain is
    /// reported and what was read is returned.
    fn chain(&self, slot: i64) -> Vec<TimerEntry> {
        let (mut pos, count) = self.state.lock().wheel.peek(slot);
        let mut out = Vec::with_capacity(count as usize);
        let mut broken = None;
        while pos >= 0 && out.len() < count as usize {
            match self.log.read(pos) {
                Ok(e) if e.slot_ms == slot => {
                    pos = e.prev;
                    out.push(e);
                }
                Ok(e) => {
                    broken = Some(format!("entry at {pos} is for slot {}", e.slot_ms));
                    break;
                }
                Err(e) => {
                    broken = Some(e.to_string());
                    break;
                }
            }
        }
        let missing = count as usize - out.len();
        if missing > 0 {
            let why = broken.unwrap_or_else(|| "the chain ends early".into());
            tracing::error!(slot, read = out.len(), count, reason = %why,
                "TimerLog chain broken; the rest of the slot is lost until a restart rebuilds the TimerLog");
            self.stats
                .dropped
                .fetch_add(missing as u64, Ordering::Relaxed);
        }
        out.reverse();
        out
    }

    /// Delivers every timer of `slot`, then moves the read time past it.
    async fn deliver_slot(self: &Arc<Self>, slot: i64, run_start: i64) -> Result<(), String> {
        let entries = self.blocking(move |me| me.chain(slot)).await?;
        for chunk in entries.chunks(CHUNK) {
            let chunk = chunk.to_vec();
            let copies = self
                .blocking(move |me| {
                    chunk
                        .iter()
                        .filter_map(|e| me.prepare_copy(e, run_start))
                        .collect::<Vec<_>>()
                })
                .await?;
            let mut puts = JoinSet::new();
            for c in copies {
                let origin = c.origin;
                let w = self.writer.clone();
                puts.spawn(async move { (origin, put_copy(w, c).await) });
            }
            let mut uncertain = None;
            while let Some(done) = puts.join_next().await {
                let (origin, outcome) = done.map_err(|e| e.to_string())?;
                match outcome {
                    PutOutcome::Stored => {
                        self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                    }
                    PutOutcome::Refused(why) => {
                        tracing::error!(origin, reason = %why, "timer copy refused by the store; dropping it");
                        self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    PutOutcome::Uncertain(why) => uncertain = Some(why),
                }
            }
            if let Some(why) = uncertain {
                return Err(why);
            }
        }
        self.finish_slot(slot);
        Ok(())
    }

    /// Empties a delivered (or confirmed) slot and reads on after it.
    fn finish_slot(&self, slot: i64) {
        let mark = self.writer.written_end();
        {
            let mut s = self.state.lock();
            s.wheel.clear(slot);
            let next = slot + self.precision();
            s.advance_read(next, mark);
        }
        self.wake_enqueue.notify_one();
    }

    /// Runs `f` off the async workers.
    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&TimerService) -> T + Send + 'static,
    ) -> Result<T, String> {
        let me = Arc::clone(self);
        tokio::task::spawn_blocking(move || f(&me))
            .await
            .map_err(|e| e.to_string())
    }

    async fn confirm_while_follower(self: &Arc<Self>, changes: &mut WritableChanges) {
        let mut confirmed: HashSet<i64> = HashSet::new();
        let mut current = i64::MIN;
        loop {
            if self.is_shutting_down() || self.writer.is_writable() {
                return;
            }
            match self.plan(FOLLOWER_GRACE_MS) {
                Step::Slot(t) => {
                    if t != current {
                        confirmed.clear();
                        current = t;
                    }
                    match self.confirm_slot(t, &confirmed).await {
                        Ok(None) => self.finish_slot(t),
                        Ok(Some(found)) => {
                            confirmed.extend(found);
                            self.wait(now_millis() + 1000, changes).await;
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "timer confirmation failed");
                            self.wait(now_millis() + 1000, changes).await;
                        }
                    }
                }
                Step::WaitUntil(ms) => self.wait(ms, changes).await,
                Step::Idle => self.wait(i64::MAX, changes).await,
            }
        }
    }

    /// Looks for the copies of `slot`'s timers: None when all are there
    /// (or need nothing), else the queue offsets found so far.
    async fn confirm_slot(
        self: &Arc<Self>,
        slot: i64,
        already: &HashSet<i64>,
    ) -> Result<Option<Vec<i64>>, String> {
        let already = already.clone();
        self.blocking(move |me| {
            let entries = me.chain(slot);
            let mut found = Vec::new();
            let mut all = true;
            for e in entries
                .iter()
                .filter(|e| !already.contains(&e.queue_offset))
            {
                if me.confirmed(e) {
                    found.push(e.queue_offset);
                } else {
                    all = false;
                }
            }
            if all { None } else { Some(found) }
        })
        .await
    }
}
