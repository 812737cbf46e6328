//! The remoting POP codes (docs/pop.md#remoting): POP_MESSAGE,
//! ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
//! NOTIFICATION and POLLING_INFO, over [`PopService`].

use std::time::Duration;

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use basalt_remoting::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    CommandHeader, NotificationRequestHeader, NotificationResponseHeader, PollingInfoRequestHeader,
    PollingInfoResponseHeader, PopMessageRequestHeader, PopMessageResponseHeader,
};
use bytes::BytesMut;

use super::error;
use crate::pop::batch_ack::BatchAckBody;
use crate::pop::fetch::PopOutcome;
use crate::pop::handle::{ExtraInfo, retry_flag_of};
use crate::pop::{PopError, PopRequest, PopService};

/// The response code and remark for a POP error.
fn pop_error(e: PopError) -> RemotingCommand {
    let code = match &e {
        PopError::TopicNotFound(_) => response::TOPIC_NOT_EXIST,
        PopError::GroupNotFound(_) => response::SUBSCRIPTION_GROUP_NOT_EXIST,
        PopError::Forbidden(_) => response::NO_PERMISSION,
        PopError::BadRequest(_) | PopError::BadHandle(_) => response::INVALID_PARAMETER,
        PopError::HandleExpired | PopError::NotFound => response::NO_MESSAGE,
        PopError::Locked => response::SYSTEM_BUSY,
        PopError::Unavailable(_) => response::SERVICE_NOT_AVAILABLE,
        PopError::Internal(_) => response::SYSTEM_ERROR,
    };
    error(code, e.to_string())
}

/// POP_MESSAGE: pops and answers with the stored records and the header
/// the client derives each message's `POP_CK` from.
pub async fn pop(p: &PopService, req: &RemotingCommand) -> RemotingCommand {
    let h = match PopMessageRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return super::bad_header(e),
    };
    if h.max_msg_nums <= 0 || h.invisible_time <= 0 {
        return error(
            response::INVALID_PARAMETER,
            format!(
                "maxMsgNums {} and invisibleTime {} must be positive",
                h.max_msg_nums, h.invisible_time
            ),
        );
    }
    let poll = h.poll_time.max(0) as u64;
    let r = PopRequest {
        group: h.consumer_group.clone(),
        topic: h.topic.clone(),
        queue_id: (h.queue_id >= 0).then_some(h.queue_id),
        max_messages: h.max_msg_nums as u32,
        invisible: Duration::from_millis(h.invisible_time as u64),
        poll_timeout: Duration::from_millis(poll),
        expression_type: h.exp_type.clone().unwrap_or_default(),
        expression: h.exp.clone().unwrap_or_default(),
        fifo: h.order.unwrap_or(false),
        attempt_id: h.attempt_id.clone(),
    };
    // ConsumeInitMode.MIN is 0.
    match p.pop_batch(&r, h.init_mode == 0).await {
        Ok(out) => pop_response(out, poll > 0),
        Err(e) => pop_error(e),
    }
}

fn pop_response(out: PopOutcome, polled: bool) -> RemotingCommand {
    let mut header = PopMessageResponseHeader {
        pop_time: out.pop_time,
        invisible_time: out.invisible_ms,
        // Order pops' handles carry POP_ORDER_REVIVE_QUEUE.
        revive_qid: if out.orders.is_empty() {
            0
        } else {
            crate::pop::order::ORDER_REVIVE_QID
        },
        rest_num: out.rest,
        ..Default::default()
    };
    if out.messages.is_empty() {
        let code = if polled {
            response::POLLING_TIMEOUT
        } else {
            response::PULL_NOT_FOUND
        };
        return RemotingCommand::response(code, Some("no new message".into()))
            .with_ext(header.to_ext());
    }
    let mut start = Vec::new();
    let mut offsets = Vec::new();
    for (topic, q, so, msgs) in &out.queues {
        let flag = retry_flag_of(topic);
        start.push(format!("{flag} {q} {so}"));
        let list: Vec<String> = msgs.iter().map(|o| o.to_string()).collect();
        offsets.push(format!("{flag} {q} {}", list.join(",")));
    }
    if !out.orders.is_empty() {
        // Per message: `<retryFlag> qo<queueId>%<offset> <earlier deliveries>`
        // (ExtraInfoUtil.buildQueueOffsetOrderCountInfo).
        let counts: Vec<String> = out
            .orders
            .iter()
            .map(|(t, q, o, n)| format!("{} qo{q}%{o} {n}", retry_flag_of(t)))
            .collect();
        header.order_count_info = Some(counts.join(";"));
    }
    header.start_offset_info = Some(start.join(";"));
    header.msg_offset_info = Some(offsets.join(";"));
    let total: usize = out.messages.iter().map(|(_, raw)| raw.len()).sum();
    let mut body = BytesMut::with_capacity(total);
    for (_, raw) in &out.messages {
        body.extend_from_slice(raw);
    }
    let mut resp = RemotingCommand::response(response::SUCCESS, None).with_ext(header.to_ext());
    resp.body = body.freeze();
    resp
}

