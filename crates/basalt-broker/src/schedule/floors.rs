//! What the store's cleanup must keep for the broker's schedulers
//! (docs/disk-space.md#messages-waiting-for-their-time): the CommitLog
//! offset of the oldest pending timer, of the oldest delay-level message
//! not yet delivered, and of the oldest transaction half the check has not
//! passed. Each is a [`RetentionFloor`] the store asks at every cleanup
//! round; it holds the broker weakly (the store outlives nothing).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Weak};

use basalt_common::constants::{group, property, topic as reserved};
use basalt_common::record::RecordView;
use basalt_store::MessageStore;
use basalt_store::consume_queue::ConsumeQueue;
use basalt_store::retention::RetentionFloor;

use crate::broker::Broker;
use crate::schedule::TimerService;

/// Registers the three floors with the store of `broker`.
pub(crate) fn register(broker: &Arc<Broker>) {
    let floors = broker.store.commit_log().retention();
    let weak = Arc::downgrade(broker);
    if broker.timers.is_some() {
        // Timers run on every member (followers confirm deliveries).
        floors.register(Arc::new(TimerFloor {
            broker: weak.clone(),
            cursor: AtomicI64::new(-1),
        }));
    }
    // Delay levels and transaction checks run where sends are taken; an HA
    // slave never moves their progress itself.
    if broker.replication.ha_slave().is_some() {
        return;
    }
    floors.register(Arc::new(QueueFloor {
        broker: weak.clone(),
        kind: Kind::DelayLevels,
    }));
    floors.register(Arc::new(QueueFloor {
        broker: weak,
        kind: Kind::Transactions,
    }));
}

/// The physical offset of the unit at `progress` of `q`, when it has one
/// (the holder has not read that far yet).
fn unit_floor(q: &ConsumeQueue, progress: i64) -> Option<i64> {
    let from = progress.max(q.min_offset());
    if from >= q.max_offset() {
        return None;
    }
    q.unit_at(from).map(|u| u.physical_offset)
}

/// Logs one scheduled message lost to the cleanup: its topic, keys and due
/// time, read from the record while it still exists.
fn log_lost(store: &MessageStore, holder: &str, phys: i64, size: i32, due_ms: Option<i64>) {
    let rec = store.log().read_bytes(phys, size as usize);
    let view = rec
        .as_deref()
        .and_then(|r| RecordView::parse(r, false).ok());
    let text = |name: &str| {
        view.as_ref()
            .and_then(|v| v.property(name))
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let due = due_ms.or_else(|| text(property::TIMER_OUT_MS).parse().ok());
    tracing::error!(
        holder,
        topic = %text(property::REAL_TOPIC),
        keys = %text(property::KEYS),
        uniq_key = %text(property::UNIQ_KEY),
        due_ms = due.unwrap_or(-1),
        phys,
        "disk full: scheduled message deleted by forced cleanup before its time"
    );
}

/// Pending timers: the first TimerLog entry in a slot not yet delivered
/// (entries are in CommitLog order, so it is the oldest pending one), and
/// timer-queue messages not yet in the TimerLog.
struct TimerFloor {
    broker: Weak<Broker>,
    /// TimerLog position before which every entry is delivered (−1: start).
    cursor: AtomicI64,
}

impl TimerFloor {
    /// Calls `each` for every pending entry (slot at or after the read
    /// time) from the cursor on; moves the cursor past delivered ones.
    fn pending(
        &self,
        t: &TimerService,
        mut each: impl FnMut(&basalt_store::timer::TimerEntry) -> bool,
    ) {
        let (read_ms, end) = {
            let s = t.state.lock();
            (s.read_ms, t.log.end())
        };
        let from = self.cursor.load(Ordering::Relaxed).max(t.log.min_offset());
        let mut first_pending = None;
        let mut go = true;
        t.log.scan(from, end, |pos, e| {
            if !go || e.slot_ms < read_ms {
                return;
            }
            first_pending.get_or_insert(pos);
            go = each(e);
        });
        self.cursor
            .store(first_pending.unwrap_or(end), Ordering::Relaxed);
    }
}

impl RetentionFloor for TimerFloor {
    fn name(&self) -> &'static str {
        "timer"
    }

    fn floor(&self) -> Option<i64> {
        let b = self.broker.upgrade()?;
        let t = b.timers.as_ref()?;
        let mut floor = None;
        self.pending(t, |e| {
            floor = Some(e.phys);
            false
        });
        let next = t.state.lock().enqueue_next;
        let queued = b
            .store
            .get_consume_queue(reserved::TIMER_TOPIC, 0)
            .and_then(|q| unit_floor(&q, next));
        [floor, queued].into_iter().flatten().min()
    }

    fn dropping(&self, from: i64, to: i64) -> u64 {
        let Some(b) = self.broker.upgrade() else {
            return 0;
        };
        let Some(t) = b.timers.as_ref() else {
            return 0;
        };
        let p = t.precision();
        let mut n = 0;
        self.pending(t, |e| {
            if (from..to).contains(&e.phys) {
                let due = basalt_store::timer::slot_due_ms(e.slot_ms, p);
                log_lost(&b.store, "timer", e.phys, e.size, Some(due));
                n += 1;
            }
            e.phys < to
        });
        let next = t.state.lock().enqueue_next;
        if let Some(q) = b.store.get_consume_queue(reserved::TIMER_TOPIC, 0) {
            n += lost_in_queue(&b.store, "timer", &q, next, from, to);
        }
        n
    }
}

