//! SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE and
//! CONSUMER_SEND_MSG_BACK (docs/protocol.md#send, docs/protocol.md#send-back).

use basalt_common::constants::{perm, property, topic as reserved};
use basalt_common::record::{RecordDraft, RecordView};
use basalt_common::{properties, sysflag};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader,
    SendMessageResponseHeader,
};
use basalt_remoting::{Channel, RemotingCommand};
use basalt_store::PutMessageResult;
use bytes::Bytes;
use rand::Rng;

use super::error;
use super::paths::SendPath;
use super::send_properties::{SendProperties, wait_value_ok};
use crate::metadata::formats::{TagMode, TopicSettings};
use crate::metadata::topics::TopicCreateError;
use crate::schedule::timers::admission::{self as timers, TimerDecision, TimerProperties};
use basalt_common::time::now_millis;

/// A group's retry or dead-letter topic, created (read-write) if missing.
/// A new one is persisted and registered with the NameServers before going
/// on, as RocketMQ's createTopicInSendMessageBackMethod does.
async fn ensure_group_topic(
    p: &SendPath,
    topic: &str,
    queues: i32,
) -> Result<TopicSettings, RemotingCommand> {
    let change = p
        .topics
        .create_if_missing(topic, queues, perm::READ | perm::WRITE)
        .map_err(|e| error(response::SYSTEM_ERROR, e.to_string()))?;
    p.registrar
        .publish_topic_change(&change)
        .await
        .map_err(|e| error(response::SYSTEM_ERROR, e))?;
    Ok(change.config)
}

/// Validation common to single and batch sends; returns the topic config
/// and the queue id to use. A topic it auto-creates is registered with the
/// NameServers before it returns, as in RocketMQ, so the producer can route
/// to it as soon as its send is answered.
pub(super) async fn check_send(
    p: &SendPath,
    h: &SendMessageRequestHeader,
    body_len: usize,
) -> Result<(TopicSettings, i32), RemotingCommand> {
    if !p.writer.is_writable() {
        return Err(error(
            response::SERVICE_NOT_AVAILABLE,
            format!(
                "p {} is a slave and does not accept messages",
                p.config.broker_name
            ),
        ));
    }
    if !perm::is_writeable(p.live.broker_permission()) {
        return Err(error(
            response::NO_PERMISSION,
            format!(
                "the p[{}] sending message is forbidden",
                p.config.broker_addr()
            ),
        ));
    }
    if let Err(e) = basalt_common::topic::validate_topic(&h.topic) {
        return Err(error(response::MESSAGE_ILLEGAL, e.to_string()));
    }
    if basalt_common::topic::is_not_allowed_send_topic(&h.topic) {
        return Err(error(
            response::NO_PERMISSION,
            format!("sending message to topic[{}] is forbidden", h.topic),
        ));
    }
    if body_len > p.live.max_message_size() {
        return Err(error(
            response::MESSAGE_ILLEGAL,
            format!(
                "the message body size {body_len} is over the limit {}",
                p.live.max_message_size()
            ),
        ));
    }
    let topic_cfg = match p.topics.get(&h.topic) {
        Some(t) => t,
        None => auto_create_topic(p, h).await?,
    };
    if !perm::is_writeable(topic_cfg.perm) {
        return Err(error(
            response::NO_PERMISSION,
            format!("the topic[{}] sending message is forbidden", h.topic),
        ));
    }
    let mut queue_id = h.queue_id;
    if queue_id < 0 {
        queue_id = rand::rng().random_range(0..topic_cfg.write_queue_nums.max(1));
    }
    let limit = topic_cfg.write_queue_nums.max(topic_cfg.read_queue_nums);
    if queue_id >= limit {
        return Err(error(
            response::SYSTEM_ERROR,
            format!(
                "request queueId[{queue_id}] is illegal, topic {} has {limit} queues",
                h.topic
            ),
        ));
    }
    Ok((topic_cfg, queue_id))
}

