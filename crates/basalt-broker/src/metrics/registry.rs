//! The counters the request paths feed: per-topic messages and bytes in with
//! a message-size histogram, RPC latency by request and response code, and
//! how far each group has pulled each queue (for in-flight messages). The
//! per-group pull counts live in [`crate::stats_items`], which GET_CONSUME_STATS
//! shares.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use basalt_common::histogram::{AtomicHistogram, HistogramSnapshot};
use parking_lot::Mutex;

use super::table::LabelTable;

/// Most topics counted (beyond: not counted; see [`LabelTable`]).
const MAX_TOPICS: usize = 100_000;
/// Most (request code, response code) pairs timed.
const MAX_RPC_PAIRS: usize = 2_048;
/// Most consumer groups whose pull progress is kept, and topics per group.
const MAX_PULL_GROUPS: usize = 20_000;
const MAX_PULL_TOPICS_PER_GROUP: usize = 2_000;

/// Message size buckets, bytes (RocketMQ 5's, with finer small sizes).
pub const MESSAGE_SIZE_BOUNDS: &[u64] = &[
    1_024, 4_096, 16_384, 65_536, 262_144, 524_288, 1_048_576, 2_097_152, 4_194_304,
];
/// RPC latency buckets, microseconds (rendered in milliseconds).
pub const RPC_MICROS_BOUNDS: &[u64] = &[
    100, 250, 500, 1_000, 3_000, 5_000, 10_000, 50_000, 100_000, 1_000_000, 3_000_000,
];

/// One topic's traffic in.
#[derive(Debug)]
pub struct TopicIn {
    pub messages: AtomicU64,
    pub bytes: AtomicU64,
    pub sizes: AtomicHistogram,
}

impl Default for TopicIn {
    fn default() -> Self {
        TopicIn {
            messages: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            sizes: AtomicHistogram::new(MESSAGE_SIZE_BOUNDS),
        }
    }
}

/// One topic's traffic in, added up over the table's shards.
#[derive(Debug, Clone)]
pub struct TopicInTotals {
    pub messages: u64,
    pub bytes: u64,
    pub sizes: HistogramSnapshot,
}

/// The next offset a group's last pull of each queue of one topic asked
/// from, by queue id.
type QueuePulls = Mutex<HashMap<i32, i64>>;

/// The broker's metric registry. Invariant: when disabled (neither the
/// Prometheus exporter nor the dashboard runs) recording does nothing but
/// test one flag; when enabled a sent message costs a read lock and four
/// relaxed adds, a request two clock reads, a read lock and two adds, all
/// on the recording thread's own shard (see [`LabelTable::sharded`]).
#[derive(Debug)]
pub struct BrokerMetrics {
    enabled: bool,
    topics_in: LabelTable<String, TopicIn>,
    rpc: LabelTable<(i32, i32), AtomicHistogram>,
    pulls: LabelTable<String, LabelTable<String, QueuePulls>>,
    /// Calls of the gRPC MessagingService.
    grpc: super::grpc::GrpcMetrics,
    /// Refused requests by reason (docs/auth.md); counted even when the
    /// registry is disabled, as failures are rare.
    auth_failures: parking_lot::Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        BrokerMetrics::new(true)
    }
}

impl BrokerMetrics {
    /// A registry that records (`enabled`) or ignores what it is told.
    pub fn new(enabled: bool) -> Self {
        BrokerMetrics {
            enabled,
            topics_in: LabelTable::sharded(MAX_TOPICS),
            rpc: LabelTable::sharded(MAX_RPC_PAIRS),
            pulls: LabelTable::new(MAX_PULL_GROUPS),
            grpc: super::grpc::GrpcMetrics::new(enabled),
            auth_failures: Default::default(),
        }
    }

    /// Counts one refused request (`reason` is a fixed label).
    pub fn record_auth_failure(&self, reason: &'static str) {
        *self.auth_failures.lock().entry(reason).or_default() += 1;
    }

