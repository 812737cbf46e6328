//! SendMessage and EndTransaction: each 5.x message becomes a remoting
//! SEND_MESSAGE_V2 handled by the broker's own send processor, so every
//! rule of a remoting send holds (limits, permissions, delay and timer
//! routing, half messages), as in RocketMQ's proxy in local mode.

use std::net::SocketAddr;

use basalt_auth::grpc::GrpcIdentity;
use basalt_common::constants::{property as p, topic as reserved};
use basalt_common::{properties, sysflag};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, EndTransactionRequestHeader, SendMessageRequestHeader,
};
use basalt_remoting::{RemotingCommand, RequestProcessor};

use crate::clients::Session;
use crate::convert::{self, names};
use crate::pb::{self, Code, Encoding, MessageType};
use crate::service::Messaging;
use crate::status::{self, status};
use crate::transactions::HalfPlace;

/// Why a message was refused before it reached the broker.
type Refused = pb::Status;

/// The message's body as it is stored: a GZIP body is inflated (the store
/// keeps plain or zlib bodies, which every client can read), up to `limit`.
fn stored_body(m: &pb::Message, limit: usize) -> Result<Vec<u8>, Refused> {
    let encoding = m
        .system_properties
        .as_ref()
        .map_or(Encoding::Identity as i32, |s| s.body_encoding);
    let body = if encoding == Encoding::Gzip as i32 {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&m.body[..])
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| {
                status(
                    Code::MessageCorrupted,
                    format!("GZIP body does not inflate: {e}"),
                )
            })?;
        out
    } else {
        m.body.clone()
    };
    if body.is_empty() {
        return Err(status(
            Code::MessageBodyEmpty,
            "message body cannot be empty",
        ));
    }
    if body.len() > limit {
        return Err(status(
            Code::MessageBodyTooLarge,
            format!("message body cannot exceed the max {limit}"),
        ));
    }
    Ok(body)
}

/// Checks a tag, key or group: no control characters, not blank.
fn plain_text(what: &str, v: &str, code: Code) -> Result<(), Refused> {
    if v.trim().is_empty() {
        return Err(status(code, format!("{what} cannot be empty")));
    }
    if v.chars().any(char::is_control) {
        return Err(status(
            code,
            format!("{what} cannot contain control character"),
        ));
    }
    Ok(())
}

/// The store properties of a 5.x message, and its sysFlag.
fn store_properties(
    m: &pb::Message,
    topic: &str,
    peer: SocketAddr,
) -> Result<(Vec<u8>, i32), Refused> {
    let sp = m.system_properties.clone().unwrap_or_default();
    let mut out = Vec::new();
    for (k, v) in &m.user_properties {
        if convert::is_system_property(k) {
            return Err(status(
                Code::IllegalMessagePropertyKey,
                format!("property is used by system: {k}"),
            ));
        }
        if k.chars().any(char::is_control) || v.chars().any(char::is_control) {
            return Err(status(
                Code::IllegalMessagePropertyKey,
                "property cannot contain control character",
            ));
        }
        if k.is_empty() || v.is_empty() {
            continue;
        }
        properties::append(&mut out, k, v);
    }
    if let Some(tag) = sp.tag.as_deref() {
        plain_text("tag", tag, Code::IllegalMessageTag)?;
        if tag.contains('|') {
            return Err(status(Code::IllegalMessageTag, "tag cannot contain '|'"));
        }
        properties::append(&mut out, p::TAGS, tag);
    }
    for key in &sp.keys {
        plain_text("key", key, Code::IllegalMessageKey)?;
    }
    if !sp.keys.is_empty() {
        properties::append(&mut out, p::KEYS, &sp.keys.join(" "));
    }
    if sp.message_id.trim().is_empty() {
        return Err(status(Code::IllegalMessageId, "message id cannot be empty"));
    }
    properties::append(&mut out, p::UNIQ_KEY, &sp.message_id);
    let mut sys_flag = 0;
    if sp.message_type == MessageType::Transaction as i32 {
        properties::append(&mut out, p::TRAN_MSG, "true");
        sys_flag |= sysflag::TRANSACTION_PREPARED_TYPE;
        if let Some(d) = sp.orphaned_transaction_recovery_duration.as_ref() {
            properties::append(
                &mut out,
                p::CHECK_IMMUNITY_TIME_IN_SECONDS,
                &d.seconds.max(0).to_string(),
            );
        }
    }
    if let Some(at) = sp.delivery_timestamp.as_ref() {
        let ms = convert::millis(at);
        if ms <= 0 {
            return Err(status(
                Code::IllegalDeliveryTime,
                "delivery timestamp must be positive",
            ));
        }
        properties::append(&mut out, p::TIMER_DELIVER_MS, &ms.to_string());
    }
    properties::append(&mut out, p::PGROUP, topic);
    if let Some(g) = sp.message_group.as_deref().filter(|g| !g.is_empty()) {
        plain_text("message group", g, Code::IllegalMessageGroup)?;
        properties::append(&mut out, names::SHARDING_KEY, g);
    }
    if let Some(t) = sp.trace_context.as_deref().filter(|t| !t.is_empty()) {
        properties::append(&mut out, names::TRACE_CONTEXT, t);
    }
    let born_host = if sp.born_host.trim().is_empty() {
        peer.to_string()
    } else {
        sp.born_host.clone()
    };
    properties::append(&mut out, names::BORN_HOST, &born_host);
    if let Some(ts) = sp.born_timestamp.as_ref() {
        properties::append(
            &mut out,
            names::BORN_TIMESTAMP,
            &convert::millis(ts).to_string(),
        );
    }
    if out.len() > properties::MAX_PROPERTIES_LEN {
        return Err(status(
            Code::MessagePropertiesTooLarge,
            "the properties of the message are too large",
        ));
    }
    Ok((out, sys_flag))
}

