//! [`ProcessQueue`]: the messages pulled from one queue and not yet consumed
//! (Java `ProcessQueue`).
//!
//! Invariant: the offset a consumer may commit is the smallest offset still
//! in flight, or one past the largest offset ever pulled once nothing is in
//! flight. [`ProcessQueue::remove`] returns exactly that, so a crash after a
//! commit never skips a message that was pulled but not consumed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use crate::message::MessageExt;

/// A pulled message as the queue tracks it: its body size (flow control)
/// and, for orderly consumption, the message itself.
#[derive(Debug)]
struct Entry {
    size: usize,
    msg: Option<MessageExt>,
}

#[derive(Debug, Default)]
struct State {
    /// In flight, by queue offset.
    msgs: BTreeMap<i64, Entry>,
    /// Orderly consumption: the messages handed to the listener, by offset.
    consuming: BTreeMap<i64, Entry>,
    count: usize,
    size: usize,
    /// Largest offset ever put.
    offset_max: i64,
}

impl State {
    fn insert(&mut self, offset: i64, size: usize, msg: Option<MessageExt>) {
        if self.msgs.insert(offset, Entry { size, msg }).is_none() {
            self.count += 1;
            self.size += size;
        }
        self.offset_max = self.offset_max.max(offset);
    }
}

/// Messages in flight for one message queue, plus its lifecycle flags.
#[derive(Debug)]
pub(crate) struct ProcessQueue {
    state: Mutex<State>,
    dropped: watch::Sender<bool>,
    /// Signalled when messages leave the queue (flow control waits on it).
    space: Notify,
    /// Signalled when messages arrive or the lock state changes (orderly).
    ready: Notify,
    locked: AtomicBool,
    last_lock_ms: AtomicI64,
    last_pull_ms: AtomicI64,
    last_consume_ms: AtomicI64,
}

/// A locally held lock is trusted this long after its last renewal
/// (`REBALANCE_LOCK_MAX_LIVE_TIME`).
pub(crate) const LOCK_MAX_LIVE_MS: i64 = 30_000;

impl ProcessQueue {
    pub fn new() -> Self {
        let now = basalt_common::time::now_millis();
        Self {
            state: Mutex::new(State {
                offset_max: -1,
                ..State::default()
            }),
            dropped: watch::channel(false).0,
            space: Notify::new(),
            ready: Notify::new(),
            locked: AtomicBool::new(false),
            last_lock_ms: AtomicI64::new(0),
            last_pull_ms: AtomicI64::new(now),
            last_consume_ms: AtomicI64::new(now),
        }
    }

    /// Adds pulled messages by offset and size (concurrent consumption:
    /// the messages themselves travel in consume requests).
    pub fn put(&self, msgs: &[MessageExt]) {
        let mut st = self.state.lock();
        for m in msgs {
            st.insert(m.queue_offset, m.body.len(), None);
        }
    }

    /// Adds pulled messages and keeps them (orderly consumption takes them
    /// from here), waking the consume loop.
    pub fn put_owned(&self, msgs: Vec<MessageExt>) {
        let mut st = self.state.lock();
        for m in msgs {
            st.insert(m.queue_offset, m.body.len(), Some(m));
        }
        drop(st);
        self.ready.notify_one();
    }

    /// Removes consumed messages and returns the offset that may now be
    /// committed (see the module docs), or -1 if nothing was in flight.
    pub fn remove(&self, offsets: impl IntoIterator<Item = i64>) -> i64 {
        let mut st = self.state.lock();
        self.last_consume_ms
            .store(basalt_common::time::now_millis(), Ordering::Relaxed);
        if st.msgs.is_empty() {
            return -1;
        }
        let mut result = st.offset_max + 1;
        for o in offsets {
            if let Some(e) = st.msgs.remove(&o) {
                st.count -= 1;
                st.size -= e.size;
            }
        }
        if let Some((first, _)) = st.msgs.first_key_value() {
            result = *first;
        }
        drop(st);
        self.space.notify_waiters();
        result
    }

