//! Admin and metadata requests: topics, stats, message lookups, metadata
//! dumps for slaves and tools.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use basalt_common::time::now_millis;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use basalt_remoting::header::{
    CommandHeader, CreateTopicRequestHeader, DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader, QueryMessageRequestHeader,
    QueryMessageResponseHeader, ViewMessageRequestHeader,
};
use basalt_remoting::protocol::{
    ConsumeStats, KvTable, MessageQueue, OffsetWrapper, TopicOffset, TopicStatsTable,
};
use bytes::BytesMut;

use super::paths::AdminPath;
use super::{bad_header, checks, error};
use crate::metadata::formats::{TagMode, TopicSettings};
use crate::metadata::groups::SubscriptionGroupConfig;

fn ok() -> RemotingCommand {
    RemotingCommand::response(response::SUCCESS, None)
}

/// Topics that cannot be created or deleted by hand.
fn is_system_topic(a: &AdminPath, topic: &str) -> bool {
    basalt_common::topic::is_system_topic(topic)
        || topic == a.config.broker_cluster_name
        || topic == a.config.broker_name
}

/// UPDATE_AND_CREATE_TOPIC. Answers after the NameServers have the new
/// topic config (as RocketMQ registers synchronously here), so the caller
/// can route to the topic as soon as it hears back.
pub async fn create_topic(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match CreateTopicRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::client_topic(&h.topic) {
        return resp;
    }
    if is_system_topic(a, &h.topic) {
        return error(
            response::SYSTEM_ERROR,
            format!("the topic[{}] is conflict with system topic", h.topic),
        );
    }
    let mut t = TopicSettings::new(h.topic.clone(), h.write_queue_nums);
    t.read_queue_nums = h.read_queue_nums;
    t.write_queue_nums = h.write_queue_nums;
    t.perm = h.perm;
    t.topic_sys_flag = h.topic_sys_flag.unwrap_or(0);
    t.order = h.order.unwrap_or(false);
    t.topic_filter_type = match h.topic_filter_type.as_deref() {
        Some("MULTI_TAG") => TagMode::MultiTag,
        _ => TagMode::SingleTag,
    };
    // `attributes` modifies the topic's current ones (Java's
    // TopicConfigManager.updateTopicConfig); absent keeps them.
    let current = a.topics.get(&h.topic).map(|c| c.attributes);
    let modification = h.attributes.as_deref().unwrap_or("");
    let attributes = crate::metadata::topic_attributes::apply(current.as_ref(), modification);
    t.attributes = match attributes {
        Ok(m) => m,
        Err(e) => return error(response::SYSTEM_ERROR, e),
    };
    let change = match a.topics.update(t) {
        Ok(c) => c,
        Err(e) => return error(response::SYSTEM_ERROR, e.to_string()),
    };
    match a.registrar.publish_topic_change(&change).await {
        Ok(()) => ok(),
        Err(e) => error(response::SYSTEM_ERROR, e),
    }
}

pub fn delete_topic(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match DeleteTopicRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::any_topic(&h.topic) {
        return resp;
    }
    if is_system_topic(a, &h.topic) {
        return error(
            response::SYSTEM_ERROR,
            format!("the topic[{}] is a system topic", h.topic),
        );
    }
    a.topics.delete(&h.topic);
    a.stats.items.forget_topic(&h.topic);
    a.offsets.remove_topic(&h.topic);
    a.waiters.remove_topic(&h.topic);
    if let Err(e) = a.store.delete_topics(std::slice::from_ref(&h.topic)) {
        return error(
            response::SYSTEM_ERROR,
            format!("deleting the topic's queues failed: {e}"),
        );
    }
    a.registrar.register_soon();
    ok()
}

/// CLEAN_EXPIRED_CONSUMEQUEUE (mqadmin cleanExpiredCQ): drops ConsumeQueue
/// files that only point at CommitLog data already deleted. Java also
/// destroys a queue whose every unit is expired; Basalt keeps the queue
/// (empty, its offsets kept) so its next message continues the offsets.
pub fn clean_expired_consume_queues(a: &AdminPath) -> RemotingCommand {
    match a.store.clean_expired_consume_queues() {
        Ok(n) => {
            tracing::info!(
                files = n,
                "cleanExpiredCQ: expired ConsumeQueue files deleted"
            );
            ok()
        }
        Err(e) => error(response::SYSTEM_ERROR, e.to_string()),
    }
}

pub fn all_topic_config(a: &AdminPath) -> RemotingCommand {
    ok().with_body(serde_json::to_vec(&a.topics.snapshot().to_wire()).unwrap_or_default())
}

pub fn topic_config(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let Some(topic) = req.ext_fields.get("topic") else {
        return error(response::SYSTEM_ERROR, "missing topic");
    };
    if let Err(resp) = checks::any_topic(topic) {
        return resp;
    }
    match a.topics.get(topic) {
        Some(t) => ok().with_body(serde_json::to_vec(&t.to_wire()).unwrap_or_default()),
        None => error(
            response::TOPIC_NOT_EXIST,
            format!("No topic in this broker. topic: {topic}"),
        ),
    }
}

