//! SubscriptionGroupManager: consumer group settings (subscriptionGroup.json).

use std::collections::BTreeMap;
use std::path::Path;

use basalt_common::time::now_millis;
use basalt_remoting::protocol::DataVersion;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::config_file::ConfigFile;

/// One group's settings (`SubscriptionGroupConfig`, 4.x fields plus the
/// common 5.x ones), fields in fastjson's alphabetical order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    #[serde(default)]
    pub broker_id: i64,
    #[serde(default = "yes")]
    pub consume_broadcast_enable: bool,
    #[serde(default = "yes")]
    pub consume_enable: bool,
    #[serde(default = "yes")]
    pub consume_from_min_enable: bool,
    #[serde(default)]
    pub consume_message_orderly: bool,
    #[serde(default = "fifteen")]
    pub consume_timeout_minute: i32,
    #[serde(default)]
    pub group_name: String,
    #[serde(default)]
    pub group_sys_flag: i32,
    #[serde(default = "yes")]
    pub notify_consumer_ids_changed_enable: bool,
    #[serde(default = "sixteen")]
    pub retry_max_times: i32,
    #[serde(default = "one")]
    pub retry_queue_nums: i32,
    #[serde(default = "one_i64")]
    pub which_broker_when_consume_slowly: i64,
}

fn yes() -> bool {
    true
}
fn fifteen() -> i32 {
    15
}
fn sixteen() -> i32 {
    16
}
fn one() -> i32 {
    1
}
fn one_i64() -> i64 {
    1
}

impl SubscriptionGroupConfig {
    pub fn new(group: &str) -> Self {
        SubscriptionGroupConfig {
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            consume_timeout_minute: 15,
            group_name: group.to_string(),
            group_sys_flag: 0,
            notify_consumer_ids_changed_enable: true,
            retry_max_times: 16,
            retry_queue_nums: 1,
            which_broker_when_consume_slowly: 1,
        }
    }
}

/// The file's shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupWrapper {
    #[serde(default)]
    pub data_version: DataVersion,
    #[serde(default)]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

/// Owns the group table.
#[derive(Debug)]
pub struct SubscriptionGroupManager {
    file: ConfigFile,
    inner: RwLock<SubscriptionGroupWrapper>,
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
    pub fn load(root: &Path) -> Self {
        let file = ConfigFile::new(root, "subscriptionGroup.json");
        let mut w: SubscriptionGroupWrapper = file
            .load(|t| basalt_remoting::fastjson::from_str(t).map_err(|e| e.to_string()))
            .unwrap_or_else(|| SubscriptionGroupWrapper {
                data_version: DataVersion::new(now_millis()),
                subscription_group_table: BTreeMap::new(),
            });
        for g in SYSTEM_GROUPS {
            w.subscription_group_table
                .entry(g.to_string())
                .or_insert_with(|| SubscriptionGroupConfig::new(g));
        }
        let m = SubscriptionGroupManager {
            file,
            inner: RwLock::new(w),
        };
        m.persist();
        m
    }

    pub fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.inner
            .read()
            .subscription_group_table
            .get(group)
            .cloned()
    }

    /// The group's settings, created with defaults when `auto_create`.
    pub fn get_or_create(&self, group: &str, auto_create: bool) -> Option<SubscriptionGroupConfig> {
        if let Some(g) = self.get(group) {
            return Some(g);
        }
        if !auto_create {
            return None;
        }
        Some(self.update(SubscriptionGroupConfig::new(group)))
    }

    pub fn update(&self, g: SubscriptionGroupConfig) -> SubscriptionGroupConfig {
        {
            let mut w = self.inner.write();
            w.subscription_group_table
                .insert(g.group_name.clone(), g.clone());
            w.data_version.next_version(now_millis());
        }
        self.persist();
        g
    }

    pub fn delete(&self, group: &str) -> bool {
        let removed = self
            .inner
            .write()
            .subscription_group_table
            .remove(group)
            .is_some();
        if removed {
            self.persist();
        }
        removed
    }

    pub fn snapshot(&self) -> SubscriptionGroupWrapper {
        self.inner.read().clone()
    }

    pub fn replace_all(&self, w: SubscriptionGroupWrapper) {
        *self.inner.write() = w;
        self.persist();
    }

    pub fn persist(&self) {
        let json = serde_json::to_string_pretty(&*self.inner.read()).unwrap_or_default();
        if let Err(e) = self.file.save(&json) {
            tracing::error!(error = %e, "cannot persist subscriptionGroup.json");
        }
    }
}
