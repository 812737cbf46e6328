//! The broker: owns the store, the managers and the remoting server; registers
//! with the NameServers; runs the periodic housekeeping.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use basalt_common::config::BrokerRole;
use basalt_common::msgid::UniqKeyGenerator;
use basalt_remoting::code::request;
use basalt_remoting::header::{
    CommandHeader, RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader,
};
use basalt_remoting::protocol::RegisterBrokerBody;
use basalt_remoting::{
    RemotingClient, RemotingCommand, RemotingServer, ServerConfig, ServerHandle,
};
use basalt_store::MessageStore;
use parking_lot::Mutex;
use thiserror::Error;
use tokio::task::JoinHandle;

use crate::client_manager::ClientManager;
use crate::config::BrokerConfig;
use crate::consumer_offset::ConsumerOffsetManager;
use crate::ha::master::{HaMaster, HaMasterConfig};
use crate::ha::slave::{HaSlave, HaSlaveConfig};
use crate::ledger::LedgerMode;

use crate::lock::LockManager;
use crate::long_polling::PullWaiters;
use crate::processor::BrokerProcessor;
use crate::schedule::ScheduleService;
use crate::subscription_group::SubscriptionGroupManager;
use crate::topic_config::{TopicChange, TopicConfigManager};

/// Why a broker could not start.
#[derive(Debug, Error)]
pub enum BrokerError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("store: {0}")]
    Store(#[from] basalt_store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// Counters for runtime info.
#[derive(Debug, Default)]
pub struct BrokerStats {
    pub put_messages: AtomicU64,
    pub put_bytes: AtomicU64,
    pub get_messages: AtomicU64,
    pub get_bytes: AtomicU64,
    pub put_failures: AtomicU64,
}

/// Shared state of a running broker.
pub struct Broker {
    pub config: BrokerConfig,
    pub store: Arc<MessageStore>,
    pub topics: TopicConfigManager,
    pub groups: SubscriptionGroupManager,
    pub offsets: ConsumerOffsetManager,
    pub clients: ClientManager,
    pub waiters: Arc<PullWaiters>,
    pub locks: LockManager,
    pub schedule: ScheduleService,
    pub uniq: UniqKeyGenerator,
    pub stats: BrokerStats,
    /// The master's address as the NameServer reported it (slaves).
    pub master_addr: Mutex<Option<String>>,
    pub namesrv_client: RemotingClient,
    /// Master side of HA (masters).
    pub ha_master: std::sync::OnceLock<Arc<HaMaster>>,
    /// Slave side of HA (slaves).
    pub ha_slave: std::sync::OnceLock<Arc<HaSlave>>,
    /// The replicated ledger (ledger mode).
    pub ledger: std::sync::OnceLock<Arc<LedgerMode>>,
    /// `ip:port` of the HA listener, as registered.
    ha_addr: Mutex<String>,
    /// Coalesces NameServer registrations asked for by topic changes.
    registrations: RegistrationRounds,
    started_at: std::time::Instant,
    shutting_down: AtomicBool,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("name", &self.config.broker_name)
            .field("id", &self.config.broker_id)
            .finish()
    }
}

impl Broker {
    /// `ip:port` clients use.
    pub fn broker_addr(&self) -> String {
        self.config.broker_addr().to_string()
    }

    /// Whether this broker refuses sends: a configured SLAVE, or a ledger
    /// member that is not (yet) the leader taking sends.
    pub fn is_slave(&self) -> bool {
        match self.ledger.get() {
            Some(l) => !l.is_writable(),
            None => self.config.broker_role == BrokerRole::Slave,
        }
    }

    /// The broker id registered with the NameServers: the configured one, or
    /// in ledger mode 0 for the leader and a fixed id > 0 for the others.
    pub fn broker_id(&self) -> i64 {
        match self.ledger.get() {
            Some(l) if l.is_writable() => 0,
            Some(l) => l.follower_id,
            None => self.config.broker_id,
        }
    }

