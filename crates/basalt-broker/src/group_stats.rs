//! Messages each consumer group pulled from each topic, and the rate at
//! which it did: GET_CONSUME_STATS's `consumeTps` (Java
//! `BrokerStatsManager.tpsGroupGetNums`, the GROUP_GET_NUMS item's rate over
//! the last minute).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

/// Most group and topic pairs counted; pulls of further pairs are not
/// counted (each pair is a pulled topic of an existing group, so this is
/// only reached by a table far larger than any real one).
const MAX_PAIRS: usize = 200_000;
/// The window the rate is taken over (Java: one minute).
const WINDOW_MS: i64 = 60_000;

/// One group's count on one topic, with the samples its rate comes from.
#[derive(Debug, Default)]
struct PairCounter {
    total: AtomicU64,
    /// Bytes of the messages counted in `total`.
    bytes: AtomicU64,
    /// `(at_ms, total)`, oldest first, covering at most the last window.
    samples: Mutex<VecDeque<(i64, u64)>>,
}

impl PairCounter {
    fn sample(&self, now_ms: i64) {
        let total = self.total.load(Ordering::Relaxed);
        let mut s = self.samples.lock();
        s.push_back((now_ms, total));
        // Keep the newest sample at or before the window's start, so the
        // rate spans the whole window once there is history.
        while s.len() > 2 && s[1].0 <= now_ms - WINDOW_MS {
            s.pop_front();
        }
    }

    /// Messages a second from the oldest kept sample to `now_ms`.
    fn tps(&self, now_ms: i64) -> f64 {
        let total = self.total.load(Ordering::Relaxed);
        let s = self.samples.lock();
        let Some(&(at, then)) = s.front() else {
            return 0.0;
        };
        let span_ms = now_ms - at;
        if span_ms <= 0 {
            return 0.0;
        }
        total.saturating_sub(then) as f64 * 1000.0 / span_ms as f64
    }
}

/// Pull counts by consumer group, then topic. Invariant: at most
/// [`MAX_PAIRS`] pairs; counting an existing pair takes a read lock and one
/// relaxed add.
#[derive(Debug, Default)]
pub struct GroupGetStats {
    table: RwLock<HashMap<String, HashMap<String, Arc<PairCounter>>>>,
    pairs: AtomicU64,
}

impl GroupGetStats {
    /// Counts `n` messages of `bytes` in all that `group` pulled from
    /// `topic`.
    pub fn add(&self, group: &str, topic: &str, n: u64, bytes: u64) {
        self.add_with_clock(group, topic, (n, bytes), basalt_common::time::now_millis);
    }

    /// `(group, topic, messages, bytes)` pulled since start, every pair.
    pub fn totals(&self) -> Vec<(String, String, u64, u64)> {
        let t = self.table.read();
        let mut v = Vec::with_capacity(self.pairs.load(Ordering::Relaxed) as usize);
        for (g, topics) in t.iter() {
            for (topic, c) in topics {
                v.push((
                    g.clone(),
                    topic.clone(),
                    c.total.load(Ordering::Relaxed),
                    c.bytes.load(Ordering::Relaxed),
                ));
            }
        }
        v
    }

    /// [`Self::add`]; a new pair's count starts from 0 at `now()`, so its
    /// first messages count in the rate before its first sample.
    fn add_with_clock(
        &self,
        group: &str,
        topic: &str,
        (n, bytes): (u64, u64),
        now: impl FnOnce() -> i64,
    ) {
        if let Some(c) = self.table.read().get(group).and_then(|t| t.get(topic)) {
            c.total.fetch_add(n, Ordering::Relaxed);
            c.bytes.fetch_add(bytes, Ordering::Relaxed);
            return;
        }
        if self.pairs.load(Ordering::Relaxed) as usize >= MAX_PAIRS {
            return;
        }
        let mut t = self.table.write();
        let topics = t.entry(group.to_string()).or_default();
        let c = topics.entry(topic.to_string()).or_insert_with(|| {
            self.pairs.fetch_add(1, Ordering::Relaxed);
            let c = PairCounter::default();
            c.samples.lock().push_back((now(), 0));
            Arc::new(c)
        });
        c.total.fetch_add(n, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Takes a sample of every counter (the broker calls this every 10 s).
    pub fn sample(&self, now_ms: i64) {
        let counters: Vec<Arc<PairCounter>> = self
            .table
            .read()
            .values()
            .flat_map(|t| t.values().cloned())
            .collect();
        for c in counters {
            c.sample(now_ms);
        }
    }

    /// Messages a second `group` pulled over about the last minute, from
    /// `topic` or (None) from all its topics.
    pub fn tps(&self, group: &str, topic: Option<&str>, now_ms: i64) -> f64 {
        let t = self.table.read();
        let Some(topics) = t.get(group) else {
            return 0.0;
        };
        match topic {
            Some(topic) => topics.get(topic).map_or(0.0, |c| c.tps(now_ms)),
            None => topics.values().map(|c| c.tps(now_ms)).sum(),
        }
    }

    /// Messages `group` pulled from `topic` since start.
    pub fn total(&self, group: &str, topic: &str) -> u64 {
        self.table
            .read()
            .get(group)
            .and_then(|t| t.get(topic))
            .map_or(0, |c| c.total.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_taken_over_the_last_minute() {
        let s = GroupGetStats::default();
        let t0 = 1_000_000;
        s.add_with_clock("g", "T", (0, 0), || t0);
        // 50 a second for 120 s, sampled every 10 s.
        for i in 1..=12 {
            s.add("g", "T", 500, 5_000);
            s.sample(t0 + i * 10_000);
        }
        let now = t0 + 120_000;
        let tps = s.tps("g", Some("T"), now);
        assert!((tps - 50.0).abs() < 0.01, "{tps}");
        // Then silence for 30 s: half the minute had traffic.
        for i in 13..=15 {
            s.sample(t0 + i * 10_000);
        }
        let tps = s.tps("g", None, t0 + 150_000);
        assert!((tps - 25.0).abs() < 0.01, "{tps}");
        assert_eq!(s.total("g", "T"), 6000);
        assert_eq!(
            s.totals(),
            vec![("g".to_string(), "T".to_string(), 6000, 60_000)]
        );
        assert_eq!(s.tps("other", None, now), 0.0);
    }

    #[test]
    fn topics_of_a_group_add_up() {
        let s = GroupGetStats::default();
        s.add_with_clock("g", "A", (100, 0), || 0);
        s.add_with_clock("g", "B", (300, 0), || 0);
        s.sample(10_000);
        assert_eq!(s.tps("g", Some("A"), 10_000), 10.0);
        assert_eq!(s.tps("g", None, 10_000), 40.0);
    }
}
