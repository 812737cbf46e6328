//! Admin statistics bodies whose maps fastjson keys by `MessageQueue` objects
//! (docs/protocol.md#fastjson-quirks): ConsumeStats, TopicStatsTable. Also KVTable.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::BodyError;
use super::client::MessageQueue;
use crate::json::{write_i64, write_key, write_str};

/// A consumer group's position in one queue (`OffsetWrapper`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OffsetWrapper {
    #[serde(default)]
    pub broker_offset: i64,
    #[serde(default)]
    pub consumer_offset: i64,
    #[serde(default)]
    pub last_timestamp: i64,
    #[serde(default)]
    pub pull_offset: i64,
}

/// GET_CONSUME_STATS's body (`ConsumeStats`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeStats {
    #[serde(default)]
    pub consume_tps: f64,
    #[serde(default, deserialize_with = "crate::fastjson::mq_map::deserialize")]
    pub offset_table: Vec<(MessageQueue, OffsetWrapper)>,
}

impl ConsumeStats {
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        Ok(crate::fastjson::from_slice(body)?)
    }

    /// fastjson's form, with `MessageQueue` objects as map keys.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.offset_table.len() * 160);
        out.extend_from_slice(b"{\"consumeTps\":");
        let tps = if self.consume_tps.is_finite() {
            self.consume_tps
        } else {
            0.0
        };
        out.extend_from_slice(format!("{tps:?}").as_bytes());
        out.extend_from_slice(b",\"offsetTable\":{");
        for (i, (mq, w)) in self.offset_table.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_mq_key(&mut out, mq);
            out.extend_from_slice(&serde_json::to_vec(w).unwrap_or_default());
        }
        out.extend_from_slice(b"}}");
        out
    }
}

/// One window of a broker stats item (`BrokerStatsItem`): what was
/// counted, per second, and per call.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatsItem {
    #[serde(default)]
    pub sum: u64,
    #[serde(default)]
    pub tps: f64,
    #[serde(default)]
    pub avgpt: f64,
}

/// VIEW_BROKER_STATS_DATA's body (`BrokerStatsData`): one stats item over
/// the last minute, hour and day.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerStatsData {
    #[serde(default)]
    pub stats_minute: BrokerStatsItem,
    #[serde(default)]
    pub stats_hour: BrokerStatsItem,
    #[serde(default)]
    pub stats_day: BrokerStatsItem,
}

impl BrokerStatsData {
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        Ok(crate::fastjson::from_slice(body)?)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// One queue's offsets (`TopicOffset`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicOffset {
    #[serde(default)]
    pub last_update_timestamp: i64,
    #[serde(default)]
    pub max_offset: i64,
    #[serde(default)]
    pub min_offset: i64,
}

/// GET_TOPIC_STATS_INFO's body (`TopicStatsTable`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatsTable {
    #[serde(default, deserialize_with = "crate::fastjson::mq_map::deserialize")]
    pub offset_table: Vec<(MessageQueue, TopicOffset)>,
}

impl TopicStatsTable {
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        Ok(crate::fastjson::from_slice(body)?)
    }

    /// fastjson's form, with `MessageQueue` objects as map keys.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.offset_table.len() * 140);
        out.extend_from_slice(b"{\"offsetTable\":{");
        for (i, (mq, o)) in self.offset_table.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_mq_key(&mut out, mq);
            out.extend_from_slice(&serde_json::to_vec(o).unwrap_or_default());
        }
        out.extend_from_slice(b"}}");
        out
    }
}

fn write_mq_key(out: &mut Vec<u8>, mq: &MessageQueue) {
    out.extend_from_slice(b"{\"brokerName\":");
    write_str(out, &mq.broker_name);
    out.extend_from_slice(b",\"queueId\":");
    write_i64(out, mq.queue_id as i64);
    out.push(b',');
    write_key(out, "topic");
    write_str(out, &mq.topic);
    out.extend_from_slice(b"}:");
}

/// A string table (`KVTable`), e.g. GET_BROKER_RUNTIME_INFO's body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvTable {
    #[serde(default)]
    pub table: BTreeMap<String, String>,
}

/// INVOKE_BROKER_TO_RESET_OFFSET's answer and RESET_CONSUMER_CLIENT_OFFSET's
/// body (`ResetOffsetBody`): the new offset of each queue, keyed by
/// `MessageQueue` objects as fastjson writes them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetOffsetBody {
    #[serde(default, deserialize_with = "crate::fastjson::mq_map::deserialize")]
    pub offset_table: Vec<(MessageQueue, i64)>,
}

impl ResetOffsetBody {
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        Ok(crate::fastjson::from_slice(body)?)
    }

    /// fastjson's form: `{"offsetTable":{{"brokerName":..}:17,...}}`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.offset_table.len() * 80);
        out.extend_from_slice(b"{\"offsetTable\":{");
        for (i, (mq, offset)) in self.offset_table.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_mq_key(&mut out, mq);
            write_i64(&mut out, *offset);
        }
        out.extend_from_slice(b"}}");
        out
    }
}

#[cfg(test)]
mod reset_offset_tests {
    use super::*;

    #[test]
    fn reset_offset_body_round_trips_in_fastjson_form() {
        let body = ResetOffsetBody {
            offset_table: vec![(MessageQueue::new("T", "broker-a", 1), 17)],
        };
        let bytes = body.encode();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:17}}"#
        );
        assert_eq!(ResetOffsetBody::decode(&bytes).unwrap(), body);
    }
}
