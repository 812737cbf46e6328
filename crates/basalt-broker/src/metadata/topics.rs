//! TopicConfigManager: the topics this broker serves (topics.json).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use basalt_common::constants::{perm, topic as reserved};
use basalt_common::time::now_millis;
use parking_lot::RwLock;
use thiserror::Error;

use crate::config::BrokerConfig;
use crate::metadata::file::ConfigFile;
use crate::metadata::formats::{TableVersion, TopicSettings, TopicsFile};
use crate::metadata::journal::JournalError;
use crate::metadata::meta_writer::MetadataWriter;
use crate::metadata::topic_journal::{TopicJournalEntry, replay_topics_journal};

/// Why a topic was not created.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum TopicCreateError {
    #[error("{0}")]
    InvalidName(String),
    #[error("topic[{0}] not exist, apply first please!")]
    NotAllowed(String),
    #[error("this broker already holds {0} topics, the most it may (maxTopicCount)")]
    TooMany(usize),
    #[error("a topic's queue count must be in 1..={max}, got {count} (maxQueueNumsPerTopic)")]
    QueueCount { count: i32, max: i32 },
}

/// A topic as the table now holds it, and the generation of the
/// topics.json write that makes its creation durable (`None`: it existed).
#[derive(Debug, Clone)]
pub struct TopicChange {
    pub config: TopicSettings,
    pub generation: Option<u64>,
    /// The table's version this change made (`None`: nothing changed). A
    /// registration of this change alone carries it: concurrent changes then
    /// reach a NameServer with versions of their own, and none is taken for
    /// a repeat of the one before and ignored.
    pub version: Option<TableVersion>,
}

/// Limits on what clients may create.
#[derive(Debug, Clone, Copy)]
struct TopicLimits {
    max_topics: usize,
    max_queues: i32,
}

/// Owns the topic table and its data version. Every change bumps the version
/// and is handed, as a journal entry, to the table's [`MetadataWriter`]
/// (topics.json plus its journal, so a creation costs an append, not a
/// rewrite of the table); callers that answer a client about a new topic
/// wait for that write with [`TopicConfigManager::persisted`]. Invariant: no topic in the table has an
/// invalid name or more than `maxQueueNumsPerTopic` queues, unless it came
/// from the file or the master as it is.
#[derive(Debug)]
pub struct TopicConfigManager {
    inner: Arc<RwLock<TopicsFile>>,
    writer: MetadataWriter,
    limits: TopicLimits,
}

impl TopicConfigManager {
    /// Loads topics.json (or its .bak), replays its journal and adds the
    /// broker's system topics, then folds the journal into topics.json
    /// (rewritten only if that changed it). Refuses a damaged journal.
    /// Blocking.
    pub fn load(root: &Path, cfg: &BrokerConfig) -> Result<Self, JournalError> {
        let file = ConfigFile::new(root, "topics.json");
        let loaded: Option<TopicsFile> = file.load(TopicsFile::parse);
        let mut wrapper = loaded.unwrap_or_else(|| TopicsFile {
            data_version: TableVersion::new(now_millis()),
            topic_config_table: BTreeMap::new(),
        });
        let journal = replay_topics_journal(root, &mut wrapper)?;
        let snapshot_len = std::fs::metadata(file.path()).map_or(0, |m| m.len());
        let mut system = vec![
            TopicSettings::new(reserved::SELF_TEST_TOPIC, 1),
            TopicSettings::new(reserved::BENCHMARK_TOPIC, 8),
            TopicSettings::new(cfg.broker_cluster_name.clone(), 16),
            TopicSettings::new(cfg.broker_name.clone(), 1),
            TopicSettings::new(reserved::OFFSET_MOVED_EVENT, 1),
            TopicSettings::new(reserved::SCHEDULE_TOPIC, 18),
            TopicSettings::new(
                format!(
                    "{}{}",
                    cfg.broker_cluster_name,
                    reserved::REPLY_TOPIC_SUFFIX
                ),
                1,
            ),
            // Transactional messages: halves and the decisions about them,
            // one queue each, as RocketMQ 5 creates them.
            TopicSettings::new(reserved::TRANS_HALF_TOPIC, 1),
            TopicSettings::new(reserved::TRANS_OP_HALF_TOPIC, 1),
        ];
        if cfg.timer_wheel_enable {
            system.push(TopicSettings::new(reserved::TIMER_TOPIC, 1));
        }
        // Message traces (clients' enableMsgTrace), one queue, as RocketMQ.
        if cfg.trace_topic_enable {
            system.push(TopicSettings::new(cfg.msg_trace_topic_name.clone(), 1));
        }
        if cfg.auto_create_topic_enable {
            let mut t =
                TopicSettings::new(reserved::AUTO_CREATE_TOPIC, cfg.default_topic_queue_nums);
            t.perm = perm::INHERIT | perm::READ | perm::WRITE;
            system.push(t);
        }
        for t in system {
            wrapper
                .topic_config_table
                .entry(t.topic_name.clone())
                .or_insert(t);
        }
        let inner = Arc::new(RwLock::new(wrapper));
        let table = Arc::clone(&inner);
        let writer = MetadataWriter::start_journaled(file, journal, snapshot_len, move || {
            table.read().render()
        });
        if let Err(e) = writer.flush_now() {
            tracing::error!(error = %e, "cannot write topics.json at start");
        }
        Ok(TopicConfigManager {
            inner,
            writer,
            limits: TopicLimits {
                max_topics: cfg.max_topic_count,
                max_queues: cfg.max_queue_nums_per_topic,
            },
        })
    }

