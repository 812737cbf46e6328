//! FIFO (orderly) pops: a pop with the `order` flag locks each queue it
//! reads to the group until every message it returned from that queue is
//! acked or its invisible time passes (RocketMQ's ConsumerOrderInfoManager).
//! A locked queue is skipped; an expired batch is popped again from the
//! group's offset, with each unacked message's attempt raised. The group's
//! offset moves only over acked messages. Past the group's `retryMaxTimes`
//! a message goes to the DLQ instead of being popped again
//! (docs/pop.md#fifo).

use std::collections::{BTreeSet, HashMap};

use super::PopError;
use super::handle::ExtraInfo;

/// The `reviveQid` of an order pop's handles (KeyBuilder.POP_ORDER_REVIVE_QUEUE).
pub const ORDER_REVIVE_QID: i32 = 999;

/// (group, stored topic, queue id).
pub type QueueKey = (String, String, i32);

/// The in-flight batch of one order pop on one queue. Invariant: `offsets`
/// is sorted; `acked` is a subset of it.
#[derive(Debug, Clone)]
pub struct OrderBatch {
    pub pop_time: i64,
    pub deadline: i64,
    pub offsets: Vec<i64>,
    /// Where the group's offset goes once every message is acked.
    pub next_begin: i64,
    pub acked: BTreeSet<i64>,
    /// Deliveries so far of each offset, before this batch.
    pub attempts: HashMap<i64, u32>,
}

impl OrderBatch {
    /// The first offset not acked, or `None` when all are.
    pub fn first_unacked(&self) -> Option<i64> {
        self.offsets
            .iter()
            .copied()
            .find(|o| !self.acked.contains(o))
    }
}

/// Order batches by queue.
#[derive(Debug, Default)]
pub struct OrderState {
    batches: HashMap<QueueKey, OrderBatch>,
}

/// What a new order pop of a queue must know about the last batch.
pub enum QueueTurn {
    /// Locked by a live batch until this time.
    Locked(i64),
    /// Free; carries the attempts and acks of an expired batch, if any.
    Free {
        attempts: HashMap<i64, u32>,
        acked: BTreeSet<i64>,
    },
}

impl OrderState {
    pub fn turn(&self, key: &QueueKey, now: i64) -> QueueTurn {
        match self.batches.get(key) {
            Some(b) if b.deadline > now && b.first_unacked().is_some() => {
                QueueTurn::Locked(b.deadline)
            }
            Some(b) => {
                let mut attempts = b.attempts.clone();
                for o in &b.offsets {
                    if !b.acked.contains(o) {
                        *attempts.entry(*o).or_insert(0) += 1;
                    }
                }
                QueueTurn::Free {
                    attempts,
                    acked: b.acked.clone(),
                }
            }
            None => QueueTurn::Free {
                attempts: HashMap::new(),
                acked: BTreeSet::new(),
            },
        }
    }

    pub fn start(&mut self, key: QueueKey, batch: OrderBatch) {
        self.batches.insert(key, batch);
    }

    /// Forgets a queue's batch (nothing was popped).
    pub fn clear(&mut self, key: &QueueKey) {
        self.batches.remove(key);
    }

    /// The earliest deadline of a live batch among `keys`.
    pub fn earliest_deadline<'a>(&self, keys: impl Iterator<Item = &'a QueueKey>) -> Option<i64> {
        keys.filter_map(|k| self.batches.get(k).map(|b| b.deadline))
            .min()
    }

    /// Acks one message of a batch. Returns the offset the group may
    /// commit now, and whether the batch is done.
    pub fn ack(&mut self, key: &QueueKey, h: &ExtraInfo) -> Result<(i64, bool), PopError> {
        let b = self
            .batches
            .get_mut(key)
            .filter(|b| b.pop_time == h.pop_time && b.offsets.contains(&h.queue_offset))
            .ok_or(PopError::NotFound)?;
        b.acked.insert(h.queue_offset);
        match b.first_unacked() {
            Some(o) => Ok((o, false)),
            None => {
                let next = b.next_begin;
                self.batches.remove(key);
                Ok((next, true))
            }
        }
    }

    /// Moves a batch's deadline to `deadline` (a change of invisible time).
    pub fn extend(
        &mut self,
        key: &QueueKey,
        h: &ExtraInfo,
        deadline: i64,
        now: i64,
    ) -> Result<(), PopError> {
        let b = self
            .batches
            .get_mut(key)
            .filter(|b| b.pop_time == h.pop_time && b.offsets.contains(&h.queue_offset))
            .ok_or(PopError::NotFound)?;
        if b.deadline <= now {
            return Err(PopError::HandleExpired);
        }
        b.deadline = deadline;
        Ok(())
    }

    /// Messages handed out by order pops and not acked.
    pub fn unacked(&self) -> usize {
        self.batches
            .values()
            .map(|b| b.offsets.len() - b.acked.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(pt: i64, o: i64) -> ExtraInfo {
        ExtraInfo {
            ck_offset: 0,
            pop_time: pt,
            invisible_ms: 100,
            revive_qid: ORDER_REVIVE_QID,
            retry_flag: "0".into(),
            broker_name: "b".into(),
            queue_id: 0,
            queue_offset: o,
        }
    }

    #[test]
    fn a_batch_locks_until_acked_or_expired() {
        let mut s = OrderState::default();
        let k: QueueKey = ("G".into(), "T".into(), 0);
        s.start(
            k.clone(),
            OrderBatch {
                pop_time: 10,
                deadline: 110,
                offsets: vec![0, 1],
                next_begin: 2,
                acked: BTreeSet::new(),
                attempts: HashMap::new(),
            },
        );
        assert!(matches!(s.turn(&k, 50), QueueTurn::Locked(110)));
        assert_eq!(s.ack(&k, &handle(10, 0)).unwrap(), (1, false));
        assert!(s.ack(&k, &handle(9, 1)).is_err(), "a stale pop time");
        match s.turn(&k, 200) {
            QueueTurn::Free { attempts, acked } => {
                assert_eq!(attempts.get(&1), Some(&1));
                assert_eq!(attempts.get(&0), None);
                assert!(acked.contains(&0));
            }
            QueueTurn::Locked(_) => panic!("expired batch still locks"),
        }
        assert_eq!(s.ack(&k, &handle(10, 1)).unwrap(), (2, true));
        assert!(matches!(s.turn(&k, 50), QueueTurn::Free { .. }));
    }
}