    /// Stores messages as this broker's mode requires and waits for what the
    /// producer asked: the local fsync (SYNC_FLUSH) and a slave's copy
    /// (SYNC_MASTER), or a ledger quorum in ledger mode. All drafts must be
    /// for one topic queue.
    pub async fn put(
        &self,
        drafts: &[basalt_common::record::RecordDraft<'_>],
        wait: bool,
    ) -> basalt_store::PutMessageResult {
        if let Some(l) = self.ledger.get() {
            return l.put(drafts, self.config.enabled_append_prop_crc).await;
        }
        let mut r = if drafts.len() == 1 {
            self.store.put_message(&drafts[0])
        } else {
            self.store.put_messages(drafts)
        };
        self.store.wait_durable(&mut r, wait).await;
        self.wait_replicated(&mut r, wait).await;
        r
    }

    pub fn uptime(&self) -> Duration {
        self.started_at.elapsed()
    }

    /// Extra runtime-info entries from replication (HA / ledger), if any.
    pub fn runtime_extra(&self) -> Option<Vec<(String, String)>> {
        let mut v = Vec::new();
        if let Some(l) = self.ledger.get() {
            v.extend(l.runtime_info());
        }
        let max = self.store.commit_log().max_offset();
        if let Some(m) = self.ha_master.get() {
            let conns = m.connections();
            v.push(("haConnections".to_string(), conns.len().to_string()));
            let acked = m.acked_offset();
            v.push(("haSlaveAckOffset".to_string(), acked.to_string()));
            if !conns.is_empty() {
                let lag = if acked >= 0 { max - acked } else { max };
                v.push(("slaveFallBehindBytes".to_string(), lag.to_string()));
            }
        }
        if let Some(s) = self.ha_slave.get() {
            v.push(("haMasterAddr".to_string(), s.master().unwrap_or_default()));
            v.push(("haConnected".to_string(), s.is_connected().to_string()));
            let master = s.master_offset.load(Ordering::Acquire);
            v.push(("haMasterOffset".to_string(), master.to_string()));
            v.push((
                "slaveFallBehindBytes".to_string(),
                (master - max).max(0).to_string(),
            ));
            if let Some(d) = s.diverged() {
                v.push(("haDiverged".to_string(), d));
            }
        }
        (!v.is_empty()).then_some(v)
    }

    /// SYNC_MASTER: waits until a slave has what a send wrote; other roles
    /// return at once.
    pub async fn wait_replicated(
        &self,
        r: &mut basalt_store::PutMessageResult,
        wait_store_msg_ok: bool,
    ) {
        if self.config.broker_role != BrokerRole::SyncMaster || !wait_store_msg_ok {
            return;
        }
        if r.status != basalt_store::PutMessageStatus::PutOk {
            return;
        }
        let (Some(ha), Some(a)) = (self.ha_master.get(), r.append.as_ref()) else {
            return;
        };
        r.status = ha
            .wait_replicated(a.end_offset(), self.config.sync_flush_timeout)
            .await;
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
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

    /// Registers with every NameServer (REGISTER_BROKER).
    pub async fn register_with_namesrvs(&self) {
        let addrs = self.namesrv_addrs();
        if addrs.is_empty() {
            return;
        }
        let body = RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: self.topics.snapshot(),
        }
        .to_json();
        let crc = basalt_common::crc::masked_crc32(&body) as i32;
        let header = RegisterBrokerRequestHeader {
            broker_name: self.config.broker_name.clone(),
            broker_addr: self.broker_addr(),
            cluster_name: self.config.broker_cluster_name.clone(),
            ha_server_addr: self.ha_addr.lock().clone(),
            broker_id: self.broker_id(),
            heartbeat_timeout_millis: Some(120_000),
            enable_acting_master: Some(false),
            compressed: Some(false),
            body_crc32: Some(crc),
        };
        for addr in addrs {
            let cmd = RemotingCommand::request(request::REGISTER_BROKER)
                .with_ext(header.to_ext())
                .with_body(body.clone());
            match self
                .namesrv_client
                .invoke(&addr, cmd, Duration::from_secs(6))
                .await
            {
                Ok(resp) if resp.code == 0 => {
                    if self.is_slave() {
                        if let Some(master) =
                            resp.ext_fields.get("masterAddr").filter(|m| !m.is_empty())
                        {
                            *self.master_addr.lock() = Some(master.to_string());
                        }
                        let ha = resp
                            .ext_fields
                            .get("haServerAddr")
                            .filter(|m| !m.is_empty());
                        if let (Some(ha), Some(slave), None) = (
                            ha,
                            self.ha_slave.get(),
                            self.config.ha_master_address.as_ref(),
                        ) {
                            slave.set_master(ha);
                        }
                    }
                }

                Ok(resp) => {
                    tracing::warn!(namesrv = %addr, code = resp.code, remark = ?resp.remark, "broker registration refused")
                }
                Err(e) => tracing::warn!(namesrv = %addr, error = %e, "broker registration failed"),
            }
        }
    }

    async fn unregister_from_namesrvs(&self) {
        let header = UnregisterBrokerRequestHeader {
            broker_name: self.config.broker_name.clone(),
            broker_addr: self.broker_addr(),
            cluster_name: self.config.broker_cluster_name.clone(),
            broker_id: self.broker_id(),
        };
        for addr in self.namesrv_addrs() {
            let cmd =
                RemotingCommand::request(request::UNREGISTER_BROKER).with_ext(header.to_ext());
            let _ = self
                .namesrv_client
                .invoke(&addr, cmd, Duration::from_secs(3))
                .await;
        }
    }

    /// Asks for a registration round soon, off the caller's path; rounds
    /// asked for while one runs are coalesced into the next. Returns the
    /// round's ticket for [`Broker::registered`].
    pub fn register_soon(&self) -> u64 {
        self.registrations.request()
    }

    /// Waits until a registration round that started after `ticket` was
    /// asked for has finished (successfully or not: failures are logged and
    /// the periodic registration repeats it).
    pub async fn registered(&self, ticket: u64) {
        self.registrations.finished(ticket).await
    }

    /// Makes a topic change visible: waits for its topics.json write, then
    /// for a NameServer registration that includes it. Nothing to wait for
    /// when the topic already existed.
    pub async fn publish_topic_change(&self, change: &TopicChange) -> Result<(), String> {
        let Some(generation) = change.generation else {
            return Ok(());
        };
        self.topics.persisted(generation).await?;
        let ticket = self.register_soon();
        self.registered(ticket).await;
        Ok(())
    }

    /// Tells every member of a consumer group that the membership changed.
    pub fn notify_consumer_ids_changed(self: &Arc<Self>, group: &str) {
        if !self.config.notify_consumer_ids_changed_enable {
            return;
        }
        if let Some(g) = self.groups.get(group)
            && !g.notify_consumer_ids_changed_enable
        {
            return;
        }
        let channels = self.clients.consumer_channels(group);
        let header = basalt_remoting::header::NotifyConsumerIdsChangedRequestHeader {
            consumer_group: group.to_string(),
        };
        for ch in channels {
            let cmd = RemotingCommand::request(request::NOTIFY_CONSUMER_IDS_CHANGED)
                .with_ext(header.to_ext());
            tokio::spawn(async move {
                if let Err(e) = ch.send_oneway(cmd).await {
                    tracing::debug!(error = %e, "could not notify a consumer");
                }
            });
        }
    }
}

/// Registration rounds asked for by topic changes, run one at a time by a
/// task of the broker: a burst of new topics costs one or two rounds, not one
/// per topic. Invariant: `finished` only grows, and round `n` started after
/// ticket `n` was handed out.
#[derive(Debug)]
struct RegistrationRounds {
    requested: AtomicU64,
    wake: tokio::sync::Notify,
    finished: tokio::sync::watch::Sender<u64>,
}

impl RegistrationRounds {
    fn new() -> Self {
        RegistrationRounds {
            requested: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
            finished: tokio::sync::watch::channel(0).0,
        }
    }

