//! The entries of topics.json's journal (`config/topics.json.journal`, see
//! [`crate::metadata::journal`]): one per created, changed or deleted topic,
//! with the table's data version after the change.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::metadata::formats::{TableVersion, TopicSettings, TopicsFile};
use crate::metadata::journal::{JournalError, JournalFile};

/// One change to the topic table as the journal keeps it (compact JSON).
/// Replaying entries is idempotent: applied to a snapshot that already
/// holds them (a crash between a compaction's rename and its emptying of
/// the journal) they leave the table as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopicJournalEntry {
    /// A topic created or replaced.
    #[serde(rename = "put")]
    Put {
        version: TableVersion,
        topic: TopicSettings,
    },
    /// A topic deleted.
    #[serde(rename = "del")]
    Delete { version: TableVersion, name: String },
}

impl TopicJournalEntry {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }

    /// Applies the change to `table`. The data version only moves forward.
    pub fn apply(self, table: &mut TopicsFile) {
        let version = match self {
            TopicJournalEntry::Put { version, topic } => {
                table
                    .topic_config_table
                    .insert(topic.topic_name.clone(), topic);
                version
            }
            TopicJournalEntry::Delete { version, name } => {
                table.topic_config_table.remove(&name);
                version
            }
        };
        if version.counter > table.data_version.counter {
            table.data_version = version;
        }
    }
}

/// Where topics.json's journal lives.
pub fn topics_journal_path(root: &Path) -> PathBuf {
    root.join("config").join("topics.json.journal")
}

/// Opens the journal and replays it onto `table`. Refuses a damaged journal
/// or an entry that does not decode, naming the file and offset.
pub fn replay_topics_journal(
    root: &Path,
    table: &mut TopicsFile,
) -> Result<JournalFile, JournalError> {
    let path = topics_journal_path(root);
    if let Some(dir) = path.parent() {
        basalt_store::fs_util::create_dir_all_durable(dir).map_err(|e| JournalError::Io {
            file: dir.to_path_buf(),
            offset: 0,
            source: std::io::Error::other(e.to_string()),
        })?;
    }
    let (journal, entries) = JournalFile::open(&path)?;
    let replayed = entries.len();
    for (offset, bytes) in entries {
        let entry = TopicJournalEntry::decode(&bytes).map_err(|reason| JournalError::BadEntry {
            file: path.clone(),
            offset,
            reason,
        })?;
        entry.apply(table);
    }
    if replayed > 0 {
        tracing::info!(file = %path.display(), entries = replayed, "replayed the topic journal");
    }
    Ok(journal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::formats::TagMode;
    use proptest::prelude::*;

    fn settings() -> impl Strategy<Value = TopicSettings> {
        (
            "[A-Za-z0-9_%-]{1,20}",
            1i32..64,
            1i32..64,
            0i32..8,
            any::<bool>(),
            prop::collection::btree_map("[a-z+.]{1,8}", "[A-Z]{0,6}", 0..3),
        )
            .prop_map(|(name, r, w, perm, order, attributes)| {
                let mut t = TopicSettings::new(name, r);
                t.write_queue_nums = w;
                t.perm = perm;
                t.order = order;
                t.attributes = attributes;
                if order {
                    t.topic_filter_type = TagMode::MultiTag;
                }
                t
            })
    }

    fn entries() -> impl Strategy<Value = Vec<TopicJournalEntry>> {
        let one = (settings(), any::<bool>(), 0i64..1_000_000).prop_map(|(t, del, ts)| {
            let version = TableVersion {
                counter: 0,
                state_version: 0,
                timestamp: ts,
            };
            if del {
                TopicJournalEntry::Delete {
                    version,
                    name: t.topic_name,
                }
            } else {
                TopicJournalEntry::Put { version, topic: t }
            }
        });
        prop::collection::vec(one, 0..40).prop_map(|mut v| {
            for (i, e) in v.iter_mut().enumerate() {
                match e {
                    TopicJournalEntry::Put { version, .. }
                    | TopicJournalEntry::Delete { version, .. } => version.counter = i as i64 + 1,
                }
            }
            v
        })
    }

    proptest! {
        #[test]
        fn entry_round_trips(e in entries()) {
            for entry in e {
                prop_assert_eq!(TopicJournalEntry::decode(&entry.encode()).unwrap(), entry);
            }
        }

        /// Replaying the journal onto the old snapshot gives the table a
        /// snapshot taken after the changes holds; replaying it again onto
        /// that snapshot changes nothing.
        #[test]
        fn replay_equals_snapshot(base in prop::collection::vec(settings(), 0..10), e in entries()) {
            let mut live = TopicsFile::default();
            for t in base {
                live.topic_config_table.insert(t.topic_name.clone(), t);
            }
            let old_snapshot = live.clone();
            for entry in &e {
                entry.clone().apply(&mut live);
            }
            let mut replayed = old_snapshot;
            for entry in &e {
                let decoded = TopicJournalEntry::decode(&entry.encode()).unwrap();
                decoded.apply(&mut replayed);
            }
            prop_assert_eq!(&replayed, &live);
            let mut again = TopicsFile::parse(&live.render()).unwrap();
            for entry in &e {
                entry.clone().apply(&mut again);
            }
            prop_assert_eq!(&again, &live);
        }
    }
}