/// ACK_MESSAGE. An ack of a message no longer in flight (acked already,
/// or revived) is answered with success, as RocketMQ answers it.
pub async fn ack(p: &PopService, req: &RemotingCommand) -> RemotingCommand {
    let h = match AckMessageRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return super::bad_header(e),
    };
    let info = match ExtraInfo::parse(&h.extra_info, Some(h.offset)) {
        Ok(i) => i,
        Err(e) => return pop_error(e),
    };
    match p.ack(&h.consumer_group, &h.topic, &info).await {
        Ok(()) | Err(PopError::NotFound) => RemotingCommand::response(response::SUCCESS, None),
        Err(e) => pop_error(e),
    }
}

/// BATCH_ACK_MESSAGE: the acks of a BatchAckMessageRequestBody; offsets no
/// longer in flight are skipped, as ACK_MESSAGE answers them with success.
pub async fn batch_ack(p: &PopService, req: &RemotingCommand) -> RemotingCommand {
    let body = match BatchAckBody::parse(&req.body) {
        Ok(b) => b,
        Err(e) => return pop_error(e),
    };
    match p.batch_ack(&body).await {
        Ok(_) => RemotingCommand::response(response::SUCCESS, None),
        Err(e) => pop_error(e),
    }
}

/// CHANGE_MESSAGE_INVISIBLETIME: answers with the new checkpoint's times;
/// the client builds the new `POP_CK` from them.
pub async fn change_invisible(p: &PopService, req: &RemotingCommand) -> RemotingCommand {
    let h = match ChangeInvisibleTimeRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return super::bad_header(e),
    };
    if h.invisible_time <= 0 {
        return error(
            response::INVALID_PARAMETER,
            "invisibleTime must be positive",
        );
    }
    let info = match ExtraInfo::parse(&h.extra_info, Some(h.offset)) {
        Ok(i) => i,
        Err(e) => return pop_error(e),
    };
    let invisible = Duration::from_millis(h.invisible_time as u64);
    match p
        .change_invisible(&h.consumer_group, &h.topic, &info, invisible)
        .await
    {
        Ok(new) => {
            let header = ChangeInvisibleTimeResponseHeader {
                pop_time: new.pop_time,
                invisible_time: new.invisible_ms,
                revive_qid: new.revive_qid,
            };
            RemotingCommand::response(response::SUCCESS, None).with_ext(header.to_ext())
        }
        Err(e) => pop_error(e),
    }
}

/// NOTIFICATION: whether the group has something to pop, waiting up to
/// `pollTime` for it.
pub async fn notification(p: &PopService, req: &RemotingCommand) -> RemotingCommand {
    let h = match NotificationRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return super::bad_header(e),
    };
    let queue = (h.queue_id >= 0).then_some(h.queue_id);
    let poll = Duration::from_millis(h.poll_time.max(0) as u64);
    match p
        .wait_for_messages(&h.consumer_group, &h.topic, queue, poll)
        .await
    {
        Ok(has_msg) => RemotingCommand::response(response::SUCCESS, None)
            .with_ext(NotificationResponseHeader { has_msg }.to_ext()),
        Err(e) => pop_error(e),
    }
}

/// POLLING_INFO: Basalt holds pops on wake-ups, not in a counted table;
/// it answers 0 held pops.
pub fn polling_info(req: &RemotingCommand) -> RemotingCommand {
    if let Err(e) = PollingInfoRequestHeader::from_ext(&req.ext_fields) {
        return super::bad_header(e);
    }
    RemotingCommand::response(response::SUCCESS, None)
        .with_ext(PollingInfoResponseHeader { polling_num: 0 }.to_ext())
}

/// Basalt's POP_STATUS: the messages popped and not acked, per group and
/// topic read, and the revive lag, as JSON (docs/pop.md#operations).
pub fn status(p: &PopService) -> RemotingCommand {
    let mut groups: Vec<basalt_remoting::protocol::PopGroupStatus> = p
        .in_flight_by_group()
        .into_iter()
        .map(
            |((group, topic), n)| basalt_remoting::protocol::PopGroupStatus {
                group,
                topic,
                in_flight: n as u64,
            },
        )
        .collect();
    groups.sort_by(|a, b| (&a.group, &a.topic).cmp(&(&b.group, &b.topic)));
    let body = basalt_remoting::protocol::PopStatus {
        in_flight: p.in_flight() as u64,
        revive_lag_ms: p.revive_lag_ms(),
        groups,
    };
    match serde_json::to_vec(&body) {
        Ok(b) => RemotingCommand::response(response::SUCCESS, None).with_body(b),
        Err(e) => error(response::SYSTEM_ERROR, format!("cannot encode: {e}")),
    }
}