    pub fn get(&self, topic: &str) -> Option<TopicSettings> {
        self.inner.read().topic_config_table.get(topic).cloned()
    }

    pub fn contains(&self, topic: &str) -> bool {
        self.inner.read().topic_config_table.contains_key(topic)
    }

    pub fn len(&self) -> usize {
        self.inner.read().topic_config_table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the whole table with its version.
    pub fn snapshot(&self) -> TopicsFile {
        self.inner.read().clone()
    }

    pub fn data_version(&self) -> TableVersion {
        self.inner.read().data_version.clone()
    }

    pub fn topic_names(&self) -> Vec<String> {
        self.inner
            .read()
            .topic_config_table
            .keys()
            .cloned()
            .collect()
    }

    /// Waits until the journal append (or topics.json write) for change
    /// `generation` is fsynced.
    pub async fn persisted(&self, generation: u64) -> Result<(), String> {
        self.writer.written(generation).await
    }

    fn check_queues(&self, count: i32) -> Result<(), TopicCreateError> {
        if !(1..=self.limits.max_queues).contains(&count) {
            return Err(TopicCreateError::QueueCount {
                count,
                max: self.limits.max_queues,
            });
        }
        Ok(())
    }

    /// Creates or replaces a topic, within the limits. Returns the change.
    pub fn update(&self, t: TopicSettings) -> Result<TopicChange, TopicCreateError> {
        basalt_common::topic::validate_internal_topic(&t.topic_name)
            .map_err(|e| TopicCreateError::InvalidName(e.to_string()))?;
        self.check_queues(t.read_queue_nums)?;
        self.check_queues(t.write_queue_nums)?;
        let (generation, version) = {
            let mut w = self.inner.write();
            if !w.topic_config_table.contains_key(&t.topic_name)
                && w.topic_config_table.len() >= self.limits.max_topics
            {
                return Err(TopicCreateError::TooMany(w.topic_config_table.len()));
            }
            w.topic_config_table.insert(t.topic_name.clone(), t.clone());
            w.data_version.next_version(now_millis());
            let version = w.data_version.clone();
            let entry = TopicJournalEntry::Put {
                version: version.clone(),
                topic: t.clone(),
            };
            // Under the table's lock: the journal keeps the table's order.
            (self.writer.record_change(entry.encode()), version)
        };
        Ok(TopicChange {
            config: t,
            generation: Some(generation),
            version: Some(version),
        })
    }

    /// Creates `topic` from the auto-create template `default_topic` when a
    /// producer sends to a topic that does not exist (RocketMQ's
    /// `createTopicInSendMessageMethod`).
    pub fn create_on_send(
        &self,
        topic: &str,
        default_topic: &str,
        queue_nums: i32,
        auto_create: bool,
    ) -> Result<TopicChange, TopicCreateError> {
        if let Some(t) = self.get(topic) {
            return Ok(TopicChange {
                config: t,
                generation: None,
                version: None,
            });
        }
        let not_allowed = || TopicCreateError::NotAllowed(topic.to_string());
        if !auto_create {
            return Err(not_allowed());
        }
        let template = self.get(default_topic).ok_or_else(not_allowed)?;
        if !perm::is_inherited(template.perm) {
            return Err(not_allowed());
        }
        let queues = queue_nums.clamp(1, template.write_queue_nums.max(1));
        let mut t = TopicSettings::new(topic, queues.min(self.limits.max_queues));
        t.perm = template.perm & !perm::INHERIT;
        t.topic_sys_flag = template.topic_sys_flag;
        let change = self.update(t)?;
        tracing::info!(topic, queues, "auto-created topic");
        Ok(change)
    }

    /// The retry (or DLQ) topic of a consumer group, created with `queues`
    /// queues (clamped to the limit) and `perm` if missing.
    pub fn create_if_missing(
        &self,
        topic: &str,
        queues: i32,
        perm_bits: i32,
    ) -> Result<TopicChange, TopicCreateError> {
        if let Some(t) = self.get(topic) {
            return Ok(TopicChange {
                config: t,
                generation: None,
                version: None,
            });
        }
        let mut t = TopicSettings::new(topic, queues.clamp(1, self.limits.max_queues));
        t.perm = perm_bits;
        self.update(t)
    }

    /// Removes a topic. Returns whether it existed.
    pub fn delete(&self, topic: &str) -> bool {
        let mut w = self.inner.write();
        let removed = w.topic_config_table.remove(topic).is_some();
        if removed {
            w.data_version.next_version(now_millis());
            let entry = TopicJournalEntry::Delete {
                version: w.data_version.clone(),
                name: topic.to_string(),
            };
            self.writer.record_change(entry.encode());
        }
        removed
    }

    /// Replaces the whole table (a slave copying its master).
    pub fn replace_all(&self, wrapper: TopicsFile) {
        let mut w = self.inner.write();
        *w = wrapper;
        self.writer.mark_replaced();
    }

    /// Writes topics.json now, empties the journal and stops the writer
    /// (shutdown): what is left is a file RocketMQ reads. Blocking.
    pub fn persist_and_stop(&self) {
        if let Err(e) = self.writer.flush_now() {
            tracing::error!(error = %e, "cannot persist topics.json");
        }
        self.writer.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn system_topics_autocreate_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = BrokerConfig::default();
        let m = TopicConfigManager::load(dir.path(), &cfg).unwrap();
        assert!(m.get("TBW102").is_some());
        assert_eq!(m.get(reserved::SCHEDULE_TOPIC).unwrap().read_queue_nums, 18);
        let v0 = m.data_version().counter;
        let ch = m.create_on_send("NewTopic", "TBW102", 4, true).unwrap();
        assert_eq!(ch.config.write_queue_nums, 4);
        assert_eq!(ch.config.perm, 6);
        block_on(m.persisted(ch.generation.unwrap())).unwrap();
        assert!(m.data_version().counter > v0);
        assert!(matches!(
            m.create_on_send("Other", "TBW102", 4, false),
            Err(TopicCreateError::NotAllowed(_))
        ));
        m.persist_and_stop();
        drop(m);
        let m = TopicConfigManager::load(dir.path(), &cfg).unwrap();
        assert_eq!(m.get("NewTopic").unwrap().read_queue_nums, 4);
        assert!(m.delete("NewTopic"));
        assert!(m.get("NewTopic").is_none());
    }

    #[test]
    fn trace_topic_enable_creates_the_trace_topic_with_one_queue() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = BrokerConfig::default();
        let m = TopicConfigManager::load(dir.path(), &cfg).unwrap();
        assert!(m.get(reserved::TRACE_TOPIC).is_none());
        m.persist_and_stop();
        drop(m);
        let mut cfg = BrokerConfig::default();
        cfg.set("traceTopicEnable", "true").unwrap();
        let m = TopicConfigManager::load(dir.path(), &cfg).unwrap();
        let t = m.get(reserved::TRACE_TOPIC).unwrap();
        assert_eq!((t.read_queue_nums, t.write_queue_nums), (1, 1));
        m.persist_and_stop();
        drop(m);
        cfg.set("msgTraceTopicName", "MyTraces").unwrap();
        let m = TopicConfigManager::load(dir.path(), &cfg).unwrap();
        assert_eq!(m.get("MyTraces").unwrap().write_queue_nums, 1);
    }

