//! The client's message model: [`Message`] (to send), [`MessageExt`] (received)
//! and [`TopicQueue`].

use std::fmt;
use std::net::SocketAddr;

use basalt_common::constants::{property, topic as reserved};
use basalt_common::properties::Properties;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::ClientError;

/// One queue of a topic on one broker group (Java's `MessageQueue`).
///
/// Ordered as Java's `MessageQueue.compareTo` (topic, broker name, queue id),
/// which the rebalance allocation and every queue-keyed `BTreeMap` of the
/// client depend on. The wire type `basalt_remoting::protocol::MessageQueue`
/// has the same fields but orders by broker name first, so the client keeps
/// its own type and converts at the protocol boundary (`From` both ways).
/// Serialized as fastjson writes it: `{"brokerName":…,"queueId":…,"topic":…}`.
#[doc(alias = "MessageQueue")]
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TopicQueue {
    pub topic: String,
    pub broker_name: String,
    pub queue_id: i32,
}

impl TopicQueue {
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        Self {
            topic: topic.into(),
            broker_name: broker_name.into(),
            queue_id,
        }
    }
}

impl fmt::Display for TopicQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            self.topic, self.broker_name, self.queue_id
        )
    }
}

impl Serialize for TopicQueue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("MessageQueue", 3)?;
        st.serialize_field("brokerName", &self.broker_name)?;
        st.serialize_field("queueId", &self.queue_id)?;
        st.serialize_field("topic", &self.topic)?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for TopicQueue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = basalt_remoting::protocol::MessageQueue::deserialize(d)?;
        Ok(w.into())
    }
}

impl From<basalt_remoting::protocol::MessageQueue> for TopicQueue {
    fn from(m: basalt_remoting::protocol::MessageQueue) -> Self {
        Self {
            topic: m.topic,
            broker_name: m.broker_name,
            queue_id: m.queue_id,
        }
    }
}

impl From<TopicQueue> for basalt_remoting::protocol::MessageQueue {
    fn from(m: TopicQueue) -> Self {
        Self::new(m.topic, m.broker_name, m.queue_id)
    }
}

/// A message to send.
///
/// `properties` holds user properties only; tags, keys, delay level and
/// `WAIT` have their own fields and are written as the system properties
/// `TAGS`, `KEYS`, `DELAY` and `WAIT`. A `UNIQ_KEY` property, if present, is
/// kept as the message's id; otherwise the producer generates one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub topic: String,
    pub body: Bytes,
    pub tags: Option<String>,
    pub keys: Vec<String>,
    pub properties: Properties,
    /// User flag, stored as the record's FLAG.
    pub flag: i32,
    /// Delay level (1 = 1 s … 18 = 2 h with the default levels); 0 = none.
    pub delay_level: i32,
    /// Whether the broker should answer only after the message is stored as
    /// its flush and replication settings require (Java default: true).
    pub wait_store_msg_ok: bool,
}

