//! TopicConfigManager: the topics this broker serves (topics.json).

use std::collections::BTreeMap;
use std::path::Path;

use basalt_common::constants::{perm, topic as reserved};
use basalt_common::time::now_millis;
use basalt_remoting::protocol::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
use parking_lot::RwLock;

use crate::config::BrokerConfig;
use crate::config_file::ConfigFile;

/// Owns the topic table and its data version; every change bumps the
/// version and is persisted before it is visible to NameServer registration.
#[derive(Debug)]
pub struct TopicConfigManager {
    file: ConfigFile,
    inner: RwLock<TopicConfigSerializeWrapper>,
}

impl TopicConfigManager {
    /// Loads topics.json (or its .bak) and adds the broker's system topics.
    pub fn load(root: &Path, cfg: &BrokerConfig) -> Self {
        let file = ConfigFile::new(root, "topics.json");
        let loaded: Option<TopicConfigSerializeWrapper> =
            file.load(|text| basalt_remoting::fastjson::from_str(text).map_err(|e| e.to_string()));
        let mut wrapper = loaded.unwrap_or_else(|| TopicConfigSerializeWrapper {
            data_version: DataVersion::new(now_millis()),
            topic_config_table: BTreeMap::new(),
        });
        let mut system = vec![
            TopicConfig::new(reserved::SELF_TEST_TOPIC, 1),
            TopicConfig::new(reserved::BENCHMARK_TOPIC, 8),
            TopicConfig::new(cfg.broker_cluster_name.clone(), 16),
            TopicConfig::new(cfg.broker_name.clone(), 1),
            TopicConfig::new(reserved::OFFSET_MOVED_EVENT, 1),
            TopicConfig::new(reserved::SCHEDULE_TOPIC, 18),
            TopicConfig::new(format!("{}_REPLY_TOPIC", cfg.broker_cluster_name), 1),
        ];
        if cfg.auto_create_topic_enable {
            let mut t = TopicConfig::new(reserved::AUTO_CREATE_TOPIC, cfg.default_topic_queue_nums);
            t.perm = perm::INHERIT | perm::READ | perm::WRITE;
            system.push(t);
        }
        for t in system {
            wrapper
                .topic_config_table
                .entry(t.topic_name.clone())
                .or_insert(t);
        }
        let m = TopicConfigManager {
            file,
            inner: RwLock::new(wrapper),
        };
        m.persist();
        m
    }

    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.inner.read().topic_config_table.get(topic).cloned()
    }

    pub fn contains(&self, topic: &str) -> bool {
        self.inner.read().topic_config_table.contains_key(topic)
    }

    /// A snapshot of the whole table with its version.
    pub fn snapshot(&self) -> TopicConfigSerializeWrapper {
        self.inner.read().clone()
    }

    pub fn data_version(&self) -> DataVersion {
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

    /// Creates or replaces a topic. Returns the stored config.
    pub fn update(&self, t: TopicConfig) -> TopicConfig {
        {
            let mut w = self.inner.write();
            w.topic_config_table.insert(t.topic_name.clone(), t.clone());
            w.data_version.next_version(now_millis());
        }
        self.persist();
        t
    }

    /// Creates `topic` from the auto-create template `default_topic` when a
    /// producer sends to a topic that does not exist (RocketMQ's
    /// `createTopicInSendMessageMethod`). `None` when not allowed.
    pub fn create_on_send(
        &self,
        topic: &str,
        default_topic: &str,
        queue_nums: i32,
        auto_create: bool,
    ) -> Option<TopicConfig> {
        if let Some(t) = self.get(topic) {
            return Some(t);
        }
        if !auto_create {
            return None;
        }
        let template = self.get(default_topic)?;
        if !perm::is_inherited(template.perm) {
            return None;
        }
        let queues = queue_nums.clamp(1, template.write_queue_nums.max(1));
        let mut t = TopicConfig::new(topic, queues);
        t.perm = template.perm & !perm::INHERIT;
        t.topic_sys_flag = template.topic_sys_flag;
        tracing::info!(topic, queues, "auto-created topic");
        Some(self.update(t))
    }

    /// The retry (or DLQ) topic of a consumer group, created with `queues`
    /// queues and `perm` if missing.
    pub fn create_if_missing(&self, topic: &str, queues: i32, perm_bits: i32) -> TopicConfig {
        if let Some(t) = self.get(topic) {
            return t;
        }
        let mut t = TopicConfig::new(topic, queues);
        t.perm = perm_bits;
        self.update(t)
    }

    /// Removes a topic. Returns whether it existed.
    pub fn delete(&self, topic: &str) -> bool {
        let removed = {
            let mut w = self.inner.write();
            let r = w.topic_config_table.remove(topic).is_some();
            if r {
                w.data_version.next_version(now_millis());
            }
            r
        };
        if removed {
            self.persist();
        }
        removed
    }

    /// Replaces the whole table (a slave copying its master).
    pub fn replace_all(&self, wrapper: TopicConfigSerializeWrapper) {
        *self.inner.write() = wrapper;
        self.persist();
    }

    pub fn persist(&self) {
        let json = {
            let w = self.inner.read();
            serde_json::to_string_pretty(&*w).unwrap_or_default()
        };
        if let Err(e) = self.file.save(&json) {
            tracing::error!(error = %e, "cannot persist topics.json");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_topics_autocreate_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = BrokerConfig::default();
        let m = TopicConfigManager::load(dir.path(), &cfg);
        assert!(m.get("TBW102").is_some());
        assert_eq!(m.get(reserved::SCHEDULE_TOPIC).unwrap().read_queue_nums, 18);
        let v0 = m.data_version().counter;
        let t = m.create_on_send("NewTopic", "TBW102", 4, true).unwrap();
        assert_eq!(t.write_queue_nums, 4);
        assert_eq!(t.perm, 6);
        assert!(m.data_version().counter > v0);
        assert!(m.create_on_send("Other", "TBW102", 4, false).is_none());
        drop(m);
        let m = TopicConfigManager::load(dir.path(), &cfg);
        assert_eq!(m.get("NewTopic").unwrap().read_queue_nums, 4);
        assert!(m.delete("NewTopic"));
        assert!(m.get("NewTopic").is_none());
    }
}
