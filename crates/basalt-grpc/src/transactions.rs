//! Where each open transaction's half message is, by transaction id: what
//! an EndTransaction call needs to end it (the gRPC request names only the
//! transaction and message ids; the broker's END_TRANSACTION wants the half
//! message's log and queue offsets). Filled by sends of half messages and
//! by the broker's check-backs; bounded, oldest forgotten first.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

/// Most open transactions remembered (a forgotten one can still be
/// decided by the broker's check-back, which records it again).
const CAPACITY: usize = 100_000;

/// A half message's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HalfPlace {
    /// The producer group the half message carries (the topic, for gRPC
    /// producers, as RocketMQ's proxy does).
    pub producer_group: String,
    pub commit_log_offset: i64,
    pub tran_state_table_offset: i64,
}

/// Transaction id → half message place. Invariant: `order` holds each key
/// of `map` at least once; the map never exceeds [`CAPACITY`].
#[derive(Default)]
pub struct OpenTransactions {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, HalfPlace>,
    order: VecDeque<String>,
}

impl OpenTransactions {
    /// Records (or moves) a transaction's half message.
    pub fn put(&self, transaction_id: String, place: HalfPlace) {
        let mut g = self.inner.lock();
        if g.map.insert(transaction_id.clone(), place).is_none() {
            g.order.push_back(transaction_id);
        }
        while g.map.len() > CAPACITY {
            match g.order.pop_front() {
                Some(old) => {
                    g.map.remove(&old);
                }
                None => break,
            }
        }
    }

    /// Takes a transaction's place out (it is being ended).
    pub fn take(&self, transaction_id: &str) -> Option<HalfPlace> {
        let mut g = self.inner.lock();
        let p = g.map.remove(transaction_id);
        if p.is_some() {
            g.order.retain(|k| k != transaction_id);
        }
        p
    }

    /// Puts a place back after an end that failed.
    pub fn restore(&self, transaction_id: String, place: HalfPlace) {
        self.put(transaction_id, place);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(n: i64) -> HalfPlace {
        HalfPlace {
            producer_group: "t".into(),
            commit_log_offset: n,
            tran_state_table_offset: n,
        }
    }

    #[test]
    fn put_take_and_move() {
        let t = OpenTransactions::default();
        t.put("a".into(), place(1));
        t.put("a".into(), place(2));
        assert_eq!(t.take("a"), Some(place(2)));
        assert_eq!(t.take("a"), None);
    }
}
