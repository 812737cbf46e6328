//! The records of the revive log: checkpoints (CK) and acks, stored as
//! JSON bodies of messages in queue 0 of `rmq_sys_REVIVE_LOG_<cluster>`
//! (docs/pop.md#revive-log). Field names are those of RocketMQ's
//! PopCheckPoint and AckMsg / BatchAckMsg JSON.

use serde::{Deserialize, Serialize};

/// TAGS of a checkpoint record (PopAckConstants.CK_TAG).
pub const CK_TAG: &str = "ck";
/// TAGS of a single ack (PopAckConstants.ACK_TAG).
pub const ACK_TAG: &str = "ack";
/// TAGS of an ack of several offsets (PopAckConstants.BATCH_ACK_TAG).
pub const BATCH_ACK_TAG: &str = "bAck";

/// The revive topic of a cluster.
pub fn revive_topic(cluster: &str) -> String {
    format!("rmq_sys_REVIVE_LOG_{cluster}")
}

/// The group whose offset on the revive topic records where a rebuild of
/// the in-flight table starts (PopAckConstants.REVIVE_GROUP).
pub const REVIVE_GROUP: &str = "CID_RMQ_SYS_REVIVE_GROUP";

/// A checkpoint: messages of one queue, popped at `pt`, invisible until
/// `pt + it`. The message offsets are `so + d[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckPoint {
    #[serde(rename = "so")]
    pub start_offset: i64,
    #[serde(rename = "pt")]
    pub pop_time: i64,
    #[serde(rename = "it")]
    pub invisible_time: i64,
    #[serde(rename = "n")]
    pub num: u32,
    #[serde(rename = "q")]
    pub queue_id: i32,
    /// The topic the messages were read from (the topic or its retry topic).
    #[serde(rename = "t")]
    pub topic: String,
    #[serde(rename = "c")]
    pub group: String,
    #[serde(rename = "d")]
    pub offset_diffs: Vec<i64>,
    #[serde(rename = "bn", default)]
    pub broker_name: String,
}

impl CheckPoint {
    /// Queue offsets of the checkpoint's messages.
    pub fn offsets(&self) -> impl Iterator<Item = i64> + '_ {
        self.offset_diffs.iter().map(|d| self.start_offset + d)
    }
}

/// An ack of one (`ao`) or several (`aol`) messages of the checkpoint
/// popped at `pt`. Also written by the revive service for the messages it
/// has put back, so a rebuild does not revive them twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    #[serde(rename = "ao", default)]
    pub ack_offset: i64,
    #[serde(rename = "aol", default, skip_serializing_if = "Vec::is_empty")]
    pub ack_offsets: Vec<i64>,
    #[serde(rename = "so")]
    pub start_offset: i64,
    #[serde(rename = "c")]
    pub group: String,
    #[serde(rename = "t")]
    pub topic: String,
    #[serde(rename = "q")]
    pub queue_id: i32,
    #[serde(rename = "pt")]
    pub pop_time: i64,
    #[serde(rename = "bn", default)]
    pub broker_name: String,
}

impl Ack {
    /// Every offset the ack covers.
    pub fn offsets(&self) -> Vec<i64> {
        if self.ack_offsets.is_empty() {
            vec![self.ack_offset]
        } else {
            self.ack_offsets.clone()
        }
    }
}

/// One parsed record of the revive log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviveRecord {
    Ck(CheckPoint),
    Ack(Ack),
}

impl ReviveRecord {
    /// Its TAGS and JSON body.
    pub fn encode(&self) -> (&'static str, Vec<u8>) {
        match self {
            // Serializing plain structs of strings and numbers cannot fail.
            ReviveRecord::Ck(c) => (CK_TAG, serde_json::to_vec(c).unwrap_or_default()),
            ReviveRecord::Ack(a) if a.ack_offsets.is_empty() => {
                (ACK_TAG, serde_json::to_vec(a).unwrap_or_default())
            }
            ReviveRecord::Ack(a) => (BATCH_ACK_TAG, serde_json::to_vec(a).unwrap_or_default()),
        }
    }

    /// Parses a record from its TAGS and body; `None` for what is not one
    /// (a damaged or foreign message is skipped, never fatal).
    pub fn decode(tag: &[u8], body: &[u8]) -> Option<Self> {
        match tag {
            b"ck" => serde_json::from_slice(body).ok().map(ReviveRecord::Ck),
            b"ack" | b"bAck" => serde_json::from_slice(body).ok().map(ReviveRecord::Ack),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let ck = ReviveRecord::Ck(CheckPoint {
            start_offset: 10,
            pop_time: 1,
            invisible_time: 2,
            num: 2,
            queue_id: 3,
            topic: "T".into(),
            group: "G".into(),
            offset_diffs: vec![0, 2],
            broker_name: "b".into(),
        });
        let (tag, body) = ck.encode();
        assert_eq!(
            ReviveRecord::decode(tag.as_bytes(), &body),
            Some(ck.clone())
        );
        if let ReviveRecord::Ck(c) = ck {
            assert_eq!(c.offsets().collect::<Vec<_>>(), vec![10, 12]);
        }
        let ack = ReviveRecord::Ack(Ack {
            ack_offset: 0,
            ack_offsets: vec![4, 5],
            start_offset: 4,
            group: "G".into(),
            topic: "T".into(),
            queue_id: 0,
            pop_time: 1,
            broker_name: String::new(),
        });
        let (tag, body) = ack.encode();
        assert_eq!(tag, BATCH_ACK_TAG);
        assert_eq!(ReviveRecord::decode(tag.as_bytes(), &body), Some(ack));
        assert_eq!(ReviveRecord::decode(b"ck", b"{oops"), None);
    }
}