impl Message {
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            body: body.into(),
            tags: None,
            keys: Vec::new(),
            properties: Properties::new(),
            flag: 0,
            delay_level: 0,
            wait_store_msg_ok: true,
        }
    }

    pub fn with_tags(mut self, tags: impl Into<String>) -> Self {
        self.tags = Some(tags.into());
        self
    }

    /// Adds one business key (keys are indexed by the broker).
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    pub fn with_keys<I, K>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        self.keys.extend(keys.into_iter().map(Into::into));
        self
    }

    /// Sets a user property (names RocketMQ reserves are refused at send time).
    pub fn with_property(mut self, name: impl AsRef<str>, value: impl AsRef<str>) -> Self {
        self.properties.set(name, value);
        self
    }

    pub fn with_flag(mut self, flag: i32) -> Self {
        self.flag = flag;
        self
    }

    pub fn with_delay_level(mut self, level: i32) -> Self {
        self.delay_level = level;
        self
    }

    pub fn with_wait_store_msg_ok(mut self, wait: bool) -> Self {
        self.wait_store_msg_ok = wait;
        self
    }

    /// The client message id, once the producer has assigned one (or the
    /// caller set `UNIQ_KEY`).
    pub fn uniq_key(&self) -> Option<&str> {
        self.properties.get(property::UNIQ_KEY)
    }

    /// Checks what `Validators.checkMessage` checks: topic name, sendable
    /// topic, non-empty body within `max_size`, no reserved property names.
    pub fn validate(&self, max_size: usize) -> Result<(), ClientError> {
        basalt_common::topic::validate_topic(&self.topic)
            .map_err(|e| ClientError::InvalidMessage(e.to_string()))?;
        self.validate_content(max_size)
    }

    /// [`Self::validate`] without the topic-name check (done once per topic
    /// on the send path).
    pub(crate) fn validate_content(&self, max_size: usize) -> Result<(), ClientError> {
        if NOT_SENDABLE_TOPICS.contains(&self.topic.as_str()) {
            return Err(ClientError::InvalidMessage(format!(
                "sending to the system topic {} is not allowed",
                self.topic
            )));
        }
        if self.body.is_empty() {
            return Err(ClientError::InvalidMessage(
                "the message body length is zero".into(),
            ));
        }
        if self.body.len() > max_size {
            return Err(ClientError::InvalidMessage(format!(
                "the message body size {} exceeds the maximum {max_size}",
                self.body.len()
            )));
        }
        if let Some((name, _)) = self
            .properties
            .iter()
            .find(|(k, _)| RESERVED_PROPERTIES.contains(k))
        {
            return Err(ClientError::InvalidMessage(format!(
                "the property {name} is reserved by the system"
            )));
        }
        if self.delay_level < 0 {
            return Err(ClientError::InvalidMessage(format!(
                "delay level {} is negative",
                self.delay_level
            )));
        }
        Ok(())
    }

    /// Appends this message's property string: `UNIQ_KEY` (the given id),
    /// `TAGS`, `KEYS`, `WAIT`, `DELAY`, then the other properties.
    pub(crate) fn write_properties(&self, uniq_key: &str, out: &mut String) {
        push_prop(out, property::UNIQ_KEY, uniq_key);
        if let Some(tags) = self.tags.as_deref().filter(|t| !t.is_empty()) {
            push_prop(out, property::TAGS, tags);
        }
        if !self.keys.is_empty() {
            out.push_str(property::KEYS);
            out.push('\u{1}');
            for (i, k) in self.keys.iter().enumerate() {
                if i > 0 {
                    out.push(property::KEY_SEPARATOR);
                }
                out.push_str(k);
            }
            out.push('\u{2}');
        }
        push_prop(
            out,
            property::WAIT,
            if self.wait_store_msg_ok {
                "true"
            } else {
                "false"
            },
        );
        if self.delay_level > 0 {
            let mut buf = itoa_buf();
            push_prop(
                out,
                property::DELAY,
                fmt_i64(&mut buf, self.delay_level as i64),
            );
        }
        for (k, v) in self.properties.iter() {
            if k != property::UNIQ_KEY {
                push_prop(out, k, v);
            }
        }
    }

    /// Rough length of the property string, to size buffers.
    pub(crate) fn properties_len_hint(&self) -> usize {
        64 + self.tags.as_ref().map_or(0, |t| t.len() + 6)
            + self.keys.iter().map(|k| k.len() + 1).sum::<usize>()
            + self
                .properties
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>()
    }
}

/// System topics `Validators` refuses to send to.
const NOT_SENDABLE_TOPICS: &[&str] = &[
    reserved::SCHEDULE_TOPIC,
    reserved::TRANS_HALF_TOPIC,
    reserved::TRANS_OP_HALF_TOPIC,
];

/// Property names with a system meaning; a user may not set them directly.
const RESERVED_PROPERTIES: &[&str] = &[
    property::KEYS,
    property::TAGS,
    property::WAIT,
    property::DELAY,
    property::RETRY_TOPIC,
    property::REAL_TOPIC,
    property::REAL_QID,
    property::TRAN_MSG,
    property::PGROUP,
    property::MIN_OFFSET,
    property::MAX_OFFSET,
    property::ORIGIN_MESSAGE_ID,
    property::RECONSUME_TIME,
    property::MAX_RECONSUME_TIMES,
    property::MSG_REGION,
    property::TRACE_ON,
    property::CLUSTER,
    property::TRANSACTION_ID,
    property::CRC32,
];

pub(crate) fn push_prop(out: &mut String, name: &str, value: &str) {
    out.push_str(name);
    out.push('\u{1}');
    out.push_str(value);
    out.push('\u{2}');
}

pub(crate) type ItoaBuf = [u8; 20];

pub(crate) fn itoa_buf() -> ItoaBuf {
    [0u8; 20]
}

/// Formats `v` in decimal into `buf` without allocating.
pub(crate) fn fmt_i64(buf: &mut ItoaBuf, v: i64) -> &str {
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    // Only ASCII digits and '-' were written.
    std::str::from_utf8(&buf[i..]).unwrap_or("0")
}

/// A received message: the stored record as the broker returned it, plus
/// the queue it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageExt {
    /// Topic (for a retried message delivered to a push consumer: the
    /// original topic, as Java's `resetRetryAndNamespace` does).
    pub topic: String,
    pub queue_id: i32,
    /// ConsumeQueue offset: what consumer offsets count.
    pub queue_offset: i64,
    pub body: Bytes,
    pub tags: Option<String>,
    pub keys: Vec<String>,
    /// Every property of the record (system ones included).
    pub properties: Properties,
    pub flag: i32,
    pub sys_flag: i32,
    /// The client id: `UNIQ_KEY` if the record has one, else the offset msgId.
    pub msg_id: String,
    /// `HEX(store host ‖ physical offset)`: locates the record on its broker.
    pub offset_msg_id: String,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    /// CommitLog physical offset (used by CONSUMER_SEND_MSG_BACK).
    pub commit_log_offset: i64,
    pub prepared_transaction_offset: i64,
    pub body_crc: u32,
    /// Broker group the message was pulled from.
    pub broker_name: String,
    /// `UNIQ_KEY` of a transactional half message.
    pub transaction_id: Option<String>,
}

