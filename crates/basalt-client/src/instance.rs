//! [`ClientInstance`]: the connection, route and heartbeat machinery that
//! producers and consumers share (Java `MQClientInstance`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use basalt_common::constants::topic::AUTO_CREATE_TOPIC;
use basalt_common::msgid::UniqKeyGenerator;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, GetConsumerRunningInfoRequestHeader, GetRouteInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader,
};
use basalt_remoting::protocol::{ConsumerData, HeartbeatData, ProducerData, TopicRouteData};
use basalt_remoting::transport::BoxFuture;
use basalt_remoting::{Channel, ClientRequestHandler, RemotingClient, RemotingCommand};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::message::TopicQueue;
use crate::route::{MASTER_ID, TopicPublishInfo, subscribe_queues};

/// Producer group of the instance's internal producer, which resends failed
/// messages to the retry topic when CONSUMER_SEND_MSG_BACK fails.
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";

/// What the instance needs from a consumer it serves.
pub(crate) trait ConsumerInner: Send + Sync + 'static {
    fn group(&self) -> &str;
    /// This consumer's entry in HEART_BEAT.
    fn consumer_data(&self) -> ConsumerData;
    /// Topics whose routes this consumer needs.
    fn subscribed_topics(&self) -> Vec<String>;
    /// A route refresh found these readable queues for `topic`; returns
    /// whether they differ from what the consumer knew.
    fn update_subscribe_info(&self, topic: &str, queues: &BTreeSet<TopicQueue>) -> bool;
    /// Whether the consumer lacks queue information for `topic`.
    fn needs_subscribe_info(&self, topic: &str) -> bool;
    /// Rebalance now (push consumers; others do nothing).
    fn rebalance(self: Arc<Self>) -> BoxFuture<'static, ()>;
    /// Commit consumed offsets (the periodic persist).
    fn persist_offsets(self: Arc<Self>) -> BoxFuture<'static, ()>;
    /// GET_CONSUMER_RUNNING_INFO's body (`ConsumerRunningInfo` JSON), with
    /// `extra` added to its properties.
    fn running_info(&self, extra: BTreeMap<String, String>) -> Vec<u8>;
    /// RESET_CONSUMER_CLIENT_OFFSET: restart the held queues of `topic`
    /// found in `offsets` from those offsets.
    fn reset_offsets(
        self: Arc<Self>,
        topic: String,
        offsets: BTreeMap<TopicQueue, i64>,
    ) -> BoxFuture<'static, ()>;
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

struct Services {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// The per-process client core (Java `MQClientInstance`): one
/// [`RemotingClient`], the route cache, the broker address table, the
/// producers and consumers it heartbeats for, and its timers.
///
/// Producers and consumers created with `new` each get their own instance;
/// `with_instance` constructors share one. Timers run while at least one
/// started producer or consumer uses the instance, and hold only a weak
/// reference, so dropping every user stops them.
pub struct ClientInstance {
    config: ClientConfig,
    client_id: String,
    client_ip: String,
    remoting: RemotingClient,
    namesrvs: Vec<String>,
    namesrv_index: AtomicUsize,
    tables: RwLock<Tables>,
    publish: RwLock<HashMap<String, Arc<TopicPublishInfo>>>,
    /// One route fetch per topic at a time; others wait for its result.
    route_gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Broker id a pull response suggested for the next pull of a queue.
    pull_from: Mutex<HashMap<TopicQueue, i64>>,
    producers: Mutex<BTreeSet<String>>,
    consumers: Mutex<BTreeMap<String, Weak<dyn ConsumerInner>>>,
    heartbeat_lock: tokio::sync::Mutex<()>,
    rebalance_notify: Notify,
    services: Mutex<Option<Services>>,
    users: Mutex<usize>,
    uniq: UniqKeyGenerator,
}

impl std::fmt::Debug for ClientInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInstance")
            .field("client_id", &self.client_id)
            .field("namesrvs", &self.namesrvs)
            .finish()
    }
}

