//! Where the instance's routes come from and what it keeps of them: the
//! NameServer selection ([`NameServers`]), the route cache with the broker
//! address table, publish infos, route gates and pull-from suggestions
//! ([`RouteCache`]), and the instance's route methods that fetch from the
//! NameServers and apply what they return.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use basalt_common::constants::topic::AUTO_CREATE_TOPIC;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, GetRouteInfoRequestHeader};
use basalt_remoting::protocol::TopicRouteData;
use basalt_remoting::{RemotingClient, RemotingCommand};
use parking_lot::{Mutex, RwLock};

use super::ClientInstance;
use crate::error::{ClientError, Result};
use crate::message::TopicQueue;
use crate::route::{MASTER_ID, TopicPublishInfo, subscribe_queues};

/// The configured NameServer addresses and which one to ask first.
///
/// Invariant: the index is below the number of addresses whenever there is
/// one. It starts at a random address (spreading clients over the
/// NameServers) and moves only to an address that answered after the one
/// before it failed, so the instance sticks to a NameServer that works.
pub(crate) struct NameServers {
    addrs: Vec<String>,
    first: AtomicUsize,
}

impl NameServers {
    pub(crate) fn new(addrs: Vec<String>) -> Self {
        let first = if addrs.is_empty() {
            0
        } else {
            crate::util::random_u32() as usize % addrs.len()
        };
        Self {
            addrs,
            first: AtomicUsize::new(first),
        }
    }

    pub(crate) fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// Sends `cmd` to the first NameServer, then to the next ones while they
    /// cannot be reached; returns the address that answered and its answer.
    pub(crate) async fn invoke(
        &self,
        remoting: &RemotingClient,
        cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<(String, RemotingCommand)> {
        let n = self.addrs.len();
        if n == 0 {
            return Err(ClientError::InvalidArgument(
                "no NameServer address is configured".into(),
            ));
        }
        let first = self.first.load(Ordering::Relaxed);
        let mut last_err = None;
        for i in 0..n {
            let idx = (first + i) % n;
            let addr = &self.addrs[idx];
            match remoting.invoke(addr, cmd.clone(), timeout).await {
                Ok(resp) => {
                    if i > 0 {
                        self.first.store(idx, Ordering::Relaxed);
                    }
                    return Ok((addr.clone(), resp));
                }
                Err(e) => {
                    tracing::debug!(namesrv = %addr, error = %e, "NameServer request failed");
                    last_err = Some(e);
                }
            }
        }
        Err(last_err
            .map(ClientError::from)
            .unwrap_or(ClientError::NotStarted))
    }
}

/// A broker address found for a broker group, and whether it is a slave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundBroker {
    pub addr: String,
    pub slave: bool,
}

#[derive(Default)]
struct Tables {
    /// Last route seen per topic (sorted, for change detection).
    routes: HashMap<String, TopicRouteData>,
    /// Broker group → broker id → address.
    broker_addrs: HashMap<String, BTreeMap<i64, String>>,
}

/// What the instance keeps of the routes (Java `MQClientInstance`'s
/// `topicRouteTable`, `brokerAddrTable`, `topicPublishInfoTable` and the
/// pull API's `pullFromWhichNodeTable`): the last route per topic, the
/// broker address table, each topic's publish info, one route gate per
/// topic, and the broker id a pull response suggested per queue.
///
/// Invariants: a route is recorded only after its brokers' addresses and
/// its publish info are (see [`Self::store_brokers_and_publish`]), so a
/// cached route's brokers can be looked up; addresses leave the table only
/// when no cached route mentions them ([`Self::clean_offline_brokers`]).
/// Every method takes at most one of the locks and none is held across an
/// await.
#[derive(Default)]
pub(crate) struct RouteCache {
    tables: RwLock<Tables>,
    publish: RwLock<HashMap<String, Arc<TopicPublishInfo>>>,
    /// One route fetch per topic at a time; others wait for its result.
    gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Broker id a pull response suggested for the next pull of a queue.
    pull_from: Mutex<HashMap<TopicQueue, i64>>,
}