/// Guava's `Hashing.consistentHash`, which RocketMQ's proxy uses to put a
/// message group on one queue: the same group always lands on the same
/// queue for the same queue count.
fn consistent_hash(input: i64, buckets: i32) -> i32 {
    let mut state = input;
    let mut candidate: i32 = 0;
    loop {
        state = state
            .wrapping_mul(2_862_933_555_777_941_757)
            .wrapping_add(1);
        let d = (((state as u64) >> 33) as i32 as f64 + 1.0) / 2_147_483_648.0;
        let next = ((candidate as f64 + 1.0) / d) as i64;
        if next >= 0 && next < i64::from(buckets) {
            candidate = next as i32;
        } else {
            return candidate;
        }
    }
}

/// Java's `String.hashCode`.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

impl Messaging {
    /// SendMessage: each message in turn; the overall status is their one
    /// code, or MULTIPLE_RESULTS.
    pub async fn send_messages(
        &self,
        session: &Session,
        id: &GrpcIdentity,
        peer: SocketAddr,
        req: pb::SendMessageRequest,
    ) -> pb::SendMessageResponse {
        if req.messages.is_empty() {
            return pb::SendMessageResponse {
                status: Some(status(Code::BadRequest, "no message to send")),
                entries: Vec::new(),
            };
        }
        let topic = req.messages[0]
            .topic
            .as_ref()
            .map(|t| t.name.clone())
            .unwrap_or_default();
        if req
            .messages
            .iter()
            .any(|m| m.topic.as_ref().map(|t| t.name.as_str()) != Some(topic.as_str()))
        {
            return pb::SendMessageResponse {
                status: Some(status(
                    Code::IllegalTopic,
                    "messages of one request must share their topic",
                )),
                entries: Vec::new(),
            };
        }
        let mut entries = Vec::with_capacity(req.messages.len());
        for m in &req.messages {
            entries.push(self.send_one(session, id, peer, &topic, m).await);
        }
        let overall = status::overall(entries.iter().filter_map(|e| e.status.as_ref()));
        pb::SendMessageResponse {
            status: Some(overall),
            entries,
        }
    }

    async fn send_one(
        &self,
        session: &Session,
        id: &GrpcIdentity,
        peer: SocketAddr,
        topic: &str,
        m: &pb::Message,
    ) -> pb::SendResultEntry {
        let failed = |s: pb::Status| pb::SendResultEntry {
            status: Some(s),
            ..Default::default()
        };
        if let Err(e) = basalt_common::topic::validate_topic(topic) {
            return failed(status(Code::IllegalTopic, e.to_string()));
        }
        let Some(cfg) = self.broker.topics().get(topic) else {
            return failed(status(
                Code::TopicNotFound,
                format!("topic {topic} not found"),
            ));
        };
        let limit = self.broker.config().max_message_size;
        let body = match stored_body(m, limit) {
            Ok(b) => b,
            Err(s) => return failed(s),
        };
        let (props, sys_flag) = match store_properties(m, topic, peer) {
            Ok(v) => v,
            Err(s) => return failed(s),
        };
        let sp = m.system_properties.clone().unwrap_or_default();
        let queue_id = match sp.message_group.as_deref().filter(|g| !g.is_empty()) {
            Some(g) if cfg.write_queue_nums > 0 => {
                consistent_hash(i64::from(java_hash(g)), cfg.write_queue_nums)
            }
            _ => -1,
        };
        let header = SendMessageRequestHeader {
            producer_group: topic.to_string(),
            topic: topic.to_string(),
            default_topic: reserved::AUTO_CREATE_TOPIC.to_string(),
            default_topic_queue_nums: 8,
            queue_id,
            sys_flag,
            born_timestamp: sp
                .born_timestamp
                .as_ref()
                .map_or_else(basalt_common::time::now_millis, convert::millis),
            flag: 0,
            properties: Some(String::from_utf8_lossy(&props).into_owned()),
            reconsume_times: Some(0),
            unit_mode: None,
            batch: None,
            max_reconsume_times: None,
            broker_name: None,
        };
        let mut cmd = RemotingCommand::request(request::SEND_MESSAGE_V2)
            .with_ext(header.to_ext_v2())
            .with_body(body);
        id.sign(&mut cmd);
        let Some(resp) = self.processor.process(&session.channel, cmd).await else {
            return failed(status(
                Code::InternalServerError,
                "the broker gave no answer",
            ));
        };
        self.sent_entry(&resp, topic, &sp)
    }

