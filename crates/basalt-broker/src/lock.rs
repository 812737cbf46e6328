//! Queue locks for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ,
//! RocketMQ's RebalanceLockManager): a (group, queue) is held by one client
//! until it unlocks or stops renewing for 60 s.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use basalt_remoting::protocol::MessageQueue;
use parking_lot::Mutex;

const LOCK_MAX_LIVE: Duration = Duration::from_secs(60);

/// Holder (client id) and last renewal of each locked queue of a group.
type GroupLocks = HashMap<MessageQueue, (String, Instant)>;

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
            let free = match g.get(mq) {
                None => true,
                Some((owner, at)) => owner == client || now.duration_since(*at) > LOCK_MAX_LIVE,
            };
            if free {
                g.insert(mq.clone(), (client.to_string(), now));
                out.push(mq.clone());
            }
        }
        out
    }

    /// Releases the queues `client` holds among `mqs`.
    pub fn unlock(&self, group: &str, client: &str, mqs: &[MessageQueue]) {
        let mut all = self.locks.lock();
        if let Some(g) = all.get_mut(group) {
            for mq in mqs {
                if g.get(mq).map(|(o, _)| o == client).unwrap_or(false) {
                    g.remove(mq);
                }
            }
        }
    }

    /// Whether any queue of `group` is locked and not expired.
    pub fn group_has_locks(&self, group: &str) -> bool {
        let now = Instant::now();
        self.locks
            .lock()
            .get(group)
            .map(|g| {
                g.values()
                    .any(|(_, at)| now.duration_since(*at) <= LOCK_MAX_LIVE)
            })
            .unwrap_or(false)
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
        m.unlock("G", "c1", &q[..1]);
        assert_eq!(m.try_lock("G", "c2", &q), vec![q[0].clone()]);
        assert!(m.group_has_locks("G"));
    }
}
