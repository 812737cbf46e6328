//! topics.json: one [`TopicSettings`] per topic.

use std::collections::BTreeMap;

use basalt_common::constants::perm;
use basalt_remoting::protocol::{TopicConfig, TopicConfigSerializeWrapper, TopicFilterType};
use serde::{Deserialize, Serialize};

use super::TableVersion;

/// How a topic's messages carry tags (`topicFilterType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TagMode {
    #[default]
    #[serde(rename = "SINGLE_TAG")]
    SingleTag,
    #[serde(rename = "MULTI_TAG")]
    MultiTag,
}

/// One topic as this broker keeps it (a row of topics.json).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicSettings {
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub order: bool,
    #[serde(default = "read_write")]
    pub perm: i32,
    #[serde(default = "sixteen")]
    pub read_queue_nums: i32,
    #[serde(default)]
    pub topic_filter_type: TagMode,
    #[serde(default)]
    pub topic_name: String,
    #[serde(default)]
    pub topic_sys_flag: i32,
    #[serde(default = "sixteen")]
    pub write_queue_nums: i32,
}

fn read_write() -> i32 {
    perm::READ | perm::WRITE
}

fn sixteen() -> i32 {
    16
}

impl TopicSettings {
    /// A read-write topic with `queues` read and write queues.
    pub fn new(name: impl Into<String>, queues: i32) -> Self {
        TopicSettings {
            attributes: BTreeMap::new(),
            order: false,
            perm: read_write(),
            read_queue_nums: queues,
            topic_filter_type: TagMode::SingleTag,
            topic_name: name.into(),
            topic_sys_flag: 0,
            write_queue_nums: queues,
        }
    }

    pub fn to_wire(&self) -> TopicConfig {
        TopicConfig {
            attributes: self.attributes.clone(),
            order: self.order,
            perm: self.perm,
            read_queue_nums: self.read_queue_nums,
            topic_filter_type: match self.topic_filter_type {
                TagMode::SingleTag => TopicFilterType::SingleTag,
                TagMode::MultiTag => TopicFilterType::MultiTag,
            },
            topic_name: self.topic_name.clone(),
            topic_sys_flag: self.topic_sys_flag,
            write_queue_nums: self.write_queue_nums,
        }
    }

    pub fn from_wire(t: &TopicConfig) -> Self {
        TopicSettings {
            attributes: t.attributes.clone(),
            order: t.order,
            perm: t.perm,
            read_queue_nums: t.read_queue_nums,
            topic_filter_type: match t.topic_filter_type {
                TopicFilterType::MultiTag => TagMode::MultiTag,
                _ => TagMode::SingleTag,
            },
            topic_name: t.topic_name.clone(),
            topic_sys_flag: t.topic_sys_flag,
            write_queue_nums: t.write_queue_nums,
        }
    }
}

/// topics.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TopicsFile {
    #[serde(default)]
    pub data_version: TableVersion,
    #[serde(default)]
    pub topic_config_table: BTreeMap<String, TopicSettings>,
}

impl TopicsFile {
    /// The file's text, as Basalt writes it.
    pub fn render(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads the file's text (also files RocketMQ wrote).
    pub fn parse(text: &str) -> Result<Self, String> {
        basalt_remoting::fastjson::from_str(text).map_err(|e| e.to_string())
    }

    /// The table as the wire carries it (registration, GET_ALL_TOPIC_CONFIG).
    pub fn to_wire(&self) -> TopicConfigSerializeWrapper {
        TopicConfigSerializeWrapper {
            data_version: self.data_version.to_wire(),
            topic_config_table: self
                .topic_config_table
                .iter()
                .map(|(k, v)| (k.clone(), v.to_wire()))
                .collect(),
        }
    }

    /// A table received over the wire (a slave copying its master).
    pub fn from_wire(w: &TopicConfigSerializeWrapper) -> Self {
        TopicsFile {
            data_version: TableVersion::from_wire(&w.data_version),
            topic_config_table: w
                .topic_config_table
                .iter()
                .map(|(k, v)| (k.clone(), TopicSettings::from_wire(v)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// topics.json exactly as Basalt writes it; a change here changes every
    /// broker's file on disk.
    const TOPICS_GOLDEN: &str = r#"{
  "dataVersion": {
    "counter": 3,
    "stateVersion": 0,
    "timestamp": 1700000000000
  },
  "topicConfigTable": {
    "Orders": {
      "attributes": {},
      "order": false,
      "perm": 6,
      "readQueueNums": 8,
      "topicFilterType": "SINGLE_TAG",
      "topicName": "Orders",
      "topicSysFlag": 0,
      "writeQueueNums": 8
    },
    "Tagged": {
      "attributes": {
        "+message.type": "NORMAL"
      },
      "order": true,
      "perm": 4,
      "readQueueNums": 2,
      "topicFilterType": "MULTI_TAG",
      "topicName": "Tagged",
      "topicSysFlag": 1,
      "writeQueueNums": 4
    }
  }
}"#;

    fn sample() -> TopicsFile {
        let mut tagged = TopicSettings::new("Tagged", 2);
        tagged.write_queue_nums = 4;
        tagged.perm = 4;
        tagged.order = true;
        tagged.topic_sys_flag = 1;
        tagged.topic_filter_type = TagMode::MultiTag;
        tagged
            .attributes
            .insert("+message.type".into(), "NORMAL".into());
        TopicsFile {
            data_version: TableVersion {
                counter: 3,
                state_version: 0,
                timestamp: 1_700_000_000_000,
            },
            topic_config_table: [
                ("Orders".to_string(), TopicSettings::new("Orders", 8)),
                ("Tagged".to_string(), tagged),
            ]
            .into_iter()
            .collect(),
        }
    }

    #[test]
    fn topics_file_golden() {
        assert_eq!(sample().render(), TOPICS_GOLDEN);
        assert_eq!(TopicsFile::parse(TOPICS_GOLDEN).unwrap(), sample());
    }

    #[test]
    fn topics_file_written_by_rocketmq_reads() {
        // Java's fastjson: compact, a field Basalt does not know.
        let java = r#"{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,"readable":true,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}"#;
        let f = TopicsFile::parse(java).unwrap();
        assert_eq!(f.topic_config_table["T"].read_queue_nums, 4);
        assert_eq!(f.data_version.counter, 1);
    }

    #[test]
    fn wire_round_trip() {
        let f = sample();
        assert_eq!(TopicsFile::from_wire(&f.to_wire()), f);
    }
}
