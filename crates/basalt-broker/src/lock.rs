//! Queue locks for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ,
//! RocketMQ's RebalanceLockManager): a (group, queue) is held by one client
//! until it unlocks or stops renewing for 60 s.
//!
//! Locks are keyed by topic and queue id only (a broker serves one broker
//! name), so the table never holds more entries than groups times real
//! queues; the processor checks both before it locks. Expired locks are
//! evicted by the broker's housekeeping.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use basalt_remoting::protocol::MessageQueue;
use parking_lot::Mutex;

const LOCK_MAX_LIVE: Duration = Duration::from_secs(60);

/// One queue's holder and last renewal.
#[derive(Debug, Clone)]
struct Holder {
    client: String,
    renewed: Instant,
}

/// Locks of one group, by (topic, queue id).
type GroupLocks = HashMap<(String, i32), Holder>;

fn key(mq: &MessageQueue) -> (String, i32) {
    (mq.topic.clone(), mq.queue_id)
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct LockManager {
    locks: Mutex<HashMap<String, GroupLocks>>,
}

impl LockManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Locks (or renews) every free or own queue; returns those `client` now holds.
    pub fn try_lock(&self, group: &str, client: &str, mqs: &[MessageQueue]) -> Vec<MessageQueue> {
        let now = Instant::now();
        let mut all = self.locks.lock();
        let g = all.entry(group.to_string()).or_default();
        let mut out = Vec::new();
        for mq in mqs {
            let free = match g.get(&key(mq)) {
                None => true,
                Some(h) => h.client == client || now.duration_since(h.renewed) > LOCK_MAX_LIVE,
            };
            if free {
                g.insert(
                    key(mq),
                    Holder {
                        client: client.to_string(),
                        renewed: now,
                    },
                );
                out.push(mq.clone());
            }
        }
        if g.is_empty() {
            all.remove(group);
        }
        out
    }

    /// Releases the queues `client` holds among `mqs`.
    pub fn unlock(&self, group: &str, client: &str, mqs: &[MessageQueue]) {
        let mut all = self.locks.lock();
        if let Some(g) = all.get_mut(group) {
            for mq in mqs {
                if g.get(&key(mq)).is_some_and(|h| h.client == client) {
                    g.remove(&key(mq));
                }
            }
            if g.is_empty() {
                all.remove(group);
            }
        }
    }

    /// Whether any queue of `group` is locked and not expired.
    pub fn group_has_locks(&self, group: &str) -> bool {
        let now = Instant::now();
        self.locks.lock().get(group).is_some_and(|g| {
            g.values()
                .any(|h| now.duration_since(h.renewed) <= LOCK_MAX_LIVE)
        })
    }

    /// Drops every expired lock (and groups left with none).
    pub fn evict_expired(&self) {
        let now = Instant::now();
        let mut all = self.locks.lock();
        all.retain(|_, g| {
            g.retain(|_, h| now.duration_since(h.renewed) <= LOCK_MAX_LIVE);
            !g.is_empty()
        });
    }

    /// Locks held (for tests and runtime info).
    pub fn len(&self) -> usize {
        self.locks.lock().values().map(|g| g.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_owner_per_queue() {
        let m = LockManager::new();
        let q = vec![
            MessageQueue::new("T", "b", 0),
            MessageQueue::new("T", "b", 1),
        ];
        assert_eq!(m.try_lock("G", "c1", &q).len(), 2);
        assert!(m.try_lock("G", "c2", &q).is_empty());
        // Another broker name is the same queue here.
        assert!(
            m.try_lock("G", "c2", &[MessageQueue::new("T", "other", 0)])
                .is_empty()
        );
        m.unlock("G", "c1", &q[..1]);
        assert_eq!(m.try_lock("G", "c2", &q), vec![q[0].clone()]);
        assert!(m.group_has_locks("G"));
        assert_eq!(m.len(), 2);
        m.evict_expired();
        assert_eq!(m.len(), 2);
    }
}