    pub fn contains(&self, offset: i64) -> bool {
        self.state.lock().msgs.contains_key(&offset)
    }

    pub fn count(&self) -> usize {
        self.state.lock().count
    }

    pub fn size_bytes(&self) -> usize {
        self.state.lock().size
    }

    /// Largest minus smallest offset in flight (0 when empty).
    pub fn max_span(&self) -> i64 {
        let st = self.state.lock();
        match (st.msgs.first_key_value(), st.msgs.last_key_value()) {
            (Some((a, _)), Some((b, _))) => b - a,
            _ => 0,
        }
    }

    /// Smallest and largest offsets in flight and the count (running info).
    pub fn snapshot(&self) -> (i64, i64, usize, usize) {
        let st = self.state.lock();
        let min = st.msgs.first_key_value().map(|(k, _)| *k).unwrap_or(0);
        let max = st.msgs.last_key_value().map(|(k, _)| *k).unwrap_or(0);
        (min, max, st.count, st.size)
    }

    // ----------------------------------------------------- orderly consume

    /// Moves up to `n` of the lowest-offset messages to the consuming set and
    /// returns them in offset order (`takeMessages`).
    pub fn take(&self, n: usize) -> Vec<MessageExt> {
        let mut st = self.state.lock();
        let mut out = Vec::with_capacity(n.min(st.msgs.len()));
        while out.len() < n {
            let Some((offset, mut entry)) = st.msgs.pop_first() else {
                break;
            };
            if let Some(m) = entry.msg.take() {
                out.push(m);
            }
            st.consuming.insert(offset, entry);
        }
        out
    }

    /// The consumed messages are done: returns the offset to commit (one
    /// past the last consumed) or -1 (`commit`).
    pub fn commit(&self) -> i64 {
        let mut st = self.state.lock();
        self.last_consume_ms
            .store(basalt_common::time::now_millis(), Ordering::Relaxed);
        let Some((last, _)) = st.consuming.last_key_value() else {
            return -1;
        };
        let next = *last + 1;
        let taken = std::mem::take(&mut st.consuming);
        st.count -= taken.len();
        st.size -= taken.values().map(|e| e.size).sum::<usize>();
        drop(st);
        self.space.notify_waiters();
        next
    }

    /// Puts failed messages back to be consumed again, first
    /// (`makeMessageToConsumeAgain`).
    pub fn reconsume_later(&self, msgs: Vec<MessageExt>) {
        let mut st = self.state.lock();
        for m in msgs {
            let offset = m.queue_offset;
            let size = m.body.len();
            st.consuming.remove(&offset);
            st.msgs.insert(offset, Entry { size, msg: Some(m) });
        }
    }

    /// Whether messages wait to be taken.
    pub fn has_pending(&self) -> bool {
        !self.state.lock().msgs.is_empty()
    }

    /// Waits for [`Self::put`] or a lock change (orderly consume loop).
    pub async fn wait_ready(&self) {
        self.ready.notified().await
    }

