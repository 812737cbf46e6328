//! Messages between the 5.x form (`pb::Message`, system properties apart
//! from user properties) and the store's form (one RocketMQ property
//! string), mapped as RocketMQ's proxy maps them (docs/grpc.md#messages).

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use basalt_common::constants::property as p;
use basalt_common::properties;
use basalt_common::record::StoredMessage;
use basalt_common::sysflag;

use crate::pb::{self, DigestType, Encoding, MessageType};

/// RocketMQ property names the proxy reads or writes besides those of
/// `basalt_common::constants::property`.
pub mod names {
    /// A FIFO message's message group.
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    pub const TRACE_CONTEXT: &str = "TRACE_CONTEXT";
    pub const BORN_HOST: &str = "__BORNHOST";
    pub const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";
    pub const POP_CK: &str = "POP_CK";
    pub const FIRST_POP_TIME: &str = "1ST_POP_TIME";
}

/// Property names a client may not set as user properties, and that are
/// never delivered as such: those the system gives a meaning (RocketMQ's
/// `MessageConst.STRING_HASH_SET`, the ones Basalt knows) and Basalt's own
/// (`BSLT_…`, e.g. the timer copy's `BSLT_TIMER_ORIGIN`).
pub fn is_system_property(name: &str) -> bool {
    const SYSTEM: &[&str] = &[
        p::KEYS,
        p::TAGS,
        p::WAIT,
        p::DELAY,
        p::RETRY_TOPIC,
        p::REAL_TOPIC,
        p::REAL_QID,
        p::TRAN_MSG,
        p::PGROUP,
        p::MIN_OFFSET,
        p::MAX_OFFSET,
        p::UNIQ_KEY,
        p::ORIGIN_MESSAGE_ID,
        p::RECONSUME_TIME,
        p::MAX_RECONSUME_TIMES,
        p::MSG_REGION,
        p::TRACE_ON,
        p::CLUSTER,
        p::TRANSACTION_ID,
        p::CHECK_IMMUNITY_TIME_IN_SECONDS,
        p::TRANSACTION_PREPARED_QUEUE_OFFSET,
        p::TRANSACTION_CHECK_TIMES,
        p::CORRELATION_ID,
        p::REPLY_TO_CLIENT,
        p::MESSAGE_TTL,
        p::MESSAGE_TYPE,
        p::CRC32,
        p::TIMER_DELIVER_MS,
        p::TIMER_DELAY_SEC,
        p::TIMER_DELAY_MS,
        p::START_DELIVER_TIME,
        p::TIMER_OUT_MS,
        p::TIMER_ENQUEUE_MS,
        p::TIMER_DEQUEUE_MS,
        p::TIMER_DEL_UNIQKEY,
        names::SHARDING_KEY,
        names::TRACE_CONTEXT,
        names::BORN_HOST,
        names::BORN_TIMESTAMP,
        names::POP_CK,
        names::FIRST_POP_TIME,
        "INSTANCE_ID",
        "CONSUME_START_TIME",
        "UNIQ_KEY",
        "PROPERTY_TRANSACTION_ID",
    ];
    SYSTEM.contains(&name)
        || name.starts_with(p::TRANSIENT_PREFIX)
        || name.starts_with(BASALT_PREFIX)
}

/// The prefix of the properties Basalt itself adds to stored messages.
const BASALT_PREFIX: &str = "BSLT_";

/// Protobuf timestamp of Unix millis.
pub fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// Unix millis of a protobuf timestamp.
pub fn millis(ts: &prost_types::Timestamp) -> i64 {
    ts.seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(ts.nanos) / 1_000_000)
}

/// A protobuf duration as a [`Duration`] (`None` when negative).
pub fn duration(d: &prost_types::Duration) -> Option<Duration> {
    if d.seconds < 0 || d.nanos < 0 {
        return None;
    }
    Some(Duration::new(d.seconds as u64, d.nanos as u32))
}

/// Protobuf duration of a [`Duration`].
pub fn pb_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// The body as the consumer must see it: a zlib-compressed body (what the
/// remoting clients send, sysFlag COMPRESSED) is inflated, up to `limit`.
/// A body in another compression, or one that does not inflate, is
/// returned as stored (and logged).
fn plain_body(m: &StoredMessage, limit: usize) -> bytes::Bytes {
    if m.sys_flag & sysflag::COMPRESSED == 0 {
        return m.body.clone();
    }
    let kind = (m.sys_flag & sysflag::COMPRESSION_TYPE_MASK) >> 8;
    if kind != 0 && kind != 3 {
        tracing::warn!(kind, topic = %m.topic, "body compressed with a codec Basalt does not inflate; sent as stored");
        return m.body.clone();
    }
    let mut out = Vec::new();
    let inflated = flate2::read::ZlibDecoder::new(&m.body[..])
        .take(limit as u64 + 1)
        .read_to_end(&mut out);
    match inflated {
        Ok(n) if n <= limit => out.into(),
        _ => {
            tracing::warn!(topic = %m.topic, "compressed body does not inflate within the limit; sent as stored");
            m.body.clone()
        }
    }
}

