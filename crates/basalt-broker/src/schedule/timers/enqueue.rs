//! Feeding the TimerLog and the wheel from the timer topic's queue 0, on
//! every broker (a follower keeps its wheel current so that it can take
//! over at once).
//!
//! Each timer message becomes one TimerLog entry in the slot of its
//! `TIMER_OUT_MS`, or in the first slot not yet read if that one is past
//! (the message arrived late: a follower catching up, a restart). The
//! TimerLog thus says exactly which slot each timer waits in, and the
//! wheel rebuilt from it after a restart is the same.

use std::sync::Arc;
use std::time::Duration;

use basalt_common::constants::{property, topic as reserved};
use basalt_common::record::RecordView;
use basalt_store::StoreError;
use basalt_store::consume_queue::CqUnit;
use basalt_store::timer::TimerEntry;

use super::TimerService;

/// Timer-queue units read per batch.
const BATCH: usize = 1024;

/// How a batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnqueueOutcome {
    /// Entries were taken; there may be more.
    Progress,
    /// Nothing left in the queue.
    CaughtUp,
    /// The next timer is further out than the wheel reaches from the read
    /// time: wait until reading moves on.
    WheelFull,
}

/// One timer-queue unit, read and judged outside the lock.
#[derive(Debug, Clone, Copy)]
enum Candidate {
    /// Nothing to schedule (a filler, an expired or unusable message).
    Skip,
    Timer {
        slot_ms: i64,
        unit: CqUnit,
    },
}

impl TimerService {
    /// Enqueues for ever, woken by new timer-queue units or by room in the
    /// wheel.
    pub(crate) async fn run_enqueue(self: Arc<Self>) {
        let arrivals = self.waiters.notify_for(reserved::TIMER_TOPIC, 0);
        loop {
            if self.is_shutting_down() {
                return;
            }
            let arrived = arrivals.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let room = self.wake_enqueue.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            let me = Arc::clone(&self);
            match tokio::task::spawn_blocking(move || me.enqueue_batch(BATCH)).await {
                Ok(Ok(EnqueueOutcome::Progress)) => {}
                Ok(Ok(EnqueueOutcome::CaughtUp)) => arrived.await,
                Ok(Ok(EnqueueOutcome::WheelFull)) => room.await,
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "timer enqueue failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, "timer enqueue task failed");
                    return;
                }
            }
        }
    }

    /// Enqueues up to `max` units (blocking: reads records, appends to the
    /// TimerLog).
    pub(crate) fn enqueue_batch(&self, max: usize) -> Result<EnqueueOutcome, StoreError> {
        let Some(cq) = self.store.get_consume_queue(reserved::TIMER_TOPIC, 0) else {
            return Ok(EnqueueOutcome::CaughtUp);
        };
        // Outside the lock: a new segment means an fsync of the directory.
        let room = self.log.room()?;
        let start = {
            let mut s = self.state.lock();
            if s.enqueue_next < cq.min_offset() {
                tracing::warn!(
                    from = s.enqueue_next,
                    to = cq.min_offset(),
                    "timer messages expired from the CommitLog before they were enqueued"
                );
                s.enqueue_next = cq.min_offset();
            }
            s.enqueue_next
        };
        let Some(run) = cq.units_from(start) else {
            return Ok(EnqueueOutcome::CaughtUp);
        };
        let candidates: Vec<(i64, Candidate)> = run
            .iter()
            .take(max.min(room))
            .enumerate()
            .map(|(i, u)| {
                let q = run.start_offset + i as i64;
                (q, self.judge(q, u))
            })
            .collect();
        if candidates.is_empty() {
            return Ok(EnqueueOutcome::CaughtUp);
        }
        self.place(start, &candidates)
    }

    /// Reads the timer message a unit points at and finds its slot.
    fn judge(&self, queue_offset: i64, u: CqUnit) -> Candidate {
        if u.is_filler() {
            return Candidate::Skip;
        }
        let Some(rec) = self
            .store
            .log()
            .read_bytes(u.physical_offset, u.size as usize)
        else {
            tracing::warn!(
                queue_offset,
                phys = u.physical_offset,
                "timer message expired before it was enqueued"
            );
            self.stats
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Candidate::Skip;
        };
        let view = match RecordView::parse(&rec, false) {
            Ok(v) if v.topic == reserved::TIMER_TOPIC.as_bytes() => v,
            Ok(_) | Err(_) => {
                tracing::error!(
                    queue_offset,
                    phys = u.physical_offset,
                    "timer queue unit does not point at a timer message; passing over it"
                );
                self.stats
                    .dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Candidate::Skip;
            }
        };
        let p = self.precision();
        let slot_ms = view
            .property(property::TIMER_OUT_MS)
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse::<i64>().ok())
            // Aligned up: a precision changed since the send never makes a
            // timer earlier than its slot.
            .map(|t| (t + p - 1).div_euclid(p) * p)
            .unwrap_or_else(|| {
                tracing::warn!(
                    queue_offset,
                    "timer message without a usable TIMER_OUT_MS; delivering it at once"
                );
                i64::MIN
            });
        Candidate::Timer { slot_ms, unit: u }
    }

    /// Appends the candidates' entries and places them, in queue order,
    /// under the state lock (no fsync happens here: the tail has room).
    fn place(
        &self,
        start: i64,
        candidates: &[(i64, Candidate)],
    ) -> Result<EnqueueOutcome, StoreError> {
        let mut placed = 0u64;
        let mut full = false;
        {
            let mut s = self.state.lock();
            assert_eq!(s.enqueue_next, start, "one enqueuer");
            for (q, c) in candidates {
                let Candidate::Timer { slot_ms, unit } = *c else {
                    s.enqueue_next = q + 1;
                    continue;
                };
                let slot = slot_ms.max(s.collect_ms);
                if slot >= s.read_ms + s.wheel.span_ms() {
                    full = true;
                    break;
                }
                let Ok(prev) = s.wheel.prev_for(slot) else {
                    full = true;
                    break;
                };
                let entry = TimerEntry {
                    slot_ms: slot,
                    phys: unit.physical_offset,
                    size: unit.size,
                    queue_offset: *q,
                    prev,
                };
                let pos = self.log.append(&entry)?;
                s.wheel
                    .place(slot, pos)
                    .expect("the slot was checked under the same lock");
                s.enqueue_next = q + 1;
                placed += 1;
            }
        }
        self.stats
            .enqueued
            .fetch_add(placed, std::sync::atomic::Ordering::Relaxed);
        if placed > 0 {
            self.wake_delivery.notify_one();
        }
        Ok(if full {
            EnqueueOutcome::WheelFull
        } else {
            EnqueueOutcome::Progress
        })
    }
}
