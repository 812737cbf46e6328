//! Route bodies served by the NameServer (docs/protocol.md#topic-routes): TopicRouteData,
//! QueueData, BrokerData, ClusterInfo, TopicList.
//!
//! Readers accept fastjson input (bare keys, `topicSynFlag`, numbers as
//! strings). Writers are hand-written so they can emit bare numeric
//! `brokerAddrs` keys as Java does; all output is compact, because
//! rocketmq-client-go splits the `brokerAddrs` text on `,` and `:`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::BodyError;
use crate::json::{write_bool, write_i64, write_key, write_str};

/// One broker group's queues for a topic (`QueueData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    pub broker_name: String,
    pub perm: i32,
    pub read_queue_nums: i32,
    pub topic_sys_flag: i32,
    pub write_queue_nums: i32,
}

/// Wire shape of [`QueueData`]: accepts both spellings of the flag.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueueDataWire {
    #[serde(default)]
    broker_name: String,
    #[serde(default)]
    perm: i32,
    #[serde(default)]
    read_queue_nums: i32,
    #[serde(default)]
    topic_sys_flag: Option<i32>,
    #[serde(default)]
    topic_syn_flag: Option<i32>,
    #[serde(default)]
    write_queue_nums: i32,
}

impl<'de> Deserialize<'de> for QueueData {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = QueueDataWire::deserialize(d)?;
        Ok(Self {
            broker_name: w.broker_name,
            perm: w.perm,
            read_queue_nums: w.read_queue_nums,
            topic_sys_flag: w.topic_sys_flag.or(w.topic_syn_flag).unwrap_or(0),
            write_queue_nums: w.write_queue_nums,
        })
    }
}

impl QueueData {
    fn write(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        write_key(out, "brokerName");
        write_str(out, &self.broker_name);
        out.extend_from_slice(b",\"perm\":");
        write_i64(out, self.perm as i64);
        out.extend_from_slice(b",\"readQueueNums\":");
        write_i64(out, self.read_queue_nums as i64);
        // Both spellings: 4.8-era readers and rocketmq-client-go use the old one.
        out.extend_from_slice(b",\"topicSynFlag\":");
        write_i64(out, self.topic_sys_flag as i64);
        out.extend_from_slice(b",\"topicSysFlag\":");
        write_i64(out, self.topic_sys_flag as i64);
        out.extend_from_slice(b",\"writeQueueNums\":");
        write_i64(out, self.write_queue_nums as i64);
        out.push(b'}');
    }
}

/// One broker group: its name, cluster and the address of each member
/// (`BrokerData`; id 0 is the master).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    #[serde(default)]
    pub broker_addrs: BTreeMap<i64, String>,
    #[serde(default)]
    pub broker_name: String,
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub enable_acting_master: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

impl BrokerData {
    pub fn new(cluster: impl Into<String>, broker_name: impl Into<String>) -> Self {
        Self {
            cluster: cluster.into(),
            broker_name: broker_name.into(),
            ..Self::default()
        }
    }

    /// The master's address, if the group has one.
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&0).map(String::as_str)
    }

    fn write(&self, out: &mut Vec<u8>, bare_keys: bool) {
        out.extend_from_slice(b"{\"brokerAddrs\":{");
        for (i, (id, addr)) in self.broker_addrs.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if bare_keys {
                write_i64(out, *id);
            } else {
                out.push(b'"');
                write_i64(out, *id);
                out.push(b'"');
            }
            out.push(b':');
            write_str(out, addr);
        }
        out.extend_from_slice(b"},\"brokerName\":");
        write_str(out, &self.broker_name);
        out.extend_from_slice(b",\"cluster\":");
        write_str(out, &self.cluster);
        out.extend_from_slice(b",\"enableActingMaster\":");
        write_bool(out, self.enable_acting_master);
        if let Some(zone) = &self.zone_name {
            out.extend_from_slice(b",\"zoneName\":");
            write_str(out, zone);
        }
        out.push(b'}');
    }
}

/// GET_ROUTEINFO_BY_TOPIC's body (`TopicRouteData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    #[serde(default)]
    pub broker_datas: Vec<BrokerData>,
    #[serde(default)]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// `"brokerName:queueNum;..."` for ordered topics; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    #[serde(default)]
    pub queue_datas: Vec<QueueData>,
}

impl TopicRouteData {
    /// Parses a route body from either key form.
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        Ok(crate::fastjson::from_slice(body)?)
    }

    /// Writes the body as a Java NameServer would: compact, keys sorted,
    /// `brokerAddrs` keys bare when `bare_keys` (see [`Self::bare_keys_for`]).
    pub fn encode(&self, bare_keys: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"brokerDatas\":[");
        for (i, bd) in self.broker_datas.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            bd.write(&mut out, bare_keys);
        }
        out.extend_from_slice(b"],\"filterServerTable\":{");
        for (i, (k, v)) in self.filter_server_table.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_key(&mut out, k);
            out.push(b'[');
            for (j, a) in v.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                write_str(&mut out, a);
            }
            out.push(b']');
        }
        out.push(b'}');
        if let Some(conf) = &self.order_topic_conf {
            out.extend_from_slice(b",\"orderTopicConf\":");
            write_str(&mut out, conf);
        }
        out.extend_from_slice(b",\"queueDatas\":[");
        for (i, qd) in self.queue_datas.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            qd.write(&mut out);
        }
        out.extend_from_slice(b"]}");
        out
    }

    /// Java's rule: quoted keys for clients at V4_9_4 (401) or later, or that
    /// ask for standard JSON; bare keys otherwise (rocketmq-client-go reports 317).
    pub fn bare_keys_for(request_version: i32, accept_standard_json_only: bool) -> bool {
        request_version < crate::code::version::V4_9_4 && !accept_standard_json_only
    }
}

/// GET_BROKER_CLUSTER_INFO's body (`ClusterInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    #[serde(default)]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    #[serde(default)]
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

impl ClusterInfo {
    pub fn decode(body: &[u8]) -> Result<Self, BodyError> {
        Ok(crate::fastjson::from_slice(body)?)
    }

    /// Plain fastjson output: `brokerAddrs` keys are always bare (Java sends
    /// this body without the BrowserCompatible feature).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"brokerAddrTable\":{");
        for (i, (name, bd)) in self.broker_addr_table.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_key(&mut out, name);
            bd.write(&mut out, true);
        }
        out.extend_from_slice(b"},\"clusterAddrTable\":{");
        for (i, (cluster, names)) in self.cluster_addr_table.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_key(&mut out, cluster);
            out.push(b'[');
            for (j, n) in names.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                write_str(&mut out, n);
            }
            out.push(b']');
        }
        out.extend_from_slice(b"}}");
        out
    }
}

/// A list of topic names (`TopicList`), e.g. GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    #[serde(default)]
    pub topic_list: BTreeSet<String>,
}
