//! The NameServer's KV config (Java `KVConfigManager`): string values by
//! namespace and key, kept in `kvConfig.json` (`{"configTable":{ns:{k:v}}}`)
//! and replaced atomically on every change. The `ORDER_TOPIC_CONFIG`
//! namespace holds each ordered topic's `brokerName:queueNums;…` layout,
//! which routes carry as `orderTopicConf` (docs/protocol.md#kv-config).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

/// The namespace of ordered topics' layouts (Java
/// `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// Longest namespace or key, in bytes.
pub const MAX_NAME_LEN: usize = 255;
/// Longest value, in bytes.
pub const MAX_VALUE_LEN: usize = 64 * 1024;
/// Most namespaces.
pub const MAX_NAMESPACES: usize = 1024;
/// Most keys over all namespaces.
pub const MAX_ENTRIES: usize = 100_000;

/// Why a KV request or the KV file failed.
#[derive(Debug, thiserror::Error)]
pub enum KvConfigError {
    #[error("{what} must be 1 to {max} bytes, got {len}")]
    BadSize {
        what: &'static str,
        len: usize,
        max: usize,
    },
    #[error("the KV config is full: at most {max} {what}")]
    Full { what: &'static str, max: usize },
    #[error("cannot read {path}: {detail}")]
    Load { path: PathBuf, detail: String },
    #[error("cannot write {path}: {detail}; the change is in memory only")]
    Persist { path: PathBuf, detail: String },
}

/// The file's shape (Java `KVConfigSerializeWrapper`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KvConfigFile {
    #[serde(default)]
    config_table: BTreeMap<String, BTreeMap<String, String>>,
}

/// Namespaces of keys of values. Invariant: within the bounds above; with
/// a file, every change acknowledged by [`KvConfigManager::persist`] is in
/// the file (each write is a snapshot taken after the change, and writes
/// never go back to an older generation).
#[derive(Debug)]
pub struct KvConfigManager {
    path: Option<PathBuf>,
    table: RwLock<BTreeMap<String, BTreeMap<String, String>>>,
    /// Changes made so far.
    changes: AtomicU64,
    /// The change the file covers; held while a snapshot is written, so
    /// writes happen one at a time and in order.
    written: Mutex<u64>,
}

fn check_size(what: &'static str, s: &str, max: usize) -> Result<(), KvConfigError> {
    if s.is_empty() || s.len() > max {
        return Err(KvConfigError::BadSize {
            what,
            len: s.len(),
            max,
        });
    }
    Ok(())
}

impl KvConfigManager {
    /// A table kept in memory only (embedding, tests).
    pub fn in_memory() -> Self {
        Self::with_table(None, BTreeMap::new())
    }

    /// Loads `path` (an absent file is an empty table). A file that does
    /// not parse is an error naming it: starting empty would drop every
    /// ordered topic's layout silently.
    pub fn load(path: &Path) -> Result<Self, KvConfigError> {
        let table = match std::fs::read_to_string(path) {
            Ok(text) if text.trim().is_empty() => BTreeMap::new(),
            Ok(text) => {
                let f: KvConfigFile =
                    serde_json::from_str(&text).map_err(|e| KvConfigError::Load {
                        path: path.to_path_buf(),
                        detail: e.to_string(),
                    })?;
                f.config_table
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                return Err(KvConfigError::Load {
                    path: path.to_path_buf(),
                    detail: e.to_string(),
                });
            }
        };
        Ok(Self::with_table(Some(path.to_path_buf()), table))
    }

    fn with_table(
        path: Option<PathBuf>,
        table: BTreeMap<String, BTreeMap<String, String>>,
    ) -> Self {
        KvConfigManager {
            path,
            table: RwLock::new(table),
            changes: AtomicU64::new(0),
            written: Mutex::new(0),
        }
    }

