//! Calls of the gRPC MessagingService (crate `basalt-grpc`): how many
//! answered each `apache.rocketmq.v2.Code`, and how long each RPC took.
//! The service names the RPC and the code with static strings, so
//! recording allocates nothing: a read lock, a hash of two short strings
//! and two relaxed adds on the recording thread's shard.

use std::collections::HashMap;
use std::time::Duration;

use basalt_common::histogram::{AtomicHistogram, HistogramSnapshot};

use super::table::LabelTable;

/// Call durations, microseconds (rendered in seconds). Long polls
/// (ReceiveMessage) last up to the client's polling time, 20 to 30 s for
/// the SDKs, hence the long tail.
pub const GRPC_MICROS_BOUNDS: &[u64] = &[
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000, 20_000_000, 30_000_000, 60_000_000,
];

/// Most (RPC, code) pairs counted: 16 RPCs by the codes each can answer
/// stay far below; the bound only guards against a bug naming labels.
const MAX_GRPC_PAIRS: usize = 1_024;

/// One (RPC, code) pair: its calls' durations (the count is the calls).
type Calls = AtomicHistogram;

/// gRPC call counters. Invariant: when disabled (neither the exporter nor
/// the dashboard runs) [`GrpcMetrics::record`] only tests a flag.
#[derive(Debug)]
pub struct GrpcMetrics {
    enabled: bool,
    calls: LabelTable<(&'static str, &'static str), Calls>,
}

impl GrpcMetrics {
    pub fn new(enabled: bool) -> Self {
        GrpcMetrics {
            enabled,
            calls: LabelTable::sharded(MAX_GRPC_PAIRS),
        }
    }

    /// Whether calls are counted (a caller may skip reading the clock).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Counts one call of `rpc` (`SendMessage`) answered with `code`
    /// (`OK`, the `Code` name) after `took`.
    pub fn record(&self, rpc: &'static str, code: &'static str, took: Duration) {
        if !self.enabled {
            return;
        }
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.calls.with(
            &(rpc, code),
            || AtomicHistogram::new(GRPC_MICROS_BOUNDS),
            |h| h.record(micros),
        );
    }

    /// Calls by (RPC, code), added up over shards, sorted.
    pub fn calls(&self) -> Vec<((&'static str, &'static str), HistogramSnapshot)> {
        let mut by_pair: HashMap<(&'static str, &'static str), HistogramSnapshot> = HashMap::new();
        self.calls.for_each(|k, h| {
            let snap = h.snapshot();
            match by_pair.get_mut(k) {
                Some(sum) => sum.merge(&snap),
                None => {
                    by_pair.insert(*k, snap);
                }
            }
        });
        let mut v: Vec<_> = by_pair.into_iter().collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// Call durations by RPC, every code added up, sorted by RPC.
    pub fn durations(&self) -> Vec<(&'static str, HistogramSnapshot)> {
        let mut out: Vec<(&'static str, HistogramSnapshot)> = Vec::new();
        for ((rpc, _), h) in self.calls() {
            match out.last_mut() {
                Some((r, sum)) if *r == rpc => sum.merge(&h),
                _ => out.push((rpc, h)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn calls_are_counted_by_rpc_and_code_over_threads() {
        let m = Arc::new(GrpcMetrics::new(true));
        let threads: Vec<_> = (0..6)
            .map(|i| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    m.record("SendMessage", "OK", Duration::from_micros(300));
                    m.record("SendMessage", "OK", Duration::from_millis(3));
                    let code = if i % 2 == 0 {
                        "MESSAGE_NOT_FOUND"
                    } else {
                        "OK"
                    };
                    m.record("ReceiveMessage", code, Duration::from_secs(20));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let calls: Vec<_> = m
            .calls()
            .into_iter()
            .map(|((r, c), h)| (r, c, h.count))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("ReceiveMessage", "MESSAGE_NOT_FOUND", 3),
                ("ReceiveMessage", "OK", 3),
                ("SendMessage", "OK", 12),
            ]
        );
        let d = m.durations();
        assert_eq!(d.len(), 2);
        let (rpc, recv) = &d[0];
        assert_eq!((*rpc, recv.count), ("ReceiveMessage", 6));
        assert_eq!(recv.sum, 6 * 20_000_000);
        // 20 s falls in the 20 s bucket, not below it.
        let at = |b: u64| GRPC_MICROS_BOUNDS.iter().position(|x| *x == b).unwrap();
        assert_eq!(recv.cumulative[at(10_000_000)], 0);
        assert_eq!(recv.cumulative[at(20_000_000)], 6);
        let (_, send) = &d[1];
        assert_eq!(send.cumulative[at(500)], 6);
        assert_eq!(send.cumulative[at(5_000)], 12);
    }

    #[test]
    fn a_disabled_registry_counts_nothing() {
        let m = GrpcMetrics::new(false);
        m.record("Heartbeat", "OK", Duration::from_millis(1));
        assert!(!m.is_enabled());
        assert!(m.calls().is_empty());
        assert!(m.durations().is_empty());
    }
}
