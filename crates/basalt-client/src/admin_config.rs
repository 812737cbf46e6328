//! The [`Admin`] calls for settings and groups (docs/protocol.md#operations):
//! broker settings (GET/UPDATE_BROKER_CONFIG), the NameServers' KV config,
//! subscription groups, cloning a group's offsets, reading a ConsumeQueue.

use std::collections::BTreeMap;

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CloneGroupOffsetRequestHeader, CommandHeader, GetKvConfigResponseHeader,
    GetKvListByNamespaceRequestHeader, KvConfigKeyRequestHeader, PutKvConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
};
use basalt_remoting::protocol::{KvTable, SubscriptionData};
use serde::Deserialize;

use crate::admin::Admin;
use crate::error::{ClientError, Result};

/// One ConsumeQueue unit as QUERY_CONSUME_QUEUE reports it (`ConsumeQueueData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeQueueUnit {
    #[serde(default)]
    pub physic_offset: i64,
    #[serde(default)]
    pub physic_size: i32,
    #[serde(default)]
    pub tags_code: i64,
}

/// QUERY_CONSUME_QUEUE's body (`QueryConsumeQueueResponseBody`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeQueueView {
    #[serde(default)]
    pub subscription_data: Option<SubscriptionData>,
    #[serde(default)]
    pub filter_data: Option<String>,
    #[serde(default)]
    pub queue_data: Vec<ConsumeQueueUnit>,
    #[serde(default)]
    pub max_queue_index: i64,
    #[serde(default)]
    pub min_queue_index: i64,
}

fn invalid(e: impl std::fmt::Display) -> ClientError {
    ClientError::InvalidArgument(e.to_string())
}

impl Admin {
    /// Every broker address (masters and slaves) of `cluster`.
    pub async fn cluster_brokers(&self, cluster: &str) -> Result<Vec<String>> {
        let info = self.cluster_info().await?;
        let names = info
            .cluster_addr_table
            .get(cluster)
            .ok_or_else(|| invalid(format!("no cluster named {cluster}")))?;
        let mut out: Vec<String> = names
            .iter()
            .filter_map(|n| info.broker_addr_table.get(n))
            .flat_map(|bd| bd.broker_addrs.values().cloned())
            .collect();
        out.sort();
        Ok(out)
    }