impl ClientInstance {
    /// A new instance; nothing is connected until it is used.
    pub fn new(config: ClientConfig) -> Arc<Self> {
        let client_ip = config.resolve_client_ip();
        let client_id = format!("{}@{}", client_ip, config.resolve_instance_name());
        let namesrvs = config.namesrv_list();
        let start = if namesrvs.is_empty() {
            0
        } else {
            crate::util::random_u32() as usize % namesrvs.len()
        };
        let ip = client_ip
            .parse()
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        Arc::new_cyclic(|weak: &Weak<Self>| {
            let remoting = RemotingClient::with_handler(
                basalt_remoting::ClientConfig {
                    connect_timeout: config.connect_timeout,
                    ..Default::default()
                },
                Arc::new(ServerRequests(weak.clone())),
            );
            Self {
                client_id,
                client_ip,
                remoting,
                namesrvs,
                namesrv_index: AtomicUsize::new(start),
                tables: RwLock::new(Tables::default()),
                publish: RwLock::new(HashMap::new()),
                route_gates: Mutex::new(HashMap::new()),
                pull_from: Mutex::new(HashMap::new()),
                producers: Mutex::new(BTreeSet::new()),
                consumers: Mutex::new(BTreeMap::new()),
                heartbeat_lock: tokio::sync::Mutex::new(()),
                rebalance_notify: Notify::new(),
                services: Mutex::new(None),
                users: Mutex::new(0),
                uniq: UniqKeyGenerator::new(ip, crate::util::random_u32()),
                config,
            }
        })
    }

    /// `ip@instanceName`: how brokers and other consumers know this client.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    pub fn client_ip(&self) -> &str {
        &self.client_ip
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The connection pool (for requests this crate has no method for).
    pub fn remoting(&self) -> &RemotingClient {
        &self.remoting
    }

    pub(crate) fn next_uniq_key(&self) -> String {
        self.uniq.next_key()
    }

