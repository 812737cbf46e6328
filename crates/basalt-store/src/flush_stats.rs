//! How the CommitLog's fsyncs go: how long each took and how many messages
//! each made durable (the group-commit size). Read by the broker's metrics;
//! recording costs the flush thread three relaxed atomic adds per fsync.

use std::sync::atomic::{AtomicU64, Ordering};

use basalt_common::histogram::{AtomicHistogram, HistogramSnapshot};

/// Upper bounds of the fsync latency buckets, microseconds (50 µs to 5 s).
pub const FSYNC_MICROS_BOUNDS: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
    5_000_000,
];
/// Upper bounds of the group-commit size buckets, messages per fsync.
pub const GROUP_SIZE_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384];

/// The CommitLog's fsync record. Invariant: every fsync that made new bytes
/// durable is counted once in both histograms.
#[derive(Debug)]
pub struct FlushStats {
    fsync_micros: AtomicHistogram,
    group_size: AtomicHistogram,
    /// The put count the last counted fsync covered.
    covered_puts: AtomicU64,
}

impl Default for FlushStats {
    fn default() -> Self {
        FlushStats {
            fsync_micros: AtomicHistogram::new(FSYNC_MICROS_BOUNDS),
            group_size: AtomicHistogram::new(GROUP_SIZE_BOUNDS),
            covered_puts: AtomicU64::new(0),
        }
    }
}

impl FlushStats {
    /// Notes one fsync that took `micros` and covered every put up to the
    /// put count `puts_before` (read before it started). Called only by
    /// the one thread that flushes.
    pub fn record(&self, micros: u64, puts_before: u64) {
        let prev = self.covered_puts.swap(puts_before, Ordering::Relaxed);
        self.fsync_micros.record(micros);
        self.group_size.record(puts_before.saturating_sub(prev));
    }

    /// fsync durations so far, microseconds.
    pub fn fsync_micros(&self) -> HistogramSnapshot {
        self.fsync_micros.snapshot()
    }

    /// Messages per fsync so far.
    pub fn group_size(&self) -> HistogramSnapshot {
        self.group_size.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_size_is_the_puts_since_the_last_fsync() {
        let s = FlushStats::default();
        s.record(120, 5);
        s.record(900, 5);
        s.record(40, 37);
        let g = s.group_size();
        assert_eq!(g.count, 3);
        assert_eq!(g.sum, 37);
        let f = s.fsync_micros();
        assert_eq!(f.cumulative[0], 1); // 40 µs <= 50
        assert_eq!(f.sum, 1060);
    }
}
