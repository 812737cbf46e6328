//! subscriptionGroup.json: one [`SubscriptionGroupConfig`] per group.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::TableVersion;

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

/// subscriptionGroup.json (also the body of GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
/// which a slave copies).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupsFile {
    #[serde(default)]
    pub data_version: TableVersion,
    #[serde(default)]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

impl GroupsFile {
    /// The file's text, as Basalt writes it.
    pub fn render(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads the file's text (also files RocketMQ wrote).
    pub fn parse(text: &str) -> Result<Self, String> {
        basalt_remoting::fastjson::from_str(text).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUPS_GOLDEN: &str = r#"{
  "dataVersion": {
    "counter": 2,
    "stateVersion": 0,
    "timestamp": 1700000000000
  },
  "subscriptionGroupTable": {
    "Billing": {
      "brokerId": 0,
      "consumeBroadcastEnable": true,
      "consumeEnable": true,
      "consumeFromMinEnable": true,
      "consumeMessageOrderly": false,
      "consumeTimeoutMinute": 15,
      "groupName": "Billing",
      "groupSysFlag": 0,
      "notifyConsumerIdsChangedEnable": true,
      "retryMaxTimes": 3,
      "retryQueueNums": 1,
      "whichBrokerWhenConsumeSlowly": 1
    }
  }
}"#;

    #[test]
    fn groups_file_golden() {
        let mut g = SubscriptionGroupConfig::new("Billing");
        g.retry_max_times = 3;
        let f = GroupsFile {
            data_version: TableVersion {
                counter: 2,
                state_version: 0,
                timestamp: 1_700_000_000_000,
            },
            subscription_group_table: [("Billing".to_string(), g)].into_iter().collect(),
        };
        assert_eq!(f.render(), GROUPS_GOLDEN);
        assert_eq!(GroupsFile::parse(GROUPS_GOLDEN).unwrap(), f);
    }
}
