//! Compiled SQL92 selectors of pulls that carry their own expression (lite
//! pull and pull consumers set the SUBSCRIPTION flag), by expression text,
//! so a client pulling every few milliseconds does not recompile each time.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FilterError, SQL92, SubscriptionFilter};

/// Most selectors kept.
pub const CACHE_ENTRIES: usize = 256;
/// Most selector text kept, in bytes (each selector is at most
/// `sql92::MAX_EXPRESSION_LEN`).
pub const CACHE_TEXT_BYTES: usize = 1024 * 1024;

/// What compiling one text gave: the filter, shared by every pull that
/// brings the text, or why it was refused.
pub type CompiledSql92 = Result<Arc<SubscriptionFilter>, FilterError>;

/// A bounded cache of compiled selectors, refusals included. Invariant: at
/// most [`CACHE_ENTRIES`] entries whose texts add up to at most
/// [`CACHE_TEXT_BYTES`]; the oldest entry leaves first.
#[derive(Debug, Default)]
pub struct FilterCache {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_text: HashMap<Arc<str>, CompiledSql92>,
    order: VecDeque<Arc<str>>,
    text_bytes: usize,
}

impl FilterCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The compiled form of `text`, compiling it (outside the lock) the
    /// first time.
    pub fn sql92(&self, text: &str) -> CompiledSql92 {
        if let Some(hit) = self.inner.lock().by_text.get(text) {
            return hit.clone();
        }
        let compiled: CompiledSql92 = SubscriptionFilter::compile(SQL92, text).map(Arc::new);
        let mut e = self.inner.lock();
        if let Some(raced) = e.by_text.get(text) {
            return raced.clone();
        }
        if text.len() > CACHE_TEXT_BYTES {
            return compiled;
        }
        while e.order.len() >= CACHE_ENTRIES || e.text_bytes + text.len() > CACHE_TEXT_BYTES {
            let Some(old) = e.order.pop_front() else {
                break;
            };
            e.text_bytes -= old.len();
            e.by_text.remove(&old);
        }
        let key: Arc<str> = Arc::from(text);
        e.text_bytes += key.len();
        e.order.push_back(Arc::clone(&key));
        e.by_text.insert(key, compiled.clone());
        debug_assert!(e.order.len() <= CACHE_ENTRIES && e.text_bytes <= CACHE_TEXT_BYTES);
        compiled
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.inner.lock().order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_once_and_keeps_refusals() {
        let c = FilterCache::new();
        let a = c.sql92("a > 1").unwrap();
        let b = c.sql92("a > 1").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(a.is_property_filter());
        let bad = c.sql92("a >").unwrap_err();
        assert_eq!(bad, c.sql92("a >").unwrap_err());
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn stays_bounded_oldest_out_first() {
        let c = FilterCache::new();
        for i in 0..CACHE_ENTRIES + 10 {
            assert!(c.sql92(&format!("a = {i}")).is_ok());
        }
        assert_eq!(c.len(), CACHE_ENTRIES);
        let first = c.sql92("a = 0").unwrap();
        let again = c.sql92("a = 0").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(c.len(), CACHE_ENTRIES);
        // Long texts are bounded by bytes too.
        let long = format!("a IN ({})", vec!["'xxxxxxxx'"; 1200].join(","));
        assert!(long.len() < crate::filter::sql92::MAX_EXPRESSION_LEN);
        for i in 0..200 {
            assert!(c.sql92(&format!("{long} OR b = {i}")).is_ok());
        }
        let e = c.inner.lock();
        assert!(e.text_bytes <= CACHE_TEXT_BYTES, "{}", e.text_bytes);
        assert_eq!(e.order.len(), e.by_text.len());
    }
}
