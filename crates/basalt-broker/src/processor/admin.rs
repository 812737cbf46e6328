//! Admin and metadata requests: topics, stats, message lookups, metadata
//! dumps for slaves and tools.

use std::collections::BTreeMap;
use std::sync::Arc;
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
    ConsumeStats, KvTable, MessageQueue, OffsetWrapper, TopicConfig, TopicFilterType, TopicOffset,
    TopicStatsTable,
};
use bytes::BytesMut;

use super::{bad_header, checks, error};
use crate::broker::Broker;
use crate::subscription_group::SubscriptionGroupConfig;

fn ok() -> RemotingCommand {
    RemotingCommand::response(response::SUCCESS, None)
}

/// Topics that cannot be created or deleted by hand.
fn is_system_topic(broker: &Broker, topic: &str) -> bool {
    basalt_common::topic::is_system_topic(topic)
        || topic == broker.config.broker_cluster_name
        || topic == broker.config.broker_name
}

/// UPDATE_AND_CREATE_TOPIC. Answers after the NameServers have the new
/// topic config (as RocketMQ registers synchronously here), so the caller
/// can route to the topic as soon as it hears back.
pub async fn create_topic(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
    let h = match CreateTopicRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::client_topic(&h.topic) {
        return resp;
    }
    if is_system_topic(broker, &h.topic) {
        return error(
            response::SYSTEM_ERROR,
            format!("the topic[{}] is conflict with system topic", h.topic),
        );
    }
    let mut t = TopicConfig::new(h.topic.clone(), h.write_queue_nums);
    t.read_queue_nums = h.read_queue_nums;
    t.write_queue_nums = h.write_queue_nums;
    t.perm = h.perm;
    t.topic_sys_flag = h.topic_sys_flag.unwrap_or(0);
    t.order = h.order.unwrap_or(false);
    t.topic_filter_type = match h.topic_filter_type.as_deref() {
        Some("MULTI_TAG") => TopicFilterType::MultiTag,
        _ => TopicFilterType::SingleTag,
    };
    let change = match broker.topics.update(t) {
        Ok(c) => c,
        Err(e) => return error(response::SYSTEM_ERROR, e.to_string()),
    };
    match broker.publish_topic_change(&change).await {
        Ok(()) => ok(),
        Err(e) => error(response::SYSTEM_ERROR, e),
    }
}

pub fn delete_topic(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
    let h = match DeleteTopicRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::any_topic(&h.topic) {
        return resp;
    }
    if is_system_topic(broker, &h.topic) {
        return error(
            response::SYSTEM_ERROR,
            format!("the topic[{}] is a system topic", h.topic),
        );
    }
    broker.topics.delete(&h.topic);
    broker.offsets.remove_topic(&h.topic);
    broker.waiters.remove_topic(&h.topic);
    if let Err(e) = broker.store.delete_topics(std::slice::from_ref(&h.topic)) {
        return error(
            response::SYSTEM_ERROR,
            format!("deleting the topic's queues failed: {e}"),
        );
    }
    broker.register_soon();
    ok()
}

pub fn all_topic_config(broker: &Arc<Broker>) -> RemotingCommand {
    ok().with_body(serde_json::to_vec(&broker.topics.snapshot()).unwrap_or_default())
}

pub fn topic_config(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
    let Some(topic) = req.ext_fields.get("topic") else {
        return error(response::SYSTEM_ERROR, "missing topic");
    };
    if let Err(resp) = checks::any_topic(topic) {
        return resp;
    }
    match broker.topics.get(topic) {
        Some(t) => ok().with_body(serde_json::to_vec(&t).unwrap_or_default()),
        None => error(
            response::TOPIC_NOT_EXIST,
            format!("no topic in this broker. topic: {topic}"),
        ),
    }
}

pub fn runtime_info(broker: &Arc<Broker>) -> RemotingCommand {
    let s = broker.store.stats();
    let st = &broker.stats;
    let mut t = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        t.insert(k.to_string(), v);
    };
    put("brokerVersionDesc", "Basalt".into());
    put(
        "brokerVersion",
        basalt_common::constants::MQ_VERSION.to_string(),
    );
    put("brokerRole", broker.config.broker_role.to_string());
    put("brokerId", broker.config.broker_id.to_string());
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
    put("consumeQueueCount", s.consume_queue_count.to_string());
    put("storePoisoned", s.poisoned.to_string());
    put(
        "bootTimestamp",
        (now_millis() - broker.uptime().as_millis() as i64).to_string(),
    );
    put("runtime", format!("{} s", broker.uptime().as_secs()));
    put("flushDiskType", broker.config.flush_disk_type.to_string());
    if let Some(extra) = broker.runtime_extra() {
        for (k, v) in extra {
            t.insert(k, v);
        }
    }
    ok().with_body(serde_json::to_vec(&KvTable { table: t }).unwrap_or_default())
}