    fn request(&self) -> u64 {
        let ticket = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        self.wake.notify_one();
        ticket
    }

    async fn finished(&self, ticket: u64) {
        let mut rx = self.finished.subscribe();
        let _ = rx.wait_for(|f| *f >= ticket).await;
    }

    /// Runs rounds as they are asked for, until the broker stops.
    async fn run(broker: Arc<Broker>) {
        let rounds = &broker.registrations;
        loop {
            let ticket = rounds.requested.load(Ordering::Acquire);
            if ticket <= *rounds.finished.borrow() {
                rounds.wake.notified().await;
                continue;
            }
            broker.register_with_namesrvs().await;
            rounds.finished.send_replace(ticket);
        }
    }
}

/// A running broker. Dropping it does not stop it; call [`BrokerHandle::shutdown`].
pub struct BrokerHandle {
    broker: Arc<Broker>,
    server: Option<ServerHandle>,
    tasks: Vec<JoinHandle<()>>,
}

impl BrokerHandle {
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// The address the remoting server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server
            .as_ref()
            .map(|s| s.local_addr())
            .unwrap_or_else(|| self.broker.config.broker_addr())
    }

    /// Clean shutdown: stop serving, unregister, persist metadata, shut the
    /// store down (flushing everything).
    pub async fn shutdown(mut self) {
        self.broker.shutting_down.store(true, Ordering::Release);
        for t in self.tasks.drain(..) {
            t.abort();
        }
        self.broker.unregister_from_namesrvs().await;
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
        if let Some(m) = self.broker.ha_master.get() {
            m.shutdown();
        }
        if let Some(s) = self.broker.ha_slave.get() {
            s.shutdown();
        }
        if let Some(l) = self.broker.ledger.get() {
            l.shutdown(&self.broker.store).await;
        }
        let b = Arc::clone(&self.broker);
        let _ = tokio::task::spawn_blocking(move || {
            b.schedule.persist();
            b.offsets.persist();
            b.topics.persist_and_stop();
            b.groups.persist_and_stop();
            b.store.shutdown();
        })
        .await;
        self.broker.namesrv_client.shutdown();
        tracing::info!(broker = %self.broker.config.broker_name, "broker stopped");
    }
}

