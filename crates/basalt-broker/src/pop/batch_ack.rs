//! BATCH_ACK_MESSAGE (200151): acks of many popped messages in one request,
//! as RocketMQ's proxy sends them. The body is a BatchAckMessageRequestBody:
//! `{"brokerName": .., "acks": [BatchAck, ..]}`; each BatchAck names one
//! checkpoint (group, topic, retry flag, start offset, queue, revive queue,
//! pop time, invisible time) and a java.util.BitSet of the offsets acked,
//! bit `i` standing for queue offset `startOffset + i`. fastjson writes the
//! BitSet as the base64 of `BitSet.toByteArray()` (little-endian bytes);
//! an array of byte values is taken too.

use serde::Deserialize;
use serde::de::{self, Deserializer};

use super::handle::{ExtraInfo, NORMAL_TOPIC, RETRY_TOPIC};
use super::order::ORDER_REVIVE_QID;
use super::records::{Ack, ReviveRecord};
use super::{PopError, PopService};

/// The most offsets one BatchAck may cover (a BitSet of 8 KiB); more is
/// refused as malformed, never allocated.
pub const MAX_BITSET_BYTES: usize = 8 * 1024;

/// A BATCH_ACK_MESSAGE body.
#[derive(Debug, Deserialize)]
pub struct BatchAckBody {
    #[serde(default, rename = "brokerName")]
    pub broker_name: Option<String>,
    #[serde(default)]
    pub acks: Vec<BatchAck>,
}

/// One checkpoint's acks. Invariant after [`BatchAck::offsets`]: every
/// offset is `start_offset + i` for a set bit `i` below
/// `MAX_BITSET_BYTES * 8`.
#[derive(Debug, Deserialize)]
pub struct BatchAck {
    #[serde(rename = "c", alias = "consumerGroup")]
    pub group: String,
    #[serde(rename = "t", alias = "topic")]
    pub topic: String,
    /// `"1"` when the messages were read from the POP retry topic.
    #[serde(default, rename = "r", alias = "retry")]
    pub retry: Option<String>,
    #[serde(rename = "so", alias = "startOffset")]
    pub start_offset: i64,
    #[serde(rename = "q", alias = "queueId")]
    pub queue_id: i32,
    #[serde(default, rename = "rq", alias = "reviveQueueId")]
    pub revive_queue_id: i32,
    #[serde(rename = "pt", alias = "popTime")]
    pub pop_time: i64,
    #[serde(default, rename = "it", alias = "invisibleTime")]
    pub invisible_time: i64,
    #[serde(
        default,
        rename = "b",
        alias = "bitSet",
        deserialize_with = "bitset_bytes"
    )]
    pub bit_set: Vec<u8>,
}