impl MessageExt {
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name)
    }

    /// The delay level the message was sent with (0 = none).
    pub fn delay_level(&self) -> i32 {
        self.property(property::DELAY)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// `UNIQ_KEY`, the id the producer assigned.
    pub fn uniq_key(&self) -> Option<&str> {
        self.property(property::UNIQ_KEY)
    }

    /// The message queue this message came from.
    pub fn queue(&self) -> TopicQueue {
        TopicQueue::new(self.topic.clone(), self.broker_name.clone(), self.queue_id)
    }

    /// A message to send with the same body, flag and properties (used to
    /// resend a message, e.g. to a retry topic).
    pub(crate) fn to_message(&self, topic: String) -> Message {
        Message {
            topic,
            body: self.body.clone(),
            tags: self.tags.clone(),
            keys: self.keys.clone(),
            properties: self.properties.clone(),
            flag: self.flag,
            delay_level: 0,
            wait_store_msg_ok: self
                .property(property::WAIT)
                .is_none_or(|v| !v.eq_ignore_ascii_case("false")),
        }
    }

    /// A placeholder host for tests.
    #[cfg(test)]
    pub(crate) fn unspecified_host() -> SocketAddr {
        SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_order_like_java() {
        let mut v = [
            TopicQueue::new("b", "broker-a", 0),
            TopicQueue::new("a", "broker-b", 0),
            TopicQueue::new("a", "broker-a", 3),
            TopicQueue::new("a", "broker-a", 1),
        ];
        v.sort();
        let names: Vec<String> = v
            .iter()
            .map(|m| format!("{}/{}/{}", m.topic, m.broker_name, m.queue_id))
            .collect();
        assert_eq!(
            names,
            [
                "a/broker-a/1",
                "a/broker-a/3",
                "a/broker-b/0",
                "b/broker-a/0"
            ]
        );
    }

    #[test]
    fn queue_json_is_fastjson_shaped() {
        let mq = TopicQueue::new("T", "broker-a", 2);
        let json = serde_json::to_string(&mq).unwrap();
        assert_eq!(json, r#"{"brokerName":"broker-a","queueId":2,"topic":"T"}"#);
        let back: TopicQueue = serde_json::from_str(&json).unwrap();
        assert_eq!(back, mq);
    }

    #[test]
    fn properties_string_layout() {
        let m = Message::new("T", "x")
            .with_tags("TagA")
            .with_keys(["k1", "k2"])
            .with_delay_level(3)
            .with_property("color", "red");
        let mut s = String::new();
        m.write_properties("ID1", &mut s);
        assert_eq!(
            s,
            "UNIQ_KEY\u{1}ID1\u{2}TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}WAIT\u{1}true\u{2}\
             DELAY\u{1}3\u{2}color\u{1}red\u{2}"
        );
        let decoded = Properties::decode(s.as_bytes());
        assert_eq!(decoded.get("KEYS"), Some("k1 k2"));
    }

    #[test]
    fn validation_rules() {
        assert!(Message::new("T", "x").validate(10).is_ok());
        assert!(Message::new("T", "").validate(10).is_err());
        assert!(Message::new("T", "x".repeat(11)).validate(10).is_err());
        assert!(Message::new("bad topic", "x").validate(10).is_err());
        assert!(
            Message::new("SCHEDULE_TOPIC_XXXX", "x")
                .validate(10)
                .is_err()
        );
        assert!(
            Message::new("T", "x")
                .with_property("TAGS", "a")
                .validate(10)
                .is_err()
        );
        // A caller-chosen UNIQ_KEY is allowed and kept.
        let m = Message::new("T", "x").with_property("UNIQ_KEY", "MYID");
        assert!(m.validate(10).is_ok());
        let mut s = String::new();
        m.write_properties("MYID", &mut s);
        assert_eq!(s.matches("UNIQ_KEY").count(), 1);
    }

    #[test]
    fn itoa_formats_extremes() {
        let mut b = itoa_buf();
        assert_eq!(fmt_i64(&mut b, 0), "0");
        assert_eq!(fmt_i64(&mut b, -42), "-42");
        assert_eq!(fmt_i64(&mut b, i64::MIN), "-9223372036854775808");
        assert_eq!(fmt_i64(&mut b, i64::MAX), "9223372036854775807");
    }
}
