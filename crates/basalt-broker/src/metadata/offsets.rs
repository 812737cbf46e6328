//! ConsumerOffsetManager: committed consumer offsets, `topic@group` →
//! queue id → offset, persisted to consumerOffset.json on an interval and at
//! shutdown (atomically, with a .bak copy).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;

use crate::metadata::file::ConfigFile;
use crate::metadata::formats::{OffsetTable, parse_offset_table, render_offset_table};

/// See the module documentation. Invariant: the table only changes through
/// `commit`/`replace_all`/`remove_*`, which mark it dirty for the next persist.
#[derive(Debug)]
pub struct ConsumerOffsetManager {
    file: ConfigFile,
    table: RwLock<OffsetTable>,
    dirty: AtomicBool,
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl ConsumerOffsetManager {
    pub fn load(root: &Path) -> Self {
        let file = ConfigFile::new(root, "consumerOffset.json");
        let table = file.load(parse_offset_table).unwrap_or_default();
        ConsumerOffsetManager {
            file,
            table: RwLock::new(table),
            dirty: AtomicBool::new(false),
        }
    }

    /// Stores a consumer's offset for a queue.
    pub fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let k = key(topic, group);
        let mut t = self.table.write();
        let prev = t.entry(k).or_default().insert(queue_id, offset);
        if prev != Some(offset) {
            self.dirty.store(true, Ordering::Release);
        }
    }

    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.table
            .read()
            .get(&key(topic, group))
            .and_then(|m| m.get(&queue_id).copied())
    }

    /// Every queue offset of a group on a topic.
    pub fn group_topic(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        self.table
            .read()
            .get(&key(topic, group))
            .cloned()
            .unwrap_or_default()
    }

    /// Topics a group has offsets for.
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        let suffix = format!("@{group}");
        self.table
            .read()
            .keys()
            .filter_map(|k| k.strip_suffix(&suffix).map(str::to_string))
            .collect()
    }

    /// Groups that have offsets for a topic.
    pub fn groups_of_topic(&self, topic: &str) -> Vec<String> {
        let prefix = format!("{topic}@");
        self.table
            .read()
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix).map(str::to_string))
            .collect()
    }

    pub fn remove_topic(&self, topic: &str) {
        let prefix = format!("{topic}@");
        self.table.write().retain(|k, _| !k.starts_with(&prefix));
        self.dirty.store(true, Ordering::Release);
    }

    pub fn snapshot(&self) -> HashMap<String, BTreeMap<i32, i64>> {
        self.table.read().clone()
    }

    /// The table in its file form (GET_ALL_CONSUMER_OFFSET body).
    pub fn encode(&self) -> String {
        render_offset_table(&self.table.read())
    }

    /// Replaces everything (a slave copying its master).
    pub fn replace_all(&self, table: HashMap<String, BTreeMap<i32, i64>>) {
        *self.table.write() = table;
        self.dirty.store(true, Ordering::Release);
    }

    /// Writes the file if anything changed since the last write.
    pub fn persist(&self) {
        // The flag is read under the file's save lock, so concurrent callers
        // (the periodic flush, a slave's sync, shutdown) write in turn and
        // the last write holds the newest table.
        let saved = self.file.save_latest(|| {
            self.dirty
                .swap(false, Ordering::AcqRel)
                .then(|| self.encode())
        });
        if let Err(e) = saved {
            self.dirty.store(true, Ordering::Release);
            tracing::error!(error = %e, "cannot persist consumerOffset.json");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the ledger fault test: a follower's offset sync and the
    /// periodic flush persisted at once, shared the temp file, and one
    /// rename failed ("cannot persist consumerOffset.json").
    #[test]
    fn concurrent_persists_leave_the_newest_table() {
        let dir = tempfile::tempdir().unwrap();
        let m = std::sync::Arc::new(ConsumerOffsetManager::load(dir.path()));
        std::thread::scope(|s| {
            for t in 0..4 {
                let m = std::sync::Arc::clone(&m);
                s.spawn(move || {
                    for i in 0..200 {
                        m.commit("G", "T", t, i);
                        m.persist();
                    }
                });
            }
        });
        m.persist();
        let back = ConsumerOffsetManager::load(dir.path());
        for q in 0..4 {
            assert_eq!(back.query("G", "T", q), Some(199), "queue {q}");
        }
    }

    #[test]
    fn persists_with_bare_keys_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOffsetManager::load(dir.path());
        m.commit("G", "T", 0, 12);
        m.commit("G", "T", 3, 7);
        m.commit("H", "%RETRY%H", 0, 1);
        m.persist();
        let text = std::fs::read_to_string(dir.path().join("config/consumerOffset.json")).unwrap();
        assert!(text.contains("\"T@G\":{0:12,3:7}"), "{text}");
        let m2 = ConsumerOffsetManager::load(dir.path());
        assert_eq!(m2.query("G", "T", 3), Some(7));
        assert_eq!(m2.topics_of_group("G"), vec!["T".to_string()]);
        // Java-written files with quoted keys parse too.
        let t = parse_offset_table(r#"{"offsetTable":{"A@B":{"1":5}}}"#).unwrap();
        assert_eq!(t["A@B"][&1], 5);
    }
}
