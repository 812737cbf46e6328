//! The dashboard's memory of the last minutes: a bounded ring of samples,
//! each the cumulative in/out counts of the busiest topics and the lag of
//! the most-behind groups. Charts derive rates from consecutive samples.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;

use crate::metrics::snapshot::BrokerSnapshot;

/// Most topics, and group/topic pairs, kept per sample.
const MAX_SERIES: usize = 200;
/// Most samples kept, whatever the configured span.
const MAX_SAMPLES: usize = 20_000;

/// One topic's counters at a sample.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicPoint {
    pub name: String,
    pub messages_in: u64,
    pub messages_out: u64,
}

/// One group's lag on one topic at a sample.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LagPoint {
    pub group: String,
    pub topic: String,
    pub lag: i64,
}

/// One sample.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPoint {
    pub at_ms: i64,
    pub topics: Vec<TopicPoint>,
    pub lags: Vec<LagPoint>,
    pub disk_used_ratio: Option<f64>,
}

/// See the module documentation. Invariant: at most `capacity` samples,
/// oldest first, each with at most [`MAX_SERIES`] topics and lags.
#[derive(Debug)]
pub struct History {
    capacity: usize,
    points: Mutex<VecDeque<HistoryPoint>>,
}

impl History {
    /// History spanning `span` at one sample per `interval`.
    pub fn new(span: Duration, interval: Duration) -> Self {
        let n = (span.as_millis() / interval.as_millis().max(1)) as usize;
        History {
            capacity: n.clamp(2, MAX_SAMPLES),
            points: Mutex::new(VecDeque::new()),
        }
    }

    /// Adds a sample of `s`, dropping the oldest beyond capacity.
    pub fn record(&self, s: &BrokerSnapshot) {
        let mut topics: Vec<TopicPoint> = s
            .topics
            .iter()
            .map(|t| TopicPoint {
                name: t.name.clone(),
                messages_in: t.messages_in,
                messages_out: t.messages_out,
            })
            .collect();
        topics.sort_by_key(|t| std::cmp::Reverse(t.messages_in + t.messages_out));
        topics.truncate(MAX_SERIES);
        let mut lags: Vec<LagPoint> = s
            .groups
            .iter()
            .flat_map(|g| {
                g.topics.iter().map(|t| LagPoint {
                    group: g.name.clone(),
                    topic: t.topic.clone(),
                    lag: t.lag,
                })
            })
            .collect();
        lags.sort_by_key(|l| std::cmp::Reverse(l.lag));
        lags.truncate(MAX_SERIES);
        let p = HistoryPoint {
            at_ms: s.at_ms,
            topics,
            lags,
            disk_used_ratio: s.store.disk_used_ratio,
        };
        let mut q = self.points.lock();
        q.push_back(p);
        while q.len() > self.capacity {
            q.pop_front();
        }
    }

    /// Every sample, oldest first.
    pub fn points(&self) -> Vec<HistoryPoint> {
        self.points.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_follows_span_and_interval() {
        let h = History::new(Duration::from_secs(60), Duration::from_secs(5));
        assert_eq!(h.capacity, 12);
        let h = History::new(Duration::from_secs(1), Duration::from_secs(5));
        assert_eq!(h.capacity, 2);
    }
}