    /// The file, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Sets a value; returns the change's generation for [`Self::persist`].
    pub fn put(&self, namespace: &str, key: &str, value: &str) -> Result<u64, KvConfigError> {
        check_size("namespace", namespace, MAX_NAME_LEN)?;
        check_size("key", key, MAX_NAME_LEN)?;
        if value.len() > MAX_VALUE_LEN {
            return Err(KvConfigError::BadSize {
                what: "value",
                len: value.len(),
                max: MAX_VALUE_LEN,
            });
        }
        let mut t = self.table.write();
        let known_ns = t.contains_key(namespace);
        if !known_ns && t.len() >= MAX_NAMESPACES {
            return Err(KvConfigError::Full {
                what: "namespaces",
                max: MAX_NAMESPACES,
            });
        }
        let new_key = !t.get(namespace).is_some_and(|m| m.contains_key(key));
        if new_key && t.values().map(BTreeMap::len).sum::<usize>() >= MAX_ENTRIES {
            return Err(KvConfigError::Full {
                what: "keys",
                max: MAX_ENTRIES,
            });
        }
        let prev = t
            .entry(namespace.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        match prev {
            Some(p) => tracing::info!(namespace, key, old = %p, new = value, "KV config updated"),
            None => tracing::info!(namespace, key, value, "KV config created"),
        }
        Ok(self.changes.fetch_add(1, Ordering::AcqRel) + 1)
    }

    /// Removes a key (an empty namespace goes too); returns the change's
    /// generation, or None when there was no such key.
    pub fn delete(&self, namespace: &str, key: &str) -> Option<u64> {
        let mut t = self.table.write();
        let m = t.get_mut(namespace)?;
        let old = m.remove(key)?;
        if m.is_empty() {
            t.remove(namespace);
        }
        tracing::info!(namespace, key, value = %old, "KV config deleted");
        Some(self.changes.fetch_add(1, Ordering::AcqRel) + 1)
    }

    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        self.table.read().get(namespace)?.get(key).cloned()
    }

    /// Every key of a namespace; None when it has none.
    pub fn namespace(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.table.read().get(namespace).cloned()
    }

    /// Writes the table if change `generation` is not in the file yet.
    /// Blocking (temp file, fsync, rename, fsync of the directory): call it
    /// from a blocking thread. Without a file, does nothing.
    pub fn persist(&self, generation: u64) -> Result<(), KvConfigError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut written = self.written.lock();
        if *written >= generation {
            return Ok(());
        }
        // Every change up to `upto` is in this snapshot.
        let (upto, bytes) = {
            let t = self.table.read();
            let upto = self.changes.load(Ordering::Acquire);
            let file = KvConfigFile {
                config_table: t.clone(),
            };
            (upto, serde_json::to_vec_pretty(&file).unwrap_or_default())
        };
        let fail = |detail: String| KvConfigError::Persist {
            path: path.clone(),
            detail,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            basalt_store::fs_util::create_dir_all_durable(dir).map_err(|e| fail(e.to_string()))?;
        }
        basalt_store::fs_util::atomic_write(path, &bytes).map_err(|e| fail(e.to_string()))?;
        *written = upto;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "basalt-kv-{name}-{}-{}",
            std::process::id(),
            basalt_common::time::now_millis()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn changes_survive_a_reload() {
        let dir = temp_dir("reload");
        let path = dir.join("namesrv").join("kvConfig.json");
        let kv = KvConfigManager::load(&path).unwrap();
        let g = kv.put(ORDER_TOPIC_CONFIG, "T", "broker-a:4").unwrap();
        kv.put("ns", "k", "v").unwrap();
        let g2 = kv.delete("ns", "k").unwrap();
        assert!(g2 > g);
        kv.persist(g2).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"configTable\""), "{text}");
        let back = KvConfigManager::load(&path).unwrap();
        assert_eq!(
            back.get(ORDER_TOPIC_CONFIG, "T").as_deref(),
            Some("broker-a:4")
        );
        assert_eq!(back.namespace("ns"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = temp_dir("corrupt");
        let path = dir.join("kvConfig.json");
        std::fs::write(&path, b"{\"configTable\":{\"ns\":").unwrap();
        let e = KvConfigManager::load(&path).unwrap_err();
        assert!(e.to_string().contains("kvConfig.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_values_and_counts_are_bounded() {
        let kv = KvConfigManager::in_memory();
        assert!(kv.put("", "k", "v").is_err());
        assert!(kv.put("ns", "", "v").is_err());
        assert!(kv.put(&"n".repeat(256), "k", "v").is_err());
        assert!(kv.put("ns", &"k".repeat(256), "v").is_err());
        assert!(kv.put("ns", "k", &"v".repeat(MAX_VALUE_LEN + 1)).is_err());
        kv.put("ns", "k", "").unwrap();
        for i in 0..MAX_NAMESPACES - 1 {
            kv.put(&format!("n{i}"), "k", "v").unwrap();
        }
        let e = kv.put("one-more", "k", "v").unwrap_err();
        assert!(matches!(e, KvConfigError::Full { .. }), "{e}");
        // Replacing a value in a known namespace still works.
        kv.put("n0", "k", "w").unwrap();
        assert_eq!(kv.get("n0", "k").as_deref(), Some("w"));
        assert_eq!(kv.delete("nope", "k"), None);
    }
}