fn host_text(a: SocketAddr) -> String {
    a.ip().to_string()
}

/// What the receive path adds to a stored message to make a 5.x message.
pub struct Delivery<'a> {
    /// The topic the consumer subscribed to.
    pub topic: &'a str,
    pub receipt_handle: &'a str,
    pub delivery_attempt: i32,
    pub invisible: Option<Duration>,
    /// Largest body inflated for the consumer.
    pub body_limit: usize,
}

/// The 5.x message of a stored one.
pub fn to_pb(m: &StoredMessage, d: &Delivery<'_>) -> pb::Message {
    let body = plain_body(m, d.body_limit);
    let mut user = HashMap::new();
    let mut tag = None;
    let mut keys = Vec::new();
    let mut group = None;
    let mut trace = None;
    let mut message_id = None;
    let mut delivery_ms = None;
    let mut transaction = false;
    for (k, v) in properties::iter(&m.properties) {
        let k = String::from_utf8_lossy(k);
        let v = String::from_utf8_lossy(v).into_owned();
        match k.as_ref() {
            p::TAGS => tag = Some(v),
            p::KEYS => {
                keys = v
                    .split(p::KEY_SEPARATOR)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            p::UNIQ_KEY => message_id = Some(v),
            p::TRAN_MSG => transaction = v == "true",
            p::TIMER_DELIVER_MS => delivery_ms = v.parse::<i64>().ok(),
            names::SHARDING_KEY => group = Some(v),
            names::TRACE_CONTEXT => trace = Some(v),
            k if is_system_property(k) => {}
            _ => {
                user.insert(k.into_owned(), v);
            }
        }
    }
    let message_type = if transaction {
        MessageType::Transaction
    } else if group.is_some() {
        MessageType::Fifo
    } else if delivery_ms.is_some() {
        MessageType::Delay
    } else {
        MessageType::Normal
    };
    let system = pb::SystemProperties {
        tag,
        keys,
        message_id: message_id.unwrap_or_else(|| m.offset_msg_id()),
        body_digest: Some(body_digest(&body)),
        body_encoding: Encoding::Identity as i32,
        message_type: message_type as i32,
        born_timestamp: Some(timestamp(m.born_timestamp)),
        born_host: host_text(m.born_host),
        store_timestamp: Some(timestamp(m.store_timestamp)),
        store_host: m.store_host.to_string(),
        delivery_timestamp: delivery_ms.map(timestamp),
        receipt_handle: Some(d.receipt_handle.to_string()),
        queue_id: m.queue_id,
        queue_offset: Some(m.queue_offset),
        invisible_duration: d.invisible.map(pb_duration),
        delivery_attempt: Some(d.delivery_attempt),
        message_group: group,
        trace_context: trace,
        orphaned_transaction_recovery_duration: None,
        dead_letter_queue: None,
    };
    pb::Message {
        topic: Some(pb::Resource {
            resource_namespace: String::new(),
            name: d.topic.to_string(),
        }),
        user_properties: user,
        system_properties: Some(system),
        body: body.to_vec(),
    }
}

/// A delivered body's digest as the proxy sends it: MD5, upper-case hex,
/// 32 digits. The Java, Python and Node.js SDKs check MD5 so; their CRC32
/// checks disagree (unpadded hex in Java, zero-padded in Python, decimal
/// in Node.js). The Go SDK v5.1.2 expects lower case for both, so it marks
/// bodies corrupted against the proxy and Basalt alike.
pub(crate) fn body_digest(body: &[u8]) -> pb::Digest {
    use md5::{Digest, Md5};
    use std::fmt::Write;
    let sum = Md5::digest(body);
    let mut checksum = String::with_capacity(32);
    for b in sum.iter() {
        let _ = write!(checksum, "{b:02X}");
    }
    pb::Digest {
        r#type: DigestType::Md5 as i32,
        checksum,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn body_digest_is_the_proxys_md5() {
        // The Java SDK's own test vector (MessageViewImplTest, "foobar").
        let d = super::body_digest(b"foobar");
        assert_eq!(d.checksum, "3858F62230AC3C915F300C664312C63F");
        assert_eq!(d.r#type, super::DigestType::Md5 as i32);
    }

    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for ms in [0i64, 1, 999, 1000, 1_733_000_000_123, -1] {
            assert_eq!(millis(&timestamp(ms)), ms);
        }
    }

    #[test]
    fn system_names_are_refused_as_user_properties() {
        assert!(is_system_property("UNIQ_KEY"));
        assert!(is_system_property("__SHARDINGKEY"));
        assert!(!is_system_property("orderId"));
        assert!(is_system_property(p::TIMER_ORIGIN), "Basalt's own");
    }
}
