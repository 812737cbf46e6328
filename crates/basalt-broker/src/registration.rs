//! Registration with the NameServers (REGISTER_BROKER / UNREGISTER_BROKER):
//! at start, every `registerNameServerPeriod`, and in coalesced rounds when
//! asked; a created topic alone, with REGISTER_TOPIC_IN_NAMESRV or an
//! incremental REGISTER_BROKER (`enableSingleTopicRegister`). A slave learns
//! its master's addresses from the answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use basalt_remoting::code::request;
use basalt_remoting::header::{
    CommandHeader, RegisterBrokerRequestHeader, RegisterTopicRequestHeader,
    UnregisterBrokerRequestHeader,
};
use basalt_remoting::protocol::{
    QueueData, RegisterBrokerBody, TopicConfigSerializeWrapper, TopicRouteData,
};
use basalt_remoting::{RemotingClient, RemotingCommand};
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use crate::config::BrokerConfig;
use crate::live_config::LiveBrokerConfig;
use crate::metadata::formats::TopicSettings;
use crate::metadata::topics::{TopicChange, TopicConfigManager};
use crate::replication::Replication;

/// Registers this broker with its NameServers and runs the coalesced
/// registration rounds topic changes ask for. Owns the remoting client the
/// broker uses for outbound calls (NameServers, a slave's master).
///
/// Invariant: `finished` only grows, and round `n` started after ticket `n`
/// was handed out, so a caller that waits for its ticket knows the
/// NameServers were sent a topic table that includes its change.
pub struct Registrar {
    config: Arc<BrokerConfig>,
    /// `brokerPermission` masks every topic's permission as registered.
    live: Arc<LiveBrokerConfig>,
    topics: Arc<TopicConfigManager>,
    replication: Arc<Replication>,
    client: RemotingClient,
    /// `ip:port` of the HA listener, as registered (empty when none).
    ha_addr: String,
    /// The master's address as the NameServer reported it (slaves).
    master_addr: Mutex<Option<String>>,
    requested: AtomicU64,
    wake: Notify,
    finished: watch::Sender<u64>,
}

impl std::fmt::Debug for Registrar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registrar")
            .field("namesrvs", &self.config.namesrv_addr)
            .finish()
    }
}

impl Registrar {
    pub fn new(
        config: Arc<BrokerConfig>,
        live: Arc<LiveBrokerConfig>,
        topics: Arc<TopicConfigManager>,
        replication: Arc<Replication>,
        client: RemotingClient,
        ha_addr: String,
    ) -> Self {
        Registrar {
            master_addr: Mutex::new(config.ha_master_address.clone()),
            config,
            live,
            topics,
            replication,
            client,
            ha_addr,
            requested: AtomicU64::new(0),
            wake: Notify::new(),
            finished: watch::channel(0).0,
        }
    }

    /// The client for the broker's own outbound requests.
    pub fn client(&self) -> &RemotingClient {
        &self.client
    }

    /// The master's address, once known (slaves and ledger followers).
    pub fn master_addr(&self) -> Option<String> {
        self.master_addr.lock().clone()
    }