impl RouteCache {
    /// Whether `route` differs from the last one recorded for `topic`, or
    /// the topic's publish info is missing or has no queue although the
    /// route has a writable one.
    pub(crate) fn route_changed(&self, topic: &str, route: &TopicRouteData) -> bool {
        let same_route = self.tables.read().routes.get(topic) == Some(route);
        !same_route
            || !self
                .publish
                .read()
                .get(topic)
                .is_some_and(|p| p.ok() || !route_writable(route))
    }

    /// Records the broker addresses of `route` and `topic`'s new publish
    /// info: the first half of applying a route.
    pub(crate) fn store_brokers_and_publish(&self, topic: &str, route: &TopicRouteData) {
        {
            let mut tables = self.tables.write();
            for bd in &route.broker_datas {
                tables
                    .broker_addrs
                    .insert(bd.broker_name.clone(), bd.broker_addrs.clone());
            }
        }
        let info = Arc::new(TopicPublishInfo::from_route(topic, route));
        self.publish.write().insert(topic.to_string(), info);
    }

    /// Records `route` as `topic`'s last route: the last step of applying it.
    pub(crate) fn store_route(&self, topic: &str, route: TopicRouteData) {
        self.tables.write().routes.insert(topic.to_string(), route);
    }

    /// The cached route of `topic`, if any.
    pub(crate) fn route(&self, topic: &str) -> Option<TopicRouteData> {
        self.tables.read().routes.get(topic).cloned()
    }

    /// Whether a route (not the auto-create template's) is cached for `topic`.
    pub(crate) fn has_route(&self, topic: &str) -> bool {
        self.tables.read().routes.contains_key(topic)
    }

    /// The publish info of `topic` if cached and usable.
    #[inline]
    pub(crate) fn publish_info(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        self.publish.read().get(topic).filter(|p| p.ok()).cloned()
    }

    /// The publish info of `topic` if cached, usable or not.
    pub(crate) fn any_publish_info(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        self.publish.read().get(topic).cloned()
    }

    /// The topics with a publish info (those a producer has sent to).
    pub(crate) fn publish_topics(&self) -> BTreeSet<String> {
        self.publish.read().keys().cloned().collect()
    }

    /// The gate that lets one route fetch of `topic` run at a time.
    pub(crate) fn gate(&self, topic: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.gates
            .lock()
            .entry(topic.to_string())
            .or_default()
            .clone()
    }

    /// The master address of a broker group.
    pub(crate) fn master_addr(&self, broker_name: &str) -> Option<String> {
        self.tables
            .read()
            .broker_addrs
            .get(broker_name)
            .and_then(|m| m.get(&MASTER_ID))
            .cloned()
    }

    /// Java's `findBrokerAddressInSubscribe`: the wanted broker id, else
    /// (unless `only_this`) any member of the group.
    pub(crate) fn find_broker(
        &self,
        broker_name: &str,
        broker_id: i64,
        only_this: bool,
    ) -> Option<FoundBroker> {
        let tables = self.tables.read();
        let addrs = tables.broker_addrs.get(broker_name)?;
        if let Some(addr) = addrs.get(&broker_id) {
            return Some(FoundBroker {
                addr: addr.clone(),
                slave: broker_id != MASTER_ID,
            });
        }
        if only_this {
            return None;
        }
        addrs.iter().next().map(|(id, addr)| FoundBroker {
            addr: addr.clone(),
            slave: *id != MASTER_ID,
        })
    }

    /// The broker id to pull `mq` from next: the last suggestion, else the
    /// master.
    pub(crate) fn pull_from(&self, mq: &TopicQueue) -> i64 {
        self.pull_from.lock().get(mq).copied().unwrap_or(MASTER_ID)
    }

    /// Records the broker id a pull response suggested for `mq`.
    pub(crate) fn set_pull_from(&self, mq: &TopicQueue, broker_id: i64) {
        let mut map = self.pull_from.lock();
        if broker_id == MASTER_ID {
            map.remove(mq);
        } else {
            map.insert(mq.clone(), broker_id);
        }
    }

