//! The wire side of a send: a message or batch made ready once
//! ([`Prepared`]), the SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE
//! request of each attempt, and the reading of the broker's answer.

use basalt_common::batch::{self, BatchEntry};
use basalt_common::constants::{property, topic as reserved};
use basalt_common::sysflag;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, SendMessageResponseHeader};
use basalt_remoting::{ExtFields, RemotingCommand};
use bytes::Bytes;

use super::{ProducerOptions, SendResult, SendStatus};
use crate::error::{ClientError, Result};
use crate::instance::ClientInstance;
use crate::message::{Message, TopicQueue, fmt_i64, itoa_buf, push_prop};

/// Ext-field keys of a send header: V1 names and V2 short keys (docs/protocol.md#send).
const V1_KEYS: [&str; 14] = [
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "maxReconsumeTimes",
    "batch",
    "bname",
];
const V2_KEYS: [&str; 14] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
];

/// A message (or batch) made ready to send: everything but the queue and
/// the timestamp, which each attempt sets.
pub(super) struct Prepared<'a> {
    pub(super) topic: &'a str,
    /// The client id(s) to report in the result.
    pub(super) msg_ids: String,
    pub(super) properties: String,
    pub(super) body: Bytes,
    pub(super) sys_flag: i32,
    pub(super) flag: i32,
    pub(super) batch: bool,
    pub(super) reconsume_times: i32,
    pub(super) max_reconsume_times: Option<i32>,
}

impl<'a> Prepared<'a> {
    /// One message: properties written with its id, the body compressed
    /// when large enough, retry counts for retry topics.
    pub(super) fn single(
        msg: &'a Message,
        instance: &ClientInstance,
        opts: &ProducerOptions,
    ) -> Result<Self> {
        let uniq = match msg.uniq_key() {
            Some(k) => k.to_string(),
            None => instance.next_uniq_key(),
        };
        let mut properties = String::with_capacity(msg.properties_len_hint());
        msg.write_properties(&uniq, &mut properties);
        if properties.len() > basalt_common::properties::MAX_PROPERTIES_LEN {
            return Err(ClientError::InvalidMessage(format!(
                "the properties take {} bytes, more than {}",
                properties.len(),
                basalt_common::properties::MAX_PROPERTIES_LEN
            )));
        }
        let mut body = msg.body.clone();
        let mut sys_flag = 0;
        if let Some(over) = opts.compress_over
            && body.len() >= over
        {
            match crate::decode::deflate(&body) {
                Ok(packed) if packed.len() < body.len() => {
                    body = Bytes::from(packed);
                    sys_flag |= sysflag::COMPRESSED | ZLIB_COMPRESSION_FLAG;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "compression failed; sending uncompressed")
                }
            }
        }
        let mut reconsume_times = 0;
        let mut max_reconsume_times = None;
        if msg.topic.starts_with(reserved::RETRY_GROUP_PREFIX) {
            if let Some(v) = msg.properties.get(property::RECONSUME_TIME) {
                reconsume_times = v.parse().unwrap_or(0);
            }
            max_reconsume_times = msg
                .properties
                .get(property::MAX_RECONSUME_TIMES)
                .and_then(|v| v.parse().ok());
        }
        Ok(Self {
            topic: &msg.topic,
            msg_ids: uniq,
            properties,
            body,
            sys_flag,
            flag: msg.flag,
            batch: false,
            reconsume_times,
            max_reconsume_times,
        })
    }

    /// A batch: the messages encoded as one body (`MessageBatch`), their
    /// ids comma-separated.
    pub(super) fn batch(
        msgs: &'a [Message],
        instance: &ClientInstance,
        opts: &ProducerOptions,
    ) -> Result<Self> {
        let Some(first) = msgs.first() else {
            return Err(ClientError::InvalidMessage("the batch is empty".into()));
        };
        let mut entries = Vec::with_capacity(msgs.len());
        let mut ids = String::with_capacity(msgs.len() * 33);
        for m in msgs {
            check_batch_member(m, first, opts.max_message_size)?;
            let uniq = match m.uniq_key() {
                Some(k) => k.to_string(),
                None => instance.next_uniq_key(),
            };
            let mut props = String::with_capacity(m.properties_len_hint());
            m.write_properties(&uniq, &mut props);
            if !ids.is_empty() {
                ids.push(',');
            }
            ids.push_str(&uniq);
            entries.push(BatchEntry {
                flag: m.flag,
                body: m.body.clone(),
                properties: Bytes::from(props.into_bytes()),
            });
        }
        let body =
            batch::encode(&entries).map_err(|e| ClientError::InvalidMessage(e.to_string()))?;
        if body.len() > opts.max_message_size {
            return Err(ClientError::InvalidMessage(format!(
                "the batch body of {} bytes exceeds the maximum {}",
                body.len(),
                opts.max_message_size
            )));
        }
        // Batch-level properties: only WAIT. (A 4.9 broker appends these to
        // every message, so a batch-level UNIQ_KEY would replace each
        // message's own id.)
        let mut properties = String::with_capacity(16);
        push_prop(
            &mut properties,
            property::WAIT,
            if first.wait_store_msg_ok {
                "true"
            } else {
                "false"
            },
        );
        Ok(Self {
            topic: &first.topic,
            msg_ids: ids,
            properties,
            body: Bytes::from(body),
            sys_flag: 0,
            flag: 0,
            batch: true,
            reconsume_times: 0,
            max_reconsume_times: None,
        })
    }

    /// The SEND_MESSAGE(_V2) / SEND_BATCH_MESSAGE request of one attempt
    /// to `mq`, stamped now.
    pub(super) fn to_request(
        &self,
        instance: &ClientInstance,
        group: &str,
        opts: &ProducerOptions,
        mq: &TopicQueue,
    ) -> RemotingCommand {
        let p = self;
        let (code, keys) = if p.batch {
            (request::SEND_BATCH_MESSAGE, &V2_KEYS)
        } else if opts.send_smart_msg {
            (request::SEND_MESSAGE_V2, &V2_KEYS)
        } else {
            (request::SEND_MESSAGE, &V1_KEYS)
        };
        let mut ext = ExtFields::with_capacity(14);
        let mut buf = itoa_buf();
        ext.push(keys[0], group);
        ext.push(keys[1], p.topic);
        ext.push(keys[2], &opts.create_topic_key);
        ext.push(
            keys[3],
            fmt_i64(&mut buf, opts.default_topic_queue_nums as i64),
        );
        ext.push(keys[4], fmt_i64(&mut buf, mq.queue_id as i64));
        ext.push(keys[5], fmt_i64(&mut buf, p.sys_flag as i64));
        ext.push(
            keys[6],
            fmt_i64(&mut buf, basalt_common::time::now_millis()),
        );
        ext.push(keys[7], fmt_i64(&mut buf, p.flag as i64));
        ext.push(keys[8], &p.properties);
        ext.push(keys[9], fmt_i64(&mut buf, p.reconsume_times as i64));
        ext.push(keys[10], "false");
        if let Some(max) = p.max_reconsume_times {
            ext.push(keys[11], fmt_i64(&mut buf, max as i64));
        }
        ext.push(keys[12], if p.batch { "true" } else { "false" });
        ext.push(keys[13], &mq.broker_name);
        let mut cmd = instance.request(code);
        cmd.ext_fields = ext;
        cmd.body = p.body.clone();
        cmd
    }
}