pub fn runtime_info(a: &AdminPath) -> RemotingCommand {
    let s = a.store.stats();
    let st = &a.stats;
    let mut t = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        t.insert(k.to_string(), v);
    };
    put("brokerVersionDesc", "Basalt".into());
    put(
        "brokerVersion",
        basalt_common::constants::MQ_VERSION.to_string(),
    );
    put("brokerRole", a.config.broker_role.to_string());
    put("brokerId", a.config.broker_id.to_string());
    put(
        "msgPutTotalTodayNow",
        st.put_messages.load(Ordering::Relaxed).to_string(),
    );
    put(
        "msgGetTotalTodayNow",
        st.get_messages.load(Ordering::Relaxed).to_string(),
    );
    put(
        "putMessageSizeTotal",
        st.put_bytes.load(Ordering::Relaxed).to_string(),
    );
    put(
        "getMessageSizeTotal",
        st.get_bytes.load(Ordering::Relaxed).to_string(),
    );
    put(
        "putMessageFailedTimes",
        st.put_failures.load(Ordering::Relaxed).to_string(),
    );
    put("commitLogMinOffset", s.commit_log_min_offset.to_string());
    put("commitLogMaxOffset", s.commit_log_max_offset.to_string());
    put(
        "commitLogFlushedOffset",
        s.commit_log_flushed_offset.to_string(),
    );
    put("dispatchBehindBytes", s.dispatch_behind_bytes.to_string());
    // Store time of the oldest record still in the CommitLog (Java
    // `getEarliestMessageTime`); absent when the log is empty.
    if let Some(ts) = a.store.log().store_timestamp_at(s.commit_log_min_offset) {
        put("earliestMessageTimeStamp", ts.to_string());
    }
    // Used fraction of the disk holding the store (the last 1 s sample).
    if let Some(p) = a.store.commit_log().disk().used_percent() {
        put("commitLogDiskRatio", format!("{:.4}", p as f64 / 100.0));
    }
    put("consumeQueueCount", s.consume_queue_count.to_string());
    put("storePoisoned", s.poisoned.to_string());
    put(
        "bootTimestamp",
        (now_millis() - a.started_at.elapsed().as_millis() as i64).to_string(),
    );
    put("runtime", format!("{} s", a.started_at.elapsed().as_secs()));
    put("flushDiskType", a.config.flush_disk_type.to_string());
    // Java's `brokerActive` says its delay-level and transaction-check
    // services run, which they do on a master (here also a ledger leader).
    let role = a.replication.role(a.config.broker_role);
    put(
        "brokerActive",
        (role != basalt_common::config::BrokerRole::Slave).to_string(),
    );
    // Java reports its request thread pools' queues (mqadmin clusterList
    // shows them). Basalt runs every request as a task of its own, so no
    // request waits in such a queue: empty by construction.
    for pool in ["send", "pull", "litePull", "query", "ack"] {
        put(&format!("{pool}ThreadPoolQueueSize"), "0".into());
        put(
            &format!("{pool}ThreadPoolQueueHeadWaitTimeMills"),
            "0".into(),
        );
    }
    for (k, v) in a.replication.runtime_info(&a.store) {
        t.insert(k, v);
    }
    t.extend(a.rates.runtime_info());
    for (k, v) in a.transactions.runtime_info() {
        t.insert(k, v);
    }
    if let Some(timers) = &a.timers {
        t.extend(timers.runtime_info());
    }
    ok().with_body(serde_json::to_vec(&KvTable { table: t }).unwrap_or_default())
}

pub fn topic_stats(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match GetTopicStatsInfoRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::any_topic(&h.topic) {
        return resp;
    }
    let Some(t) = a.topics.get(&h.topic) else {
        return error(
            response::TOPIC_NOT_EXIST,
            format!("topic[{}] not exist", h.topic),
        );
    };
    let mut table = Vec::new();
    for q in 0..t.write_queue_nums.max(t.read_queue_nums) {
        let min = a.store.min_offset_in_queue(&h.topic, q);
        let max = a.store.max_offset_in_queue(&h.topic, q);
        let last = if max > 0 {
            a.store
                .message_store_timestamp(&h.topic, q, max - 1)
                .unwrap_or(0)
        } else {
            0
        };
        table.push((
            MessageQueue::new(h.topic.clone(), a.config.broker_name.clone(), q),
            TopicOffset {
                min_offset: min,
                max_offset: max,
                last_update_timestamp: last,
            },
        ));
    }
    ok().with_body(
        TopicStatsTable {
            offset_table: table,
        }
        .encode(),
    )
}