pub fn broker_config(broker: &Arc<Broker>) -> RemotingCommand {
    let c = &broker.config;
    let text = format!(
        "brokerClusterName={}\nbrokerName={}\nbrokerId={}\nbrokerIP1={}\nlistenPort={}\nnamesrvAddr={}\nstorePathRootDir={}\nflushDiskType={}\nbrokerRole={}\nmappedFileSizeCommitLog={}\nfileReservedTime={}\nautoCreateTopicEnable={}\ndefaultTopicQueueNums={}\n",
        c.broker_cluster_name,
        c.broker_name,
        c.broker_id,
        c.broker_ip1,
        c.listen_port,
        c.namesrv_addr.clone().unwrap_or_default(),
        c.store_path_root_dir.display(),
        c.flush_disk_type,
        c.broker_role,
        c.mapped_file_size_commit_log,
        c.file_reserved_time,
        c.auto_create_topic_enable,
        c.default_topic_queue_nums,
    );
    ok().with_body(text.into_bytes())
}

pub fn topic_stats(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
    let h = match GetTopicStatsInfoRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::any_topic(&h.topic) {
        return resp;
    }
    let Some(t) = broker.topics.get(&h.topic) else {
        return error(
            response::TOPIC_NOT_EXIST,
            format!("topic[{}] not exist", h.topic),
        );
    };
    let mut table = Vec::new();
    for q in 0..t.write_queue_nums.max(t.read_queue_nums) {
        let min = broker.store.min_offset_in_queue(&h.topic, q);
        let max = broker.store.max_offset_in_queue(&h.topic, q);
        let last = if max > 0 {
            broker
                .store
                .message_store_timestamp(&h.topic, q, max - 1)
                .unwrap_or(0)
        } else {
            0
        };
        table.push((
            MessageQueue::new(h.topic.clone(), broker.config.broker_name.clone(), q),
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

pub fn consume_stats(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
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
            let mut v = broker.offsets.topics_of_group(&h.consumer_group);
            if let Some(g) = broker.clients.consumer_group(&h.consumer_group) {
                v.extend(g.subscriptions.keys().cloned());
            }
            v
        }
    };
    topics.sort();
    topics.dedup();
    let mut table = Vec::new();
    for topic in topics {
        let Some(t) = broker.topics.get(&topic) else {
            continue;
        };
        for q in 0..t.read_queue_nums {
            let broker_offset = broker.store.max_offset_in_queue(&topic, q);
            let consumer_offset = broker
                .offsets
                .query(&h.consumer_group, &topic, q)
                .unwrap_or(-1);
            let last = if consumer_offset > 0 {
                broker
                    .store
                    .message_store_timestamp(&topic, q, consumer_offset - 1)
                    .unwrap_or(0)
            } else {
                0
            };
            table.push((
                MessageQueue::new(topic.clone(), broker.config.broker_name.clone(), q),
                OffsetWrapper {
                    broker_offset,
                    consumer_offset,
                    pull_offset: consumer_offset.max(0),
                    last_timestamp: last,
                },
            ));
        }
    }
    ok().with_body(
        ConsumeStats {
            consume_tps: 0.0,
            offset_table: table,
        }
        .encode(),
    )
}

pub fn consumer_connections(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
    let Some(group) = req.ext_fields.get("consumerGroup") else {
        return error(response::SYSTEM_ERROR, "missing consumerGroup");
    };
    if let Err(resp) = checks::group(group) {
        return resp;
    }
    let Some(g) = broker.clients.consumer_group(group) else {
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
        .map(|(t, s)| (t.clone(), serde_json::to_value(s).unwrap_or_default()))
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

pub fn query_message(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
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
    let r = broker
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

pub fn view_message(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
    let h = match ViewMessageRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    match broker.store.look_message_by_offset(h.offset) {
        Some(rec) => ok().with_body(rec),
        None => error(
            response::SYSTEM_ERROR,
            format!("can not find message by the offset, {}", h.offset),
        ),
    }
}

pub fn all_consumer_offsets(broker: &Arc<Broker>) -> RemotingCommand {
    ok().with_body(broker.offsets.encode().into_bytes())
}

pub fn all_delay_offsets(broker: &Arc<Broker>) -> RemotingCommand {
    ok().with_body(broker.schedule.encode().into_bytes())
}

pub fn all_subscription_groups(broker: &Arc<Broker>) -> RemotingCommand {
    ok().with_body(serde_json::to_vec(&broker.groups.snapshot()).unwrap_or_default())
}

pub async fn create_subscription_group(
    broker: &Arc<Broker>,
    req: &RemotingCommand,
) -> RemotingCommand {
    let g: SubscriptionGroupConfig = match basalt_remoting::fastjson::from_slice(&req.body) {
        Ok(g) => g,
        Err(e) => {
            return error(
                response::SYSTEM_ERROR,
                format!("bad subscription group body: {e}"),
            );
        }
    };
    let generation = match broker.groups.update(g) {
        Ok((_, generation)) => generation,
        Err(e) => return error(response::SYSTEM_ERROR, e.to_string()),
    };
    match broker.groups.persisted(generation).await {
        Ok(()) => ok(),
        Err(e) => error(response::SYSTEM_ERROR, e),
    }
}

pub fn delete_subscription_group(broker: &Arc<Broker>, req: &RemotingCommand) -> RemotingCommand {
    let Some(group) = req.ext_fields.get("groupName") else {
        return error(response::SYSTEM_ERROR, "missing groupName");
    };
    if let Err(resp) = checks::group(group) {
        return resp;
    }
    broker.groups.delete(group);
    ok()
}
