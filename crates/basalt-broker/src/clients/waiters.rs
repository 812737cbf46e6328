//! Long polling: pulls that find nothing wait for the next message of their
//! queue (RocketMQ's PullRequestHoldService), woken by dispatch.
//!
//! A waiter takes the queue's `Notify`, registers interest, re-checks the
//! queue and then sleeps; dispatch calls [`PullWaiters::arrived`] after it
//! writes a ConsumeQueue unit. No polling: an idle broker wakes nobody.

use std::collections::HashMap;
use std::sync::Arc;

use basalt_store::dispatch::ArrivalListener;
use parking_lot::RwLock;
use tokio::sync::Notify;

/// Wake-ups per topic queue.
#[derive(Debug, Default)]
pub struct PullWaiters {
    queues: RwLock<HashMap<String, HashMap<i32, Arc<Notify>>>>,
}

impl PullWaiters {
    pub fn new() -> Self {
        Self::default()
    }

    /// The queue's wake-up (created on first use).
    pub fn notify_for(&self, topic: &str, queue_id: i32) -> Arc<Notify> {
        if let Some(n) = self.queues.read().get(topic).and_then(|m| m.get(&queue_id)) {
            return Arc::clone(n);
        }
        let mut w = self.queues.write();
        Arc::clone(
            w.entry(topic.to_string())
                .or_default()
                .entry(queue_id)
                .or_insert_with(|| Arc::new(Notify::new())),
        )
    }

    /// Forgets a deleted topic.
    pub fn remove_topic(&self, topic: &str) {
        if let Some(m) = self.queues.write().remove(topic) {
            for n in m.values() {
                n.notify_waiters();
            }
        }
    }
}

impl ArrivalListener for PullWaiters {
    fn arrived(&self, topic: &str, queue_id: i32, _max_offset: i64, _tags_code: i64) {
        // Fast path: nobody has ever waited on this queue.
        let q = self.queues.read();
        if let Some(n) = q.get(topic).and_then(|m| m.get(&queue_id)) {
            n.notify_waiters();
        }
    }
}