    /// Refused requests so far, by reason.
    pub fn auth_failures(&self) -> Vec<(&'static str, u64)> {
        self.auth_failures
            .lock()
            .iter()
            .map(|(r, n)| (*r, *n))
            .collect()
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The gRPC MessagingService's call counters.
    pub fn grpc(&self) -> &super::grpc::GrpcMetrics {
        &self.grpc
    }

    /// Counts `count` messages of `bytes` in all stored to `topic` (a
    /// batch's messages are counted at their mean size).
    pub fn record_put(&self, topic: &str, count: u64, bytes: u64) {
        if !self.enabled || count == 0 {
            return;
        }
        self.topics_in.with(topic, TopicIn::default, |t| {
            t.messages.fetch_add(count, Ordering::Relaxed);
            t.bytes.fetch_add(bytes, Ordering::Relaxed);
            t.sizes.record_n(bytes / count, count);
        });
    }

    /// Times one request that answered `response_code`.
    pub fn record_rpc(&self, request_code: i32, response_code: i32, took: Duration) {
        if !self.enabled {
            return;
        }
        self.rpc.with(
            &(request_code, response_code),
            || AtomicHistogram::new(RPC_MICROS_BOUNDS),
            |h| h.record(took.as_micros() as u64),
        );
    }

    /// Notes that `group`'s pull of `topic` queue `queue_id` now continues
    /// from `next_offset`.
    pub fn record_pull(&self, group: &str, topic: &str, queue_id: i32, next_offset: i64) {
        if !self.enabled {
            return;
        }
        let Some(topics) = self
            .pulls
            .entry(group, || LabelTable::new(MAX_PULL_TOPICS_PER_GROUP))
        else {
            return;
        };
        if let Some(q) = topics.entry(topic, QueuePulls::default) {
            q.lock().insert(queue_id, next_offset);
        }
    }

    /// Where `group`'s pulls of `topic` continue from, by queue id.
    pub fn pulled(&self, group: &str, topic: &str) -> HashMap<i32, i64> {
        self.pulls
            .get(group)
            .and_then(|t| t.get(topic))
            .map(|q| q.lock().clone())
            .unwrap_or_default()
    }

    /// Traffic in by topic, in no particular order.
    pub fn topics_in(&self) -> Vec<(String, TopicInTotals)> {
        let mut by_topic: HashMap<String, TopicInTotals> = HashMap::new();
        for (topic, t) in self.topics_in.entries() {
            let sizes = t.sizes.snapshot();
            let (messages, bytes) = (
                t.messages.load(Ordering::Relaxed),
                t.bytes.load(Ordering::Relaxed),
            );
            match by_topic.get_mut(&topic) {
                Some(sum) => {
                    sum.messages += messages;
                    sum.bytes += bytes;
                    sum.sizes.merge(&sizes);
                }
                None => {
                    by_topic.insert(
                        topic,
                        TopicInTotals {
                            messages,
                            bytes,
                            sizes,
                        },
                    );
                }
            }
        }
        by_topic.into_iter().collect()
    }

    /// RPC latency histograms by (request code, response code), sorted.
    pub fn rpc_latency(&self) -> Vec<((i32, i32), HistogramSnapshot)> {
        let mut by_code: HashMap<(i32, i32), HistogramSnapshot> = HashMap::new();
        for (k, h) in self.rpc.entries() {
            let snap = h.snapshot();
            match by_code.get_mut(&k) {
                Some(sum) => sum.merge(&snap),
                None => {
                    by_code.insert(k, snap);
                }
            }
        }
        let mut v: Vec<_> = by_code.into_iter().collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// Forgets a deleted topic's counters.
    pub fn forget_topic(&self, topic: &str) {
        self.topics_in.retain(|t| t != topic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disabled_registry_records_nothing() {
        let m = BrokerMetrics::new(false);
        m.record_put("T", 3, 300);
        m.record_rpc(10, 0, Duration::from_millis(1));
        m.record_pull("g", "T", 0, 5);
        assert!(m.topics_in().is_empty());
        assert!(m.rpc_latency().is_empty());
        assert!(m.pulled("g", "T").is_empty());
    }

    #[test]
    fn puts_count_messages_bytes_and_sizes() {
        let m = BrokerMetrics::new(true);
        m.record_put("T", 1, 2_000);
        m.record_put("T", 4, 400);
        let (_, t) = m.topics_in().pop().unwrap();
        assert_eq!(t.messages, 5);
        assert_eq!(t.bytes, 2_400);
        let s = t.sizes;
        assert_eq!(s.cumulative[0], 4); // four of 100 bytes <= 1 KiB
        assert_eq!(s.count, 5);
        m.record_pull("g", "T", 1, 7);
        m.record_pull("g", "T", 1, 9);
        assert_eq!(m.pulled("g", "T").get(&1), Some(&9));
    }
}