/// Creates the topic a send names, from the auto-create template (or, for
/// a retry topic, from its group's settings), persisted and registered
/// before the send goes on.
async fn auto_create_topic(
    p: &SendPath,
    h: &SendMessageRequestHeader,
) -> Result<TopicSettings, RemotingCommand> {
    let created = if let Some(group) = h.topic.strip_prefix(reserved::RETRY_GROUP_PREFIX) {
        match p.groups.get(group) {
            Some(g) => {
                p.topics
                    .create_if_missing(&h.topic, g.retry_queue_nums, perm::READ | perm::WRITE)
            }
            None => Err(TopicCreateError::NotAllowed(h.topic.clone())),
        }
    } else {
        p.topics.create_on_send(
            &h.topic,
            if h.default_topic.is_empty() {
                reserved::AUTO_CREATE_TOPIC
            } else {
                &h.default_topic
            },
            h.default_topic_queue_nums.max(1),
            p.live.auto_create_topic_enable(),
        )
    };
    let change = created.map_err(|e| match e {
        TopicCreateError::NotAllowed(_) => error(response::TOPIC_NOT_EXIST, e.to_string()),
        e => error(response::SYSTEM_ERROR, e.to_string()),
    })?;
    p.registrar
        .publish_topic_change(&change)
        .await
        .map_err(|e| error(response::SYSTEM_ERROR, e))?;
    Ok(change.config)
}

/// Ensures a unique key and adds the cluster name, as the Java p does.
/// Sets `MSG_REGION` (regionId) and `TRACE_ON` (traceOn) on every stored
/// message, replacing a client's values, as Java's `buildMsgContext` does:
/// the 5.x Java client's consume trace drops a message without a region.
/// A client's `__CRC32#` property is dropped: only the store writes that
/// trailer, and a forged one would make the record fail its own check.
pub(super) fn broker_properties(p: &SendPath, raw: &[u8]) -> Vec<u8> {
    let [crc, uniq, cluster, region, trace] = properties::find_each(
        raw,
        [
            property::CRC32,
            property::UNIQ_KEY,
            property::CLUSTER,
            property::MSG_REGION,
            property::TRACE_ON,
        ],
    );
    let trace_on = if p.config.trace_on { "true" } else { "false" };
    let region_ok = region == Some(p.config.region_id.as_bytes());
    let trace_ok = trace == Some(trace_on.as_bytes());
    let mut drop = Vec::new();
    if crc.is_some() {
        drop.push(property::CRC32);
    }
    if region.is_some() && !region_ok {
        drop.push(property::MSG_REGION);
    }
    if trace.is_some() && !trace_ok {
        drop.push(property::TRACE_ON);
    }
    let mut props = if drop.is_empty() {
        raw.to_vec()
    } else {
        properties::without(raw, &drop)
    };
    if uniq.is_none() {
        properties::append(&mut props, property::UNIQ_KEY, &p.uniq.next_key());
    }
    if cluster.is_none() {
        properties::append(&mut props, property::CLUSTER, &p.config.broker_cluster_name);
    }
    if !region_ok {
        properties::append(&mut props, property::MSG_REGION, &p.config.region_id);
    }
    if !trace_ok {
        properties::append(&mut props, property::TRACE_ON, trace_on);
    }
    props
}

/// Maps a store result to a send response. `transaction_id` is set for a
/// half message (the producer ends its transaction with it).
pub(super) fn response_for(
    p: &SendPath,
    topic: &str,
    r: &PutMessageResult,
    queue_id: i32,
    transaction_id: Option<String>,
) -> RemotingCommand {
    let code = super::code_for_put(r.status);
    let Some(a) = r.append.as_ref().filter(|_| r.status.is_stored()) else {
        p.stats
            .put_failures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let remark = format!("{}: {}", r.status, r.detail.clone().unwrap_or_default());
        let mut resp = error(code, remark);
        // Clients read these without a null check even on errors.
        resp.ext_fields
            .insert(property::MSG_REGION, &p.config.region_id);
        resp.ext_fields.insert(
            property::TRACE_ON,
            if p.config.trace_on { "true" } else { "false" },
        );
        return resp;
    };
    p.stats
        .put_messages
        .fetch_add(a.msg_count as u64, std::sync::atomic::Ordering::Relaxed);
    p.stats
        .put_bytes
        .fetch_add(a.wrote_bytes as u64, std::sync::atomic::Ordering::Relaxed);
    p.stats
        .metrics
        .record_put(topic, a.msg_count as u64, a.wrote_bytes as u64);
    p.stats
        .items
        .record_put(topic, a.msg_count as u64, a.wrote_bytes as u64);
    let host = p.config.broker_addr();
    let msg_id = a
        .offsets()
        .iter()
        .map(|o| basalt_common::msgid::encode(host, *o))
        .collect::<Vec<_>>()
        .join(",");
    let header = SendMessageResponseHeader {
        msg_id,
        queue_id,
        queue_offset: a.queue_offset,
        transaction_id,
        batch_uniq_id: None,
    };
    let mut ext = header.to_ext();
    ext.insert(property::MSG_REGION, &p.config.region_id);
    ext.insert(
        property::TRACE_ON,
        if p.config.trace_on { "true" } else { "false" },
    );
    let mut resp = RemotingCommand::response(code, r.detail.clone()).with_ext(ext);
    if code != response::SUCCESS {
        resp.remark = Some(r.status.to_string());
    }
    resp
}

