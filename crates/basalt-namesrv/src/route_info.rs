//! [`RouteInfoManager`]: the NameServer's tables, as pure logic. No I/O and
//! no clock: every call that depends on time takes `now_ms`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use basalt_common::constants::perm;

mod topic_queues;
use basalt_remoting::protocol::{
    BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfig, TopicConfigSerializeWrapper,
    TopicList, TopicRouteData,
};
use topic_queues::TopicQueues;

/// The broker id of a master.
pub const MASTER_ID: i64 = 0;

/// Default liveness timeout (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, 120 s).
pub const DEFAULT_BROKER_EXPIRY_MS: i64 = 120_000;

/// What a broker tells the NameServer when it registers.
#[derive(Debug, Clone, Default)]
pub struct BrokerRegistration {
    pub cluster_name: String,
    pub broker_addr: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub ha_server_addr: String,
    /// Liveness timeout this broker asks for; the manager's default otherwise.
    pub heartbeat_timeout_ms: Option<i64>,
    pub enable_acting_master: bool,
    pub zone_name: Option<String>,
    /// The broker's topic table; `None` registers liveness only.
    pub topic_config_wrapper: Option<TopicConfigSerializeWrapper>,
    pub filter_server_list: Vec<String>,
}

/// What the NameServer answers a registration with: for a slave, its
/// master's addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterBrokerResult {
    pub ha_server_addr: Option<String>,
    pub master_addr: Option<String>,
}

/// A broker is identified for liveness by its cluster and address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddrKey {
    pub cluster_name: String,
    pub broker_addr: String,
}

#[derive(Debug, Clone)]
struct BrokerLiveInfo {
    last_update_ms: i64,
    timeout_ms: i64,
    data_version: DataVersion,
    ha_server_addr: String,
    broker_name: String,
}

/// The NameServer's route tables.
///
/// Invariants: every broker name in `cluster_addr_table` has an entry in
/// `broker_addr_table` with at least one address; every queue data names a
/// broker group that has (or had, until its last address left) an entry there;
/// a topic with no queue data left is removed.
#[derive(Debug)]
pub struct RouteInfoManager {
    default_expiry_ms: i64,
    /// topic → its queues on each broker name.
    topic_queue_table: HashMap<String, TopicQueues>,
    broker_addr_table: BTreeMap<String, BrokerData>,
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    broker_live_table: HashMap<BrokerAddrKey, BrokerLiveInfo>,
    filter_server_table: HashMap<BrokerAddrKey, Vec<String>>,
}

impl Default for RouteInfoManager {
    fn default() -> Self {
        Self::new(DEFAULT_BROKER_EXPIRY_MS)
    }
}

impl RouteInfoManager {
    /// A manager that expires brokers silent for `default_expiry_ms` (unless
    /// a broker asks for its own timeout).
    pub fn new(default_expiry_ms: i64) -> Self {
        Self {
            default_expiry_ms,
            topic_queue_table: HashMap::new(),
            broker_addr_table: BTreeMap::new(),
            cluster_addr_table: BTreeMap::new(),
            broker_live_table: HashMap::new(),
            filter_server_table: HashMap::new(),
        }
    }

    /// Registers (or re-registers) a broker. Topic configs of a master update
    /// the queue table when its DataVersion differs from the one it sent last
    /// time, or when this is its first registration.
    pub fn register_broker(
        &mut self,
        reg: BrokerRegistration,
        now_ms: i64,
    ) -> RegisterBrokerResult {
        let key = BrokerAddrKey {
            cluster_name: reg.cluster_name.clone(),
            broker_addr: reg.broker_addr.clone(),
        };
        self.cluster_addr_table
            .entry(reg.cluster_name.clone())
            .or_default()
            .insert(reg.broker_name.clone());

        let mut register_first = !self.broker_addr_table.contains_key(&reg.broker_name);
        let bd = self
            .broker_addr_table
            .entry(reg.broker_name.clone())
            .or_insert_with(|| BrokerData::new(&reg.cluster_name, &reg.broker_name));
        bd.cluster = reg.cluster_name.clone();
        bd.enable_acting_master = reg.enable_acting_master;
        if reg.zone_name.is_some() {
            bd.zone_name = reg.zone_name.clone();
        }
        // One address holds one id: a slave promoted to master drops its old entry.
        bd.broker_addrs
            .retain(|id, addr| !(*addr == reg.broker_addr && *id != reg.broker_id));
        let old = bd
            .broker_addrs
            .insert(reg.broker_id, reg.broker_addr.clone());
        register_first |= old.is_none();

        if let Some(wrapper) = &reg.topic_config_wrapper
            && reg.broker_id == MASTER_ID
        {
            let changed = self
                .broker_live_table
                .get(&key)
                .is_none_or(|live| live.data_version != wrapper.data_version);
            if changed || register_first {
                for tc in wrapper.topic_config_table.values() {
                    self.create_or_update_queue_data(&reg.broker_name, tc);
                }
            } else {
                // A RocketMQ 5.5 broker's split registration stamps every
                // part with the same version, so only the first part of a
                // round would count: a topic this broker name has no queue
                // data for yet is taken from any part.
                for tc in wrapper.topic_config_table.values() {
                    let known = self
                        .topic_queue_table
                        .get(&tc.topic_name)
                        .is_some_and(|q| q.get(&reg.broker_name).is_some());
                    if !known {
                        self.create_or_update_queue_data(&reg.broker_name, tc);
                    }
                }
            }
        }

        let data_version = reg
            .topic_config_wrapper
            .as_ref()
            .map(|w| w.data_version.clone())
            .unwrap_or_default();
        self.broker_live_table.insert(
            key.clone(),
            BrokerLiveInfo {
                last_update_ms: now_ms,
                timeout_ms: reg
                    .heartbeat_timeout_ms
                    .filter(|t| *t > 0)
                    .unwrap_or(self.default_expiry_ms),
                data_version,
                ha_server_addr: reg.ha_server_addr.clone(),
                broker_name: reg.broker_name.clone(),
            },
        );
        if reg.filter_server_list.is_empty() {
            self.filter_server_table.remove(&key);
        } else {
            self.filter_server_table
                .insert(key, reg.filter_server_list.clone());
        }

        let mut result = RegisterBrokerResult::default();
        if reg.broker_id != MASTER_ID
            && let Some(master) = self
                .broker_addr_table
                .get(&reg.broker_name)
                .and_then(|bd| bd.master_addr())
        {
            let master_key = BrokerAddrKey {
                cluster_name: reg.cluster_name.clone(),
                broker_addr: master.to_string(),
            };
            if let Some(live) = self.broker_live_table.get(&master_key) {
                result.ha_server_addr = Some(live.ha_server_addr.clone());
                result.master_addr = Some(master.to_string());
            }
        }
        result
    }

