//! One PULL_MESSAGE exchange and the processing of its result (Java
//! `PullAPIWrapper`): response code → [`PullStatus`], records → messages,
//! client-side tag re-filtering, `MIN_OFFSET`/`MAX_OFFSET` properties.

use std::time::Duration;

use basalt_common::constants::property;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, PullMessageRequestHeader, PullMessageResponseHeader};
use basalt_remoting::protocol::SubscriptionData;
use bytes::Bytes;

use crate::error::{ClientError, Result};
use crate::filter::matches_tags;
use crate::instance::ClientInstance;
use crate::message::{MessageExt, TopicQueue, fmt_i64, itoa_buf};

/// `PullSysFlag` bits (docs/protocol.md#pull-sys-flags).
pub mod sys_flag {
    /// Store the request's `commitOffset` for the group.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// The broker may hold the request (long polling).
    pub const SUSPEND: i32 = 0x2;
    /// Filter with the request's `subscription` instead of the heartbeat's.
    pub const SUBSCRIPTION: i32 = 0x4;
    pub const CLASS_FILTER: i32 = 0x8;
    pub const LITE_PULL: i32 = 0x10;
}

/// What a pull found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PullStatus {
    /// Messages were returned (possibly all filtered out on the client).
    Found,
    /// Nothing at or after the offset yet (PULL_NOT_FOUND).
    NoNewMsg,
    /// Messages were scanned, none matched the broker-side filter
    /// (PULL_RETRY_IMMEDIATELY).
    NoMatchedMsg,
    /// The offset is outside the queue (PULL_OFFSET_MOVED); continue from
    /// `next_begin_offset`.
    OffsetIllegal,
}

/// The outcome of one pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullResult {
    pub status: PullStatus,
    /// Where the next pull of this queue starts.
    pub next_begin_offset: i64,
    pub min_offset: i64,
    /// The queue's max offset (exclusive).
    pub max_offset: i64,
    /// The messages that passed the tag filter, in queue order.
    pub msgs: Vec<MessageExt>,
}

/// Arguments of one PULL_MESSAGE request.
pub(crate) struct PullArgs<'a> {
    pub group: &'a str,
    pub mq: &'a TopicQueue,
    pub subscription: &'a SubscriptionData,
    /// Send the expression in the request (SUBSCRIPTION flag).
    pub post_subscription: bool,
    pub offset: i64,
    pub max_nums: i32,
    pub max_bytes: Option<i32>,
    /// SUSPEND and COMMIT_OFFSET as wanted; SUBSCRIPTION is set from
    /// `post_subscription`, COMMIT_OFFSET cleared when pulling from a slave.
    pub sys_flag: i32,
    pub commit_offset: i64,
    pub suspend_timeout: Duration,
    pub rpc_timeout: Duration,
    /// PULL_MESSAGE, or LITE_PULL_MESSAGE with the LITE_PULL flag.
    pub lite: bool,
}

/// Sends one pull and turns the answer into a [`PullResult`].
pub(crate) async fn pull(instance: &ClientInstance, args: PullArgs<'_>) -> Result<PullResult> {
    let target = instance.pull_target(args.mq).await?;
    let mut flag = args.sys_flag;
    if args.post_subscription {
        flag |= sys_flag::SUBSCRIPTION;
    }
    if args.lite {
        flag |= sys_flag::LITE_PULL;
    }
    if target.slave {
        flag &= !sys_flag::COMMIT_OFFSET;
    }
    let header = PullMessageRequestHeader {
        consumer_group: args.group.to_string(),
        topic: args.mq.topic.clone(),
        queue_id: args.mq.queue_id,
        queue_offset: args.offset,
        max_msg_nums: args.max_nums,
        sys_flag: flag,
        commit_offset: args.commit_offset,
        suspend_timeout_millis: args.suspend_timeout.as_millis() as i64,
        subscription: args
            .post_subscription
            .then(|| args.subscription.sub_string.clone()),
        sub_version: args.subscription.sub_version,
        expression_type: Some(args.subscription.expression_type.clone()),
        max_msg_bytes: args.max_bytes,
    };
    let code = if args.lite {
        request::LITE_PULL_MESSAGE
    } else {
        request::PULL_MESSAGE
    };
    let mut cmd = instance.request(code).with_ext(header.to_ext());
    // 5.x brokers route by the target broker name (`bname`); older ones ignore it.
    cmd.ext_fields.insert("bname", &args.mq.broker_name);
    let resp = instance.invoke(&target.addr, cmd, args.rpc_timeout).await?;
    let status = match resp.code {
        response::SUCCESS => PullStatus::Found,
        response::PULL_NOT_FOUND => PullStatus::NoNewMsg,
        response::PULL_RETRY_IMMEDIATELY => PullStatus::NoMatchedMsg,
        response::PULL_OFFSET_MOVED => PullStatus::OffsetIllegal,
        code => return Err(ClientError::broker(code, resp.remark, &target.addr)),
    };
    let h = PullMessageResponseHeader::from_ext(&resp.ext_fields)
        .map_err(|e| ClientError::bad_response(&target.addr, e))?;
    instance
        .routes()
        .set_pull_from(args.mq, h.suggest_which_broker_id);
    let raw = RawPull {
        status,
        next_begin_offset: h.next_begin_offset,
        min_offset: h.min_offset,
        max_offset: h.max_offset,
        offset_delta: h.offset_delta,
        body: resp.body,
    };
    Ok(process(raw, args.mq, args.subscription))
}