    /// The result entry of one send's remoting answer; a half message's
    /// place is remembered for its EndTransaction.
    fn sent_entry(
        &self,
        resp: &RemotingCommand,
        topic: &str,
        sp: &pb::SystemProperties,
    ) -> pb::SendResultEntry {
        let code = match resp.code {
            response::FLUSH_DISK_TIMEOUT => Some(Code::MasterPersistenceTimeout),
            response::FLUSH_SLAVE_TIMEOUT => Some(Code::SlavePersistenceTimeout),
            response::SLAVE_NOT_AVAILABLE => Some(Code::HaNotAvailable),
            _ => None,
        };
        if let Some(c) = code {
            return pb::SendResultEntry {
                status: Some(status(
                    c,
                    format!(
                        "send message failed, {}",
                        resp.remark.as_deref().unwrap_or("")
                    ),
                )),
                ..Default::default()
            };
        }
        if resp.code != response::SUCCESS {
            return pb::SendResultEntry {
                status: Some(status::from_remoting(resp.code, resp.remark.as_deref())),
                ..Default::default()
            };
        }
        let ext = &resp.ext_fields;
        let offset = ext
            .get("queueOffset")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let transaction_id = ext.get("transactionId").unwrap_or("").to_string();
        if !transaction_id.is_empty() {
            let log_offset = ext
                .get("msgId")
                .and_then(|id| basalt_common::msgid::decode(id).ok())
                .map(|(_, off)| off);
            if let Some(commit_log_offset) = log_offset {
                self.transactions.put(
                    transaction_id.clone(),
                    HalfPlace {
                        producer_group: topic.to_string(),
                        commit_log_offset,
                        tran_state_table_offset: offset,
                    },
                );
            }
        }
        pb::SendResultEntry {
            status: Some(status::ok()),
            message_id: sp.message_id.clone(),
            transaction_id,
            offset,
            recall_handle: String::new(),
        }
    }

    /// EndTransaction: commits or rolls back a half message by its
    /// transaction id, through the broker's END_TRANSACTION.
    pub async fn end_transaction(
        &self,
        session: &Session,
        id: &GrpcIdentity,
        req: pb::EndTransactionRequest,
    ) -> pb::Status {
        let topic = req
            .topic
            .as_ref()
            .map(|t| t.name.clone())
            .unwrap_or_default();
        let commit = match pb::TransactionResolution::try_from(req.resolution) {
            Ok(pb::TransactionResolution::Commit) => sysflag::TRANSACTION_COMMIT_TYPE,
            Ok(pb::TransactionResolution::Rollback) => sysflag::TRANSACTION_ROLLBACK_TYPE,
            _ => {
                return status(
                    Code::BadRequest,
                    "transaction resolution must be COMMIT or ROLLBACK",
                );
            }
        };
        if req.transaction_id.is_empty() {
            return status(Code::InvalidTransactionId, "transaction id cannot be empty");
        }
        let Some(place) = self.transactions.take(&req.transaction_id) else {
            return status(
                Code::InvalidTransactionId,
                format!("no open transaction {} known here", req.transaction_id),
            );
        };
        let header = EndTransactionRequestHeader {
            topic: Some(topic),
            producer_group: place.producer_group.clone(),
            tran_state_table_offset: place.tran_state_table_offset,
            commit_log_offset: place.commit_log_offset,
            commit_or_rollback: commit,
            from_transaction_check: Some(
                req.source == pb::TransactionSource::SourceServerCheck as i32,
            ),
            msg_id: req.message_id.clone(),
            transaction_id: Some(req.transaction_id.clone()),
        };
        let mut cmd = RemotingCommand::request(request::END_TRANSACTION).with_ext(header.to_ext());
        id.sign(&mut cmd);
        match self.processor.process(&session.channel, cmd).await {
            Some(r) if r.code == response::SUCCESS => status::ok(),
            Some(r) => {
                self.transactions.restore(req.transaction_id, place);
                status::from_remoting(r.code, r.remark.as_deref())
            }
            None => status(Code::InternalServerError, "the broker gave no answer"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash() {
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(java_hash("hello"), 99_162_322);
    }

    #[test]
    fn consistent_hash_stays_in_range_and_is_stable() {
        for n in 1..20 {
            for g in ["g1", "order-7", "x"] {
                let b = consistent_hash(i64::from(java_hash(g)), n);
                assert!((0..n).contains(&b));
                assert_eq!(b, consistent_hash(i64::from(java_hash(g)), n));
            }
        }
        assert_eq!(consistent_hash(12345, 1), 0);
    }
}
