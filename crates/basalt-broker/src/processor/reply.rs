//! SEND_REPLY_MESSAGE / SEND_REPLY_MESSAGE_V2: request-reply
//! (docs/protocol.md#request-reply), as RocketMQ's `ReplyMessageProcessor`:
//! the reply is pushed to the requesting client with
//! PUSH_REPLY_MESSAGE_TO_CLIENT over the connection its client id
//! heartbeats on, and (with `storeReplyMessageEnable`) stored in the reply
//! topic.

use std::time::Duration;

use basalt_common::constants::property;
use basalt_common::properties;
use basalt_common::record::RecordDraft;
use basalt_common::sysflag;
use basalt_common::time::now_millis;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
};
use basalt_remoting::{Channel, RemotingCommand};
use basalt_store::PutMessageStatus;

use super::paths::{ReplyPath, SendPath};
use super::send::{broker_properties, check_send, response_for, wait_store_msg_ok};
use super::{bad_header, error};
use crate::metadata::formats::TagMode;

/// How long the requester may take to take a pushed reply (RocketMQ's
/// `callClient` timeout).
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// Handles the reply codes.
pub async fn send_reply(
    r: &ReplyPath,
    channel: &Channel,
    req: &RemotingCommand,
) -> RemotingCommand {
    let header = match req.code {
        request::SEND_REPLY_MESSAGE => SendMessageRequestHeader::from_ext_v1(&req.ext_fields),
        _ => SendMessageRequestHeader::from_ext_v2(&req.ext_fields),
    };
    let h = match header {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    let p = &r.send;
    let (topic_cfg, queue_id) = match check_send(p, &h, req.body.len()).await {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let raw_props = h.properties.as_deref().unwrap_or("").as_bytes();
    let pushed = push_reply(r, channel, &h, queue_id, raw_props, &req.body).await;
    let mut resp = match &pushed {
        Ok(()) => pushed_response(p, queue_id),
        Err(remark) => {
            tracing::warn!(topic = %h.topic, "{remark}");
            with_region(p, error(response::SYSTEM_ERROR, remark.clone()))
        }
    };
    if p.config.store_reply_message_enable {
        let props = broker_properties(p, raw_props);
        let mut sys_flag = h.sys_flag & !(sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6);
        if topic_cfg.topic_filter_type == TagMode::MultiTag {
            sys_flag |= sysflag::MULTI_TAGS;
        }
        let draft = RecordDraft {
            topic: &h.topic,
            queue_id,
            flag: h.flag,
            sys_flag,
            born_timestamp: h.born_timestamp,
            born_host: channel.remote_addr(),
            store_host: p.config.broker_addr(),
            reconsume_times: h.reconsume_times.unwrap_or(0),
            prepared_transaction_offset: 0,
            body: &req.body,
            properties: &props,
        };
        let stored = p.writer.put(&[draft], wait_store_msg_ok(&props)).await;
        if !stored.status.is_stored() {
            tracing::warn!(topic = %h.topic, status = %stored.status, "cannot store a reply message");
        } else if pushed.is_ok() && stored.status == PutMessageStatus::PutOk {
            resp = response_for(p, &h.topic, &stored, queue_id, None);
        }
    }
    resp
}

/// Pushes the reply to the client named in its `REPLY_TO_CLIENT` property.
/// `Err` is the remark for the replier.
async fn push_reply(
    r: &ReplyPath,
    replier: &Channel,
    h: &SendMessageRequestHeader,
    queue_id: i32,
    raw_props: &[u8],
    body: &bytes::Bytes,
) -> Result<(), String> {
    let Some(client_id) = properties::find(raw_props, property::REPLY_TO_CLIENT)
        .map(|c| String::from_utf8_lossy(c).into_owned())
    else {
        return Err(format!(
            "reply message properties[{}] is null",
            property::REPLY_TO_CLIENT
        ));
    };
    let Some(requester) = r.clients.client_channel(&client_id) else {
        return Err(format!(
            "push reply message fail, channel of <{client_id}> not found."
        ));
    };
    let mut props = properties::without(raw_props, &[property::CRC32, property::PUSH_REPLY_TIME]);
    properties::append(
        &mut props,
        property::PUSH_REPLY_TIME,
        &now_millis().to_string(),
    );
    let header = ReplyMessageRequestHeader {
        producer_group: h.producer_group.clone(),
        topic: h.topic.clone(),
        default_topic: h.default_topic.clone(),
        default_topic_queue_nums: h.default_topic_queue_nums,
        queue_id,
        sys_flag: h.sys_flag,
        born_timestamp: h.born_timestamp,
        flag: h.flag,
        properties: Some(String::from_utf8_lossy(&props).into_owned()),
        reconsume_times: h.reconsume_times,
        unit_mode: h.unit_mode,
        born_host: replier.remote_addr().to_string(),
        store_host: r.send.config.broker_addr().to_string(),
        store_timestamp: now_millis(),
    };
    let cmd = RemotingCommand::request(request::PUSH_REPLY_MESSAGE_TO_CLIENT)
        .with_ext(header.to_ext())
        .with_body(body.clone());
    match requester.request(cmd, PUSH_TIMEOUT).await {
        Ok(resp) if resp.code == response::SUCCESS => Ok(()),
        Ok(resp) => Err(format!(
            "push reply message to {client_id} fail: {} {}",
            resp.code,
            resp.remark.unwrap_or_default()
        )),
        Err(e) => Err(format!("push reply message to {client_id} fail: {e}")),
    }
}

/// The answer to a pushed reply that was not stored (RocketMQ answers msgId
/// "0" and offset 0 "to avoid client decoding exception").
fn pushed_response(p: &SendPath, queue_id: i32) -> RemotingCommand {
    let header = SendMessageResponseHeader {
        msg_id: "0".into(),
        queue_id,
        queue_offset: 0,
        transaction_id: None,
        batch_uniq_id: None,
    };
    with_region(
        p,
        RemotingCommand::response(response::SUCCESS, None).with_ext(header.to_ext()),
    )
}

/// Adds the region and trace switch every send answer carries.
fn with_region(p: &SendPath, mut resp: RemotingCommand) -> RemotingCommand {
    resp.ext_fields
        .insert(property::MSG_REGION, &p.config.region_id);
    resp.ext_fields.insert(
        property::TRACE_ON,
        if p.config.trace_on { "true" } else { "false" },
    );
    resp
}