    /// A random broker of `topic`'s cached route (master preferred), for
    /// group-wide queries such as GET_CONSUMER_LIST_BY_GROUP.
    pub(crate) fn any_broker_of(&self, topic: &str) -> Option<String> {
        let tables = self.tables.read();
        let route = tables.routes.get(topic)?;
        if route.broker_datas.is_empty() {
            return None;
        }
        let bd = &route.broker_datas[crate::util::random_u32() as usize % route.broker_datas.len()];
        bd.broker_addrs
            .get(&MASTER_ID)
            .or_else(|| bd.broker_addrs.values().next())
            .cloned()
    }

    /// Every known broker address with its group and id, sorted.
    pub(crate) fn broker_addresses(&self) -> Vec<(String, i64, String)> {
        let tables = self.tables.read();
        let mut out = Vec::new();
        for (name, addrs) in &tables.broker_addrs {
            for (id, addr) in addrs {
                out.push((name.clone(), *id, addr.clone()));
            }
        }
        out.sort();
        out
    }

    /// Forgets broker addresses that no cached route mentions any more
    /// (`cleanOfflineBroker`).
    pub(crate) fn clean_offline_brokers(&self) {
        let mut tables = self.tables.write();
        let live: BTreeSet<(String, String)> = tables
            .routes
            .values()
            .flat_map(|r| r.broker_datas.iter())
            .flat_map(|bd| {
                bd.broker_addrs
                    .values()
                    .map(move |a| (bd.broker_name.clone(), a.clone()))
            })
            .collect();
        tables.broker_addrs.retain(|name, addrs| {
            addrs.retain(|_, a| live.contains(&(name.clone(), a.clone())));
            !addrs.is_empty()
        });
    }
}

fn route_writable(route: &TopicRouteData) -> bool {
    route
        .queue_datas
        .iter()
        .any(|q| basalt_common::constants::perm::is_writeable(q.perm) && q.write_queue_nums > 0)
}

impl ClientInstance {
    /// GET_ROUTEINFO_BY_TOPIC, uncached. `NoRoute` if no NameServer knows it.
    pub async fn fetch_route(&self, topic: &str) -> Result<TopicRouteData> {
        let header = GetRouteInfoRequestHeader {
            topic: topic.to_string(),
            accept_standard_json_only: None,
        };
        let cmd = self
            .request(request::GET_ROUTEINFO_BY_TOPIC)
            .with_ext(header.to_ext());
        let (addr, resp) = self.invoke_namesrv(cmd).await?;
        match resp.code {
            response::SUCCESS if !resp.body.is_empty() => {
                let mut route = TopicRouteData::decode(&resp.body)
                    .map_err(|e| ClientError::bad_response(&addr, e))?;
                route
                    .queue_datas
                    .sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
                route
                    .broker_datas
                    .sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
                Ok(route)
            }
            response::SUCCESS | response::TOPIC_NOT_EXIST => Err(ClientError::NoRoute {
                topic: topic.to_string(),
            }),
            code => Err(ClientError::broker(code, resp.remark, &addr)),
        }
    }

    /// Fetches `topic`'s route and applies it if it changed (Java
    /// `updateTopicRouteInfoFromNameServer`). Returns whether it changed.
    pub async fn update_route(&self, topic: &str) -> Result<bool> {
        let route = self.fetch_route(topic).await?;
        Ok(self.apply_route(topic, route))
    }

    /// Uses the auto-create template's route (`TBW102`) for a topic no
    /// NameServer knows yet, with at most `queue_nums` queues per broker
    /// (Java's `isDefault` branch). The broker creates the topic on the
    /// first send.
    pub(crate) async fn update_route_from_default(
        &self,
        topic: &str,
        queue_nums: i32,
    ) -> Result<bool> {
        let mut route = self.fetch_route(AUTO_CREATE_TOPIC).await?;
        for qd in &mut route.queue_datas {
            let n = queue_nums.min(qd.read_queue_nums);
            qd.read_queue_nums = n;
            qd.write_queue_nums = n;
        }
        Ok(self.apply_route(topic, route))
    }