    #[test]
    fn limits_hold() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = BrokerConfig {
            max_topic_count: 12,
            ..BrokerConfig::default()
        };
        let m = TopicConfigManager::load(dir.path(), &cfg).unwrap();
        // A retry topic asked for with two billion queues gets the limit.
        let ch = m
            .create_if_missing("%RETRY%G", 2_000_000_000, perm::READ | perm::WRITE)
            .unwrap();
        assert_eq!(ch.config.read_queue_nums, 1024);
        let mut t = TopicSettings::new("Big", 1);
        t.write_queue_nums = 1025;
        assert!(matches!(
            m.update(t),
            Err(TopicCreateError::QueueCount { .. })
        ));
        assert!(matches!(
            m.update(TopicSettings::new("../x", 1)),
            Err(TopicCreateError::InvalidName(_))
        ));
        let mut made = 0;
        let err = loop {
            match m.create_on_send(&format!("T{made}"), "TBW102", 4, true) {
                Ok(_) => made += 1,
                Err(e) => break e,
            }
        };
        assert!(matches!(err, TopicCreateError::TooMany(12)), "{err:?}");
        assert_eq!(m.len(), 12);
    }

    fn copy_config(from: &Path, to: &Path) {
        std::fs::create_dir_all(to.join("config")).unwrap();
        for e in std::fs::read_dir(from.join("config")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join("config").join(e.file_name())).unwrap();
        }
    }

    /// A creation is durable once acknowledged, through the journal alone:
    /// a copy of the directory taken then (a crash) loads every topic, and
    /// loading folds the journal into topics.json.
    #[test]
    fn creations_survive_a_crash_through_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = BrokerConfig::default();
        let m = TopicConfigManager::load(dir.path(), &cfg).unwrap();
        let before = std::fs::read(dir.path().join("config/topics.json")).unwrap();
        let mut last = 0;
        for i in 0..50 {
            let ch = m
                .create_on_send(&format!("J{i}"), "TBW102", 4, true)
                .unwrap();
            last = ch.generation.unwrap();
        }
        assert!(m.delete("J7"));
        let ch = m.create_on_send("J50", "TBW102", 4, true).unwrap();
        last = last.max(ch.generation.unwrap());
        block_on(m.persisted(last)).unwrap();
        // Acknowledged by an append, not by a rewrite of topics.json.
        let after = std::fs::read(dir.path().join("config/topics.json")).unwrap();
        assert_eq!(before, after);
        let crashed = tempfile::tempdir().unwrap();
        copy_config(dir.path(), crashed.path());
        let live = m.snapshot();
        let r = TopicConfigManager::load(crashed.path(), &cfg).unwrap();
        assert_eq!(r.snapshot(), live, "replay equals the table");
        assert!(r.get("J7").is_none() && r.get("J50").is_some());
        let journal = crate::metadata::topic_journal::topics_journal_path(crashed.path());
        assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0);
        let text = std::fs::read_to_string(crashed.path().join("config/topics.json")).unwrap();
        assert_eq!(TopicsFile::parse(&text).unwrap(), live);
        // A clean stop leaves topics.json complete too.
        m.persist_and_stop();
        let text = std::fs::read_to_string(dir.path().join("config/topics.json")).unwrap();
        assert_eq!(TopicsFile::parse(&text).unwrap(), live);
    }

    #[test]
    fn a_damaged_journal_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = BrokerConfig::default();
        let m = TopicConfigManager::load(dir.path(), &cfg).unwrap();
        for i in 0..3 {
            let ch = m
                .create_on_send(&format!("D{i}"), "TBW102", 4, true)
                .unwrap();
            block_on(m.persisted(ch.generation.unwrap())).unwrap();
        }
        let crashed = tempfile::tempdir().unwrap();
        copy_config(dir.path(), crashed.path());
        let journal = crate::metadata::topic_journal::topics_journal_path(crashed.path());
        let mut bytes = std::fs::read(&journal).unwrap();
        bytes[10] ^= 0x20; // inside the first of three frames
        std::fs::write(&journal, &bytes).unwrap();
        let err = TopicConfigManager::load(crashed.path(), &cfg)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("topics.json.journal") && err.contains("offset 0"),
            "{err}"
        );
        m.persist_and_stop();
    }
}