/// Whether the producer asked to wait for durability (`WAIT`, default true).
pub(super) fn wait_store_msg_ok(props: &[u8]) -> bool {
    wait_value_ok(properties::find(props, property::WAIT))
}

/// Where a single send is stored and with which properties, as the routing
/// steps (DLQ, transaction half, timer, delay level) rewrite it.
struct SendDestination {
    topic: String,
    queue_id: i32,
    props: Vec<u8>,
    /// The `DELAY` level still in `props` (0 once a routing step removed it).
    delay_level: i32,
}

/// Handles the send codes.
pub async fn send(p: &SendPath, channel: &Channel, req: &RemotingCommand) -> RemotingCommand {
    let header = match req.code {
        request::SEND_MESSAGE | request::SEND_REPLY_MESSAGE => {
            SendMessageRequestHeader::from_ext_v1(&req.ext_fields)
        }
        _ => SendMessageRequestHeader::from_ext_v2(&req.ext_fields),
    };
    let h = match header {
        Ok(h) => h,
        Err(e) => return super::bad_header(e),
    };
    let batch = req.code == request::SEND_BATCH_MESSAGE || h.batch.unwrap_or(false);
    if batch {
        return send_batch(p, channel, &h, &req.body).await;
    }
    let (topic_cfg, queue_id) = match check_send(p, &h, req.body.len()).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let raw_props = h.properties.as_deref().unwrap_or("").as_bytes();
    let scanned = SendProperties::scan(raw_props);
    let prepared = scanned.is_half_message(h.reconsume_times.unwrap_or(0));
    if prepared && p.live.reject_transaction_message() {
        return error(
            response::NO_PERMISSION,
            format!(
                "the broker[{}] sending transaction message is forbidden",
                p.config.broker_ip1
            ),
        );
    }
    let mut dest = SendDestination {
        topic: h.topic.clone(),
        queue_id,
        props: broker_properties(p, raw_props),
        delay_level: scanned.delay_level(),
    };
    if let Err(resp) = route_exhausted_retry(p, &h, &mut dest).await {
        return resp;
    }
    let transaction_id = prepared.then(|| route_half(&mut dest)).flatten();
    if let Err(resp) = route_delay_or_timer(p, &h, &mut dest, &scanned.timer) {
        return resp;
    }
    let draft = RecordDraft {
        topic: &dest.topic,
        queue_id: dest.queue_id,
        flag: h.flag,
        sys_flag: record_sys_flag(h.sys_flag, topic_cfg.topic_filter_type, prepared),
        born_timestamp: h.born_timestamp,
        born_host: channel.remote_addr(),
        store_host: p.config.broker_addr(),
        reconsume_times: h.reconsume_times.unwrap_or(0),
        prepared_transaction_offset: 0,
        body: &req.body,
        properties: &dest.props,
    };
    // No routing step changes `WAIT`.
    let r = p.writer.put(&[draft], scanned.wait_store_msg_ok()).await;
    // The response names the queue the send was for, before any DLQ or
    // delay rewrite, as in Java.
    response_for(p, &h.topic, &r, queue_id, transaction_id)
}

/// A retry past the group's limit goes to the group's dead-letter queue.
async fn route_exhausted_retry(
    p: &SendPath,
    h: &SendMessageRequestHeader,
    dest: &mut SendDestination,
) -> Result<(), RemotingCommand> {
    let Some(group) = dest.topic.strip_prefix(reserved::RETRY_GROUP_PREFIX) else {
        return Ok(());
    };
    let Some(g) = p.groups.get(group) else {
        return Err(error(
            response::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("subscription group {group} not exist"),
        ));
    };
    let max = h.max_reconsume_times.unwrap_or(g.retry_max_times);
    if h.reconsume_times.unwrap_or(0) >= max {
        let dlq = basalt_common::topic::dlq_topic(group);
        ensure_group_topic(p, &dlq, 1).await?;
        dest.props = properties::without(&dest.props, &[property::DELAY]);
        dest.delay_level = 0;
        dest.topic = dlq;
        dest.queue_id = 0;
    }
    Ok(())
}