/// A BitSet as fastjson writes it (base64 text) or as a byte array.
fn bitset_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    use base64::Engine;
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Bytes(Vec<i16>),
    }
    let bytes = match Raw::deserialize(d)? {
        Raw::Text(s) => base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .map_err(|e| de::Error::custom(format!("bitSet is not base64: {e}")))?,
        Raw::Bytes(v) => v
            .into_iter()
            .map(|b| u8::try_from(b & 0xff).map_err(de::Error::custom))
            .collect::<Result<_, _>>()?,
    };
    if bytes.len() > MAX_BITSET_BYTES {
        return Err(de::Error::custom(format!(
            "bitSet of {} bytes, at most {MAX_BITSET_BYTES}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

impl BatchAckBody {
    /// Parses a body; a malformed one is a [`PopError::BadRequest`].
    pub fn parse(body: &[u8]) -> Result<Self, PopError> {
        basalt_remoting::fastjson::from_slice(body)
            .map_err(|e| PopError::BadRequest(format!("bad batch ack body: {e}")))
    }
}

impl BatchAck {
    /// The queue offsets this entry acks, ascending.
    pub fn offsets(&self) -> Result<Vec<i64>, PopError> {
        let mut out = Vec::new();
        for (byte_index, byte) in self.bit_set.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    let i = (byte_index * 8 + bit) as i64;
                    let offset = self.start_offset.checked_add(i).ok_or_else(|| {
                        PopError::BadRequest(format!("startOffset {} overflows", self.start_offset))
                    })?;
                    out.push(offset);
                }
            }
        }
        Ok(out)
    }

    /// The receipt handle of offset `offset` under this entry's checkpoint.
    fn handle(&self, broker_name: &str, offset: i64) -> ExtraInfo {
        let retry = self.retry.as_deref() == Some(RETRY_TOPIC);
        ExtraInfo {
            ck_offset: self.start_offset,
            pop_time: self.pop_time,
            invisible_ms: self.invisible_time,
            revive_qid: self.revive_queue_id,
            retry_flag: if retry { RETRY_TOPIC } else { NORMAL_TOPIC }.to_string(),
            broker_name: broker_name.to_string(),
            queue_id: self.queue_id,
            queue_offset: offset,
        }
    }
}

impl PopService {
    /// BATCH_ACK_MESSAGE: for each entry, one `bAck` record of the offsets
    /// still in flight under its pop time (an offset acked already or
    /// revived is skipped, as a single ack of it answers success). Order
    /// batches are acked offset by offset. Returns how many were acked.
    pub(crate) async fn batch_ack(&self, body: &BatchAckBody) -> Result<usize, PopError> {
        let broker_name = self.config.broker_name.clone();
        let mut acked = 0;
        for entry in &body.acks {
            self.check_target(&entry.group, &entry.topic)?;
            let offsets = entry.offsets()?;
            let Some(first) = offsets.first() else {
                continue;
            };
            let stored = entry
                .handle(&broker_name, *first)
                .stored_topic(&entry.topic, &entry.group);
            if entry.revive_queue_id == ORDER_REVIVE_QID {
                for &o in &offsets {
                    let h = entry.handle(&broker_name, o);
                    match self.ack_ordered(&entry.group, &stored, &h) {
                        Ok(()) => acked += 1,
                        Err(PopError::NotFound) => {}
                        Err(e) => return Err(e),
                    }
                }
                continue;
            }
            self.ensure_loaded().await?;
            let live: Vec<i64> = {
                let state = self.state.lock();
                offsets
                    .into_iter()
                    .filter(|&o| {
                        let key = (entry.group.clone(), stored.clone(), entry.queue_id, o);
                        state
                            .get(&key)
                            .is_some_and(|e| e.pop_time == entry.pop_time)
                    })
                    .collect()
            };
            let Some(&last) = live.last() else { continue };
            acked += live.len();
            let rec = ReviveRecord::Ack(Ack {
                ack_offset: last,
                ack_offsets: live,
                start_offset: entry.start_offset,
                group: entry.group.clone(),
                topic: stored,
                queue_id: entry.queue_id,
                pop_time: entry.pop_time,
                broker_name: broker_name.clone(),
            });
            self.write_record(rec).await?;
        }
        Ok(acked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fastjson_bitsets_and_long_names() {
        // BitSet {0, 2, 9}: toByteArray = [0b101, 0b10] = "BQI=".
        let body = br#"{"brokerName":"b","acks":[{"c":"g","t":"T","r":"0","so":100,"q":3,"rq":0,"pt":5,"it":60000,"b":"BQI="}]}"#;
        let b = BatchAckBody::parse(body).unwrap();
        assert_eq!(b.acks[0].offsets().unwrap(), vec![100, 102, 109]);
        let long = br#"{"acks":[{"consumerGroup":"g","topic":"T","startOffset":7,"queueId":0,"popTime":1,"bitSet":[3]}]}"#;
        let b = BatchAckBody::parse(long).unwrap();
        assert_eq!(b.acks[0].offsets().unwrap(), vec![7, 8]);
        assert!(b.broker_name.is_none());
    }

    #[test]
    fn refuses_what_cannot_be_right() {
        for bad in [
            &br#"{"acks":[{"c":"g","t":"T","so":0,"q":0,"pt":1,"b":"not base64!"}]}"#[..],
            br#"{"acks":[{"t":"T","so":0,"q":0,"pt":1}]}"#,
            br#"{"acks":"x"}"#,
            b"\xff\x00",
        ] {
            assert!(
                BatchAckBody::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let huge = format!(
            r#"{{"acks":[{{"c":"g","t":"T","so":0,"q":0,"pt":1,"b":"{}"}}]}}"#,
            "A".repeat((MAX_BITSET_BYTES + 3) / 3 * 4 + 8)
        );
        assert!(BatchAckBody::parse(huge.as_bytes()).is_err());
        let overflow =
            br#"{"acks":[{"c":"g","t":"T","so":9223372036854775807,"q":0,"pt":1,"b":"Ag=="}]}"#;
        let b = BatchAckBody::parse(overflow).unwrap();
        assert!(b.acks[0].offsets().is_err());
    }
}
