//! SubscriptionGroupManager: consumer group settings (subscriptionGroup.json).

use std::collections::BTreeMap;
use std::path::Path;

use std::sync::Arc;

use basalt_common::time::now_millis;
use parking_lot::RwLock;

use crate::metadata::file::ConfigFile;
pub use crate::metadata::formats::SubscriptionGroupConfig;
use crate::metadata::formats::{GroupsFile, TableVersion};
use crate::metadata::meta_writer::MetadataWriter;

/// Why a group was not created.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum GroupCreateError {
    #[error("{0}")]
    InvalidName(String),
    #[error("subscription group [{0}] does not exist")]
    NotAllowed(String),
    #[error(
        "this broker already holds {0} subscription groups, the most it may (maxSubscriptionGroupCount)"
    )]
    TooMany(usize),
    #[error("retryQueueNums must be in 1..={max}, got {count} (maxQueueNumsPerTopic)")]
    RetryQueueNums { count: i32, max: i32 },
}

/// Owns the group table (subscriptionGroup.json) and its writer.
/// Invariant: every group in the table has a valid name and a retry queue
/// count within the limit, unless it came from the file or the master.
#[derive(Debug)]
pub struct SubscriptionGroupManager {
    inner: Arc<RwLock<GroupsFile>>,
    writer: MetadataWriter,
    max_groups: usize,
    max_queues: i32,
}

/// Groups every RocketMQ broker knows.
const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER",
    "SELF_TEST_P_GROUP",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL",
    "CID_RMQ_SYS_TRANS",
];

impl SubscriptionGroupManager {
    /// Loads subscriptionGroup.json (or its .bak) and adds the system
    /// groups; writes the file only if that changed it. Blocking.
    pub fn load(root: &Path, max_groups: usize, max_queues: i32) -> Self {
        let file = ConfigFile::new(root, "subscriptionGroup.json");
        let mut w: GroupsFile = file.load(GroupsFile::parse).unwrap_or_else(|| GroupsFile {
            data_version: TableVersion::new(now_millis()),
            subscription_group_table: BTreeMap::new(),
        });
        for g in SYSTEM_GROUPS {
            w.subscription_group_table
                .entry(g.to_string())
                .or_insert_with(|| SubscriptionGroupConfig::new(g));
        }
        let inner = Arc::new(RwLock::new(w));
        let table = Arc::clone(&inner);
        let writer = MetadataWriter::start(file, move || table.read().render());
        if let Err(e) = writer.flush_now() {
            tracing::error!(error = %e, "cannot write subscriptionGroup.json at start");
        }
        SubscriptionGroupManager {
            inner,
            writer,
            max_groups,
            max_queues,
        }
    }

    pub fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.inner
            .read()
            .subscription_group_table
            .get(group)
            .cloned()
    }

    pub fn len(&self) -> usize {
        self.inner.read().subscription_group_table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The group's settings, created with defaults when `auto_create`.
    pub fn get_or_create(
        &self,
        group: &str,
        auto_create: bool,
    ) -> Result<SubscriptionGroupConfig, GroupCreateError> {
        if let Some(g) = self.get(group) {
            return Ok(g);
        }
        if !auto_create {
            return Err(GroupCreateError::NotAllowed(group.to_string()));
        }
        self.update(SubscriptionGroupConfig::new(group))
            .map(|(g, _)| g)
    }

    /// Creates or replaces a group, within the limits. Returns it and the
    /// generation of the write that makes the change durable.
    pub fn update(
        &self,
        g: SubscriptionGroupConfig,
    ) -> Result<(SubscriptionGroupConfig, u64), GroupCreateError> {
        basalt_common::topic::validate_group(&g.group_name)
            .map_err(|e| GroupCreateError::InvalidName(e.to_string()))?;
        if !(1..=self.max_queues).contains(&g.retry_queue_nums) {
            return Err(GroupCreateError::RetryQueueNums {
                count: g.retry_queue_nums,
                max: self.max_queues,
            });
        }
        {
            let mut w = self.inner.write();
            if !w.subscription_group_table.contains_key(&g.group_name)
                && w.subscription_group_table.len() >= self.max_groups
            {
                return Err(GroupCreateError::TooMany(w.subscription_group_table.len()));
            }
            w.subscription_group_table
                .insert(g.group_name.clone(), g.clone());
            w.data_version.next_version(now_millis());
        }
        Ok((g, self.writer.mark_changed()))
    }

    /// Waits until the write for change `generation` is done.
    pub async fn persisted(&self, generation: u64) -> Result<(), String> {
        self.writer.written(generation).await
    }

    pub fn delete(&self, group: &str) -> bool {
        let removed = {
            let mut w = self.inner.write();
            let r = w.subscription_group_table.remove(group).is_some();
            if r {
                w.data_version.next_version(now_millis());
            }
            r
        };
        if removed {
            self.writer.mark_changed();
        }
        removed
    }

    pub fn snapshot(&self) -> GroupsFile {
        self.inner.read().clone()
    }

    pub fn replace_all(&self, w: GroupsFile) {
        *self.inner.write() = w;
        self.writer.mark_changed();
    }

    /// Writes the table now and stops the writer (shutdown). Blocking.
    pub fn persist_and_stop(&self) {
        if let Err(e) = self.writer.flush_now() {
            tracing::error!(error = %e, "cannot persist subscriptionGroup.json");
        }
        self.writer.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_names() {
        let dir = tempfile::tempdir().unwrap();
        let m = SubscriptionGroupManager::load(dir.path(), SYSTEM_GROUPS.len() + 1, 1024);
        assert!(m.get_or_create("G1", true).is_ok());
        assert!(matches!(
            m.get_or_create("G2", true),
            Err(GroupCreateError::TooMany(_))
        ));
        assert!(matches!(
            m.get_or_create("/../Victim", true),
            Err(GroupCreateError::InvalidName(_))
        ));
        let mut g = SubscriptionGroupConfig::new("G1");
        g.retry_queue_nums = 2_000_000_000;
        assert!(matches!(
            m.update(g),
            Err(GroupCreateError::RetryQueueNums { .. })
        ));
        assert!(matches!(
            m.get_or_create("G3", false),
            Err(GroupCreateError::NotAllowed(_))
        ));
        m.persist_and_stop();
        let text =
            std::fs::read_to_string(dir.path().join("config/subscriptionGroup.json")).unwrap();
        assert!(text.contains("\"G1\""), "{text}");
    }
}
