//! A bounded table of per-label counters: the read path is one read lock
//! and a hash lookup; a new label takes the write lock once.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::RwLock;

/// Counters by label value (topic, group, request code). Invariant: at most
/// `max` entries; values of labels beyond it are not counted, so a client
/// that invents names cannot grow the table (or the scrape) without bound.
#[derive(Debug)]
pub struct LabelTable<K, V> {
    map: RwLock<HashMap<K, Arc<V>>>,
    max: usize,
}

impl<K: Eq + Hash + Clone, V> LabelTable<K, V> {
    /// An empty table holding at most `max` labels.
    pub fn new(max: usize) -> Self {
        LabelTable {
            map: RwLock::new(HashMap::new()),
            max,
        }
    }

    /// The entry for `key`, made by `make` if new; `None` once the table
    /// is full. `key` is only turned into an owned label when inserted.
    pub fn entry<Q>(&self, key: &Q, make: impl FnOnce() -> V) -> Option<Arc<V>>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(v) = self.map.read().get(key) {
            return Some(Arc::clone(v));
        }
        let mut m = self.map.write();
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

    /// The entry for `key`, if there is one.
    pub fn get<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.read().get(key).cloned()
    }

    /// Every entry, in no particular order.
    pub fn entries(&self) -> Vec<(K, Arc<V>)> {
        self.map
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// Drops the entries `keep` refuses (a deleted topic's counters).
    pub fn retain(&self, mut keep: impl FnMut(&K) -> bool) {
        self.map.write().retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

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
}