/// A transaction's half message waits in the half topic for its producer's
/// decision (crate::transaction); it takes no delay. Returns its
/// transaction id (the message's unique key).
fn route_half(dest: &mut SendDestination) -> Option<String> {
    dest.props = properties::without(&dest.props, &[property::DELAY]);
    dest.delay_level = 0;
    let txid = properties::find(&dest.props, property::UNIQ_KEY)
        .map(|u| String::from_utf8_lossy(u).into_owned());
    dest.props =
        crate::transaction::messages::half_properties(&dest.props, &dest.topic, dest.queue_id);
    dest.topic = reserved::TRANS_HALF_TOPIC.to_string();
    dest.queue_id = 0;
    txid
}

/// A delay level sends the message through the schedule topic; a timer
/// property through the timer topic. A delay level wins over a timer, as in
/// RocketMQ (only normal and committed messages are scheduled). `timer` is
/// the client's timer properties; no earlier routing step changes them.
fn route_delay_or_timer(
    p: &SendPath,
    h: &SendMessageRequestHeader,
    dest: &mut SendDestination,
    timer: &TimerProperties<'_>,
) -> Result<(), RemotingCommand> {
    let delay_level = dest.delay_level;
    if delay_level <= 0 {
        if sysflag::is_consumable(h.sys_flag) {
            match timers::decide(timer, now_millis(), &p.config) {
                Err(refused) => return Err(error(refused.code, refused.remark)),
                Ok(TimerDecision::Timer { out_ms }) => {
                    dest.props = timers::timer_topic_properties(
                        &dest.props,
                        out_ms,
                        &dest.topic,
                        dest.queue_id,
                    );
                    dest.topic = reserved::TIMER_TOPIC.to_string();
                    dest.queue_id = 0;
                }
                Ok(TimerDecision::NotTimer | TimerDecision::DueNow) => {}
            }
        }
        return Ok(());
    }
    let mut props = if timer.any_requested() {
        timers::strip_timer_properties(&dest.props)
    } else {
        std::mem::take(&mut dest.props)
    };
    let level = delay_level.min(p.delays.max_level());
    props = properties::without(
        &props,
        &[property::DELAY, property::REAL_TOPIC, property::REAL_QID],
    );
    properties::append(&mut props, property::DELAY, &level.to_string());
    properties::append(&mut props, property::REAL_TOPIC, &dest.topic);
    properties::append(&mut props, property::REAL_QID, &dest.queue_id.to_string());
    dest.props = props;
    dest.topic = reserved::SCHEDULE_TOPIC.to_string();
    dest.queue_id = level - 1;
    Ok(())
}

/// The stored record's sysFlag: the client's, without its host flags (the
/// broker sets those), with MULTI_TAGS for a multi-tag topic, and a half
/// message stored as a plain message of the half topic (it gets a unit there).
fn record_sys_flag(client_flag: i32, filter: TagMode, prepared: bool) -> i32 {
    let mut sys_flag = client_flag & !(sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6);
    if filter == TagMode::MultiTag {
        sys_flag |= sysflag::MULTI_TAGS;
    }
    if prepared {
        sys_flag = crate::transaction::messages::with_transaction_type(
            sys_flag,
            sysflag::TRANSACTION_NOT_TYPE,
        );
    }
    sys_flag
}