    fn create_or_update_queue_data(&mut self, broker_name: &str, tc: &TopicConfig) {
        let qd = QueueData {
            broker_name: broker_name.to_string(),
            perm: tc.perm,
            read_queue_nums: tc.read_queue_nums,
            topic_sys_flag: tc.topic_sys_flag,
            write_queue_nums: tc.write_queue_nums,
        };
        let queues = self
            .topic_queue_table
            .entry(tc.topic_name.clone())
            .or_default();
        if queues.get(broker_name) != Some(&qd) {
            tracing::debug!(topic = %tc.topic_name, broker = broker_name, "topic queue data updated");
            queues.insert(qd);
        }
    }

    /// REGISTER_TOPIC_IN_NAMESRV: adds or replaces the queue data of the
    /// named broker groups for one topic, as a broker sends for a topic it
    /// just created. Refused (nothing changes, `false`) when it is empty or
    /// names a group with no registered broker, as Java ignores it then.
    pub fn register_topic(&mut self, topic: &str, queue_datas: &[QueueData]) -> bool {
        if queue_datas.is_empty()
            || queue_datas
                .iter()
                .any(|q| !self.broker_addr_table.contains_key(&q.broker_name))
        {
            return false;
        }
        let queues = self.topic_queue_table.entry(topic.to_string()).or_default();
        for qd in queue_datas {
            queues.insert(qd.clone());
        }
        true
    }

    /// Renews a broker's liveness without touching its topics.
    pub fn touch(&mut self, cluster_name: &str, broker_addr: &str, now_ms: i64) -> bool {
        let key = BrokerAddrKey {
            cluster_name: cluster_name.to_string(),
            broker_addr: broker_addr.to_string(),
        };
        match self.broker_live_table.get_mut(&key) {
            Some(live) => {
                live.last_update_ms = now_ms;
                true
            }
            None => false,
        }
    }

    /// Removes one broker (UNREGISTER_BROKER, expiry, or its connection closing).
    /// When its group has no address left, the group and its queue data go too.
    pub fn unregister_broker(
        &mut self,
        cluster_name: &str,
        broker_addr: &str,
        broker_name: &str,
        broker_id: i64,
    ) {
        let key = BrokerAddrKey {
            cluster_name: cluster_name.to_string(),
            broker_addr: broker_addr.to_string(),
        };
        self.broker_live_table.remove(&key);
        self.filter_server_table.remove(&key);
        let mut remove_group = false;
        if let Some(bd) = self.broker_addr_table.get_mut(broker_name) {
            if bd.broker_addrs.get(&broker_id).map(String::as_str) == Some(broker_addr) {
                bd.broker_addrs.remove(&broker_id);
            } else {
                // The id may have changed since; drop the address wherever it is.
                bd.broker_addrs.retain(|_, a| a != broker_addr);
            }
            remove_group = bd.broker_addrs.is_empty();
        }
        if remove_group {
            self.broker_addr_table.remove(broker_name);
            if let Some(names) = self.cluster_addr_table.get_mut(cluster_name) {
                names.remove(broker_name);
                if names.is_empty() {
                    self.cluster_addr_table.remove(cluster_name);
                }
            }
            self.remove_queue_data_of(broker_name);
        }
    }

