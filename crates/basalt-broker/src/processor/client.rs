//! Client membership and offsets: HEART_BEAT, UNREGISTER_CLIENT,
//! GET_CONSUMER_LIST_BY_GROUP, consumer offsets, queue offsets, queue locks
//! (docs/protocol.md#heartbeat, docs/protocol.md#offsets, docs/protocol.md#queue-locks).

use std::time::Instant;

use basalt_common::constants::perm;
use basalt_remoting::code::response;
use basalt_remoting::header::{
    CommandHeader, GetConsumerListByGroupRequestHeader, GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    OffsetResponseHeader, QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader,
    UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use basalt_remoting::protocol::{
    CheckClientRequestBody, ConsumerListBody, HeartbeatData, LockBatchRequestBody,
    LockBatchResponseBody,
};
use basalt_remoting::{Channel, RemotingCommand};
use basalt_store::BoundaryType;

use super::paths::ClientPath;
use super::{bad_header, checks, error};
use crate::clients::registry::ClientChannel;
use crate::filter::{SubscriptionFilter, is_tag_type};
use crate::metadata::groups::GroupCreateError;

fn ok() -> RemotingCommand {
    RemotingCommand::response(response::SUCCESS, None)
}

fn offset_response(offset: i64) -> RemotingCommand {
    ok().with_ext(OffsetResponseHeader { offset }.to_ext())
}

/// HEART_BEAT. A group's first heartbeat creates its retry topic, which is
/// registered with the NameServers before the answer (as in RocketMQ).
pub async fn heartbeat(
    c: &ClientPath,
    channel: &Channel,
    req: &RemotingCommand,
) -> RemotingCommand {
    let data: HeartbeatData = match basalt_remoting::fastjson::from_slice(&req.body) {
        Ok(d) => d,
        Err(e) => return error(response::SYSTEM_ERROR, format!("bad heartbeat body: {e}")),
    };
    if let Err(resp) = check_heartbeat(&data) {
        return resp;
    }
    let now = Instant::now();
    for cd in data.consumer_data_set {
        let g = match c
            .groups
            .get_or_create(&cd.group_name, c.live.auto_create_subscription_group())
        {
            Ok(g) => g,
            Err(GroupCreateError::NotAllowed(_)) => continue,
            Err(e) => return error(response::SYSTEM_ERROR, e.to_string()),
        };
        if c.replication.is_writable() {
            let retry = basalt_common::topic::retry_topic(&cd.group_name);
            let created =
                c.topics
                    .create_if_missing(&retry, g.retry_queue_nums, perm::READ | perm::WRITE);
            let published = match created {
                Ok(change) => c.registrar.publish_topic_change(&change).await,
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = published {
                return error(response::SYSTEM_ERROR, e);
            }
        }
        let changed = c.clients.register_consumer(
            &cd.group_name,
            ClientChannel {
                channel: channel.clone(),
                client_id: data.client_id.clone(),
                last_update: now,
            },
            cd.consume_type,
            cd.message_model,
            cd.consume_from_where,
            cd.subscription_data_set,
        );
        if changed {
            tracing::info!(group = %cd.group_name, client = %data.client_id, "consumer group changed");
            c.notify_consumer_ids_changed(&cd.group_name);
        }
    }
    for p in data.producer_data_set {
        c.clients.register_producer(
            &p.group_name,
            ClientChannel {
                channel: channel.clone(),
                client_id: data.client_id.clone(),
                last_update: now,
            },
        );
    }
    ok()
}

/// Every group and topic a heartbeat names, checked before any is used.
fn check_heartbeat(data: &HeartbeatData) -> Result<(), RemotingCommand> {
    for c in &data.consumer_data_set {
        checks::group(&c.group_name)?;
        for sub in &c.subscription_data_set {
            checks::any_topic(&sub.topic)?;
        }
    }
    for p in &data.producer_data_set {
        checks::group(&p.group_name)?;
    }
    Ok(())
}

/// CHECK_CLIENT_CONFIG, as RocketMQ's `ClientManageProcessor` answers it:
/// a TAG subscription is fine; a property filter needs
/// `enablePropertyFilter` and an expression that compiles (the refusal
/// says where it does not). Nothing is registered.
pub fn check_client_config(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    if req.body.is_empty() {
        return ok();
    }
    let body: CheckClientRequestBody = match basalt_remoting::fastjson::from_slice(&req.body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                response::SYSTEM_ERROR,
                format!("bad check client body: {e}"),
            );
        }
    };
    let Some(sub) = body.subscription_data else {
        return ok();
    };
    if is_tag_type(&sub.expression_type) {
        return ok();
    }
    if !c.config.enable_property_filter {
        return error(
            response::SYSTEM_ERROR,
            format!(
                "The broker does not support consumer to filter message by {}",
                sub.expression_type
            ),
        );
    }
    match SubscriptionFilter::compile(&sub.expression_type, &sub.sub_string) {
        Ok(_) => ok(),
        Err(e) => {
            tracing::warn!(client = %body.client_id, group = %body.group, expression = %sub.sub_string,
                error = %e, "client filters messages with an expression that does not compile");
            error(response::SUBSCRIPTION_PARSE_FAILED, e.to_string())
        }
    }
}