/// A pull response before its body is decoded.
#[derive(Debug, Clone)]
pub(crate) struct RawPull {
    pub status: PullStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub offset_delta: Option<i64>,
    pub body: Bytes,
}

/// Java's `processPullResult`: decode, re-filter by tag, stamp each message
/// with its queue, broker and the queue's min/max offsets.
pub(crate) fn process(raw: RawPull, mq: &TopicQueue, sub: &SubscriptionData) -> PullResult {
    let mut msgs = Vec::new();
    if raw.status == PullStatus::Found && !raw.body.is_empty() {
        let (decoded, err) = crate::decode::decode_messages(&raw.body);
        if let Some(e) = err {
            tracing::warn!(queue = %mq, error = %e, decoded = decoded.len(),
                "pull body has an undecodable record; keeping the messages before it");
        }
        msgs = decoded;
        msgs.retain(|m| matches_tags(sub, m));
        let mut b1 = itoa_buf();
        let mut b2 = itoa_buf();
        let min = fmt_i64(&mut b1, raw.min_offset);
        let max = fmt_i64(&mut b2, raw.max_offset);
        for m in &mut msgs {
            m.properties.set(property::MIN_OFFSET, min);
            m.properties.set(property::MAX_OFFSET, max);
            m.broker_name.clone_from(&mq.broker_name);
            m.queue_id = mq.queue_id;
            if let Some(d) = raw.offset_delta {
                m.queue_offset += d;
            }
        }
    }
    PullResult {
        status: raw.status,
        next_begin_offset: raw.next_begin_offset,
        min_offset: raw.min_offset,
        max_offset: raw.max_offset,
        msgs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::build_subscription;
    use basalt_common::record::{RecordDraft, stamp};

    fn record(queue_offset: i64, tag: Option<&str>) -> Vec<u8> {
        let props = match tag {
            Some(t) => format!("TAGS\u{1}{t}\u{2}UNIQ_KEY\u{1}U{queue_offset}\u{2}"),
            None => format!("UNIQ_KEY\u{1}U{queue_offset}\u{2}"),
        };
        let draft = RecordDraft {
            topic: "T",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"body",
            properties: props.as_bytes(),
        };
        let mut out = Vec::new();
        draft.encode_into(&mut out).unwrap();
        stamp(&mut out, queue_offset, queue_offset * 100, 2);
        out
    }

    fn raw(records: &[Vec<u8>]) -> RawPull {
        RawPull {
            status: PullStatus::Found,
            next_begin_offset: 13,
            min_offset: 0,
            max_offset: 20,
            offset_delta: None,
            body: Bytes::from(records.concat()),
        }
    }

    #[test]
    fn refilters_by_tag_and_stamps_queue_info() {
        let mq = TopicQueue::new("T", "broker-b", 5);
        let sub = build_subscription("T", "TagA || TagC").unwrap();
        let r = process(
            raw(&[
                record(10, Some("TagA")),
                record(11, Some("TagB")),
                record(12, None),
                record(13, Some("TagC")),
            ]),
            &mq,
            &sub,
        );
        let offsets: Vec<i64> = r.msgs.iter().map(|m| m.queue_offset).collect();
        assert_eq!(offsets, [10, 13]);
        for m in &r.msgs {
            assert_eq!(m.broker_name, "broker-b");
            assert_eq!(m.queue_id, 5);
            assert_eq!(m.property("MIN_OFFSET"), Some("0"));
            assert_eq!(m.property("MAX_OFFSET"), Some("20"));
        }
        assert_eq!(r.next_begin_offset, 13);
    }

    #[test]
    fn star_keeps_untagged_messages_and_delta_shifts_offsets() {
        let mq = TopicQueue::new("T", "b", 0);
        let sub = build_subscription("T", "*").unwrap();
        let mut rp = raw(&[record(1, None), record(2, Some("X"))]);
        rp.offset_delta = Some(100);
        let r = process(rp, &mq, &sub);
        let offsets: Vec<i64> = r.msgs.iter().map(|m| m.queue_offset).collect();
        assert_eq!(offsets, [101, 102]);
    }

    #[test]
    fn non_found_status_has_no_messages() {
        let mq = TopicQueue::new("T", "b", 0);
        let sub = build_subscription("T", "*").unwrap();
        let mut rp = raw(&[record(1, None)]);
        rp.status = PullStatus::NoNewMsg;
        assert!(process(rp, &mq, &sub).msgs.is_empty());
    }
}
