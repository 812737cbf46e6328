//! [`OpIndex`]: what one queue of `RMQ_SYS_TRANS_OP_HALF_TOPIC` says about
//! the half queue of the same id, read lazily from the check's op progress
//! (RocketMQ's `fillOpRemoveMap`).

use std::collections::{HashMap, HashSet};

use basalt_common::constants::{property, topic as reserved};
use basalt_common::record::RecordView;
use basalt_store::MessageStore;

use super::messages::{OP_REMOVE_TAG, parse_op_body};

/// The half offsets resolved by the op messages read so far, and which op
/// messages are fully used up. Invariant: an op offset is in `done` once
/// every half offset it names is below the half progress or was taken.
#[derive(Debug)]
pub(crate) struct OpIndex {
    queue_id: i32,
    /// Op queue offset the read started at: the op progress.
    start: i64,
    /// Next op queue offset to read.
    next: i64,
    /// Half offsets below this were passed already; ops naming only such
    /// offsets are done.
    half_floor: i64,
    /// Half queue offset → the op queue offset that resolved it.
    removed: HashMap<i64, i64>,
    /// Op queue offset → half offsets of it not yet taken.
    open: HashMap<i64, HashSet<i64>>,
    done: Vec<i64>,
}

impl OpIndex {
    /// An index of op queue `queue_id` from `op_progress` (moved up to the
    /// queue's first offset if that expired) for halves from `half_floor`.
    pub fn new(store: &MessageStore, queue_id: i32, op_progress: i64, half_floor: i64) -> Self {
        let min = store
            .get_consume_queue(reserved::TRANS_OP_HALF_TOPIC, queue_id)
            .map(|cq| cq.min_offset())
            .unwrap_or(0);
        let start = op_progress.max(min);
        OpIndex {
            queue_id,
            start,
            next: start,
            half_floor,
            removed: HashMap::new(),
            open: HashMap::new(),
            done: Vec::new(),
        }
    }

    /// Whether op messages past those read exist.
    pub fn has_unread(&self, store: &MessageStore) -> bool {
        self.next < store.max_offset_in_queue(reserved::TRANS_OP_HALF_TOPIC, self.queue_id)
    }

    /// Reads up to `max` more op messages. Returns how many were read.
    pub fn read_more(&mut self, store: &MessageStore, max: usize) -> usize {
        let Some(cq) = store.get_consume_queue(reserved::TRANS_OP_HALF_TOPIC, self.queue_id) else {
            return 0;
        };
        let end = cq.max_offset();
        let log = store.log();
        let mut n = 0;
        while self.next < end && n < max {
            let op_offset = self.next;
            self.next += 1;
            n += 1;
            let record = cq
                .unit_at(op_offset)
                .filter(|u| u.is_valid() && !u.is_filler())
                .and_then(|u| log.read_bytes(u.physical_offset, u.size as usize));
            let Some(record) = record else {
                // Expired or a hole: nothing to learn from it.
                self.done.push(op_offset);
                continue;
            };
            self.add(op_offset, &record);
        }
        n
    }

    /// Records what the op message at `op_offset` resolves.
    fn add(&mut self, op_offset: i64, record: &[u8]) {
        let v = match RecordView::parse(record, false) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(queue = self.queue_id, op_offset, error = %e, "unreadable transaction op message; passing over it");
                self.done.push(op_offset);
                return;
            }
        };
        if v.property(property::TAGS) != Some(OP_REMOVE_TAG.as_bytes()) {
            tracing::error!(
                queue = self.queue_id,
                op_offset,
                "transaction op message without tag d; passing over it"
            );
            self.done.push(op_offset);
            return;
        }
        let mut open = HashSet::new();
        for half in parse_op_body(v.body) {
            if half < self.half_floor {
                continue;
            }
            self.removed.insert(half, op_offset);
            open.insert(half);
        }
        if open.is_empty() {
            self.done.push(op_offset);
        } else {
            self.open.insert(op_offset, open);
        }
    }

    /// Whether an op resolved half offset `half`; if so, uses it up.
    pub fn take(&mut self, half: i64) -> bool {
        let Some(op_offset) = self.removed.remove(&half) else {
            return false;
        };
        if let Some(set) = self.open.get_mut(&op_offset) {
            set.remove(&half);
            if set.is_empty() {
                self.open.remove(&op_offset);
                self.done.push(op_offset);
            }
        }
        true
    }

    /// Whether an op read so far resolved half offset `half`.
    #[cfg(test)]
    fn resolves(&self, half: i64) -> bool {
        self.removed.contains_key(&half)
    }

    /// The new op progress: past every done op contiguous with the start
    /// (RocketMQ's `calculateOpOffset`).
    pub fn progress(&mut self) -> i64 {
        self.done.sort_unstable();
        self.done.dedup();
        let mut p = self.start;
        for o in &self.done {
            match o.cmp(&p) {
                std::cmp::Ordering::Less => continue,
                std::cmp::Ordering::Equal => p += 1,
                std::cmp::Ordering::Greater => break,
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transaction::messages::{op_body, op_properties};
    use basalt_common::record::RecordDraft;
    use basalt_store::StoreConfig;
    use std::sync::Arc;
    use std::time::Duration;

    fn store(dir: &std::path::Path) -> Arc<MessageStore> {
        MessageStore::open(StoreConfig::for_tests(dir)).unwrap()
    }

    fn put_op(s: &MessageStore, halves: &[i64], tag: Option<&str>) {
        let props = match tag {
            Some(t) => {
                let mut p = Vec::new();
                basalt_common::properties::append(&mut p, property::TAGS, t);
                p
            }
            None => op_properties("K"),
        };
        let body = op_body(halves);
        let host = "127.0.0.1:10911".parse().unwrap();
        let d = RecordDraft {
            topic: reserved::TRANS_OP_HALF_TOPIC,
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &body,
            properties: &props,
        };
        let r = s.put_message(&d);
        assert!(r.status.is_stored(), "{:?}", r.status);
        assert!(s.wait_dispatched(s.commit_log().max_offset(), Duration::from_secs(5)));
    }

    #[test]
    fn resolves_halves_and_moves_progress_over_used_ops() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        put_op(&s, &[1], None); // op 0: below the floor, done at once
        put_op(&s, &[5, 6], None); // op 1
        put_op(&s, &[4], Some("x")); // op 2: wrong tag, done
        put_op(&s, &[7], None); // op 3
        let mut ops = OpIndex::new(&s, 0, 0, 4);
        assert!(ops.has_unread(&s));
        assert_eq!(ops.read_more(&s, 2), 2);
        assert!(ops.resolves(5) && ops.resolves(6));
        assert!(!ops.resolves(7), "op 3 not read yet");
        assert_eq!(ops.read_more(&s, 10), 2);
        assert!(!ops.has_unread(&s));
        assert!(!ops.resolves(4), "a wrong-tag op resolves nothing");
        assert_eq!(ops.progress(), 1, "op 1 still has halves to take");
        assert!(ops.take(5));
        assert!(!ops.take(5), "taken once");
        assert_eq!(ops.progress(), 1);
        assert!(ops.take(6));
        assert_eq!(ops.progress(), 3, "ops 0..=2 done, op 3 still open");
        assert!(ops.take(7));
        assert_eq!(ops.progress(), 4);
        s.shutdown();
    }

    #[test]
    fn an_empty_queue_reads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let mut ops = OpIndex::new(&s, 0, 0, 0);
        assert!(!ops.has_unread(&s));
        assert_eq!(ops.read_more(&s, 32), 0);
        assert_eq!(ops.progress(), 0);
        s.shutdown();
    }
}