pub fn unregister_client(
    c: &ClientPath,
    channel: &Channel,
    req: &RemotingCommand,
) -> RemotingCommand {
    let h = match UnregisterClientRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    for g in [&h.producer_group, &h.consumer_group]
        .into_iter()
        .flatten()
        .filter(|g| !g.is_empty())
    {
        if let Err(resp) = checks::group(g) {
            return resp;
        }
    }
    if let Some(g) = h.producer_group.as_deref().filter(|g| !g.is_empty()) {
        c.clients.unregister_producer(g, channel.id());
    }
    if let Some(g) = h.consumer_group.as_deref().filter(|g| !g.is_empty())
        && c.clients.unregister_consumer(g, channel.id())
    {
        c.notify_consumer_ids_changed(g);
    }
    ok()
}

pub fn consumer_list(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match GetConsumerListByGroupRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::group(&h.consumer_group) {
        return resp;
    }
    let ids = c
        .clients
        .consumer_group(&h.consumer_group)
        .map(|g| g.client_ids())
        .unwrap_or_default();
    if ids.is_empty() {
        return error(
            response::SYSTEM_ERROR,
            format!("no consumer for this group, {}", h.consumer_group),
        );
    }
    let body = serde_json::to_vec(&ConsumerListBody {
        consumer_id_list: ids,
    })
    .unwrap_or_default();
    ok().with_body(body)
}

pub fn query_consumer_offset(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match QueryConsumerOffsetRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::group(&h.consumer_group).and(checks::any_topic(&h.topic)) {
        return resp;
    }
    if let Some(o) = c.offsets.query(&h.consumer_group, &h.topic, h.queue_id) {
        return offset_response(o);
    }
    if h.set_zero_if_not_found == Some(false) {
        return error(
            response::QUERY_NOT_FOUND,
            "Not found, do not set to zero, maybe this group boot first",
        );
    }
    // A new group on a queue whose first message is still around and in
    // memory starts at 0, as in Java; otherwise the client applies its
    // consume-from-where rule.
    let min = c.store.min_offset_in_queue(&h.topic, h.queue_id);
    if min <= 0 && first_message_in_memory(c, &h.topic, h.queue_id) {
        return offset_response(0);
    }
    error(
        response::QUERY_NOT_FOUND,
        "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
    )
}

fn first_message_in_memory(c: &ClientPath, topic: &str, queue_id: i32) -> bool {
    match c.store.commit_log_offset_in_queue(topic, queue_id, 0) {
        Some(phys) => c.store.is_in_memory(phys),
        // Empty or missing queue: nothing to skip.
        None => true,
    }
}

