//! [`Admin`]: what `basalt admin` needs — topics, clusters, broker runtime
//! info, consumer progress and connections, message lookup (Java
//! `DefaultMQAdminExt` / `MQAdminImpl`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, CreateTopicRequestHeader, DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader, GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader,
    ListTransactionsRequestHeader, QueryMessageRequestHeader, ViewMessageRequestHeader,
};
use basalt_remoting::protocol::{
    self, ClusterInfo, ConsumeStats, KvTable, SubscriptionData, TopicConfig, TopicList,
    TopicRouteData, TopicStatsTable, TransactionList,
};
use serde::Deserialize;

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::instance::ClientInstance;
use crate::message::{MessageExt, TopicQueue};
use crate::route::MASTER_ID;

/// Ext field that marks a QUERY_MESSAGE as a lookup by `UNIQ_KEY`.
const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

/// One queue's offsets (`TopicOffset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStats {
    pub queue: TopicQueue,
    pub min_offset: i64,
    pub max_offset: i64,
    pub last_update_timestamp: i64,
}

/// A consumer group's position in one queue (`OffsetWrapper`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueProgress {
    pub queue: TopicQueue,
    pub broker_offset: i64,
    pub consumer_offset: i64,
    pub last_timestamp: i64,
}

impl QueueProgress {
    /// Messages not consumed yet.
    pub fn lag(&self) -> i64 {
        (self.broker_offset - self.consumer_offset.max(0)).max(0)
    }
}

/// A consumer group's progress over every broker (`ConsumeStats`, merged).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConsumeProgress {
    pub consume_tps: f64,
    /// Sorted by queue.
    pub queues: Vec<QueueProgress>,
}

impl ConsumeProgress {
    /// Total messages not consumed yet (`computeTotalDiff`).
    pub fn total_lag(&self) -> i64 {
        self.queues.iter().map(QueueProgress::lag).sum()
    }
}

/// One client connection of a consumer group (`Connection`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub client_addr: String,
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub version: i32,
}

/// GET_CONSUMER_CONNECTION_LIST's body (`ConsumerConnection`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerConnection {
    #[serde(default)]
    pub connection_set: Vec<Connection>,
    #[serde(default)]
    pub subscription_table: BTreeMap<String, SubscriptionData>,
    #[serde(default)]
    pub consume_type: protocol::ConsumeType,
    #[serde(default)]
    pub message_model: protocol::MessageModel,
    #[serde(default)]
    pub consume_from_where: protocol::ConsumeFromWhere,
}

/// Administration client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Admin {
    instance: Arc<ClientInstance>,
}

impl Admin {
    pub fn new(config: ClientConfig) -> Self {
        Self::with_instance(ClientInstance::new(config))
    }

    pub fn with_instance(instance: Arc<ClientInstance>) -> Self {
        Self { instance }
    }

    pub fn instance(&self) -> &Arc<ClientInstance> {
        &self.instance
    }

    /// Closes the connections.
    pub fn shutdown(&self) {
        self.instance.remoting().shutdown();
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.instance.config().request_timeout
    }

    // ------------------------------------------------------ NameServer views

