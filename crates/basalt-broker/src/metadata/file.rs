//! The broker's JSON metadata files in `{root}/config/` (topics.json,
//! subscriptionGroup.json, consumerOffset.json, delayOffset.json): replaced
//! atomically, with the previous version kept as `<name>.bak` and used when
//! the main file is missing or unreadable;
//! [`MetadataWriter`](crate::metadata::meta_writer::MetadataWriter) writes
//! them off the async workers and coalesces bursts of changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use basalt_store::fs_util;
use parking_lot::Mutex;

/// One metadata file. See the module documentation.
///
/// Invariant: one save at a time per file (clones share the lock). Two
/// concurrent saves would share the temp file name and could rename an older
/// snapshot over a newer one; the lock is held across the save's fsyncs on
/// purpose, and only writers of this one file wait for it.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    saving: Arc<Mutex<()>>,
}

impl ConfigFile {
    pub fn new(root: &Path, name: &str) -> Self {
        ConfigFile {
            path: root.join("config").join(name),
            saving: Arc::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn bak(&self) -> PathBuf {
        let mut n = self.path.file_name().unwrap_or_default().to_os_string();
        n.push(".bak");
        self.path.with_file_name(n)
    }

    /// Parses the file with `parse`, falling back to the `.bak` copy when the
    /// main file is missing, empty or does not parse. `None` when neither works.
    pub fn load<T>(&self, parse: impl Fn(&str) -> Result<T, String>) -> Option<T> {
        for p in [self.path.clone(), self.bak()] {
            match std::fs::read_to_string(&p) {
                Ok(text) if !text.trim().is_empty() => match parse(&text) {
                    Ok(v) => return Some(v),
                    Err(e) => {
                        tracing::error!(file = %p.display(), error = %e, "unreadable metadata file")
                    }
                },
                _ => {}
            }
        }
        None
    }

    /// Writes `content` atomically, keeping the previous content as `.bak`.
    pub fn save(&self, content: &str) -> basalt_store::Result<()> {
        let _one_at_a_time = self.saving.lock();
        self.save_locked(content)
    }

    /// Renders and writes the newest content, if `render` has any, as one
    /// step: a snapshot taken by a later call is never overwritten by an
    /// earlier one.
    pub fn save_latest(&self, render: impl FnOnce() -> Option<String>) -> basalt_store::Result<()> {
        let _one_at_a_time = self.saving.lock();
        match render() {
            Some(content) => self.save_locked(&content),
            None => Ok(()),
        }
    }

    fn save_locked(&self, content: &str) -> basalt_store::Result<()> {
        if let Some(dir) = self.path.parent() {
            fs_util::create_dir_all_durable(dir)?;
        }
        if let Ok(prev) = std::fs::read(&self.path) {
            if prev != content.as_bytes() {
                fs_util::atomic_write(&self.bak(), &prev)?;
            } else {
                return Ok(());
            }
        }
        fs_util::atomic_write(&self.path, content.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Saves of one file from several threads at once all succeed (they
    /// used to share the temp file, and a rename found it gone).
    #[test]
    fn concurrent_saves_of_one_file_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let f = ConfigFile::new(dir.path(), "x.json");
        std::thread::scope(|s| {
            for t in 0..4 {
                let f = f.clone();
                s.spawn(move || {
                    for i in 0..100 {
                        f.save(&format!("{{\"t\":{t},\"i\":{i}}}")).unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert!(text.contains("\"i\":99"), "{text}");
    }

    #[test]
    fn falls_back_to_bak() {
        let dir = tempfile::tempdir().unwrap();
        let f = ConfigFile::new(dir.path(), "x.json");
        f.save("one").unwrap();
        f.save("two").unwrap();
        assert_eq!(f.load(|s| Ok::<_, String>(s.to_string())).unwrap(), "two");
        std::fs::write(f.path(), "garbage").unwrap();
        let parsed = f.load(|s| {
            if s == "one" {
                Ok(1)
            } else {
                Err("bad".to_string())
            }
        });
        assert_eq!(parsed, Some(1));
    }

    #[test]
    fn a_save_the_full_disk_refuses_keeps_the_old_content() {
        let dir = tempfile::tempdir().unwrap();
        let f = ConfigFile::new(dir.path(), "x.json");
        f.save("one").unwrap();
        basalt_store::faults::fill_disk_under(dir.path());
        assert!(f.save("two").is_err());
        // Unchanged content needs no write, so it succeeds on a full disk.
        f.save("one").unwrap();
        basalt_store::faults::free_disk_under(dir.path());
        let text = |s: &str| Ok::<_, String>(s.to_string());
        assert_eq!(f.load(text).unwrap(), "one");
        assert!(!dir.path().join("config/x.json.tmp").exists());
        assert!(!dir.path().join("config/x.json.bak.tmp").exists());
    }

    #[test]
    fn loading_the_tables_again_rewrites_no_file() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::config::BrokerConfig::default();
        let inodes = || {
            ["topics.json", "subscriptionGroup.json"].map(|n| {
                std::fs::metadata(dir.path().join("config").join(n))
                    .map(|m| m.ino())
                    .ok()
            })
        };
        let load_both = || {
            let topics =
                crate::metadata::topics::TopicConfigManager::load(dir.path(), &cfg).unwrap();
            let groups = crate::metadata::groups::SubscriptionGroupManager::load(
                dir.path(),
                cfg.max_subscription_group_count,
                cfg.max_queue_nums_per_topic,
            );
            topics.persist_and_stop();
            groups.persist_and_stop();
        };
        load_both();
        let first = inodes();
        assert!(first.iter().all(Option::is_some), "{first:?}");
        // A broker starting on a full disk has no block for a rewrite: a
        // second start must find nothing to change (a rewrite is a rename,
        // a new inode).
        load_both();
        assert_eq!(inodes(), first, "a metadata file was replaced at start-up");
    }
}