    /// Sends `cmd` to the NameServer at `addr`, signed with the broker's
    /// own credentials when it has any: `innerClientAuthenticationCredentials`
    /// as Java's broker signs, else the `initAuthenticationUser` (a super
    /// user, so a NameServer sharing the broker's settings takes it).
    async fn call_namesrv(
        &self,
        addr: &str,
        mut cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, basalt_remoting::RemotingError> {
        if let Some(u) = self.config.auth.broker_credentials() {
            basalt_auth::sign::sign(&mut cmd, &u.username, &u.password, None);
        }
        self.client.invoke(addr, cmd, timeout).await
    }

    /// A topic's route from the first NameServer that knows it (all of
    /// its broker groups' queues); None when none does.
    pub async fn topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        let h = basalt_remoting::header::GetRouteInfoRequestHeader {
            topic: topic.to_string(),
            accept_standard_json_only: Some(true),
        };
        for addr in self.namesrv_addrs() {
            let cmd =
                RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC).with_ext(h.to_ext());
            match self.call_namesrv(&addr, cmd, Duration::from_secs(3)).await {
                Ok(r) if r.code == 0 => match TopicRouteData::decode(&r.body) {
                    Ok(route) => return Some(route),
                    Err(e) => tracing::warn!(namesrv = %addr, error = %e, "unreadable route"),
                },
                Ok(_) => {}
                Err(e) => tracing::debug!(namesrv = %addr, error = %e, "route lookup failed"),
            }
        }
        None
    }

    fn namesrv_addrs(&self) -> Vec<String> {
        self.config
            .namesrv_addr
            .as_deref()
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Registers with every NameServer now (REGISTER_BROKER), with the
    /// whole topic table: in one request, or, with
    /// `enableSplitRegistration` and more than `splitRegistrationSize`
    /// topics, in requests of that many topics each (RocketMQ 5's
    /// `registerBrokerAll`). Each part carries its own data version (the
    /// table's, its counter plus the part's index, stamped now), so a
    /// NameServer, which takes a table only when the version differs from
    /// the last one it was sent, takes every part.
    pub async fn register(&self) {
        if self.namesrv_addrs().is_empty() {
            return;
        }
        let whole = self.topics.snapshot().to_wire();
        let size = self.config.split_registration_size.max(1);
        if !self.config.enable_split_registration || whole.topic_config_table.len() <= size {
            self.register_table(whole).await;
            return;
        }
        let now = basalt_common::time::now_millis();
        let mut parts = Vec::new();
        let mut part = std::collections::BTreeMap::new();
        for (name, tc) in whole.topic_config_table {
            part.insert(name, tc);
            if part.len() == size {
                parts.push(std::mem::take(&mut part));
            }
        }
        if !part.is_empty() {
            parts.push(part);
        }
        for (i, table) in parts.into_iter().enumerate() {
            let mut version = whole.data_version.clone();
            version.counter += i as i64;
            version.timestamp = now + i as i64;
            let wrapper = TopicConfigSerializeWrapper {
                data_version: version,
                topic_config_table: table,
            };
            self.register_table(wrapper).await;
        }
    }

    /// RocketMQ's `registerIncrementBrokerData`: a REGISTER_BROKER whose
    /// table holds one topic, stamped with the version that change made (a
    /// NameServer adds queue data from a registration, it removes none). Not
    /// the table's current version: a NameServer takes a table only when its
    /// version differs from the broker's previous registration, so two
    /// creations registering at once with the same current version lost the
    /// second topic until a later change (the C++ client's test, creating
    /// topics from five threads, waited for its 30 s route poll).
    /// True when every NameServer took it.
    async fn register_increment(&self, change: &TopicChange) -> bool {
        let tc = &change.config;
        let version = change
            .version
            .clone()
            .unwrap_or_else(|| self.topics.data_version());
        let wrapper = TopicConfigSerializeWrapper {
            data_version: version.to_wire(),
            topic_config_table: [(tc.topic_name.clone(), tc.to_wire())].into(),
        };
        self.register_table(wrapper).await
    }

    /// REGISTER_BROKER with `topics` to every NameServer; true when all of
    /// them took it.
    async fn register_table(&self, mut topics: TopicConfigSerializeWrapper) -> bool {
        let addrs = self.namesrv_addrs();
        // The NameServer takes queue data only from a table whose version
        // changed: a run-time change of brokerPermission counts as one (as
        // Java bumps the topic table's version for it, and for no other
        // setting: a wipeWritePerm at the NameServer stays until then).
        // Both counters only grow, so their sum does too.
        topics.data_version.counter += self.live.permission_version() as i64;
        // A broker that is not both readable and writable registers every
        // topic with its own permission masked (Java `registerBrokerAll`).
        let broker_perm = self.live.broker_permission();
        if broker_perm
            != basalt_common::constants::perm::READ | basalt_common::constants::perm::WRITE
        {
            for t in topics.topic_config_table.values_mut() {
                t.perm &= broker_perm;
            }
        }
        let count = topics.topic_config_table.len();
        let body = RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: topics,
        };
        let version = RemotingCommand::request(request::REGISTER_BROKER).version;
        let compressed = self.config.compressed_register;
        let body = if compressed {
            match body.encode_compressed(version) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(error = %e, "cannot compress the registration; not sent");
                    return false;
                }
            }
        } else {
            body.to_json()
        };
        tracing::debug!(
            topics = count,
            bytes = body.len(),
            compressed,
            "REGISTER_BROKER body"
        );
        let crc = basalt_common::crc::masked_crc32(&body) as i32;
        let header = RegisterBrokerRequestHeader {
            broker_name: self.config.broker_name.clone(),
            broker_addr: self.config.broker_addr().to_string(),
            cluster_name: self.config.broker_cluster_name.clone(),
            ha_server_addr: self.ha_addr.clone(),
            broker_id: self.replication.registered_id(self.config.broker_id),
            heartbeat_timeout_millis: Some(120_000),
            enable_acting_master: Some(false),
            compressed: Some(compressed),
            body_crc32: Some(crc),
        };
        let mut all = true;
        for addr in addrs {
            let cmd = RemotingCommand::request(request::REGISTER_BROKER)
                .with_ext(header.to_ext())
                .with_body(body.clone());
            match self.call_namesrv(&addr, cmd, Duration::from_secs(6)).await {
                Ok(resp) if resp.code == 0 => self.learn_master(&resp),
                Ok(resp) => {
                    all = false;
                    tracing::warn!(namesrv = %addr, code = resp.code, remark = ?resp.remark, "broker registration refused")
                }
                Err(e) => {
                    all = false;
                    tracing::warn!(namesrv = %addr, error = %e, "broker registration failed")
                }
            }
        }
        all
    }

    /// A slave takes its master's addresses from a registration answer.
    fn learn_master(&self, resp: &RemotingCommand) {
        if self.replication.is_writable() {
            return;
        }
        if let Some(master) = resp.ext_fields.get("masterAddr").filter(|m| !m.is_empty()) {
            *self.master_addr.lock() = Some(master.to_string());
        }
        let ha = resp
            .ext_fields
            .get("haServerAddr")
            .filter(|m| !m.is_empty());
        if let (Some(ha), Some(slave), None) = (
            ha,
            self.replication.ha_slave(),
            self.config.ha_master_address.as_ref(),
        ) {
            slave.set_master(ha);
        }
    }

    /// Unregisters from every NameServer (shutdown).
    pub async fn unregister(&self) {
        let header = UnregisterBrokerRequestHeader {
            broker_name: self.config.broker_name.clone(),
            broker_addr: self.config.broker_addr().to_string(),
            cluster_name: self.config.broker_cluster_name.clone(),
            broker_id: self.replication.registered_id(self.config.broker_id),
        };
        for addr in self.namesrv_addrs() {
            let cmd =
                RemotingCommand::request(request::UNREGISTER_BROKER).with_ext(header.to_ext());
            let _ = self.call_namesrv(&addr, cmd, Duration::from_secs(3)).await;
        }
    }

    /// Asks for a registration round soon, off the caller's path; rounds
    /// asked for while one runs are coalesced into the next. Returns the
    /// ticket to wait for with [`Registrar::registered`].
    pub fn register_soon(&self) -> u64 {
        let ticket = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake.notify_one();
        ticket
    }

    /// Waits until a round that started after `ticket` was handed out has
    /// finished (successfully or not: failures are logged, and the periodic
    /// registration repeats it).
    pub async fn registered(&self, ticket: u64) {
        let mut rx = self.finished.subscribe();
        let _ = rx.wait_for(|f| *f >= ticket).await;
    }

    /// Makes a topic change visible: waits for its journal write
    /// (coalesced with other changes by the table's writer), then registers
    /// the one topic with every NameServer, alone with code 217 when
    /// `enableSingleTopicRegister`, else in a REGISTER_BROKER carrying only
    /// it; if one of them does not take it, waits for a full registration
    /// round instead. Nothing to wait for when the topic already existed.
    pub async fn publish_topic_change(&self, change: &TopicChange) -> Result<(), String> {
        let Some(generation) = change.generation else {
            return Ok(());
        };
        self.topics.persisted(generation).await?;
        let taken = if self.config.enable_single_topic_register {
            self.register_topic(&change.config).await
        } else {
            self.register_increment(change).await
        };
        if taken {
            return Ok(());
        }
        let ticket = self.register_soon();
        self.registered(ticket).await;
        Ok(())
    }

    /// REGISTER_TOPIC_IN_NAMESRV (RocketMQ 5's `registerSingleTopicAll`):
    /// one topic's queue data instead of the whole table, so creating the
    /// n-th topic costs the same as the first. Its permission is masked by
    /// `brokerPermission` as in a full registration. The periodic full
    /// registration carries it too (the table's version changed). True when
    /// every NameServer took it; a NameServer without code 217 answers
    /// REQUEST_CODE_NOT_SUPPORTED, and the caller falls back.
    async fn register_topic(&self, tc: &TopicSettings) -> bool {
        let queue = QueueData {
            broker_name: self.config.broker_name.clone(),
            perm: tc.perm & self.live.broker_permission(),
            read_queue_nums: tc.read_queue_nums,
            topic_sys_flag: tc.topic_sys_flag,
            write_queue_nums: tc.write_queue_nums,
        };
        let body = TopicRouteData {
            queue_datas: vec![queue],
            ..TopicRouteData::default()
        }
        .encode(false);
        let header = RegisterTopicRequestHeader {
            topic: tc.topic_name.clone(),
        };
        let mut all = true;
        for addr in self.namesrv_addrs() {
            let cmd = RemotingCommand::request(request::REGISTER_TOPIC_IN_NAMESRV)
                .with_ext(header.to_ext())
                .with_body(body.clone());
            match self.call_namesrv(&addr, cmd, Duration::from_secs(3)).await {
                Ok(resp) if resp.code == 0 => {}
                Ok(resp) => {
                    tracing::debug!(namesrv = %addr, topic = %tc.topic_name, code = resp.code, remark = ?resp.remark, "single-topic registration not taken");
                    all = false;
                }
                Err(e) => {
                    tracing::debug!(namesrv = %addr, topic = %tc.topic_name, error = %e, "single-topic registration failed");
                    all = false;
                }
            }
        }
        all
    }

    /// Runs rounds as they are asked for, until the task is aborted.
    pub async fn run_rounds(self: Arc<Self>) {
        loop {
            let ticket = self.requested.load(Ordering::Acquire);
            if ticket <= *self.finished.borrow() {
                self.wake.notified().await;
                continue;
            }
            self.register().await;
            self.finished.send_replace(ticket);
        }
    }

    /// Registers every `registerNameServerPeriod`. A slave that started
    /// before its master learns the master's address from a registration
    /// answer: until it has one, it asks every second.
    pub async fn run_periodic(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.config.register_name_server_period);
        tick.tick().await;
        loop {
            while !self.config.enable_dleger_commit_log
                && !self.replication.is_writable()
                && self.master_addr().is_none()
            {
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.register().await;
            }
            tick.tick().await;
            self.register().await;
        }
    }
}