/// Opens the store, loads metadata and starts serving.
pub async fn start(mut config: BrokerConfig) -> Result<BrokerHandle, BrokerError> {
    config.validate()?;
    if config.listen_port == 0 {
        // Port 0 (tests): pick a free port now, since the address is written
        // into every record and registered with the NameServer.
        let probe =
            std::net::TcpListener::bind(SocketAddr::new(config.listen_addr, 0)).map_err(|e| {
                BrokerError::Listen {
                    addr: SocketAddr::new(config.listen_addr, 0),
                    source: e,
                }
            })?;
        let port = probe
            .local_addr()
            .map_err(|e| BrokerError::Other(e.to_string()))?
            .port();
        drop(probe);
        config.listen_port = port;
        // The HA port follows: any free one.
        config.ha_listen_port = 0;
    }
    let cfg = config.clone();
    let (store, topics, groups, offsets, schedule) = tokio::task::spawn_blocking(move || {
        let root = cfg.store_path_root_dir.clone();
        let store = MessageStore::open_with_delays(cfg.store_config(), cfg.delay_levels())?;
        let topics = TopicConfigManager::load(&root, &cfg);
        let groups = SubscriptionGroupManager::load(
            &root,
            cfg.max_subscription_group_count,
            cfg.max_queue_nums_per_topic,
        );
        let offsets = ConsumerOffsetManager::load(&root);
        let schedule = ScheduleService::load(&root, cfg.delay_levels());
        Ok::<_, BrokerError>((store, topics, groups, offsets, schedule))
    })
    .await
    .map_err(|e| BrokerError::Other(format!("store open task failed: {e}")))??;
    let waiters = Arc::new(PullWaiters::new());
    store.set_arrival_listener(
        Arc::clone(&waiters) as Arc<dyn basalt_store::dispatch::ArrivalListener>
    );
    let uniq = UniqKeyGenerator::new(config.broker_ip1, rand::random());
    let broker = Arc::new(Broker {
        store,
        topics,
        groups,
        offsets,
        clients: ClientManager::new(),
        waiters,
        locks: LockManager::new(),
        schedule,
        uniq,
        stats: BrokerStats::default(),
        master_addr: Mutex::new(config.ha_master_address.clone()),
        namesrv_client: RemotingClient::new(basalt_remoting::ClientConfig::default()),
        ha_master: std::sync::OnceLock::new(),
        ha_slave: std::sync::OnceLock::new(),
        ledger: std::sync::OnceLock::new(),
        ha_addr: Mutex::new(config.ha_addr().to_string()),
        registrations: RegistrationRounds::new(),
        started_at: std::time::Instant::now(),
        shutting_down: AtomicBool::new(false),
        config,
    });

    let listen = SocketAddr::new(broker.config.listen_addr, broker.config.listen_port);
    let mut server_cfg = ServerConfig::default();
    server_cfg.connection.max_frame_size = broker.config.max_frame_size;
    server_cfg.connection.max_inflight_requests = broker.config.server_max_inflight_per_connection;
    server_cfg.max_connections = broker.config.server_max_connections;
    server_cfg.max_inflight_requests = broker.config.server_max_inflight_requests;
    let processor = Arc::new(BrokerProcessor::new(Arc::clone(&broker)));
    let server = RemotingServer::bind_with_config(listen, processor, server_cfg)
        .await
        .map_err(|e| BrokerError::Listen {
            addr: listen,
            source: std::io::Error::other(e.to_string()),
        })?;
    tracing::info!(
        broker = %broker.config.broker_name,
        id = broker.config.broker_id,
        listen = %server.local_addr(),
        store = %broker.config.store_path_root_dir.display(),
        role = %broker.config.broker_role,
        flush = %broker.config.flush_disk_type,
        "broker started"
    );

    let mut tasks = Vec::new();
    start_replication(&broker, &mut tasks).await?;
    // Register before the broker counts as started (as RocketMQ's
    // BrokerController.start does): a client that sees the broker up finds
    // its routes at once. Then every registerNameServerPeriod.
    broker.register_with_namesrvs().await;
    tasks.push(tokio::spawn(RegistrationRounds::run(Arc::clone(&broker))));
    {
        let b = Arc::clone(&broker);
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(b.config.register_name_server_period);
            tick.tick().await;
            loop {
                // A slave that started before its master learns the master's
                // address from a registration answer: until it has one, ask
                // every second instead of every 30 s.
                while !b.config.enable_dleger_commit_log
                    && b.is_slave()
                    && b.master_addr.lock().is_none()
                {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    b.register_with_namesrvs().await;
                }
                tick.tick().await;
                b.register_with_namesrvs().await;
            }
        }));
    }
    // Persist consumer and delay offsets every flushConsumerOffsetInterval.
    {
        let b = Arc::clone(&broker);
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(b.config.flush_consumer_offset_interval);
            tick.tick().await;
            loop {
                tick.tick().await;
                let b2 = Arc::clone(&b);
                let _ = tokio::task::spawn_blocking(move || {
                    b2.offsets.persist();
                    b2.schedule.persist();
                })
                .await;
            }
        }));
    }
    // Expire silent clients every 10 s.
    {
        let b = Arc::clone(&broker);
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            loop {
                tick.tick().await;
                for group in b.clients.expire(b.config.channel_expired_timeout) {
                    b.notify_consumer_ids_changed(&group);
                }
                b.locks.evict_expired();
            }
        }));
    }
    // Delayed delivery (runs while this broker is a master).
    if broker.ledger.get().is_some() || !broker.is_slave() {
        tasks.extend(crate::schedule::start(Arc::clone(&broker)));
    }

    Ok(BrokerHandle {
        broker,
        server: Some(server),
        tasks,
    })
}