pub fn update_consumer_offset(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match UpdateConsumerOffsetRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if h.commit_offset < 0 {
        return error(
            response::SYSTEM_ERROR,
            format!("illegal offset {}", h.commit_offset),
        );
    }
    // Offsets only for a real group name and a queue this c serves:
    // the table cannot be filled with made-up topics and queues.
    if let Err(resp) = checks::group(&h.consumer_group).and_then(|_| {
        checks::served_queue(&c.topics, &c.store, &c.replication, &h.topic, h.queue_id)
    }) {
        return resp;
    }
    if let Err(e) = c
        .groups
        .get_or_create(&h.consumer_group, c.live.auto_create_subscription_group())
    {
        return error(response::SUBSCRIPTION_GROUP_NOT_EXIST, e.to_string());
    }
    c.offsets
        .commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
    ok()
}

pub fn max_offset(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    match GetMaxOffsetRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => match checks::any_topic(&h.topic) {
            Ok(()) => offset_response(c.store.max_offset_in_queue(&h.topic, h.queue_id)),
            Err(resp) => resp,
        },
        Err(e) => bad_header(e),
    }
}

pub fn min_offset(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    match GetMinOffsetRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => match checks::any_topic(&h.topic) {
            Ok(()) => offset_response(c.store.min_offset_in_queue(&h.topic, h.queue_id)),
            Err(resp) => resp,
        },
        Err(e) => bad_header(e),
    }
}

pub fn earliest_msg_storetime(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    match GetEarliestMsgStoretimeRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => {
            if let Err(resp) = checks::any_topic(&h.topic) {
                return resp;
            }
            let ts = c
                .store
                .earliest_message_time(&h.topic, h.queue_id)
                .unwrap_or(-1);
            ok().with_ext(GetEarliestMsgStoretimeResponseHeader { timestamp: ts }.to_ext())
        }
        Err(e) => bad_header(e),
    }
}

pub fn search_offset(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match SearchOffsetRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::any_topic(&h.topic) {
        return resp;
    }
    let boundary = match h
        .boundary_type
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("LOWER") => BoundaryType::Lower,
        Some("UPPER") => BoundaryType::Upper,
        Some(other) => {
            return error(
                response::SYSTEM_ERROR,
                format!("unknown boundaryType {other}"),
            );
        }
    };
    offset_response(
        c.store
            .offset_in_queue_by_time(&h.topic, h.queue_id, h.timestamp, boundary),
    )
}

pub fn lock_batch(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    let body: LockBatchRequestBody = match basalt_remoting::fastjson::from_slice(&req.body) {
        Ok(b) => b,
        Err(e) => return error(response::SYSTEM_ERROR, format!("bad lock body: {e}")),
    };
    if let Err(resp) = check_lock_body(c, &body) {
        return resp;
    }
    let locked = c
        .locks
        .try_lock(&body.consumer_group, &body.client_id, &body.mq_set);
    let resp = LockBatchResponseBody {
        lock_ok_mq_set: locked,
    };
    ok().with_body(serde_json::to_vec(&resp).unwrap_or_default())
}

pub fn unlock_batch(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    let body: LockBatchRequestBody = match basalt_remoting::fastjson::from_slice(&req.body) {
        Ok(b) => b,
        Err(e) => return error(response::SYSTEM_ERROR, format!("bad unlock body: {e}")),
    };
    if let Err(resp) = check_lock_body(c, &body) {
        return resp;
    }
    c.locks
        .unlock(&body.consumer_group, &body.client_id, &body.mq_set);
    ok()
}

/// A lock request names a real group and only queues this c serves, so
/// the lock table stays bounded by groups times real queues.
fn check_lock_body(c: &ClientPath, body: &LockBatchRequestBody) -> Result<(), RemotingCommand> {
    checks::group(&body.consumer_group)?;
    for mq in &body.mq_set {
        checks::served_queue(&c.topics, &c.store, &c.replication, &mq.topic, mq.queue_id)?;
    }
    Ok(())
}