/// Logs and counts the units of `q` from `progress` whose records lie in
/// `[from, to)`.
fn lost_in_queue(
    store: &MessageStore,
    holder: &str,
    q: &ConsumeQueue,
    progress: i64,
    from: i64,
    to: i64,
) -> u64 {
    let mut n = 0;
    let mut at = progress.max(q.min_offset());
    while at < q.max_offset() {
        let Some(u) = q.unit_at(at) else { break };
        if u.physical_offset >= to {
            break;
        }
        if u.physical_offset >= from {
            // A delay-level unit's tags code is its delivery time.
            let due = (holder == "delay-levels").then_some(u.tags_code);
            log_lost(store, holder, u.physical_offset, u.size, due);
            n += 1;
        }
        at += 1;
    }
    n
}

/// Which queue-kept state a [`QueueFloor`] reads.
#[derive(Clone, Copy)]
enum Kind {
    /// `SCHEDULE_TOPIC_XXXX` queue `level - 1` from delayOffset.json.
    DelayLevels,
    /// The transaction half queues from the check's progress.
    Transactions,
}

/// A holder whose state is a progress offset per queue of a system topic.
struct QueueFloor {
    broker: Weak<Broker>,
    kind: Kind,
}

impl QueueFloor {
    /// Each queue of the holder's topic with its progress.
    fn queues(&self, b: &Broker) -> Vec<(Arc<ConsumeQueue>, i64)> {
        let topic = match self.kind {
            Kind::DelayLevels => reserved::SCHEDULE_TOPIC,
            Kind::Transactions => reserved::TRANS_HALF_TOPIC,
        };
        b.store
            .consume_queues()
            .topic_queues(topic)
            .into_iter()
            .map(|q| {
                let progress = match self.kind {
                    Kind::DelayLevels => b.delay_offsets.offset(q.queue_id() + 1),
                    Kind::Transactions => b
                        .offsets
                        .query(group::TRANSACTION_CHECK, topic, q.queue_id())
                        .unwrap_or(0),
                };
                (q, progress)
            })
            .collect()
    }
}

impl RetentionFloor for QueueFloor {
    fn name(&self) -> &'static str {
        match self.kind {
            Kind::DelayLevels => "delay-levels",
            Kind::Transactions => "transactions",
        }
    }

    fn floor(&self) -> Option<i64> {
        let b = self.broker.upgrade()?;
        self.queues(&b)
            .iter()
            .filter_map(|(q, p)| unit_floor(q, *p))
            .min()
    }

    fn dropping(&self, from: i64, to: i64) -> u64 {
        let Some(b) = self.broker.upgrade() else {
            return 0;
        };
        self.queues(&b)
            .iter()
            .map(|(q, p)| lost_in_queue(&b.store, self.name(), q, *p, from, to))
            .sum()
    }
}
