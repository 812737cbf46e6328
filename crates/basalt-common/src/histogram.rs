//! A histogram of fixed buckets whose recording is lock-free: one relaxed
//! add to a bucket, one to the sum (Prometheus' histogram model: cumulative
//! counts are formed when it is read, not when a value is recorded).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of values per bucket, with fixed inclusive upper bounds and an
/// overflow bucket. Invariant: `counts.len() == bounds.len() + 1`, and
/// `bounds` is strictly increasing.
#[derive(Debug)]
pub struct AtomicHistogram {
    bounds: &'static [u64],
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

/// What an [`AtomicHistogram`] held when it was read: the bounds, the
/// cumulative count at or below each, the total count and sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    pub bounds: &'static [u64],
    /// `cumulative[i]` counts values `<= bounds[i]`.
    pub cumulative: Vec<u64>,
    pub count: u64,
    pub sum: u64,
}

impl HistogramSnapshot {
    /// Adds `other`'s counts into this one (two shards of one histogram).
    /// Both must have the same bounds.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        assert_eq!(
            self.bounds, other.bounds,
            "merging histograms of other buckets"
        );
        for (a, b) in self.cumulative.iter_mut().zip(&other.cumulative) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
    }
}

impl AtomicHistogram {
    /// A histogram over `bounds` (strictly increasing; checked).
    pub fn new(bounds: &'static [u64]) -> AtomicHistogram {
        assert!(
            bounds.windows(2).all(|w| w[0] < w[1]),
            "histogram bounds must increase"
        );
        AtomicHistogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Records `n` values each equal to `value`.
    pub fn record_n(&self, value: u64, n: u64) {
        let i = self.bounds.partition_point(|b| *b < value);
        self.counts[i].fetch_add(n, Ordering::Relaxed);
        self.sum
            .fetch_add(value.saturating_mul(n), Ordering::Relaxed);
    }

    /// Records one value.
    pub fn record(&self, value: u64) {
        self.record_n(value, 1);
    }

    /// The counts as of now (each bucket read once; concurrent records may
    /// land in some buckets and not yet in others).
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = Vec::with_capacity(self.bounds.len());
        let mut acc = 0u64;
        for c in &self.counts[..self.bounds.len()] {
            acc += c.load(Ordering::Relaxed);
            cumulative.push(acc);
        }
        let count = acc + self.counts[self.bounds.len()].load(Ordering::Relaxed);
        HistogramSnapshot {
            bounds: self.bounds,
            cumulative,
            count,
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_the_first_bucket_that_holds_them() {
        let h = AtomicHistogram::new(&[1, 5, 10]);
        h.record(0);
        h.record(1);
        h.record(2);
        h.record_n(10, 3);
        h.record(11);
        let s = h.snapshot();
        assert_eq!(s.cumulative, vec![2, 3, 6]);
        assert_eq!(s.count, 7);
        assert_eq!(s.sum, 1 + 2 + 30 + 11);
    }

    #[test]
    fn merged_snapshots_add_up() {
        let (a, b) = (AtomicHistogram::new(&[1, 5]), AtomicHistogram::new(&[1, 5]));
        a.record(1);
        b.record(4);
        b.record(9);
        let mut m = a.snapshot();
        m.merge(&b.snapshot());
        assert_eq!(m.cumulative, vec![1, 2]);
        assert_eq!((m.count, m.sum), (3, 14));
    }
}