async fn send_batch(
    p: &SendPath,
    channel: &Channel,
    h: &SendMessageRequestHeader,
    body: &Bytes,
) -> RemotingCommand {
    let (entries, client_flag) = match decode_batch(p, h, body) {
        // An inflated batch stores each entry's own body, uncompressed.
        Ok(d) if d.inflated => (
            d.entries,
            super::batch_body::without_compression(h.sys_flag),
        ),
        Ok(d) => (d.entries, h.sys_flag),
        Err(resp) => return resp,
    };
    let largest = entries.iter().map(|e| e.body.len()).max().unwrap_or(0);
    let (topic_cfg, queue_id) = match check_send(p, h, largest).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let batch_props = h.properties.as_deref().unwrap_or("").as_bytes();
    let props = match batch_entry_properties(p, batch_props, &entries) {
        Ok(props) => props,
        Err(resp) => return resp,
    };
    let sys_flag = record_sys_flag(client_flag, topic_cfg.topic_filter_type, false);
    let born_host = channel.remote_addr();
    let store_host = p.config.broker_addr();
    let drafts: Vec<RecordDraft<'_>> = entries
        .iter()
        .zip(&props)
        .map(|(e, p)| RecordDraft {
            topic: &h.topic,
            queue_id,
            flag: e.flag,
            sys_flag,
            born_timestamp: h.born_timestamp,
            born_host,
            store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &e.body,
            properties: p,
        })
        .collect();
    let r = p.writer.put(&drafts, wait_store_msg_ok(batch_props)).await;
    response_for(p, &h.topic, &r, queue_id, None)
}

/// The entries of a batch body, refused when the batch cannot be taken: to
/// a retry topic, over the size limit (the whole batch counts, as in
/// RocketMQ: a body of many tiny entries cannot become millions of records
/// under the put lock; a compressed body's inflated size counts too), empty
/// or undecodable.
fn decode_batch(
    p: &SendPath,
    h: &SendMessageRequestHeader,
    body: &Bytes,
) -> Result<super::batch_body::DecodedBatch, RemotingCommand> {
    if h.topic.starts_with(reserved::RETRY_GROUP_PREFIX) {
        return Err(error(
            response::MESSAGE_ILLEGAL,
            "a batch cannot be sent to a retry topic",
        ));
    }
    if body.len() > p.live.max_message_size() {
        return Err(error(
            response::MESSAGE_ILLEGAL,
            format!(
                "the batch body size {} is over the limit {}",
                body.len(),
                p.live.max_message_size()
            ),
        ));
    }
    match super::batch_body::decode(body, h.sys_flag, p.live.max_message_size()) {
        Ok(d) if !d.entries.is_empty() => Ok(d),
        Ok(_) => Err(error(response::MESSAGE_ILLEGAL, "empty batch")),
        Err(e) => Err(error(response::MESSAGE_ILLEGAL, e.to_string())),
    }
}

/// Each entry's stored properties. A batch carries no transaction, delay
/// level or timer.
fn batch_entry_properties(
    p: &SendPath,
    batch_props: &[u8],
    entries: &[basalt_common::batch::BatchEntry],
) -> Result<Vec<Vec<u8>>, RemotingCommand> {
    let is_half = |props: &[u8]| SendProperties::scan(props).is_half_message(0);
    if is_half(batch_props) || entries.iter().any(|e| is_half(&e.properties)) {
        return Err(error(
            response::MESSAGE_ILLEGAL,
            "batch message does not support transaction",
        ));
    }
    let props: Vec<Vec<u8>> = entries
        .iter()
        .map(|e| broker_properties(p, &e.properties))
        .collect();
    if props
        .iter()
        .any(|p| properties::find(p, property::DELAY).is_some_and(|d| d != b"0"))
    {
        return Err(error(
            response::MESSAGE_ILLEGAL,
            "a batch cannot carry a delay level",
        ));
    }
    if props.iter().any(|p| timers::has_timer_property(p)) {
        return Err(error(
            response::MESSAGE_ILLEGAL,
            "a batch cannot carry timer properties (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS, __STARTDELIVERTIME)",
        ));
    }
    Ok(props)
}

/// The properties of a failed message's retry copy: its own, without CRC
/// and delay, naming the topic it came from and the original message id.
fn retry_properties(h: &ConsumerSendMsgBackRequestHeader, v: &RecordView<'_>) -> Vec<u8> {
    let mut props = properties::without(v.properties, &[property::CRC32, property::DELAY]);
    if properties::find(&props, property::RETRY_TOPIC).is_none() {
        properties::append(&mut props, property::RETRY_TOPIC, &v.topic_str());
    }
    if properties::find(&props, property::ORIGIN_MESSAGE_ID).is_none() {
        let origin = h
            .origin_msg_id
            .clone()
            .or_else(|| {
                properties::find(v.properties, property::UNIQ_KEY)
                    .map(|u| String::from_utf8_lossy(u).into_owned())
            })
            .unwrap_or_else(|| basalt_common::msgid::encode(v.store_host, v.physical_offset));
        properties::append(&mut props, property::ORIGIN_MESSAGE_ID, &origin);
    }
    props
}