    fn remove_queue_data_of(&mut self, broker_name: &str) {
        self.topic_queue_table.retain(|_, queues| {
            queues.remove(broker_name);
            !queues.is_empty()
        });
    }

    /// Removes brokers whose last registration is older than their timeout;
    /// returns which.
    pub fn scan_expired(&mut self, now_ms: i64) -> Vec<BrokerAddrKey> {
        let expired: Vec<(BrokerAddrKey, String)> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| now_ms - live.last_update_ms > live.timeout_ms)
            .map(|(k, live)| (k.clone(), live.broker_name.clone()))
            .collect();
        for (key, broker_name) in &expired {
            tracing::warn!(cluster = %key.cluster_name, addr = %key.broker_addr,
                "broker expired: no registration within its timeout");
            let id = self
                .broker_addr_table
                .get(broker_name)
                .and_then(|bd| {
                    bd.broker_addrs
                        .iter()
                        .find(|(_, a)| **a == key.broker_addr)
                        .map(|(id, _)| *id)
                })
                .unwrap_or(-1);
            self.unregister_broker(&key.cluster_name, &key.broker_addr, broker_name, id);
        }
        expired.into_iter().map(|(k, _)| k).collect()
    }

    /// Removes a broker known only by its liveness key (its connection closed).
    pub fn remove_broker(&mut self, key: &BrokerAddrKey) {
        if let Some(live) = self.broker_live_table.get(key) {
            let name = live.broker_name.clone();
            let id = self
                .broker_addr_table
                .get(&name)
                .and_then(|bd| {
                    bd.broker_addrs
                        .iter()
                        .find(|(_, a)| **a == key.broker_addr)
                        .map(|(id, _)| *id)
                })
                .unwrap_or(-1);
            self.unregister_broker(&key.cluster_name, &key.broker_addr, &name, id);
        }
    }

    /// The route of a topic: its queue data and the groups serving it.
    /// `None` when no live broker group serves it.
    pub fn topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topic_queue_table.get(topic)?;
        let mut route = TopicRouteData::default();
        for qd in queues.iter() {
            route.queue_datas.push(qd.clone());
            if let Some(bd) = self.broker_addr_table.get(&qd.broker_name) {
                route.broker_datas.push(bd.clone());
                for addr in bd.broker_addrs.values() {
                    let key = BrokerAddrKey {
                        cluster_name: bd.cluster.clone(),
                        broker_addr: addr.clone(),
                    };
                    if let Some(fs) = self.filter_server_table.get(&key) {
                        route.filter_server_table.insert(addr.clone(), fs.clone());
                    }
                }
            }
        }
        if route.queue_datas.is_empty() || route.broker_datas.is_empty() {
            return None;
        }
        Some(route)
    }

    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr_table.clone(),
            cluster_addr_table: self.cluster_addr_table.clone(),
        }
    }

    pub fn all_topics(&self) -> TopicList {
        TopicList {
            broker_addr: None,
            topic_list: self.topic_queue_table.keys().cloned().collect(),
        }
    }

    /// Topics with at least one queue on a broker group of `cluster`.
    pub fn topics_by_cluster(&self, cluster: &str) -> TopicList {
        let names = self.cluster_addr_table.get(cluster);
        let topic_list = self
            .topic_queue_table
            .iter()
            .filter(|(_, q)| names.is_some_and(|n| q.iter().any(|qd| n.contains(&qd.broker_name))))
            .map(|(t, _)| t.clone())
            .collect();
        TopicList {
            broker_addr: None,
            topic_list,
        }
    }

    /// Deletes a topic's route: everywhere, or only on `cluster`'s groups.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) {
        match cluster.filter(|c| !c.is_empty()) {
            None => {
                self.topic_queue_table.remove(topic);
            }
            Some(cluster) => {
                let Some(names) = self.cluster_addr_table.get(cluster) else {
                    return;
                };
                if let Some(queues) = self.topic_queue_table.get_mut(topic) {
                    queues.retain(|qd| !names.contains(&qd.broker_name));
                    if queues.is_empty() {
                        self.topic_queue_table.remove(topic);
                    }
                }
            }
        }
    }

    /// Clears (`writable` false) or restores the write permission of a
    /// broker group's queue data in every topic (WIPE_WRITE_PERM_OF_BROKER /
    /// ADD_WRITE_PERM_OF_BROKER); returns how many topics it touched. As in
    /// Java, restoring sets the permission to read + write. The change lasts
    /// until the broker registers a changed topic table (or re-registers
    /// after a restart).
    pub fn set_write_perm(&mut self, broker_name: &str, writable: bool) -> i32 {
        let mut count = 0;
        for queues in self.topic_queue_table.values_mut() {
            let Some(qd) = queues.get_mut(broker_name) else {
                continue;
            };
            qd.perm = if writable {
                perm::READ | perm::WRITE
            } else {
                qd.perm & !perm::WRITE
            };
            count += 1;
        }
        count
    }

    /// Number of live brokers (for tests and logs).
    pub fn live_broker_count(&self) -> usize {
        self.broker_live_table.len()
    }
}

#[cfg(test)]
mod tests;