    /// GET_BROKER_CLUSTER_INFO.
    pub async fn cluster_info(&self) -> Result<ClusterInfo> {
        let (addr, resp) = self
            .instance
            .invoke_namesrv(self.instance.request(request::GET_BROKER_CLUSTER_INFO))
            .await?;
        check(&resp, &addr)?;
        ClusterInfo::decode(&resp.body).map_err(|e| ClientError::bad_response(&addr, e))
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER, sorted.
    pub async fn topic_list(&self) -> Result<Vec<String>> {
        let (addr, resp) = self
            .instance
            .invoke_namesrv(
                self.instance
                    .request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
            )
            .await?;
        check(&resp, &addr)?;
        let list: TopicList = basalt_remoting::fastjson::from_slice(&resp.body)
            .map_err(|e| ClientError::bad_response(&addr, e))?;
        Ok(list.topic_list.into_iter().collect())
    }

    /// GET_ROUTEINFO_BY_TOPIC.
    pub async fn topic_route(&self, topic: &str) -> Result<TopicRouteData> {
        self.instance.fetch_route(topic).await
    }

    /// The master (name, address) of every broker group of `cluster`.
    pub async fn cluster_masters(&self, cluster: &str) -> Result<Vec<(String, String)>> {
        let info = self.cluster_info().await?;
        let names = info
            .cluster_addr_table
            .get(cluster)
            .ok_or_else(|| ClientError::InvalidArgument(format!("no cluster named {cluster}")))?;
        Ok(names
            .iter()
            .filter_map(|n| {
                let bd = info.broker_addr_table.get(n)?;
                Some((n.clone(), bd.broker_addrs.get(&MASTER_ID)?.clone()))
            })
            .collect())
    }

    // ---------------------------------------------------------------- topics

    /// UPDATE_AND_CREATE_TOPIC at one broker.
    pub async fn create_topic(&self, broker_addr: &str, config: &TopicConfig) -> Result<()> {
        let header = CreateTopicRequestHeader {
            topic: config.topic_name.clone(),
            default_topic: Some(basalt_common::constants::topic::AUTO_CREATE_TOPIC.into()),
            read_queue_nums: config.read_queue_nums,
            write_queue_nums: config.write_queue_nums,
            perm: config.perm,
            topic_filter_type: Some(config.topic_filter_type.name().to_string()),
            topic_sys_flag: Some(config.topic_sys_flag),
            order: Some(config.order),
            attributes: None,
            force: None,
        };
        basalt_common::topic::validate_topic(&header.topic)
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let cmd = self
            .instance
            .request(request::UPDATE_AND_CREATE_TOPIC)
            .with_ext(header.to_ext());
        self.instance
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        Ok(())
    }

    /// UPDATE_AND_CREATE_TOPIC at every master of `cluster`; returns the
    /// addresses updated.
    pub async fn create_topic_in_cluster(
        &self,
        cluster: &str,
        config: &TopicConfig,
    ) -> Result<Vec<String>> {
        let masters = self.cluster_masters(cluster).await?;
        if masters.is_empty() {
            return Err(ClientError::InvalidArgument(format!(
                "cluster {cluster} has no master"
            )));
        }
        let mut done = Vec::new();
        for (_, addr) in masters {
            self.create_topic(&addr, config).await?;
            done.push(addr);
        }
        Ok(done)
    }

    /// DELETE_TOPIC_IN_BROKER at every master of `cluster`, then
    /// DELETE_TOPIC_IN_NAMESRV at every NameServer.
    pub async fn delete_topic(&self, topic: &str, cluster: &str) -> Result<()> {
        for (_, addr) in self.cluster_masters(cluster).await? {
            let cmd = self
                .instance
                .request(request::DELETE_TOPIC_IN_BROKER)
                .with_ext(
                    DeleteTopicRequestHeader {
                        topic: topic.to_string(),
                    }
                    .to_ext(),
                );
            self.instance.invoke_ok(&addr, cmd, self.timeout()).await?;
        }
        for ns in self.instance.namesrv_addrs().to_vec() {
            let cmd = self
                .instance
                .request(request::DELETE_TOPIC_IN_NAMESRV)
                .with_ext(
                    DeleteTopicFromNamesrvRequestHeader {
                        topic: topic.to_string(),
                        cluster_name: Some(cluster.to_string()),
                    }
                    .to_ext(),
                );
            self.instance.invoke_ok(&ns, cmd, self.timeout()).await?;
        }
        Ok(())
    }

    /// GET_TOPIC_STATS_INFO at every master of the topic, merged and sorted.
    pub async fn topic_stats(&self, topic: &str) -> Result<Vec<QueueStats>> {
        let route = self.instance.fetch_route(topic).await?;
        let mut out = Vec::new();
        for bd in &route.broker_datas {
            let Some(addr) = bd.master_addr() else {
                continue;
            };
            let cmd = self
                .instance
                .request(request::GET_TOPIC_STATS_INFO)
                .with_ext(
                    GetTopicStatsInfoRequestHeader {
                        topic: topic.to_string(),
                    }
                    .to_ext(),
                );
            let resp = self.instance.invoke_ok(addr, cmd, self.timeout()).await?;
            let table = TopicStatsTable::decode(&resp.body)
                .map_err(|e| ClientError::bad_response(addr, e))?;
            out.extend(table.offset_table.into_iter().map(|(mq, o)| QueueStats {
                queue: mq.into(),
                min_offset: o.min_offset,
                max_offset: o.max_offset,
                last_update_timestamp: o.last_update_timestamp,
            }));
        }
        out.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(out)
    }

    // --------------------------------------------------------------- brokers

    /// GET_BROKER_RUNTIME_INFO: the broker's key/value status table.
    pub async fn broker_runtime_info(&self, broker_addr: &str) -> Result<BTreeMap<String, String>> {
        let cmd = self.instance.request(request::GET_BROKER_RUNTIME_INFO);
        let resp = self
            .instance
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        let table: KvTable = basalt_remoting::fastjson::from_slice(&resp.body)
            .map_err(|e| ClientError::bad_response(broker_addr, e))?;
        Ok(table.table)
    }

    /// Basalt's LIST_TRANSACTIONS: the broker's unresolved transactional
    /// (half) messages, at most `max` of them.
    pub async fn transactions(&self, broker_addr: &str, max: i32) -> Result<TransactionList> {
        let header = ListTransactionsRequestHeader { max: Some(max) };
        let cmd = self
            .instance
            .request(request::LIST_TRANSACTIONS)
            .with_ext(header.to_ext());
        let resp = self
            .instance
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        serde_json::from_slice(&resp.body).map_err(|e| ClientError::bad_response(broker_addr, e))
    }

    // ------------------------------------------------------------- consumers

    /// GET_CONSUME_STATS at every master serving the group (found through the
    /// group's retry topic, or `topic`), merged: offsets and lag per queue.
    pub async fn consume_stats(&self, group: &str, topic: Option<&str>) -> Result<ConsumeProgress> {
        let retry = basalt_common::topic::retry_topic(group);
        let route = match self.instance.fetch_route(&retry).await {
            Ok(r) => r,
            Err(ClientError::NoRoute { .. }) if topic.is_some() => {
                self.instance.fetch_route(topic.unwrap_or_default()).await?
            }
            Err(e) => return Err(e),
        };
        let mut progress = ConsumeProgress::default();
        for bd in &route.broker_datas {
            let Some(addr) = bd.master_addr() else {
                continue;
            };
            let header = GetConsumeStatsRequestHeader {
                consumer_group: group.to_string(),
                topic: topic.map(str::to_string),
            };
            let cmd = self
                .instance
                .request(request::GET_CONSUME_STATS)
                .with_ext(header.to_ext());
            let resp = self.instance.invoke_ok(addr, cmd, self.timeout()).await?;
            let stats =
                ConsumeStats::decode(&resp.body).map_err(|e| ClientError::bad_response(addr, e))?;
            progress.consume_tps += stats.consume_tps;
            progress
                .queues
                .extend(stats.offset_table.into_iter().map(|(mq, w)| QueueProgress {
                    queue: mq.into(),
                    broker_offset: w.broker_offset,
                    consumer_offset: w.consumer_offset,
                    last_timestamp: w.last_timestamp,
                }));
        }
        progress.queues.sort_by(|a, b| a.queue.cmp(&b.queue));
        Ok(progress)
    }

    /// GET_CONSUMER_CONNECTION_LIST at a broker serving the group.
    pub async fn consumer_connections(&self, group: &str) -> Result<ConsumerConnection> {
        let retry = basalt_common::topic::retry_topic(group);
        let route = self.instance.fetch_route(&retry).await?;
        let mut last_err = None;
        for bd in &route.broker_datas {
            let Some(addr) = bd.master_addr() else {
                continue;
            };
            let mut cmd = self.instance.request(request::GET_CONSUMER_CONNECTION_LIST);
            cmd.ext_fields.insert("consumerGroup", group);
            match self.instance.invoke_ok(addr, cmd, self.timeout()).await {
                Ok(resp) => {
                    return basalt_remoting::fastjson::from_slice(&resp.body)
                        .map_err(|e| ClientError::bad_response(addr, e));
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or(ClientError::NoRoute { topic: retry }))
    }

    // -------------------------------------------------------------- messages

    /// QUERY_MESSAGE by business key at every broker of `topic`: the
    /// messages stored between `begin_ms` and `end_ms` whose KEYS contain
    /// `key` (the broker's index can return hash collisions, so each is
    /// checked).
    pub async fn query_message_by_key(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<MessageExt>> {
        let msgs = self
            .query_message(topic, key, max_num, begin_ms, end_ms, false)
            .await?;
        Ok(msgs
            .into_iter()
            .filter(|m| m.keys.iter().any(|k| k == key))
            .collect())
    }

    /// QUERY_MESSAGE by client id (`UNIQ_KEY`).
    pub async fn query_message_by_uniq_key(
        &self,
        topic: &str,
        uniq_key: &str,
    ) -> Result<Vec<MessageExt>> {
        let msgs = self
            .query_message(topic, uniq_key, 32, 0, i64::MAX, true)
            .await?;
        Ok(msgs
            .into_iter()
            .filter(|m| m.uniq_key() == Some(uniq_key))
            .collect())
    }

    async fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin_ms: i64,
        end_ms: i64,
        uniq: bool,
    ) -> Result<Vec<MessageExt>> {
        let route = self.instance.fetch_route(topic).await?;
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for bd in &route.broker_datas {
            let Some(addr) = bd
                .broker_addrs
                .get(&MASTER_ID)
                .or_else(|| bd.broker_addrs.values().next())
            else {
                continue;
            };
            let header = QueryMessageRequestHeader {
                topic: topic.to_string(),
                key: key.to_string(),
                max_num,
                begin_timestamp: begin_ms,
                end_timestamp: end_ms,
            };
            let mut cmd = self
                .instance
                .request(request::QUERY_MESSAGE)
                .with_ext(header.to_ext());
            cmd.ext_fields
                .insert(UNIQUE_KEY_QUERY, if uniq { "true" } else { "false" });
            let resp = self.instance.invoke(addr, cmd, self.timeout() * 3).await?;
            match resp.code {
                response::SUCCESS => {}
                response::QUERY_NOT_FOUND => continue,
                code => return Err(ClientError::broker(code, resp.remark, addr)),
            }
            let (msgs, err) = crate::decode::decode_messages(&resp.body);
            if let Some(e) = err {
                tracing::warn!(broker = %addr, error = %e, "query body has an undecodable record");
            }
            for mut m in msgs {
                if m.topic == topic && seen.insert(m.offset_msg_id.clone()) {
                    m.broker_name.clone_from(&bd.broker_name);
                    out.push(m);
                }
            }
        }
        Ok(out)
    }

    /// VIEW_MESSAGE_BY_ID: the message an offset msgId points at (the msgId
    /// holds the broker address and the CommitLog offset).
    pub async fn view_message(&self, offset_msg_id: &str) -> Result<MessageExt> {
        let (addr, offset) = basalt_common::msgid::decode(offset_msg_id)
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let addr = addr.to_string();
        let header = ViewMessageRequestHeader {
            offset,
            topic: None,
        };
        let cmd = self
            .instance
            .request(request::VIEW_MESSAGE_BY_ID)
            .with_ext(header.to_ext());
        let resp = self.instance.invoke_ok(&addr, cmd, self.timeout()).await?;
        let (mut msgs, err) = crate::decode::decode_messages(&resp.body);
        if msgs.is_empty() {
            return Err(ClientError::bad_response(
                &addr,
                err.map(|e| e.to_string())
                    .unwrap_or_else(|| "empty body".into()),
            ));
        }
        Ok(msgs.swap_remove(0))
    }

    /// GET_MAX_OFFSET of a queue.
    pub async fn max_offset(&self, mq: &TopicQueue) -> Result<i64> {
        self.instance.max_offset(mq).await
    }

    /// GET_MIN_OFFSET of a queue.
    pub async fn min_offset(&self, mq: &TopicQueue) -> Result<i64> {
        self.instance.min_offset(mq).await
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP of a queue.
    pub async fn search_offset(&self, mq: &TopicQueue, timestamp_ms: i64) -> Result<i64> {
        self.instance.search_offset(mq, timestamp_ms).await
    }
}

fn check(resp: &basalt_remoting::RemotingCommand, addr: &str) -> Result<()> {
    if resp.code == response::SUCCESS {
        Ok(())
    } else {
        Err(ClientError::broker(resp.code, resp.remark.clone(), addr))
    }
}
