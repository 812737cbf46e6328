//! The [`Admin`] calls operators run daily (docs/protocol.md#operations):
//! draining a broker's writes, resetting a group's offsets, producer
//! connections, consumers' running info, live broker settings.

use std::collections::BTreeMap;

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::request;
use basalt_remoting::header::{
    AddWritePermOfBrokerResponseHeader, CommandHeader, GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader, ResetOffsetRequestHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
use basalt_remoting::protocol::{MessageQueue, ResetOffsetBody};
use serde::Deserialize;

use crate::admin::{Admin, Connection};
use crate::error::{ClientError, Result};
use crate::message::TopicQueue;

/// GET_PRODUCER_CONNECTION_LIST's body (`ProducerConnection`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerConnection {
    #[serde(default)]
    pub connection_set: Vec<Connection>,
}

/// One queue a consumer holds, as it reports it (`ProcessQueueInfo`, the
/// fields `basalt admin consumer-status` shows).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessQueueInfo {
    #[serde(default)]
    pub commit_offset: i64,
    #[serde(default)]
    pub cached_msg_min_offset: i64,
    #[serde(default)]
    pub cached_msg_max_offset: i64,
    #[serde(default)]
    pub cached_msg_count: i64,
    #[serde(default)]
    pub last_pull_timestamp: i64,
    #[serde(default)]
    pub last_consume_timestamp: i64,
}

/// GET_CONSUMER_RUNNING_INFO's body (`ConsumerRunningInfo`): the
/// consumer's settings and the queues it holds.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerRunningInfo {
    #[serde(default)]
    pub properties: BTreeMap<String, serde_json::Value>,
    #[serde(
        default,
        deserialize_with = "basalt_remoting::fastjson::mq_map::deserialize"
    )]
    pub mq_table: Vec<(MessageQueue, ProcessQueueInfo)>,
}

impl Admin {
    /// WIPE_WRITE_PERM_OF_BROKER (`writable` false) or
    /// ADD_WRITE_PERM_OF_BROKER (true) at every NameServer, as `mqadmin
    /// wipeWritePerm` / `addWritePerm` do: the topics each NameServer
    /// changed, by NameServer address. Stops at the first that refuses or
    /// cannot be reached.
    pub async fn set_broker_write_perm(
        &self,
        broker_name: &str,
        writable: bool,
    ) -> Result<Vec<(String, i32)>> {
        if broker_name.is_empty() {
            return Err(ClientError::InvalidArgument("empty broker name".into()));
        }
        let code = if writable {
            request::ADD_WRITE_PERM_OF_BROKER
        } else {
            request::WIPE_WRITE_PERM_OF_BROKER
        };
        // Both request headers hold only `brokerName`.
        let ext = WipeWritePermOfBrokerRequestHeader {
            broker_name: broker_name.to_string(),
        }
        .to_ext();
        let mut out = Vec::new();
        for ns in self.instance().namesrv_addrs().to_vec() {
            let cmd = self.instance().request(code).with_ext(ext.clone());
            let resp = self.instance().invoke_ok(&ns, cmd, self.timeout()).await?;
            let count =
                topic_count(&resp, writable).map_err(|e| ClientError::bad_response(&ns, e))?;
            out.push((ns, count));
        }
        Ok(out)
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET at every master of `topic` (Java
    /// `resetOffsetByTimestamp`): the group's offsets go to the first
    /// message stored at or after `timestamp_ms` (-1: the max offset, i.e.
    /// skip what has accumulated); online consumers are told. Without
    /// `force` a queue only moves back. Returns the new offsets, sorted.
    pub async fn reset_offset_by_time(
        &self,
        group: &str,
        topic: &str,
        timestamp_ms: i64,
        force: bool,
    ) -> Result<Vec<(TopicQueue, i64)>> {
        basalt_common::topic::validate_group(group)
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let route = self.topic_route(topic).await?;
        let header = ResetOffsetRequestHeader {
            topic: topic.to_string(),
            group: group.to_string(),
            timestamp: timestamp_ms,
            is_force: force,
            queue_id: None,
            offset: None,
        };
        let mut out = Vec::new();
        for bd in &route.broker_datas {
            let Some(addr) = bd.master_addr() else {
                continue;
            };
            let cmd = self
                .instance()
                .request(request::INVOKE_BROKER_TO_RESET_OFFSET)
                .with_ext(header.to_ext());
            let resp = self.instance().invoke_ok(addr, cmd, self.timeout()).await?;
            let body = ResetOffsetBody::decode(&resp.body)
                .map_err(|e| ClientError::bad_response(addr, e))?;
            out.extend(body.offset_table.into_iter().map(|(mq, o)| (mq.into(), o)));
        }
        out.sort();
        Ok(out)
    }

    /// GET_PRODUCER_CONNECTION_LIST at each master serving `topic` (a
    /// producer group has no route of its own): the connections of the
    /// first broker that knows the group.
    pub async fn producer_connections(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<ProducerConnection> {
        let route = self.topic_route(topic).await?;
        let header = GetProducerConnectionListRequestHeader {
            producer_group: group.to_string(),
        };
        let mut last_err = None;
        for bd in &route.broker_datas {
            let Some(addr) = bd.master_addr() else {
                continue;
            };
            let cmd = self
                .instance()
                .request(request::GET_PRODUCER_CONNECTION_LIST)
                .with_ext(header.to_ext());
            match self.instance().invoke_ok(addr, cmd, self.timeout()).await {
                Ok(resp) => {
                    return basalt_remoting::fastjson::from_slice(&resp.body)
                        .map_err(|e| ClientError::bad_response(addr, e));
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or(ClientError::NoRoute {
            topic: topic.to_string(),
        }))
    }

    /// GET_CONSUMER_RUNNING_INFO of one consumer, through a broker serving
    /// its group (the broker asks the consumer).
    pub async fn consumer_running_info(
        &self,
        group: &str,
        client_id: &str,
    ) -> Result<ConsumerRunningInfo> {
        let retry = basalt_common::topic::retry_topic(group);
        let route = self.topic_route(&retry).await?;
        let header = GetConsumerRunningInfoRequestHeader {
            consumer_group: group.to_string(),
            client_id: client_id.to_string(),
            jstack_enable: Some(false),
        };
        let mut last_err = None;
        for bd in &route.broker_datas {
            let Some(addr) = bd.master_addr() else {
                continue;
            };
            let cmd = self
                .instance()
                .request(request::GET_CONSUMER_RUNNING_INFO)
                .with_ext(header.to_ext());
            match self.instance().invoke_ok(addr, cmd, self.timeout()).await {
                Ok(resp) => {
                    return basalt_remoting::fastjson::from_slice(&resp.body)
                        .map_err(|e| ClientError::bad_response(addr, e));
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or(ClientError::NoRoute { topic: retry }))
    }
}

fn topic_count(
    resp: &RemotingCommand,
    writable: bool,
) -> std::result::Result<i32, basalt_remoting::HeaderError> {
    if writable {
        AddWritePermOfBrokerResponseHeader::from_ext(&resp.ext_fields).map(|h| h.add_topic_count)
    } else {
        WipeWritePermOfBrokerResponseHeader::from_ext(&resp.ext_fields).map(|h| h.wipe_topic_count)
    }
}