    /// Arms a wait for space before checking the thresholds, so a removal
    /// between the check and the wait is not missed.
    pub fn space_notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.space.notified()
    }

    // ------------------------------------------------------------- flags

    pub fn set_dropped(&self) {
        self.dropped.send_replace(true);
        self.space.notify_waiters();
        self.ready.notify_one();
    }

    pub fn is_dropped(&self) -> bool {
        *self.dropped.borrow()
    }

    /// Resolves once the queue is dropped.
    pub async fn dropped(&self) {
        let mut rx = self.dropped.subscribe();
        let _ = rx.wait_for(|d| *d).await;
    }

    pub fn set_locked(&self, locked: bool) {
        self.locked.store(locked, Ordering::Release);
        if locked {
            self.last_lock_ms
                .store(basalt_common::time::now_millis(), Ordering::Relaxed);
        }
        self.ready.notify_one();
    }

    /// Locked by the broker for this client, and renewed recently enough.
    pub fn holds_lock(&self) -> bool {
        self.locked.load(Ordering::Acquire)
            && basalt_common::time::now_millis() - self.last_lock_ms.load(Ordering::Relaxed)
                <= LOCK_MAX_LIVE_MS
    }

    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
    }

    pub fn touch_pull(&self) {
        self.last_pull_ms
            .store(basalt_common::time::now_millis(), Ordering::Relaxed);
    }

    pub fn last_pull_ms(&self) -> i64 {
        self.last_pull_ms.load(Ordering::Relaxed)
    }

    pub fn last_consume_ms(&self) -> i64 {
        self.last_consume_ms.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn msg(offset: i64) -> MessageExt {
        MessageExt {
            topic: "T".into(),
            queue_id: 0,
            queue_offset: offset,
            body: Bytes::from_static(b"0123456789"),
            tags: None,
            keys: vec![],
            properties: Default::default(),
            flag: 0,
            sys_flag: 0,
            msg_id: format!("id{offset}"),
            offset_msg_id: String::new(),
            born_timestamp: 0,
            born_host: MessageExt::unspecified_host(),
            store_timestamp: 0,
            store_host: MessageExt::unspecified_host(),
            reconsume_times: 0,
            commit_log_offset: offset * 100,
            prepared_transaction_offset: 0,
            body_crc: 0,
            broker_name: "b".into(),
            transaction_id: None,
        }
    }

    fn msgs(offsets: &[i64]) -> Vec<MessageExt> {
        offsets.iter().copied().map(msg).collect()
    }

    #[test]
    fn committed_offset_is_the_smallest_in_flight() {
        let pq = ProcessQueue::new();
        pq.put(&msgs(&[10, 11, 12, 13]));
        assert_eq!((pq.count(), pq.size_bytes()), (4, 40));
        // 11 and 13 finish first: 10 is still in flight.
        assert_eq!(pq.remove([11, 13]), 10);
        assert_eq!(pq.max_span(), 2);
        // 10 finishes: 12 is the smallest left.
        assert_eq!(pq.remove([10]), 12);
        // Everything done: one past the largest pulled.
        assert_eq!(pq.remove([12]), 14);
        assert_eq!((pq.count(), pq.size_bytes()), (0, 0));
        // Nothing in flight any more.
        assert_eq!(pq.remove([12]), -1);
    }

    #[test]
    fn duplicates_are_counted_once() {
        let pq = ProcessQueue::new();
        pq.put(&msgs(&[1, 2]));
        pq.put(&msgs(&[2, 3]));
        assert_eq!(pq.count(), 3);
        assert!(pq.contains(3));
        assert_eq!(pq.remove([1, 2, 3]), 4);
    }

    #[test]
    fn orderly_take_commit_and_rollback() {
        let pq = ProcessQueue::new();
        pq.put_owned(msgs(&[5, 6, 7]));
        let first = pq.take(2);
        assert_eq!(
            first.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            [5, 6]
        );
        // Failed: back in front of 7.
        pq.reconsume_later(first);
        let again = pq.take(2);
        assert_eq!(
            again.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            [5, 6]
        );
        assert_eq!(pq.commit(), 7);
        assert_eq!(pq.count(), 1);
        assert_eq!(pq.take(5).len(), 1);
        assert_eq!(pq.commit(), 8);
        assert_eq!(pq.commit(), -1);
        assert_eq!(pq.count(), 0);
    }

    #[test]
    fn lock_expires_locally() {
        let pq = ProcessQueue::new();
        assert!(!pq.holds_lock());
        pq.set_locked(true);
        assert!(pq.holds_lock());
        pq.last_lock_ms.store(0, Ordering::Relaxed);
        assert!(!pq.holds_lock() && pq.is_locked());
    }
}