/// What each message of a batch must satisfy: a valid message, no delay
/// level, no retry topic, and `first`'s topic and `wait_store_msg_ok`.
fn check_batch_member(m: &Message, first: &Message, max_size: usize) -> Result<()> {
    m.validate(max_size)?;
    if m.delay_level > 0 {
        return Err(ClientError::InvalidMessage(
            "a delay level is not supported in a batch".into(),
        ));
    }
    if m.topic.starts_with(reserved::RETRY_GROUP_PREFIX) {
        return Err(ClientError::InvalidMessage(
            "a retry topic is not supported in a batch".into(),
        ));
    }
    if m.topic != first.topic {
        return Err(ClientError::InvalidMessage(
            "the messages of a batch must share one topic".into(),
        ));
    }
    if m.wait_store_msg_ok != first.wait_store_msg_ok {
        return Err(ClientError::InvalidMessage(
            "the messages of a batch must share waitStoreMsgOK".into(),
        ));
    }
    Ok(())
}

/// `COMPRESSION_ZLIB_TYPE` (3 << 8), set with COMPRESSED since 4.9.4.
const ZLIB_COMPRESSION_FLAG: i32 = 3 << 8;

/// Java's `processSendResponse`: SUCCESS and the three "stored, but" codes
/// give a result; anything else is a broker error.
pub(super) fn process_send_response(
    addr: &str,
    resp: RemotingCommand,
    mq: &TopicQueue,
) -> Result<SendResult> {
    let status = match resp.code {
        response::SUCCESS => SendStatus::SendOk,
        response::FLUSH_DISK_TIMEOUT => SendStatus::FlushDiskTimeout,
        response::FLUSH_SLAVE_TIMEOUT => SendStatus::FlushSlaveTimeout,
        response::SLAVE_NOT_AVAILABLE => SendStatus::SlaveNotAvailable,
        code => return Err(ClientError::broker(code, resp.remark, addr)),
    };
    let header = SendMessageResponseHeader::from_ext(&resp.ext_fields)
        .map_err(|e| ClientError::bad_response(addr, e))?;
    let region_id = resp
        .ext_fields
        .get(property::MSG_REGION)
        .filter(|r| !r.is_empty())
        .unwrap_or("DefaultRegion")
        .to_string();
    let trace_on = resp.ext_fields.get(property::TRACE_ON) != Some("false");
    Ok(SendResult {
        status,
        // The caller moves the ids in (no copy per send).
        msg_id: String::new(),
        offset_msg_id: header.msg_id,
        queue: TopicQueue {
            topic: mq.topic.clone(),
            broker_name: mq.broker_name.clone(),
            queue_id: header.queue_id,
        },
        queue_offset: header.queue_offset,
        transaction_id: header.transaction_id,
        region_id,
        trace_on,
    })
}
