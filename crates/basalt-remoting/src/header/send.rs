//! Producer send headers (docs/protocol.md#send): one struct for both the V1 (long names,
//! SEND_MESSAGE) and V2 (keys `a`..`n`, SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE) forms.

use super::{CommandHeader, ExtValue, header};
use crate::command::{ExtFields, java_parse_bool};
use crate::error::HeaderError;

/// A send request, whichever key form it arrived in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SendMessageRequestHeader {
    pub producer_group: String,
    pub topic: String,
    pub default_topic: String,
    pub default_topic_queue_nums: i32,
    /// < 0: the broker picks a queue.
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub flag: i32,
    /// The encoded property string (`name\x01value\x02`...).
    pub properties: Option<String>,
    pub reconsume_times: Option<i32>,
    pub unit_mode: Option<bool>,
    /// Whether the body is a batch (see [`batch_flag`]).
    pub batch: Option<bool>,
    pub max_reconsume_times: Option<i32>,
    /// 5.x target broker name (`bname` in V1, `n` in V2).
    pub broker_name: Option<String>,
}

/// (V1 key, V2 key) of each field, in struct order.
const KEYS: [(&str, &str); 14] = [
    ("producerGroup", "a"),
    ("topic", "b"),
    ("defaultTopic", "c"),
    ("defaultTopicQueueNums", "d"),
    ("queueId", "e"),
    ("sysFlag", "f"),
    ("bornTimestamp", "g"),
    ("flag", "h"),
    ("properties", "i"),
    ("reconsumeTimes", "j"),
    ("unitMode", "k"),
    ("maxReconsumeTimes", "l"),
    ("batch", "m"),
    ("bname", "n"),
];

impl SendMessageRequestHeader {
    /// Parses the V2 short-key form.
    pub fn from_ext_v2(ext: &ExtFields) -> Result<Self, HeaderError> {
        Self::read(ext, 1)
    }

    /// Parses the V1 long-name form.
    pub fn from_ext_v1(ext: &ExtFields) -> Result<Self, HeaderError> {
        Self::read(ext, 0)
    }

    /// Flattens into the V2 short-key form (for SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE).
    pub fn to_ext_v2(&self) -> ExtFields {
        self.write(1)
    }

    /// Flattens into the V1 long-name form (for SEND_MESSAGE).
    pub fn to_ext_v1(&self) -> ExtFields {
        self.write(0)
    }

    fn read(ext: &ExtFields, form: usize) -> Result<Self, HeaderError> {
        let k = |i: usize| -> &'static str {
            let pair: (&'static str, &'static str) = KEYS[i];
            if form == 0 { pair.0 } else { pair.1 }
        };
        Ok(Self {
            producer_group: ExtValue::read(ext, k(0))?,
            topic: ExtValue::read(ext, k(1))?,
            default_topic: ExtValue::read(ext, k(2))?,
            default_topic_queue_nums: ExtValue::read(ext, k(3))?,
            queue_id: ExtValue::read(ext, k(4))?,
            sys_flag: ExtValue::read(ext, k(5))?,
            born_timestamp: ExtValue::read(ext, k(6))?,
            flag: ExtValue::read(ext, k(7))?,
            properties: ExtValue::read(ext, k(8))?,
            reconsume_times: ExtValue::read(ext, k(9))?,
            unit_mode: ExtValue::read(ext, k(10))?,
            max_reconsume_times: ExtValue::read(ext, k(11))?,
            batch: ext.get(k(12)).map(batch_flag),
            broker_name: ExtValue::read(ext, k(13))?,
        })
    }

    fn write(&self, form: usize) -> ExtFields {
        let k = |i: usize| -> &'static str {
            let pair: (&'static str, &'static str) = KEYS[i];
            if form == 0 { pair.0 } else { pair.1 }
        };
        let mut ext = ExtFields::with_capacity(KEYS.len());
        self.producer_group.write(&mut ext, k(0));
        self.topic.write(&mut ext, k(1));
        self.default_topic.write(&mut ext, k(2));
        self.default_topic_queue_nums.write(&mut ext, k(3));
        self.queue_id.write(&mut ext, k(4));
        self.sys_flag.write(&mut ext, k(5));
        self.born_timestamp.write(&mut ext, k(6));
        self.flag.write(&mut ext, k(7));
        self.properties.write(&mut ext, k(8));
        self.reconsume_times.write(&mut ext, k(9));
        self.unit_mode.write(&mut ext, k(10));
        self.max_reconsume_times.write(&mut ext, k(11));
        self.batch.write(&mut ext, k(12));
        self.broker_name.write(&mut ext, k(13));
        ext
    }
}

/// Reads the `batch` flag: `true` in any case (Java's `parseBoolean`) or
/// `1`. The C++ client 2.0 (and the Python, Node.js and older Go clients
/// built on it) prints its boolean as a digit; reading "1" as false, as Java
/// does, would store a whole batch as one broken message. Other boolean
/// header fields keep Java's rule.
pub fn batch_flag(v: &str) -> bool {
    java_parse_bool(v) || v.trim() == "1"
}

impl CommandHeader for SendMessageRequestHeader {
    /// Accepts either form: the V2 keys when the short topic key `b` is
    /// present, the V1 names otherwise.
    fn from_ext(ext: &ExtFields) -> Result<Self, HeaderError> {
        if ext.contains_key("b") {
            Self::from_ext_v2(ext)
        } else {
            Self::from_ext_v1(ext)
        }
    }

    /// The V1 long-name form; use [`Self::to_ext_v2`] for SEND_MESSAGE_V2.
    fn to_ext(&self) -> ExtFields {
        self.to_ext_v1()
    }
}

header! {
    /// Send response header. The broker also adds `MSG_REGION` and `TRACE_ON`
    /// to the ext fields (the Java client reads them without a null check).
    pub struct SendMessageResponseHeader {
        /// Offset msgId(s), comma-separated for a batch.
        msg_id: String = "msgId",
        queue_id: i32 = "queueId",
        queue_offset: i64 = "queueOffset",
        transaction_id: Option<String> = "transactionId",
        batch_uniq_id: Option<String> = "batchUniqId",
    }
}