pub fn consume_stats(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match GetConsumeStatsRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::group(&h.consumer_group) {
        return resp;
    }
    let mut topics = match h.topic.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => vec![t.to_string()],
        None => {
            let mut v = a.offsets.topics_of_group(&h.consumer_group);
            if let Some(g) = a.clients.consumer_group(&h.consumer_group) {
                v.extend(g.subscriptions.keys().cloned());
            }
            v
        }
    };
    topics.sort();
    topics.dedup();
    let mut table = Vec::new();
    for topic in topics {
        let Some(t) = a.topics.get(&topic) else {
            continue;
        };
        for q in 0..t.read_queue_nums {
            let broker_offset = a.store.max_offset_in_queue(&topic, q);
            let consumer_offset = a.offsets.query(&h.consumer_group, &topic, q).unwrap_or(-1);
            let last = if consumer_offset > 0 {
                a.store
                    .message_store_timestamp(&topic, q, consumer_offset - 1)
                    .unwrap_or(0)
            } else {
                0
            };
            table.push((
                MessageQueue::new(topic.clone(), a.config.broker_name.clone(), q),
                OffsetWrapper {
                    broker_offset,
                    consumer_offset,
                    pull_offset: consumer_offset.max(0),
                    last_timestamp: last,
                },
            ));
        }
    }
    let topic = h.topic.as_deref().filter(|t| !t.is_empty());
    let consume_tps = a
        .stats
        .items
        .group_get_tps(&h.consumer_group, topic, now_millis());
    ok().with_body(
        ConsumeStats {
            consume_tps,
            offset_table: table,
        }
        .encode(),
    )
}

pub fn consumer_connections(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let Some(group) = req.ext_fields.get("consumerGroup") else {
        return error(response::SYSTEM_ERROR, "missing consumerGroup");
    };
    if let Err(resp) = checks::group(group) {
        return resp;
    }
    let Some(g) = a.clients.consumer_group(group) else {
        return error(
            response::CONSUMER_NOT_ONLINE,
            format!("the consumer group[{group}] not online"),
        );
    };
    let connections: Vec<serde_json::Value> = g
        .members
        .values()
        .map(|m| {
            serde_json::json!({
                "clientAddr": m.channel.remote_addr().to_string(),
                "clientId": m.client_id,
                "language": "JAVA",
                "version": 0,
            })
        })
        .collect();
    let subs: serde_json::Map<String, serde_json::Value> = g
        .subscriptions
        .iter()
        .map(|(t, s)| {
            (
                t.clone(),
                serde_json::to_value(s.to_wire()).unwrap_or_default(),
            )
        })
        .collect();
    let body = serde_json::json!({
        "connectionSet": connections,
        "consumeFromWhere": g.consume_from_where.name(),
        "consumeType": g.consume_type.name(),
        "messageModel": g.message_model.name(),
        "subscriptionTable": subs,
    });
    ok().with_body(serde_json::to_vec(&body).unwrap_or_default())
}

pub fn query_message(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match QueryMessageRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::any_topic(&h.topic) {
        return resp;
    }
    let max = h.max_num.clamp(1, 64) as usize;
    let end = if h.end_timestamp <= 0 {
        i64::MAX
    } else {
        h.end_timestamp
    };
    let r = a
        .store
        .query_message(&h.topic, &h.key, max, h.begin_timestamp, end);
    let header = QueryMessageResponseHeader {
        index_last_update_timestamp: r.index_last_update_timestamp,
        index_last_update_phyoffset: r.index_last_update_phy_offset,
    };
    if r.messages.is_empty() {
        return error(
            response::QUERY_NOT_FOUND,
            "can not find message, maybe time range not correct",
        )
        .with_ext(header.to_ext());
    }
    let mut body = BytesMut::new();
    for m in &r.messages {
        body.extend_from_slice(m);
    }
    ok().with_ext(header.to_ext()).with_body(body.freeze())
}

pub fn view_message(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match ViewMessageRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    match a.store.look_message_by_offset(h.offset) {
        Some(rec) => ok().with_body(rec),
        None => error(
            response::SYSTEM_ERROR,
            format!("can not find message by the offset, {}", h.offset),
        ),
    }
}

pub fn all_consumer_offsets(a: &AdminPath) -> RemotingCommand {
    ok().with_body(a.offsets.encode().into_bytes())
}

pub fn all_delay_offsets(a: &AdminPath) -> RemotingCommand {
    ok().with_body(a.delay_offsets.encode().into_bytes())
}

pub fn all_subscription_groups(a: &AdminPath) -> RemotingCommand {
    ok().with_body(serde_json::to_vec(&a.groups.snapshot()).unwrap_or_default())
}

pub async fn create_subscription_group(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let g: SubscriptionGroupConfig = match basalt_remoting::fastjson::from_slice(&req.body) {
        Ok(g) => g,
        Err(e) => {
            return error(
                response::SYSTEM_ERROR,
                format!("bad subscription group body: {e}"),
            );
        }
    };
    let generation = match a.groups.update(g) {
        Ok((_, generation)) => generation,
        Err(e) => return error(response::SYSTEM_ERROR, e.to_string()),
    };
    match a.groups.persisted(generation).await {
        Ok(()) => ok(),
        Err(e) => error(response::SYSTEM_ERROR, e),
    }
}

pub fn delete_subscription_group(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let Some(group) = req.ext_fields.get("groupName") else {
        return error(response::SYSTEM_ERROR, "missing groupName");
    };
    if let Err(resp) = checks::group(group) {
        return resp;
    }
    a.groups.delete(group);
    a.stats.items.forget_group(group);
    ok()
}