/// Where a failed message goes: the group's DLQ past its retry limit (or
/// when the consumer asks with a negative delay level), otherwise a random
/// queue of its retry topic with a delay level. Returns (topic, queue id,
/// delay level; 0 for none).
async fn send_back_destination(
    p: &SendPath,
    h: &ConsumerSendMsgBackRequestHeader,
    g: &crate::metadata::formats::SubscriptionGroupConfig,
    reconsume: i32,
) -> Result<(String, i32, i32), RemotingCommand> {
    let max = h.max_reconsume_times.unwrap_or(g.retry_max_times);
    if reconsume >= max || h.delay_level < 0 {
        let dlq = basalt_common::topic::dlq_topic(&h.group);
        ensure_group_topic(p, &dlq, 1).await?;
        return Ok((dlq, 0, 0));
    }
    let retry = basalt_common::topic::retry_topic(&h.group);
    let t = ensure_group_topic(p, &retry, g.retry_queue_nums).await?;
    let qid = rand::rng().random_range(0..t.write_queue_nums.max(1));
    let level = if h.delay_level == 0 {
        3 + reconsume
    } else {
        h.delay_level
    };
    Ok((retry, qid, level.min(p.delays.max_level())))
}

/// CONSUMER_SEND_MSG_BACK: a consumer failed a message; store a copy for a
/// later retry (through the delay levels) or, past the limit, in the DLQ.
pub async fn send_back(p: &SendPath, channel: &Channel, req: &RemotingCommand) -> RemotingCommand {
    let h = match ConsumerSendMsgBackRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return super::bad_header(e),
    };
    if let Err(resp) = super::checks::group(&h.group) {
        return resp;
    }
    if !p.writer.is_writable() {
        return error(
            response::SERVICE_NOT_AVAILABLE,
            "a slave does not take retries",
        );
    }
    let g = match p
        .groups
        .get_or_create(&h.group, p.live.auto_create_subscription_group())
    {
        Ok(g) => g,
        Err(e) => return error(response::SUBSCRIPTION_GROUP_NOT_EXIST, e.to_string()),
    };
    let Some(rec) = p.store.look_message_by_offset(h.offset) else {
        return error(
            response::SYSTEM_ERROR,
            format!("look message by offset failed, {}", h.offset),
        );
    };
    let v = match RecordView::parse(&rec, false) {
        Ok(v) => v,
        Err(e) => {
            return error(
                response::SYSTEM_ERROR,
                format!("stored message unreadable: {e}"),
            );
        }
    };
    let mut props = retry_properties(&h, &v);
    let back_topic = properties::find(&props, property::RETRY_TOPIC)
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .unwrap_or_else(|| v.topic_str().to_string());
    let reconsume = v.reconsume_times;
    let (topic, queue_id, delay) = match send_back_destination(p, &h, &g, reconsume).await {
        Ok(d) => d,
        Err(resp) => return resp,
    };
    let (store_topic, store_qid) = if delay > 0 {
        properties::append(&mut props, property::DELAY, &delay.to_string());
        properties::append(&mut props, property::REAL_TOPIC, &topic);
        properties::append(&mut props, property::REAL_QID, &queue_id.to_string());
        (reserved::SCHEDULE_TOPIC.to_string(), delay - 1)
    } else {
        (topic, queue_id)
    };
    let _ = channel;
    let draft = RecordDraft {
        topic: &store_topic,
        queue_id: store_qid,
        flag: v.flag,
        sys_flag: v.sys_flag,
        born_timestamp: v.born_timestamp,
        born_host: v.born_host,
        store_host: p.config.broker_addr(),
        reconsume_times: reconsume + 1,
        prepared_transaction_offset: 0,
        body: v.body,
        properties: &props,
    };
    let r = p.writer.put(&[draft], true).await;
    if r.status.is_stored() {
        // As Java: the retry counts for the group and the message's first
        // topic, and a put to the delay topic counts as that topic's.
        if let Some(a) = r.append.as_ref().filter(|_| delay > 0) {
            p.stats
                .items
                .record_put(&store_topic, 1, a.wrote_bytes as u64);
        }
        p.stats.items.record_send_back(&h.group, &back_topic);
        RemotingCommand::response(response::SUCCESS, None)
    } else {
        error(
            response::SYSTEM_ERROR,
            format!("{}: {}", r.status, r.detail.unwrap_or_default()),
        )
    }
}
