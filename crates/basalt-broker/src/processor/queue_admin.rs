//! Operators' requests about one group's view of queues:
//! CLONE_GROUP_OFFSET (314), QUERY_CONSUME_QUEUE (321) and
//! QUERY_TOPIC_CONSUME_BY_WHO (300) (docs/protocol.md#operations).

use std::collections::BTreeSet;

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use basalt_remoting::header::{
    CloneGroupOffsetRequestHeader, CommandHeader, QueryConsumeQueueRequestHeader,
};

use super::paths::AdminPath;
use super::{bad_header, checks, error};

/// Most ConsumeQueue units one QUERY_CONSUME_QUEUE returns.
pub const MAX_QUERY_UNITS: i32 = 1024;

fn ok() -> RemotingCommand {
    RemotingCommand::response(response::SUCCESS, None)
}

/// CLONE_GROUP_OFFSET: `destGroup` gets `srcGroup`'s committed offsets on
/// `topic` (or on every topic `srcGroup` has offsets for). Topics this
/// broker does not have are skipped; unless `offline`, so are topics an
/// online `srcGroup` does not subscribe to (Java `cloneGroupOffset`).
pub fn clone_group_offset(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match CloneGroupOffsetRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::group(&h.src_group).and_then(|()| checks::group(&h.dest_group)) {
        return resp;
    }
    let topics = match h.topic.as_deref().filter(|t| !t.trim().is_empty()) {
        Some(t) => {
            if let Err(resp) = checks::any_topic(t) {
                return resp;
            }
            vec![t.to_string()]
        }
        None => a.offsets.topics_of_group(&h.src_group),
    };
    let online = a.clients.consumer_group(&h.src_group);
    let mut cloned = 0usize;
    for topic in topics {
        if !a.topics.contains(&topic) {
            tracing::warn!(%topic, "clone group offset: no such topic here");
            continue;
        }
        if !h.offline
            && let Some(g) = &online
            && !g.subscriptions.is_empty()
            && !g.subscriptions.contains_key(&topic)
        {
            tracing::warn!(%topic, group = %h.src_group,
                "clone group offset: topic not in the online group's subscription");
            continue;
        }
        for (queue_id, offset) in a.offsets.group_topic(&h.src_group, &topic) {
            a.offsets.commit(&h.dest_group, &topic, queue_id, offset);
            cloned += 1;
        }
    }
    tracing::info!(src = %h.src_group, dest = %h.dest_group, queues = cloned, "group offsets cloned");
    ok()
}

/// QUERY_CONSUME_QUEUE: up to `count` units of one ConsumeQueue from
/// `index`, with the queue's bounds and, when `consumerGroup` is online,
/// its subscription of the topic (`QueryConsumeQueueResponseBody`).
pub fn query_consume_queue(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match QueryConsumeQueueRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::any_topic(&h.topic) {
        return resp;
    }
    if !h.consumer_group.is_empty()
        && let Err(resp) = checks::group(&h.consumer_group)
    {
        return resp;
    }
    if !(1..=MAX_QUERY_UNITS).contains(&h.count) {
        return error(
            response::INVALID_PARAMETER,
            format!("count must be 1 to {MAX_QUERY_UNITS}"),
        );
    }
    let Some(cq) = a.store.consume_queues().get(&h.topic, h.queue_id) else {
        return error(
            response::SYSTEM_ERROR,
            format!("{}@{} is not exist!", h.queue_id, h.topic),
        );
    };
    let (min, max) = (cq.min_offset(), cq.max_offset());
    let (subscription, filter_data) = if h.consumer_group.is_empty() {
        (serde_json::Value::Null, serde_json::Value::Null)
    } else {
        match a.clients.subscription(&h.consumer_group, &h.topic) {
            Some(s) => (
                serde_json::to_value(s.to_wire()).unwrap_or_default(),
                serde_json::Value::Null,
            ),
            None => (
                serde_json::Value::Null,
                format!("{}@{} is not online!", h.consumer_group, h.topic).into(),
            ),
        }
    };
    let mut units = Vec::new();
    let mut remark = None;
    if h.index < min || h.index >= max {
        remark = Some(format!(
            "Index {} of {}@{} is not exist!",
            h.index, h.queue_id, h.topic
        ));
    } else {
        let end = h.index.saturating_add(h.count as i64).min(max);
        for i in h.index..end {
            let Some(u) = cq.unit_at(i) else { break };
            units.push(serde_json::json!({
                "physicOffset": u.physical_offset,
                "physicSize": u.size,
                "tagsCode": u.tags_code,
                "eval": false,
            }));
        }
    }
    let body = serde_json::json!({
        "subscriptionData": subscription,
        "filterData": filter_data,
        "queueData": units,
        "maxQueueIndex": max,
        "minQueueIndex": min,
    });
    let mut resp = ok().with_body(serde_json::to_vec(&body).unwrap_or_default());
    resp.remark = remark;
    resp
}

/// QUERY_TOPIC_CONSUME_BY_WHO: the groups consuming `topic`, online or
/// with offsets stored (`GroupList`).
pub fn topic_consume_by_who(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let Some(topic) = req.ext_fields.get("topic") else {
        return error(response::SYSTEM_ERROR, "missing topic");
    };
    if let Err(resp) = checks::any_topic(topic) {
        return resp;
    }
    let mut groups: BTreeSet<String> = a.offsets.groups_of_topic(topic).into_iter().collect();
    for g in a.clients.consumer_group_names() {
        if a.clients.subscription(&g, topic).is_some() {
            groups.insert(g);
        }
    }
    let body = serde_json::json!({ "groupList": groups });
    ok().with_body(serde_json::to_vec(&body).unwrap_or_default())
}