    /// Stores a route and everything derived from it, if it differs from
    /// the last one or some user lacks information for the topic.
    fn apply_route(&self, topic: &str, route: TopicRouteData) -> bool {
        let consumers = self.registry.live_consumers();
        let changed = self.routes.route_changed(topic, &route)
            || consumers.iter().any(|c| c.needs_subscribe_info(topic));
        if !changed {
            return false;
        }
        tracing::debug!(topic, client = %self.client_id, "route changed");
        self.routes.store_brokers_and_publish(topic, &route);
        if !consumers.is_empty() {
            let queues = subscribe_queues(topic, &route);
            let mut any = false;
            for c in &consumers {
                any |= c.update_subscribe_info(topic, &queues);
            }
            // New or lost queues: rebalance now rather than at the next tick.
            if any {
                self.rebalance_now();
            }
        }
        self.routes.store_route(topic, route);
        true
    }

    /// The cached route of `topic`, if any.
    pub fn cached_route(&self, topic: &str) -> Option<TopicRouteData> {
        self.routes.route(topic)
    }

    /// Java's `tryToFindTopicPublishInfo`: the cached info, else the route
    /// from the NameServer, else the auto-create template route.
    pub(crate) async fn find_publish_info(
        &self,
        topic: &str,
        default_queue_nums: i32,
    ) -> Result<Arc<TopicPublishInfo>> {
        if let Some(info) = self.routes.publish_info(topic) {
            return Ok(info);
        }
        let gate = self.routes.gate(topic);
        let _one_at_a_time = gate.lock().await;
        if let Some(info) = self.routes.publish_info(topic) {
            return Ok(info);
        }
        match self.update_route(topic).await {
            Ok(_) => {}
            Err(ClientError::NoRoute { .. }) => {}
            Err(e) => return Err(e),
        }
        if !self.routes.has_route(topic) {
            match self
                .update_route_from_default(topic, default_queue_nums)
                .await
            {
                Ok(_) | Err(ClientError::NoRoute { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.routes
            .any_publish_info(topic)
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })
    }

    /// Refreshes a topic's route in the background (after a send failure).
    pub(crate) fn refresh_route_soon(self: &Arc<Self>, topic: &str) {
        // One refresh per topic at a time: a broker outage fails many sends
        // at once, and each must not become a NameServer request.
        let gate = self.routes.gate(topic);
        let Ok(guard) = gate.try_lock_owned() else {
            return;
        };
        let weak = Arc::downgrade(self);
        let topic = topic.to_string();
        tokio::spawn(async move {
            let _guard = guard;
            if let Some(me) = weak.upgrade()
                && let Err(e) = me.update_route(&topic).await
            {
                tracing::debug!(topic, error = %e, "route refresh after a send failure failed");
            }
        });
    }

    /// Refreshes the routes of every topic a producer or consumer uses.
    pub(crate) async fn refresh_all_routes(&self) {
        let mut topics = self.routes.publish_topics();
        for c in self.registry.live_consumers() {
            topics.extend(c.subscribed_topics());
        }
        for t in topics {
            if let Err(e) = self.update_route(&t).await
                && !matches!(e, ClientError::NoRoute { .. })
            {
                tracing::warn!(topic = %t, error = %e, "route refresh failed");
            }
        }
    }

    /// The master address of a broker group.
    pub fn master_addr(&self, broker_name: &str) -> Option<String> {
        self.routes.master_addr(broker_name)
    }

    /// The master of a queue's broker group, refreshing the route once if
    /// it is unknown.
    pub(crate) async fn master_of(&self, mq: &TopicQueue) -> Result<String> {
        if let Some(a) = self.routes.master_addr(&mq.broker_name) {
            return Ok(a);
        }
        let _ = self.update_route(&mq.topic).await;
        self.routes
            .master_addr(&mq.broker_name)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker_name: mq.broker_name.clone(),
            })
    }

