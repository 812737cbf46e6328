//! What the cleanup must keep for others: the lowest CommitLog offset each
//! holder (the broker's timer wheel, delay levels, transaction checks) still
//! has to read, and what happens when a full disk leaves no choice
//! (docs/disk-space.md#messages-waiting-for-their-time).
//!
//! The store knows nothing of timers: a holder registers a
//! [`RetentionFloor`], and every cleanup round keeps each CommitLog file
//! that holds a record at or past the lowest floor. Only forced cleanup on a
//! full disk (sends refused) with nothing below the floors left to delete
//! goes past them, one file at a time, after each holder has logged the
//! messages it is about to lose; their count is [`RetentionFloors::dropped`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

/// A holder of CommitLog records the cleanup must keep.
pub trait RetentionFloor: Send + Sync {
    /// Short name for logs (`timer`, `delay-levels`, `transactions`).
    fn name(&self) -> &'static str;

    /// The lowest CommitLog offset this holder still needs, `None` when it
    /// needs nothing.
    fn floor(&self) -> Option<i64>;

    /// The CommitLog records in `[from, to)` are about to be deleted
    /// though this holder still needs some: it logs each message it loses
    /// (the records are still readable during the call) and returns how
    /// many.
    fn dropping(&self, from: i64, to: i64) -> u64;
}

/// The registered holders and the messages lost past them.
#[derive(Default)]
pub struct RetentionFloors {
    holders: RwLock<Vec<Arc<dyn RetentionFloor>>>,
    dropped: AtomicU64,
}

impl std::fmt::Debug for RetentionFloors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.holders.read().iter().map(|h| h.name()).collect();
        f.debug_struct("RetentionFloors")
            .field("holders", &names)
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl RetentionFloors {
    /// Adds a holder; its floor counts from the next cleanup round.
    pub fn register(&self, holder: Arc<dyn RetentionFloor>) {
        self.holders.write().push(holder);
    }

    /// The lowest floor of all holders and whose it is (`None`: nothing is
    /// held).
    pub fn lowest(&self) -> Option<(i64, &'static str)> {
        self.holders
            .read()
            .iter()
            .filter_map(|h| h.floor().map(|f| (f, h.name())))
            .min_by_key(|(f, _)| *f)
    }

    /// `limit` lowered to the lowest floor.
    pub fn keep_from(&self, limit: i64) -> i64 {
        self.lowest().map_or(limit, |(f, _)| f.min(limit))
    }

    /// Tells every holder whose floor lies before `to` that `[from, to)`
    /// goes; adds up the messages they lose.
    pub fn drop_range(&self, from: i64, to: i64) -> u64 {
        let holders = self.holders.read().clone();
        let mut n = 0;
        for h in holders {
            if h.floor().is_some_and(|f| f < to) {
                let lost = h.dropping(from, to);
                if lost > 0 {
                    tracing::error!(
                        holder = h.name(),
                        lost,
                        from,
                        to,
                        "disk full: deleted CommitLog records still waiting to be delivered"
                    );
                }
                n += lost;
            }
        }
        self.dropped.fetch_add(n, Ordering::Relaxed);
        n
    }

    /// Messages lost to forced cleanup since the store opened.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    struct Fixed {
        name: &'static str,
        floor: Mutex<Option<i64>>,
        asked: Mutex<Vec<(i64, i64)>>,
    }

    impl RetentionFloor for Fixed {
        fn name(&self) -> &'static str {
            self.name
        }
        fn floor(&self) -> Option<i64> {
            *self.floor.lock()
        }
        fn dropping(&self, from: i64, to: i64) -> u64 {
            self.asked.lock().push((from, to));
            1
        }
    }

    fn fixed(name: &'static str, floor: Option<i64>) -> Arc<Fixed> {
        Arc::new(Fixed {
            name,
            floor: Mutex::new(floor),
            asked: Mutex::new(Vec::new()),
        })
    }

    #[test]
    fn lowest_floor_wins_and_none_holds_nothing() {
        let r = RetentionFloors::default();
        assert_eq!(r.lowest(), None);
        assert_eq!(r.keep_from(500), 500);
        let a = fixed("timer", Some(300));
        let b = fixed("delay-levels", None);
        r.register(a.clone());
        r.register(b.clone());
        assert_eq!(r.lowest(), Some((300, "timer")));
        assert_eq!(r.keep_from(500), 300);
        assert_eq!(r.keep_from(200), 200);
        *b.floor.lock() = Some(100);
        assert_eq!(r.lowest(), Some((100, "delay-levels")));
    }

    #[test]
    fn only_holders_before_the_end_are_told() {
        let r = RetentionFloors::default();
        let a = fixed("timer", Some(300));
        let b = fixed("transactions", Some(1000));
        r.register(a.clone());
        r.register(b.clone());
        assert_eq!(r.drop_range(0, 512), 1);
        assert_eq!(*a.asked.lock(), vec![(0, 512)]);
        assert!(b.asked.lock().is_empty());
        assert_eq!(r.dropped(), 1);
    }
}
