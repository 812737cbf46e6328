//! A bounded table of per-label counters, optionally split into shards by
//! recording thread. The read path is one read lock and a hash lookup; a
//! new label takes the write lock once.
//!
//! Why shards: every produced message records into the same topic's
//! counters from whichever worker thread ran it. With one shared table the
//! lock word, the entry's reference count and the counters themselves are
//! cache lines that bounce between cores on every message: about 0.5 µs of
//! CPU per message on this project's 2-core machine in `bench produce`.
//! A sharded table gives each thread its own copy of a label's counters;
//! readers (a scrape, the dashboard) add the shards up.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::RwLock;

/// Shards of a sharded table: more than the worker threads of a small
/// machine, few enough that a scrape's merge stays cheap.
pub const LABEL_TABLE_SHARDS: usize = 8;

/// One shard, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
struct Shard<K, V> {
    map: RwLock<HashMap<K, Arc<V>>>,
}

/// Counters by label value (topic, group, request code). Invariant: each
/// shard holds at most `max` labels; values of labels beyond it are not
/// counted, so a client that invents names cannot grow the table (or the
/// scrape) without bound. A sharded table can hold a label once per shard.
#[derive(Debug)]
pub struct LabelTable<K, V> {
    shards: Box<[Shard<K, V>]>,
    max: usize,
}

/// The shard the calling thread records into (threads take shards in turn).
fn thread_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SHARD.with(|s| *s)
}

impl<K: Eq + Hash + Clone, V> LabelTable<K, V> {
    /// An empty table of one shard holding at most `max` labels: for values
    /// that cannot be added up across shards.
    pub fn new(max: usize) -> Self {
        Self::with_shards(max, 1)
    }

    /// An empty table of [`LABEL_TABLE_SHARDS`] shards, each holding at most
    /// `max` labels: for counters, which readers add up.
    pub fn sharded(max: usize) -> Self {
        Self::with_shards(max, LABEL_TABLE_SHARDS)
    }

    fn with_shards(max: usize, n: usize) -> Self {
        assert!(n > 0);
        LabelTable {
            shards: (0..n)
                .map(|_| Shard {
                    map: RwLock::new(HashMap::new()),
                })
                .collect(),
            max,
        }
    }

    fn local(&self) -> &Shard<K, V> {
        &self.shards[thread_shard() % self.shards.len()]
    }

    /// Runs `f` on the calling thread's entry for `key`, made by `make` if
    /// new; `None` once the shard is full. The hot path: no reference count
    /// is touched.
    pub fn with<Q, R>(
        &self,
        key: &Q,
        make: impl FnOnce() -> V,
        f: impl FnOnce(&V) -> R,
    ) -> Option<R>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let shard = self.local();
        if let Some(v) = shard.map.read().get(key) {
            return Some(f(v));
        }
        let v = self.insert(shard, key, make)?;
        Some(f(&v))
    }

    /// The calling thread's entry for `key`, made by `make` if new; `None`
    /// once the shard is full. `key` is only turned into an owned label when
    /// inserted.
    pub fn entry<Q>(&self, key: &Q, make: impl FnOnce() -> V) -> Option<Arc<V>>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let shard = self.local();
        if let Some(v) = shard.map.read().get(key) {
            return Some(Arc::clone(v));
        }
        self.insert(shard, key, make)
    }

    fn insert<Q>(&self, shard: &Shard<K, V>, key: &Q, make: impl FnOnce() -> V) -> Option<Arc<V>>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut m = shard.map.write();
        if let Some(v) = m.get(key) {
            return Some(Arc::clone(v));
        }
        if m.len() >= self.max {
            return None;
        }
        let v = Arc::new(make());
        m.insert(key.to_owned(), Arc::clone(&v));
        Some(v)
    }

    /// The entry for `key` of a one-shard table, if there is one.
    pub fn get<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        debug_assert_eq!(self.shards.len(), 1, "get on a sharded table");
        self.shards[0].map.read().get(key).cloned()
    }

    /// Every entry, in no particular order; a label of a sharded table
    /// comes once per shard that holds it (readers add them up).
    pub fn entries(&self) -> Vec<(K, Arc<V>)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            out.extend(s.map.read().iter().map(|(k, v)| (k.clone(), Arc::clone(v))));
        }
        out
    }

    /// Runs `f` on every entry under each shard's read lock, cloning
    /// nothing; a label of a sharded table comes once per shard.
    pub fn for_each(&self, mut f: impl FnMut(&K, &V)) {
        for s in self.shards.iter() {
            for (k, v) in s.map.read().iter() {
                f(k, v);
            }
        }
    }

    /// Runs `f` on `key`'s entry in every shard that holds it.
    pub fn for_key<Q>(&self, key: &Q, mut f: impl FnMut(&V))
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        for s in self.shards.iter() {
            if let Some(v) = s.map.read().get(key) {
                f(v);
            }
        }
    }

    /// Drops the entries `keep` refuses (a deleted topic's counters).
    pub fn retain(&self, mut keep: impl FnMut(&K) -> bool) {
        for s in self.shards.iter() {
            s.map.write().retain(|k, _| keep(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn a_full_table_counts_no_new_labels() {
        let t: LabelTable<String, AtomicU64> = LabelTable::new(2);
        for k in ["a", "b", "a", "c"] {
            if let Some(c) = t.entry(k, AtomicU64::default) {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut e: Vec<(String, u64)> = t
            .entries()
            .into_iter()
            .map(|(k, v)| (k, v.load(Ordering::Relaxed)))
            .collect();
        e.sort();
        assert_eq!(e, vec![("a".into(), 2), ("b".into(), 1)]);
    }

    #[test]
    fn shards_of_many_threads_add_up() {
        let t: Arc<LabelTable<String, AtomicU64>> = Arc::new(LabelTable::sharded(4));
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let t = Arc::clone(&t);
                std::thread::spawn(move || {
                    for k in ["a", "b", "a"] {
                        t.with(k, AtomicU64::default, |c| c.fetch_add(1, Ordering::Relaxed));
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        let mut sums: HashMap<String, u64> = HashMap::new();
        for (k, v) in t.entries() {
            *sums.entry(k).or_default() += v.load(Ordering::Relaxed);
        }
        assert_eq!(sums["a"], 24);
        assert_eq!(sums["b"], 12);
        t.retain(|k| k != "a");
        assert!(t.entries().iter().all(|(k, _)| k == "b"));
    }
}
