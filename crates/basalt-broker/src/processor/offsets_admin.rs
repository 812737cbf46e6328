//! INVOKE_BROKER_TO_RESET_OFFSET (222): an operator moves a consumer
//! group's offsets on a topic to a point in time (Java
//! `Broker2Client.resetOffset`; docs/protocol.md#operations).

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, ResetOffsetRequestHeader};
use basalt_remoting::protocol::{MessageQueue, ResetOffsetBody};
use basalt_store::BoundaryType;

use super::paths::AdminPath;
use super::{bad_header, checks, error};

/// `timestamp` meaning "the max offset" (`mqadmin skipAccumulatedMessage`).
const TO_MAX_OFFSET: i64 = -1;

/// INVOKE_BROKER_TO_RESET_OFFSET. Each queue of the topic goes to the first
/// message stored at or after `timestamp` (or to the max offset for -1);
/// without `isForce` a queue only ever moves back. The new offsets are
/// stored (consumerOffset.json) and pushed to every online consumer of the
/// group with RESET_CONSUMER_CLIENT_OFFSET; the answer lists them.
pub fn reset_offset(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match ResetOffsetRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::any_topic(&h.topic).and_then(|()| checks::group(&h.group)) {
        return resp;
    }
    if h.queue_id.is_some_and(|q| q >= 0) {
        return error(
            response::SYSTEM_ERROR,
            "resetting a single queue (queueId/offset) is not supported; reset by timestamp",
        );
    }
    if h.timestamp < TO_MAX_OFFSET {
        return error(
            response::SYSTEM_ERROR,
            format!("timestamp {} is neither a time nor -1", h.timestamp),
        );
    }
    let table = match new_offsets(a, &h) {
        Ok(t) => t,
        Err(resp) => return resp,
    };
    for (mq, offset) in &table {
        a.offsets.commit(&h.group, &h.topic, mq.queue_id, *offset);
    }
    let body = ResetOffsetBody {
        offset_table: table,
    }
    .encode();
    let consumers = push_to_consumers(a, &h, &body);
    tracing::info!(group = %h.group, topic = %h.topic, timestamp = h.timestamp,
        force = h.is_force, consumers, "consumer offsets reset");
    RemotingCommand::response(response::SUCCESS, None).with_body(body)
}

/// The offset each queue of the topic moves to.
fn new_offsets(
    a: &AdminPath,
    h: &ResetOffsetRequestHeader,
) -> Result<Vec<(MessageQueue, i64)>, RemotingCommand> {
    let Some(t) = a.topics.get(&h.topic) else {
        return Err(error(
            response::SYSTEM_ERROR,
            format!(
                "[reset-offset] reset offset failed, no topic in this broker. topic={}",
                h.topic
            ),
        ));
    };
    let stored = a.offsets.group_topic(&h.group, &h.topic);
    let online = a
        .clients
        .consumer_group(&h.group)
        .is_some_and(|g| g.subscriptions.contains_key(&h.topic));
    if stored.is_empty() && !online {
        return Err(error(
            response::SYSTEM_ERROR,
            format!("THe consumer group <{}> not exist", h.group),
        ));
    }
    let mut table = Vec::with_capacity(t.write_queue_nums.max(0) as usize);
    for q in 0..t.write_queue_nums.max(0) {
        let target = if h.timestamp == TO_MAX_OFFSET {
            a.store.max_offset_in_queue(&h.topic, q)
        } else {
            a.store
                .offset_in_queue_by_time(&h.topic, q, h.timestamp, BoundaryType::Lower)
        }
        .max(0);
        let offset = match stored.get(&q) {
            Some(&current) if !h.is_force && target >= current => current,
            _ => target,
        };
        let mq = MessageQueue::new(h.topic.clone(), a.config.broker_name.clone(), q);
        table.push((mq, offset));
    }
    Ok(table)
}

/// Sends RESET_CONSUMER_CLIENT_OFFSET (oneway) to every online member of
/// the group; returns how many.
fn push_to_consumers(a: &AdminPath, h: &ResetOffsetRequestHeader, body: &[u8]) -> usize {
    let header = ResetOffsetRequestHeader {
        topic: h.topic.clone(),
        group: h.group.clone(),
        timestamp: h.timestamp,
        is_force: h.is_force,
        queue_id: None,
        offset: None,
    };
    let body = bytes::Bytes::copy_from_slice(body);
    let channels = a.clients.consumer_channels(&h.group);
    for ch in &channels {
        let cmd = RemotingCommand::request(request::RESET_CONSUMER_CLIENT_OFFSET)
            .with_ext(header.to_ext())
            .with_body(body.clone());
        let ch = ch.clone();
        tokio::spawn(async move {
            if let Err(e) = ch.send_oneway(cmd).await {
                tracing::warn!(error = %e, "could not push an offset reset to a consumer");
            }
        });
    }
    channels.len()
}