    /// The master of a queue's broker group or, when the group has none (its
    /// master is down), any member: Java's offset store reads and writes
    /// consumer offsets at a slave then (`findBrokerAddressInSubscribe` with
    /// `onlyThisBroker` false after a route refresh).
    pub(crate) async fn master_or_member_of(&self, mq: &TopicQueue) -> Result<String> {
        if let Some(a) = self.routes.master_addr(&mq.broker_name) {
            return Ok(a);
        }
        let _ = self.update_route(&mq.topic).await;
        self.routes
            .find_broker(&mq.broker_name, MASTER_ID, false)
            .map(|b| b.addr)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker_name: mq.broker_name.clone(),
            })
    }

    /// The broker to pull a queue from: the node the last pull response
    /// suggested (master by default), else any member of the group.
    pub(crate) async fn pull_target(&self, mq: &TopicQueue) -> Result<FoundBroker> {
        let id = self.routes.pull_from(mq);
        if let Some(b) = self.routes.find_broker(&mq.broker_name, id, false) {
            return Ok(b);
        }
        let _ = self.update_route(&mq.topic).await;
        self.routes
            .find_broker(&mq.broker_name, id, false)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker_name: mq.broker_name.clone(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_remoting::protocol::{BrokerData, QueueData};

    /// One route of `topic` over the groups `(name, [(id, addr)])`, each with
    /// two read/write queues (perm 6).
    fn route_of(groups: &[(&str, &[(i64, &str)])]) -> TopicRouteData {
        let mut route = TopicRouteData::default();
        for (name, members) in groups {
            let mut bd = BrokerData::new("c", *name);
            for (id, addr) in *members {
                bd.broker_addrs.insert(*id, addr.to_string());
            }
            route.broker_datas.push(bd);
            route.queue_datas.push(QueueData {
                broker_name: name.to_string(),
                perm: 6,
                read_queue_nums: 2,
                topic_sys_flag: 0,
                write_queue_nums: 2,
            });
        }
        route
    }

    fn apply(cache: &RouteCache, topic: &str, route: TopicRouteData) {
        cache.store_brokers_and_publish(topic, &route);
        cache.store_route(topic, route);
    }

    #[test]
    fn a_route_changes_until_it_and_its_publish_info_are_stored() {
        let cache = RouteCache::default();
        let r = route_of(&[("broker-a", &[(0, "a0:1")])]);
        assert!(cache.route_changed("T", &r));
        apply(&cache, "T", r.clone());
        assert!(!cache.route_changed("T", &r));
        assert!(cache.has_route("T"));
        assert_eq!(cache.route("T"), Some(r.clone()));
        assert_eq!(cache.publish_info("T").map(|p| p.queues.len()), Some(2));
        assert_eq!(
            cache.publish_topics().into_iter().collect::<Vec<_>>(),
            ["T"]
        );

        let mut more = r;
        more.queue_datas[0].write_queue_nums = 4;
        assert!(cache.route_changed("T", &more));
    }

    #[test]
    fn a_route_without_a_master_has_no_usable_publish_info() {
        let cache = RouteCache::default();
        let r = route_of(&[("broker-a", &[(1, "a1:1")])]);
        apply(&cache, "T", r.clone());
        assert!(cache.publish_info("T").is_none());
        assert!(cache.any_publish_info("T").is_some_and(|p| !p.ok()));
        // Writable queues but nothing to send to: worth fetching again.
        assert!(cache.route_changed("T", &r));
    }

    #[test]
    fn find_broker_prefers_the_wanted_id_then_any_member() {
        let cache = RouteCache::default();
        apply(
            &cache,
            "T",
            route_of(&[
                ("broker-a", &[(0, "a0:1"), (1, "a1:1")]),
                ("broker-b", &[(2, "b2:1")]),
            ]),
        );
        assert_eq!(cache.master_addr("broker-a").as_deref(), Some("a0:1"));
        assert_eq!(cache.master_addr("broker-b"), None);
        let slave = FoundBroker {
            addr: "a1:1".into(),
            slave: true,
        };
        assert_eq!(cache.find_broker("broker-a", 1, true), Some(slave));
        assert_eq!(cache.find_broker("broker-b", MASTER_ID, true), None);
        assert_eq!(
            cache.find_broker("broker-b", MASTER_ID, false),
            Some(FoundBroker {
                addr: "b2:1".into(),
                slave: true
            })
        );
        assert_eq!(cache.find_broker("broker-z", MASTER_ID, false), None);
    }

    #[test]
    fn pull_from_remembers_only_slave_suggestions() {
        let cache = RouteCache::default();
        let mq = TopicQueue::new("T", "broker-a", 0);
        assert_eq!(cache.pull_from(&mq), MASTER_ID);
        cache.set_pull_from(&mq, 1);
        assert_eq!(cache.pull_from(&mq), 1);
        assert_eq!(
            cache.pull_from(&TopicQueue::new("T", "broker-a", 1)),
            MASTER_ID
        );
        cache.set_pull_from(&mq, MASTER_ID);
        assert_eq!(cache.pull_from(&mq), MASTER_ID);
        assert!(cache.pull_from.lock().is_empty());
    }

    #[test]
    fn offline_brokers_are_forgotten_once_no_route_mentions_them() {
        let cache = RouteCache::default();
        apply(
            &cache,
            "T",
            route_of(&[
                ("broker-a", &[(0, "a0:1"), (1, "a1:1")]),
                ("broker-b", &[(0, "b0:1")]),
            ]),
        );
        apply(&cache, "U", route_of(&[("broker-b", &[(0, "b0:1")])]));
        assert_eq!(
            cache.broker_addresses(),
            [
                ("broker-a".to_string(), 0, "a0:1".to_string()),
                ("broker-a".to_string(), 1, "a1:1".to_string()),
                ("broker-b".to_string(), 0, "b0:1".to_string()),
            ]
        );
        // broker-a's slave left T's route; broker-b is still in U's.
        apply(
            &cache,
            "T",
            route_of(&[("broker-a", &[(0, "a0:1")]), ("broker-b", &[(0, "b0:1")])]),
        );
        // The new route replaced broker-a's members at once.
        assert_eq!(cache.broker_addresses().len(), 2);
        apply(&cache, "T", route_of(&[("broker-a", &[(0, "a0:1")])]));
        cache.clean_offline_brokers();
        assert_eq!(
            cache.broker_addresses().len(),
            2,
            "U still routes to broker-b"
        );
        apply(&cache, "U", route_of(&[("broker-a", &[(0, "a0:1")])]));
        cache.clean_offline_brokers();
        assert_eq!(
            cache.broker_addresses(),
            [("broker-a".to_string(), 0, "a0:1".to_string())]
        );
    }

    #[test]
    fn any_broker_of_prefers_a_master_and_needs_a_cached_route() {
        let cache = RouteCache::default();
        assert_eq!(cache.any_broker_of("T"), None);
        apply(
            &cache,
            "T",
            route_of(&[("broker-a", &[(0, "a0:1"), (1, "a1:1")])]),
        );
        assert_eq!(cache.any_broker_of("T").as_deref(), Some("a0:1"));
        apply(&cache, "U", route_of(&[("broker-b", &[(1, "b1:1")])]));
        assert_eq!(cache.any_broker_of("U").as_deref(), Some("b1:1"));
    }

    #[test]
    fn one_gate_per_topic() {
        let cache = RouteCache::default();
        assert!(Arc::ptr_eq(&cache.gate("T"), &cache.gate("T")));
        assert!(!Arc::ptr_eq(&cache.gate("T"), &cache.gate("U")));
    }

    #[test]
    fn name_servers_start_at_a_valid_index() {
        let ns = NameServers::new(vec!["n1:9876".into(), "n2:9876".into()]);
        assert!(ns.first.load(Ordering::Relaxed) < 2);
        assert_eq!(ns.addrs(), ["n1:9876", "n2:9876"]);
        let none = NameServers::new(Vec::new());
        assert_eq!(none.first.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn no_name_server_is_an_invalid_argument() {
        let none = NameServers::new(Vec::new());
        let cmd = RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC);
        let r = none
            .invoke(&RemotingClient::default(), cmd, Duration::from_secs(1))
            .await;
        assert!(matches!(r, Err(ClientError::InvalidArgument(_))), "{r:?}");
    }
}