    /// A request command with this client's language, version and header
    /// encoding.
    pub fn request(&self, code: i32) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(code);
        cmd.language = self.config.language;
        cmd.version = self.config.version;
        cmd.serialize_type = self.config.serialize_type;
        cmd
    }

    /// Sends `cmd` to `addr` and waits for the answer (any code).
    pub async fn invoke(
        &self,
        addr: &str,
        cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        Ok(self.remoting.invoke(addr, cmd, timeout).await?)
    }

    /// Like [`Self::invoke`], but any code other than SUCCESS is an error.
    pub async fn invoke_ok(
        &self,
        addr: &str,
        cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let resp = self.invoke(addr, cmd, timeout).await?;
        if resp.code != response::SUCCESS {
            return Err(ClientError::broker(resp.code, resp.remark, addr));
        }
        Ok(resp)
    }

    /// Sends `cmd` to a NameServer, trying the next one when a NameServer
    /// cannot be reached, and sticking to the one that answered.
    pub async fn invoke_namesrv(&self, cmd: RemotingCommand) -> Result<(String, RemotingCommand)> {
        let n = self.namesrvs.len();
        if n == 0 {
            return Err(ClientError::InvalidArgument(
                "no NameServer address is configured".into(),
            ));
        }
        let first = self.namesrv_index.load(Ordering::Relaxed);
        let mut last_err = None;
        for i in 0..n {
            let idx = (first + i) % n;
            let addr = &self.namesrvs[idx];
            match self
                .remoting
                .invoke(addr, cmd.clone(), self.config.request_timeout)
                .await
            {
                Ok(resp) => {
                    if i > 0 {
                        self.namesrv_index.store(idx, Ordering::Relaxed);
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

    /// The NameServer addresses this instance uses.
    pub fn namesrv_addrs(&self) -> &[String] {
        &self.namesrvs
    }

    // ---------------------------------------------------------------- routes

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
        let consumers = self.live_consumers();
        let changed = {
            let tables = self.tables.read();
            tables.routes.get(topic) != Some(&route)
        } || !self
            .publish
            .read()
            .get(topic)
            .is_some_and(|p| p.ok() || !route_writable(&route))
            || consumers.iter().any(|c| c.needs_subscribe_info(topic));
        if !changed {
            return false;
        }
        tracing::debug!(topic, client = %self.client_id, "route changed");
        {
            let mut tables = self.tables.write();
            for bd in &route.broker_datas {
                tables
                    .broker_addrs
                    .insert(bd.broker_name.clone(), bd.broker_addrs.clone());
            }
        }
        let info = Arc::new(TopicPublishInfo::from_route(topic, &route));
        self.publish.write().insert(topic.to_string(), info);
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
        self.tables.write().routes.insert(topic.to_string(), route);
        true
    }

    /// The cached route of `topic`, if any.
    pub fn cached_route(&self, topic: &str) -> Option<TopicRouteData> {
        self.tables.read().routes.get(topic).cloned()
    }

    /// The publish info of `topic` if cached and usable.
    #[inline]
    pub(crate) fn publish_info(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        self.publish.read().get(topic).filter(|p| p.ok()).cloned()
    }

    /// Java's `tryToFindTopicPublishInfo`: the cached info, else the route
    /// from the NameServer, else the auto-create template route.
    pub(crate) async fn find_publish_info(
        &self,
        topic: &str,
        default_queue_nums: i32,
    ) -> Result<Arc<TopicPublishInfo>> {
        if let Some(info) = self.publish_info(topic) {
            return Ok(info);
        }
        let gate = self
            .route_gates
            .lock()
            .entry(topic.to_string())
            .or_default()
            .clone();
        let _one_at_a_time = gate.lock().await;
        if let Some(info) = self.publish_info(topic) {
            return Ok(info);
        }
        match self.update_route(topic).await {
            Ok(_) => {}
            Err(ClientError::NoRoute { .. }) => {}
            Err(e) => return Err(e),
        }
        let has_real_route = self.tables.read().routes.contains_key(topic);
        if !has_real_route {
            match self
                .update_route_from_default(topic, default_queue_nums)
                .await
            {
                Ok(_) | Err(ClientError::NoRoute { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.publish
            .read()
            .get(topic)
            .cloned()
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_string(),
            })
    }

    /// Refreshes a topic's route in the background (after a send failure).
    pub(crate) fn refresh_route_soon(self: &Arc<Self>, topic: &str) {
        // One refresh per topic at a time: a broker outage fails many sends
        // at once, and each must not become a NameServer request.
        let gate = self
            .route_gates
            .lock()
            .entry(topic.to_string())
            .or_default()
            .clone();
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

    /// The master address of a broker group.
    pub fn master_addr(&self, broker_name: &str) -> Option<String> {
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

    /// The master of a queue's broker group, refreshing the route once if
    /// it is unknown.
    pub(crate) async fn master_of(&self, mq: &TopicQueue) -> Result<String> {
        if let Some(a) = self.master_addr(&mq.broker_name) {
            return Ok(a);
        }
        let _ = self.update_route(&mq.topic).await;
        self.master_addr(&mq.broker_name)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker_name: mq.broker_name.clone(),
            })
    }

    /// The master of a queue's broker group or, when the group has none (its
    /// master is down), any member: Java's offset store reads and writes
    /// consumer offsets at a slave then (`findBrokerAddressInSubscribe` with
    /// `onlyThisBroker` false after a route refresh).
    pub(crate) async fn master_or_member_of(&self, mq: &TopicQueue) -> Result<String> {
        if let Some(a) = self.master_addr(&mq.broker_name) {
            return Ok(a);
        }
        let _ = self.update_route(&mq.topic).await;
        self.find_broker(&mq.broker_name, MASTER_ID, false)
            .map(|b| b.addr)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker_name: mq.broker_name.clone(),
            })
    }

    /// The broker to pull a queue from: the node the last pull response
    /// suggested (master by default), else any member of the group.
    pub(crate) async fn pull_target(&self, mq: &TopicQueue) -> Result<FoundBroker> {
        let id = self.pull_from.lock().get(mq).copied().unwrap_or(MASTER_ID);
        if let Some(b) = self.find_broker(&mq.broker_name, id, false) {
            return Ok(b);
        }
        let _ = self.update_route(&mq.topic).await;
        self.find_broker(&mq.broker_name, id, false)
            .ok_or_else(|| ClientError::BrokerNotFound {
                broker_name: mq.broker_name.clone(),
            })
    }

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

    /// Every known broker address with its group and id.
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
    fn clean_offline_brokers(&self) {
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

    // ------------------------------------------------------------- registry

    pub(crate) fn register_producer(&self, group: &str) -> Result<()> {
        if !self.producers.lock().insert(group.to_string()) {
            return Err(ClientError::InvalidArgument(format!(
                "the producer group {group} is already registered in client {}",
                self.client_id
            )));
        }
        Ok(())
    }

    pub(crate) fn register_consumer(&self, consumer: Weak<dyn ConsumerInner>) -> Result<()> {
        let Some(c) = consumer.upgrade() else {
            return Err(ClientError::NotStarted);
        };
        let mut map = self.consumers.lock();
        if map.get(c.group()).is_some_and(|w| w.strong_count() > 0) {
            return Err(ClientError::InvalidArgument(format!(
                "the consumer group {} is already registered in client {}",
                c.group(),
                self.client_id
            )));
        }
        map.insert(c.group().to_string(), consumer);
        Ok(())
    }

    fn live_consumers(&self) -> Vec<Arc<dyn ConsumerInner>> {
        self.consumers
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Removes a producer group and tells every broker (UNREGISTER_CLIENT).
    pub(crate) async fn unregister_producer(&self, group: &str) {
        self.producers.lock().remove(group);
        self.unregister_client(Some(group), None).await;
    }

    /// Removes a consumer group and tells every broker (UNREGISTER_CLIENT).
    pub(crate) async fn unregister_consumer(&self, group: &str) {
        self.consumers.lock().remove(group);
        self.unregister_client(None, Some(group)).await;
    }

    async fn unregister_client(&self, producer: Option<&str>, consumer: Option<&str>) {
        let header = UnregisterClientRequestHeader {
            client_id: self.client_id.clone(),
            producer_group: producer.map(str::to_string),
            consumer_group: consumer.map(str::to_string),
        };
        for (_, _, addr) in self.broker_addresses() {
            let cmd = self
                .request(request::UNREGISTER_CLIENT)
                .with_ext(header.to_ext());
            if let Err(e) = self
                .invoke_ok(&addr, cmd, self.config.request_timeout)
                .await
            {
                tracing::warn!(broker = %addr, error = %e, "UNREGISTER_CLIENT failed");
            }
        }
    }

    // ------------------------------------------------------------ heartbeat

    fn heartbeat_data(&self) -> HeartbeatData {
        let consumers = self.live_consumers();
        let mut producer_data_set: Vec<ProducerData> = self
            .producers
            .lock()
            .iter()
            .map(|g| ProducerData {
                group_name: g.clone(),
            })
            .collect();
        if !consumers.is_empty()
            && !producer_data_set
                .iter()
                .any(|p| p.group_name == CLIENT_INNER_PRODUCER_GROUP)
        {
            producer_data_set.push(ProducerData {
                group_name: CLIENT_INNER_PRODUCER_GROUP.into(),
            });
        }
        HeartbeatData {
            client_id: self.client_id.clone(),
            consumer_data_set: consumers.iter().map(|c| c.consumer_data()).collect(),
            heartbeat_fingerprint: None,
            producer_data_set,
            without_sub: None,
        }
    }

    /// Sends HEART_BEAT to every known broker (only masters when this client
    /// has no consumer). Returns how many brokers answered SUCCESS.
    pub async fn send_heartbeat_to_all_brokers(&self) -> usize {
        let _one_at_a_time = self.heartbeat_lock.lock().await;
        let data = self.heartbeat_data();
        if data.consumer_data_set.is_empty() && data.producer_data_set.is_empty() {
            return 0;
        }
        let body = match serde_json::to_vec(&data) {
            Ok(b) => bytes::Bytes::from(b),
            Err(e) => {
                tracing::error!(error = %e, "cannot encode the heartbeat");
                return 0;
            }
        };
        let only_masters = data.consumer_data_set.is_empty();
        let mut set = tokio::task::JoinSet::new();
        for (_, id, addr) in self.broker_addresses() {
            if only_masters && id != MASTER_ID {
                continue;
            }
            let cmd = self.request(request::HEART_BEAT).with_body(body.clone());
            let remoting = self.remoting.clone();
            let timeout = self.config.request_timeout;
            set.spawn(async move {
                let r = remoting.invoke(&addr, cmd, timeout).await;
                (addr, r)
            });
        }
        let mut ok = 0;
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((_, Ok(resp))) if resp.code == response::SUCCESS => ok += 1,
                Ok((addr, Ok(resp))) => tracing::warn!(broker = %addr, code = resp.code,
                    remark = ?resp.remark, "heartbeat refused"),
                Ok((addr, Err(e))) => {
                    tracing::warn!(broker = %addr, error = %e, "heartbeat failed")
                }
                Err(e) => tracing::error!(error = %e, "heartbeat task failed"),
            }
        }
        ok
    }

    // ------------------------------------------------------------- services

    /// Asks the rebalance service to run now.
    pub fn rebalance_now(&self) {
        self.rebalance_notify.notify_one();
    }

    /// Marks one more started user; the first one starts the timers.
    pub(crate) fn acquire(self: &Arc<Self>) {
        let mut users = self.users.lock();
        *users += 1;
        if *users == 1 {
            self.start_services();
        }
    }

    /// Marks one user gone; the last one stops the timers and closes the
    /// connections.
    pub(crate) async fn release(&self) {
        let stop = {
            let mut users = self.users.lock();
            *users = users.saturating_sub(1);
            *users == 0
        };
        if stop {
            let services = self.services.lock().take();
            if let Some(s) = services {
                s.stop.send_replace(true);
                for t in s.tasks {
                    let _ = t.await;
                }
            }
            self.remoting.shutdown();
        }
    }

    fn start_services(self: &Arc<Self>) {
        let (stop, stop_rx) = watch::channel(false);
        let cfg = &self.config;
        let mut tasks = Vec::new();
        // The first heartbeat goes out after 1 s, as in Java, so brokers
        // learn of producers whose routes were found at their first send.
        tasks.push(spawn_periodic(
            Arc::downgrade(self),
            stop_rx.clone(),
            cfg.poll_name_server_interval,
            cfg.poll_name_server_interval,
            |me| Box::pin(async move { me.refresh_all_routes().await }),
        ));
        tasks.push(spawn_periodic(
            Arc::downgrade(self),
            stop_rx.clone(),
            cfg.heartbeat_interval.min(Duration::from_secs(1)),
            cfg.heartbeat_interval,
            |me| {
                Box::pin(async move {
                    me.clean_offline_brokers();
                    me.send_heartbeat_to_all_brokers().await;
                })
            },
        ));
        tasks.push(spawn_periodic(
            Arc::downgrade(self),
            stop_rx.clone(),
            cfg.persist_consumer_offset_interval,
            cfg.persist_consumer_offset_interval,
            |me| {
                Box::pin(async move {
                    for c in me.live_consumers() {
                        c.persist_offsets().await;
                    }
                })
            },
        ));
        tasks.push(tokio::spawn(rebalance_service(
            Arc::downgrade(self),
            stop_rx,
            cfg.rebalance_interval,
        )));
        *self.services.lock() = Some(Services { stop, tasks });
    }

    /// Refreshes the routes of every topic a producer or consumer uses.
    pub(crate) async fn refresh_all_routes(&self) {
        let mut topics: BTreeSet<String> = self.publish.read().keys().cloned().collect();
        for c in self.live_consumers() {
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

    async fn rebalance_all(&self) {
        for c in self.live_consumers() {
            c.rebalance().await;
        }
    }

    fn consumer(&self, group: &str) -> Option<Arc<dyn ConsumerInner>> {
        self.consumers.lock().get(group).and_then(Weak::upgrade)
    }
}

fn route_writable(route: &TopicRouteData) -> bool {
    route
        .queue_datas
        .iter()
        .any(|q| basalt_common::constants::perm::is_writeable(q.perm) && q.write_queue_nums > 0)
}

type Job = fn(Arc<ClientInstance>) -> BoxFuture<'static, ()>;

/// Runs `job` after `first`, then every `period`, until the stop signal or
/// until the instance is gone.
fn spawn_periodic(
    weak: Weak<ClientInstance>,
    mut stop: watch::Receiver<bool>,
    first: Duration,
    period: Duration,
    job: Job,
) -> JoinHandle<()> {
    let period = period.max(Duration::from_millis(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + first, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let Some(me) = weak.upgrade() else { return };
            tokio::select! {
                _ = job(me) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    })
}

/// Rebalances every push consumer each `period`, and at once when asked
/// (NOTIFY_CONSUMER_IDS_CHANGED, a start, a dropped queue).
async fn rebalance_service(
    weak: Weak<ClientInstance>,
    mut stop: watch::Receiver<bool>,
    period: Duration,
) {
    let period = period.max(Duration::from_millis(1));
    loop {
        // The strong reference lives for one round only, so dropping every
        // user of the instance ends this task at the next round.
        let Some(me) = weak.upgrade() else { return };
        let go = tokio::select! {
            _ = me.rebalance_notify.notified() => true,
            _ = tokio::time::sleep(period) => true,
            _ = stop.wait_for(|s| *s) => false,
        };
        if !go {
            return;
        }
        tokio::select! {
            _ = me.rebalance_all() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Handles the requests brokers send to this client.
struct ServerRequests(Weak<ClientInstance>);

impl ClientRequestHandler for ServerRequests {
    fn handle<'a>(
        &'a self,
        channel: &'a Channel,
        req: RemotingCommand,
    ) -> BoxFuture<'a, Option<RemotingCommand>> {
        Box::pin(async move {
            let me = self.0.upgrade()?;
            match req.code {
                request::NOTIFY_CONSUMER_IDS_CHANGED => {
                    let group = req
                        .decode_header::<NotifyConsumerIdsChangedRequestHeader>()
                        .map(|h| h.consumer_group)
                        .unwrap_or_default();
                    tracing::info!(group, broker = %channel.remote_addr(),
                        "consumer ids changed; rebalancing");
                    me.rebalance_now();
                    // Oneway: the transport sends nothing for a oneway request.
                    Some(RemotingCommand::response_to(&req))
                }
                request::GET_CONSUMER_RUNNING_INFO => Some(me.running_info_response(&req)),
                request::RESET_CONSUMER_CLIENT_OFFSET => {
                    me.reset_offsets(&req).await;
                    // Brokers send it oneway (no reply goes out then).
                    Some(RemotingCommand::response_to(&req))
                }
                request::CHECK_TRANSACTION_STATE => {
                    tracing::warn!(broker = %channel.remote_addr(),
                        "CHECK_TRANSACTION_STATE received, but this client sends no transactional messages");
                    None
                }
                _ => Some(RemotingCommand::not_supported(&req)),
            }
        })
    }
}

/// RESET_CONSUMER_CLIENT_OFFSET's body (`ResetOffsetBody`): MessageQueue
/// object keys, fastjson style.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResetOffsetBody {
    #[serde(
        default,
        deserialize_with = "basalt_remoting::fastjson::mq_map::deserialize"
    )]
    offset_table: Vec<(TopicQueue, i64)>,
}

impl ClientInstance {
    /// An admin reset a group's offsets: the broker tells each consumer the
    /// new offsets of the queues (Java `ClientRemotingProcessor.resetOffset`).
    async fn reset_offsets(&self, req: &RemotingCommand) {
        let (Some(topic), Some(group)) = (req.ext_fields.get("topic"), req.ext_fields.get("group"))
        else {
            tracing::warn!("RESET_CONSUMER_CLIENT_OFFSET without topic or group");
            return;
        };
        let table: BTreeMap<TopicQueue, i64> = if req.body.is_empty() {
            BTreeMap::new()
        } else {
            match basalt_remoting::fastjson::from_slice::<ResetOffsetBody>(&req.body) {
                Ok(b) => b.offset_table.into_iter().collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "undecodable RESET_CONSUMER_CLIENT_OFFSET body");
                    return;
                }
            }
        };
        match self.consumer(group) {
            Some(c) => {
                tracing::info!(
                    group,
                    topic,
                    queues = table.len(),
                    "resetting consumer offsets"
                );
                c.reset_offsets(topic.to_string(), table).await;
            }
            None => tracing::debug!(group, "offset reset for a group this client does not run"),
        }
    }

    fn running_info_response(&self, req: &RemotingCommand) -> RemotingCommand {
        let header = match req.decode_header::<GetConsumerRunningInfoRequestHeader>() {
            Ok(h) => h,
            Err(e) => {
                let mut r = RemotingCommand::response(response::SYSTEM_ERROR, Some(e.to_string()));
                r.opaque = req.opaque;
                return r;
            }
        };
        match self.consumer(&header.consumer_group) {
            Some(c) => {
                let mut extra = BTreeMap::new();
                let ns: String = self.namesrvs.iter().map(|a| format!("{a};")).collect();
                extra.insert("PROP_NAMESERVER_ADDR".to_string(), ns);
                extra.insert(
                    "PROP_CLIENT_VERSION".to_string(),
                    format!("V{}", self.config.version),
                );
                RemotingCommand::response_to(req).with_body(c.running_info(extra))
            }
            None => {
                let mut r = RemotingCommand::response(
                    response::SYSTEM_ERROR,
                    Some(format!(
                        "The Consumer Group <{}> not exist in this consumer",
                        header.consumer_group
                    )),
                );
                r.opaque = req.opaque;
                r
            }
        }
    }
}