/// Starts HA: the master side on masters, the slave side and metadata sync
/// on slaves.
async fn start_replication(
    broker: &Arc<Broker>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Result<(), BrokerError> {
    let c = &broker.config;
    if c.enable_dleger_commit_log {
        let lm = LedgerMode::start(c, &broker.store).await?;
        let _ = broker.ledger.set(Arc::clone(&lm));
        // Re-register at once when this member becomes or stops being master.
        let b = Arc::clone(broker);
        let store = Arc::clone(&broker.store);
        tasks.push(tokio::spawn(lm.follow_roles(store, move |_| {
            b.register_soon();
        })));
        // Followers copy the master's metadata like HA slaves do.
        let b = Arc::clone(broker);
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(b.config.slave_sync_interval);
            loop {
                tick.tick().await;
                if !b.is_slave() {
                    continue;
                }
                let master = b.master_addr.lock().clone();
                if let Some(m) = master.filter(|m| *m != b.broker_addr()) {
                    crate::ha::sync::sync_once(&b, &m).await;
                }
            }
        }));
        return Ok(());
    }
    if broker.is_slave() {
        let slave = HaSlave::start(
            Arc::clone(&broker.store),
            HaSlaveConfig {
                report_interval: c.ha_send_heartbeat_interval,
                housekeeping_interval: c.ha_housekeeping_interval,
                max_chunk: (c.ha_transfer_batch_size + c.max_message_size + 64 * 1024).max(1 << 20),
            },
            c.ha_master_address.clone(),
        );
        let _ = broker.ha_slave.set(slave);
        let b = Arc::clone(broker);
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(b.config.slave_sync_interval);
            loop {
                tick.tick().await;
                let master = b.master_addr.lock().clone();
                if let Some(m) = master {
                    crate::ha::sync::sync_once(&b, &m).await;
                }
            }
        }));
    } else {
        let listen = SocketAddr::new(c.listen_addr, c.ha_listen_port);
        let m = HaMaster::start(
            Arc::clone(&broker.store),
            HaMasterConfig {
                listen,
                heartbeat_interval: c.ha_send_heartbeat_interval,
                housekeeping_interval: c.ha_housekeeping_interval,
                transfer_batch_size: c.ha_transfer_batch_size,
                max_gap_not_in_sync: c.ha_max_gap_not_in_sync,
            },
        )
        .await
        .map_err(|source| BrokerError::Listen {
            addr: listen,
            source,
        })?;
        *broker.ha_addr.lock() = SocketAddr::new(c.broker_ip2, m.local_addr().port()).to_string();
        let _ = broker.ha_master.set(Arc::clone(&m));
        // Log the slaves' lag every minute, as RocketMQ does.
        let b = Arc::clone(broker);
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            tick.tick().await;
            loop {
                tick.tick().await;
                let max = b.store.commit_log().max_offset();
                for conn in m.connections() {
                    let acked = conn.acked.load(Ordering::Acquire);
                    tracing::info!(slave = %conn.addr, behind_bytes = max - acked.max(0), "slave fall behind master");
                }
            }
        }));
    }
    Ok(())
}
