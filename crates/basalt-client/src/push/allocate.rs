//! Queue allocation among the consumers of a group (Java
//! `AllocateMessageQueueStrategy` implementations). Every consumer runs the
//! same function on the same sorted inputs, so they agree without talking.

use crate::message::TopicQueue;

/// How a group's consumers split a topic's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocateStrategy {
    /// Contiguous ranges, the first `queues % consumers` consumers taking
    /// one more (`AllocateMessageQueueAveragely`, Java's default).
    #[default]
    Averagely,
    /// Queue i goes to consumer `i % consumers`
    /// (`AllocateMessageQueueAveragelyByCircle`).
    AveragelyByCircle,
}

impl AllocateStrategy {
    /// The queues `current` gets. `mq_all` and `cid_all` must be sorted the
    /// same way on every consumer (the rebalance sorts both). A consumer not
    /// in `cid_all` gets nothing.
    pub fn allocate(
        self,
        current: &str,
        mq_all: &[TopicQueue],
        cid_all: &[String],
    ) -> Vec<TopicQueue> {
        match self {
            Self::Averagely => allocate_averagely(current, mq_all, cid_all),
            Self::AveragelyByCircle => allocate_by_circle(current, mq_all, cid_all),
        }
    }

    /// The Java strategy name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Averagely => "AVG",
            Self::AveragelyByCircle => "AVG_BY_CIRCLE",
        }
    }
}

/// `AllocateMessageQueueAveragely.allocate`, arithmetic for arithmetic.
pub fn allocate_averagely(
    current: &str,
    mq_all: &[TopicQueue],
    cid_all: &[String],
) -> Vec<TopicQueue> {
    let Some(index) = cid_all.iter().position(|c| c == current) else {
        return Vec::new();
    };
    if mq_all.is_empty() {
        return Vec::new();
    }
    let (mqs, cids, index) = (mq_all.len() as i64, cid_all.len() as i64, index as i64);
    let modulo = mqs % cids;
    let average = if mqs <= cids {
        1
    } else if modulo > 0 && index < modulo {
        mqs / cids + 1
    } else {
        mqs / cids
    };
    let start = if modulo > 0 && index < modulo {
        index * average
    } else {
        index * average + modulo
    };
    let range = average.min(mqs - start);
    (0..range.max(0))
        .map(|i| mq_all[((start + i) % mqs) as usize].clone())
        .collect()
}

/// `AllocateMessageQueueAveragelyByCircle.allocate`.
pub fn allocate_by_circle(
    current: &str,
    mq_all: &[TopicQueue],
    cid_all: &[String],
) -> Vec<TopicQueue> {
    let Some(index) = cid_all.iter().position(|c| c == current) else {
        return Vec::new();
    };
    (index..mq_all.len())
        .filter(|i| i % cid_all.len() == index)
        .map(|i| mq_all[i].clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn mqs(n: usize) -> Vec<TopicQueue> {
        (0..n)
            .map(|i| TopicQueue::new("T", "broker-a", i as i32))
            .collect()
    }

    fn cids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    fn ids(v: &[TopicQueue]) -> Vec<i32> {
        v.iter().map(|m| m.queue_id).collect()
    }

    /// (queues, consumers) → what each consumer gets, worked out by hand
    /// from the Java arithmetic.
    #[test]
    fn averagely_matches_java_table() {
        let table: &[(usize, usize, &[&[i32]])] = &[
            (8, 3, &[&[0, 1, 2], &[3, 4, 5], &[6, 7]]),
            (8, 4, &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]]),
            (4, 1, &[&[0, 1, 2, 3]]),
            (5, 2, &[&[0, 1, 2], &[3, 4]]),
            (10, 4, &[&[0, 1, 2], &[3, 4, 5], &[6, 7], &[8, 9]]),
            (3, 3, &[&[0], &[1], &[2]]),
            (2, 4, &[&[0], &[1], &[], &[]]),
            (1, 3, &[&[0], &[], &[]]),
            (7, 3, &[&[0, 1, 2], &[3, 4], &[5, 6]]),
        ];
        for (q, c, want) in table {
            let all = mqs(*q);
            let cs = cids(*c);
            for (i, w) in want.iter().enumerate() {
                let got = allocate_averagely(&cs[i], &all, &cs);
                assert_eq!(ids(&got), *w, "{q} queues, {c} consumers, consumer {i}");
            }
        }
    }

    #[test]
    fn unknown_consumer_gets_nothing() {
        assert!(allocate_averagely("nobody", &mqs(4), &cids(2)).is_empty());
        assert!(allocate_by_circle("nobody", &mqs(4), &cids(2)).is_empty());
    }

    #[test]
    fn by_circle_deals_round_robin() {
        let all = mqs(7);
        let cs = cids(3);
        assert_eq!(ids(&allocate_by_circle("c0", &all, &cs)), [0, 3, 6]);
        assert_eq!(ids(&allocate_by_circle("c1", &all, &cs)), [1, 4]);
        assert_eq!(ids(&allocate_by_circle("c2", &all, &cs)), [2, 5]);
    }

    proptest::proptest! {
        /// Every queue goes to exactly one consumer, and shares differ by at most one.
        #[test]
        fn partitions_the_queues(q in 1usize..64, c in 1usize..20, circle in proptest::bool::ANY) {
            let all = mqs(q);
            let cs = cids(c);
            let strategy = if circle { AllocateStrategy::AveragelyByCircle } else { AllocateStrategy::Averagely };
            let mut seen = BTreeSet::new();
            let mut sizes = Vec::new();
            for cid in &cs {
                let got = strategy.allocate(cid, &all, &cs);
                sizes.push(got.len());
                for m in got {
                    proptest::prop_assert!(seen.insert(m.queue_id));
                }
            }
            proptest::prop_assert_eq!(seen.len(), q);
            let (min, max) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
            proptest::prop_assert!(max - min <= 1);
        }
    }
}