    /// GET_BROKER_CONFIG: the broker's settings, in the order it lists them.
    pub async fn broker_config(&self, broker_addr: &str) -> Result<Vec<(String, String)>> {
        let cmd = self.instance().request(request::GET_BROKER_CONFIG);
        let resp = self
            .instance()
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        let text = String::from_utf8_lossy(&resp.body);
        Ok(text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| match l.split_once('=') {
                Some((k, v)) => (k.trim().to_string(), v.trim().to_string()),
                None => (l.to_string(), String::new()),
            })
            .collect())
    }

    /// UPDATE_BROKER_CONFIG: sets `pairs` at one broker, all or none.
    pub async fn update_broker_config(
        &self,
        broker_addr: &str,
        pairs: &[(String, String)],
    ) -> Result<()> {
        let mut body = String::new();
        for (k, v) in pairs {
            if k.is_empty() || k.contains(['=', '\n']) || v.contains('\n') {
                return Err(invalid(format!("bad setting {k:?}={v:?}")));
            }
            body.push_str(&format!("{k}={v}\n"));
        }
        let cmd = self
            .instance()
            .request(request::UPDATE_BROKER_CONFIG)
            .with_body(body.into_bytes());
        self.instance()
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        Ok(())
    }

    /// PUT_KV_CONFIG at every NameServer (as `mqadmin updateKvConfig`);
    /// returns the NameServers written.
    pub async fn put_kv_config(
        &self,
        namespace: &str,
        key: &str,
        value: &str,
    ) -> Result<Vec<String>> {
        let ext = PutKvConfigRequestHeader {
            namespace: namespace.to_string(),
            key: key.to_string(),
            value: value.to_string(),
        }
        .to_ext();
        self.kv_at_every_namesrv(request::PUT_KV_CONFIG, ext).await
    }

    /// DELETE_KV_CONFIG at every NameServer; returns the NameServers written.
    pub async fn delete_kv_config(&self, namespace: &str, key: &str) -> Result<Vec<String>> {
        let ext = KvConfigKeyRequestHeader {
            namespace: namespace.to_string(),
            key: key.to_string(),
        }
        .to_ext();
        self.kv_at_every_namesrv(request::DELETE_KV_CONFIG, ext)
            .await
    }

    async fn kv_at_every_namesrv(
        &self,
        code: i32,
        ext: basalt_remoting::ExtFields,
    ) -> Result<Vec<String>> {
        let mut done = Vec::new();
        for ns in self.instance().namesrv_addrs().to_vec() {
            let cmd = self.instance().request(code).with_ext(ext.clone());
            self.instance().invoke_ok(&ns, cmd, self.timeout()).await?;
            done.push(ns);
        }
        Ok(done)
    }

    /// GET_KV_CONFIG: the value, or None when the NameServer has none.
    pub async fn kv_config(&self, namespace: &str, key: &str) -> Result<Option<String>> {
        let ext = KvConfigKeyRequestHeader {
            namespace: namespace.to_string(),
            key: key.to_string(),
        }
        .to_ext();
        let cmd = self
            .instance()
            .request(request::GET_KV_CONFIG)
            .with_ext(ext);
        let (addr, resp) = self.instance().invoke_namesrv(cmd).await?;
        match resp.code {
            response::SUCCESS => GetKvConfigResponseHeader::from_ext(&resp.ext_fields)
                .map(|h| h.value)
                .map_err(|e| ClientError::bad_response(&addr, e)),
            response::QUERY_NOT_FOUND => Ok(None),
            code => Err(ClientError::broker(code, resp.remark, &addr)),
        }
    }

    /// GET_KVLIST_BY_NAMESPACE: every key of a namespace (empty when none).
    pub async fn kv_namespace(&self, namespace: &str) -> Result<BTreeMap<String, String>> {
        let ext = GetKvListByNamespaceRequestHeader {
            namespace: namespace.to_string(),
        }
        .to_ext();
        let cmd = self
            .instance()
            .request(request::GET_KVLIST_BY_NAMESPACE)
            .with_ext(ext);
        let (addr, resp) = self.instance().invoke_namesrv(cmd).await?;
        match resp.code {
            response::SUCCESS => basalt_remoting::fastjson::from_slice::<KvTable>(&resp.body)
                .map(|t| t.table)
                .map_err(|e| ClientError::bad_response(&addr, e)),
            response::QUERY_NOT_FOUND => Ok(BTreeMap::new()),
            code => Err(ClientError::broker(code, resp.remark, &addr)),
        }
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP at one broker; `config` is the
    /// `SubscriptionGroupConfig` JSON (`groupName` at least).
    pub async fn create_group(&self, broker_addr: &str, config: &serde_json::Value) -> Result<()> {
        let name = config
            .get("groupName")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        basalt_common::topic::validate_group(name).map_err(invalid)?;
        let cmd = self
            .instance()
            .request(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(serde_json::to_vec(config).unwrap_or_default());
        self.instance()
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        Ok(())
    }

    /// DELETE_SUBSCRIPTIONGROUP at one broker.
    pub async fn delete_group(&self, broker_addr: &str, group: &str) -> Result<()> {
        basalt_common::topic::validate_group(group).map_err(invalid)?;
        let mut cmd = self.instance().request(request::DELETE_SUBSCRIPTIONGROUP);
        cmd.ext_fields.insert("groupName", group);
        self.instance()
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        Ok(())
    }

    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG at one broker: each group's
    /// `SubscriptionGroupConfig` JSON, by name.
    pub async fn groups(&self, broker_addr: &str) -> Result<BTreeMap<String, serde_json::Value>> {
        let cmd = self
            .instance()
            .request(request::GET_ALL_SUBSCRIPTIONGROUP_CONFIG);
        let resp = self
            .instance()
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        let v: serde_json::Value = basalt_remoting::fastjson::from_slice(&resp.body)
            .map_err(|e| ClientError::bad_response(broker_addr, e))?;
        let table = v
            .get("subscriptionGroupTable")
            .and_then(|t| t.as_object())
            .cloned()
            .unwrap_or_default();
        Ok(table.into_iter().collect())
    }

    /// CLONE_GROUP_OFFSET at every master of `topic`: `dest` gets `src`'s
    /// offsets on it. Returns the brokers asked.
    pub async fn clone_group_offset(
        &self,
        src: &str,
        dest: &str,
        topic: &str,
        offline: bool,
    ) -> Result<Vec<String>> {
        basalt_common::topic::validate_group(src).map_err(invalid)?;
        basalt_common::topic::validate_group(dest).map_err(invalid)?;
        let route = self.topic_route(topic).await?;
        let header = CloneGroupOffsetRequestHeader {
            src_group: src.to_string(),
            dest_group: dest.to_string(),
            topic: Some(topic.to_string()),
            offline,
        };
        let mut done = Vec::new();
        for bd in &route.broker_datas {
            let Some(addr) = bd.master_addr() else {
                continue;
            };
            let cmd = self
                .instance()
                .request(request::CLONE_GROUP_OFFSET)
                .with_ext(header.to_ext());
            self.instance().invoke_ok(addr, cmd, self.timeout()).await?;
            done.push(addr.to_string());
        }
        Ok(done)
    }

    /// QUERY_CONSUME_QUEUE at the master of `broker_name`: `count` units of
    /// queue `queue_id` of `topic` from `index`, with `group`'s
    /// subscription when it is online.
    pub async fn query_consume_queue(
        &self,
        topic: &str,
        broker_name: &str,
        queue_id: i32,
        index: i64,
        count: i32,
        group: Option<&str>,
    ) -> Result<ConsumeQueueView> {
        let route = self.topic_route(topic).await?;
        let addr = route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == broker_name)
            .and_then(|b| b.master_addr())
            .ok_or_else(|| invalid(format!("{topic} has no master on broker {broker_name}")))?
            .to_string();
        let header = QueryConsumeQueueRequestHeader {
            topic: topic.to_string(),
            queue_id,
            index,
            count,
            consumer_group: group.unwrap_or_default().to_string(),
        };
        let cmd = self
            .instance()
            .request(request::QUERY_CONSUME_QUEUE)
            .with_ext(header.to_ext());
        let resp = self
            .instance()
            .invoke_ok(&addr, cmd, self.timeout())
            .await?;
        basalt_remoting::fastjson::from_slice(&resp.body)
            .map_err(|e| ClientError::bad_response(&addr, e))
    }
}
