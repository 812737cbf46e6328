//! [`start`]: brings a broker up, step by step.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use basalt_common::config::BrokerRole;
use basalt_common::msgid::UniqKeyGenerator;
use basalt_remoting::{RemotingClient, RemotingServer, ServerConfig, ServerHandle};
use basalt_store::{MessageSource, MessageStore};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::broker::{Broker, BrokerError, BrokerHandle};
use crate::clients::locks::LockManager;
use crate::clients::registry::ClientManager;
use crate::clients::waiters::PullWaiters;
use crate::config::BrokerConfig;
use crate::filter::FilterCache;
use crate::live_config::LiveBrokerConfig;
use crate::metadata::groups::SubscriptionGroupManager;
use crate::metadata::offsets::ConsumerOffsetManager;
use crate::metadata::topics::TopicConfigManager;
use crate::processor::BrokerProcessor;
use crate::processor::paths::BrokerStats;
use crate::registration::Registrar;
use crate::replication::Replication;
use crate::replication::ha::master::{HaMaster, HaMasterConfig};
use crate::replication::ha::slave::{HaSlave, HaSlaveConfig};
use crate::replication::ledger::LedgerMode;
use crate::schedule::DelayOffsets;
use crate::schedule::timers::{TimerParts, TimerService};
use crate::transaction::Transactions;
use crate::transaction::decisions::Decisions;
use crate::transport_security::TransportSecurity;
use crate::writer::MessageWriter;
use basalt_store::timer::RecoveredTimers;

/// Opens the store, loads metadata, starts replication and serving.
pub async fn start(config: BrokerConfig) -> Result<BrokerHandle, BrokerError> {
    config.validate()?;
    let transport = Arc::new(TransportSecurity::load(&config.security).await?);
    let (listener, config) = bind_listener(config).await?;
    let config = Arc::new(config);
    let auth = crate::auth::open(&config).await?;
    let (opened, replication, ha_addr) = open_and_replicate(&config, &transport).await?;
    let broker = assemble(
        config,
        opened,
        Arc::new(replication),
        ha_addr,
        transport,
        auth,
    );
    crate::schedule::floors::register(&broker);
    let server = serve(&broker, listener);
    tracing::info!(
        broker = %broker.config.broker_name,
        id = broker.config.broker_id,
        listen = %server.local_addr(),
        store = %broker.config.store_path_root_dir.display(),
        replication = %broker.replication.name(),
        flush = %broker.config.flush_disk_type,
        "broker started"
    );
    // Register before the broker counts as started (as RocketMQ's
    // BrokerController.start does): a client that sees the broker up finds
    // its routes at once.
    broker.registrar.register().await;
    let mut tasks = spawn_services(&broker);
    let http = match crate::dashboard::start(&broker).await {
        Ok(h) => h,
        Err(e) => {
            BrokerHandle {
                broker,
                server: Some(server),
                tasks,
                metrics_addr: None,
                dashboard_addr: None,
            }
            .shutdown()
            .await;
            return Err(e);
        }
    };
    if let Some(a) = http.metrics_addr {
        tracing::info!(addr = %a, "Prometheus metrics at http://{a}/metrics");
    }
    if let Some(a) = http.dashboard_addr {
        tracing::info!(addr = %a, "dashboard at http://{a}/");
    }
    tasks.extend(http.tasks);
    Ok(BrokerHandle {
        broker,
        server: Some(server),
        tasks,
        metrics_addr: http.metrics_addr,
        dashboard_addr: http.dashboard_addr,
    })
}

/// Binds the client port once. Port 0 (tests) takes any free port, and the
/// real one goes into the config: it is written into every record and
/// registered with the NameServers. The HA port then follows: any free one.
async fn bind_listener(
    mut config: BrokerConfig,
) -> Result<(TcpListener, BrokerConfig), BrokerError> {
    let addr = SocketAddr::new(config.listen_addr, config.listen_port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| BrokerError::Listen { addr, source })?;
    if config.listen_port == 0 {
        let bound = listener
            .local_addr()
            .map_err(|source| BrokerError::Listen { addr, source })?;
        config.listen_port = bound.port();
        config.ha_listen_port = 0;
    }
    Ok((listener, config))
}

/// The store and the metadata tables, as loaded from disk.
struct Opened {
    store: Arc<MessageStore>,
    topics: TopicConfigManager,
    groups: SubscriptionGroupManager,
    offsets: ConsumerOffsetManager,
    request_modes: crate::metadata::request_modes::RequestModes,
    delay_offsets: DelayOffsets,
    /// The timer state, when timerWheelEnable is on.
    timers: Option<RecoveredTimers>,
}

/// Opens the store and starts the replication mode. In ledger mode the
/// ledger starts first: the store reads its records from the ledger, and
/// that is fixed when the store opens.
async fn open_and_replicate(
    config: &Arc<BrokerConfig>,
    transport: &TransportSecurity,
) -> Result<(Opened, Replication, String), BrokerError> {
    if !config.enable_dleger_commit_log {
        let opened = open_store_and_metadata(Arc::clone(config), MessageSource::CommitLog).await?;
        let (replication, ha_addr) = start_replication(config, &opened.store, transport).await?;
        return Ok((opened, replication, ha_addr));
    }
    let started = LedgerMode::start(config, transport).await?;
    let source = started.message_source();
    let opened = match open_store_and_metadata(Arc::clone(config), source).await {
        Ok(o) => o,
        Err(e) => {
            started.abandon().await;
            return Err(e);
        }
    };
    let lm = LedgerMode::attach(started, config, &opened.store);
    Ok((
        opened,
        Replication::Ledger(lm),
        config.ha_addr().to_string(),
    ))
}

/// Opens (and recovers) the store over `source` and loads the metadata
/// files, off the async workers.
async fn open_store_and_metadata(
    config: Arc<BrokerConfig>,
    source: MessageSource,
) -> Result<Opened, BrokerError> {
    tokio::task::spawn_blocking(move || {
        let root = config.store_path_root_dir.clone();
        let store =
            MessageStore::open_with_source(config.store_config(), config.delay_levels(), source)?;
        let timers = if config.timer_wheel_enable {
            Some(TimerService::recover(&config.timer_config(), &store)?)
        } else {
            None
        };
        Ok(Opened {
            store,
            topics: TopicConfigManager::load(&root, &config)?,
            groups: SubscriptionGroupManager::load(
                &root,
                config.max_subscription_group_count,
                config.max_queue_nums_per_topic,
            ),
            offsets: ConsumerOffsetManager::load(&root),
            request_modes: crate::metadata::request_modes::RequestModes::load(&root),
            delay_offsets: DelayOffsets::load(&root),
            timers,
        })
    })
    .await
    .map_err(|e| BrokerError::Other(format!("store open task failed: {e}")))?
}

/// Starts the master/slave replication mode the configuration names (ledger
/// mode starts in [`open_and_replicate`]). Returns it and the HA address to
/// register (`ip:port`; the configured one when no HA listener runs).
async fn start_replication(
    c: &BrokerConfig,
    store: &Arc<MessageStore>,
    transport: &TransportSecurity,
) -> Result<(Replication, String), BrokerError> {
    let configured_ha = c.ha_addr().to_string();
    if c.broker_role == BrokerRole::Slave {
        let slave = HaSlave::start(
            Arc::clone(store),
            HaSlaveConfig {
                report_interval: c.ha_send_heartbeat_interval,
                housekeeping_interval: c.ha_housekeeping_interval,
                max_chunk: (c.ha_transfer_batch_size + c.max_message_size + 64 * 1024).max(1 << 20),
                security: transport.replication_client("ha"),
            },
            c.ha_master_address.clone(),
        );
        return Ok((Replication::HaSlave(slave), configured_ha));
    }
    if !c.ha_enable {
        return Ok((Replication::Standalone, String::new()));
    }
    let listen = SocketAddr::new(c.listen_addr, c.ha_listen_port);
    let ha = HaMaster::start(
        Arc::clone(store),
        HaMasterConfig {
            listen,
            heartbeat_interval: c.ha_send_heartbeat_interval,
            housekeeping_interval: c.ha_housekeeping_interval,
            transfer_batch_size: c.ha_transfer_batch_size,
            max_gap_not_in_sync: c.ha_max_gap_not_in_sync,
            security: transport.replication_listener("ha"),
        },
    )
    .await
    .map_err(|source| BrokerError::Listen {
        addr: listen,
        source,
    })?;
    let ha_addr = SocketAddr::new(c.broker_ip2, ha.local_addr().port()).to_string();
    let sync = c.broker_role == BrokerRole::SyncMaster;
    Ok((Replication::HaMaster { ha, sync }, ha_addr))
}

/// Puts the parts together.
fn assemble(
    config: Arc<BrokerConfig>,
    o: Opened,
    replication: Arc<Replication>,
    ha_addr: String,
    transport: Arc<TransportSecurity>,
    auth: Arc<basalt_auth::AuthGate>,
) -> Arc<Broker> {
    let waiters = Arc::new(PullWaiters::new());
    o.store.set_arrival_listener(
        Arc::clone(&waiters) as Arc<dyn basalt_store::dispatch::ArrivalListener>
    );
    let topics = Arc::new(o.topics);
    let live = Arc::new(LiveBrokerConfig::new(&config));
    let registrar = Arc::new(Registrar::new(
        Arc::clone(&config),
        Arc::clone(&live),
        Arc::clone(&topics),
        Arc::clone(&replication),
        RemotingClient::new(basalt_remoting::RemotingClientConfig {
            security: transport.inner_client("namesrv"),
            ..Default::default()
        }),
        ha_addr,
    ));
    let uniq = Arc::new(UniqKeyGenerator::new(config.broker_ip1, rand::random()));
    let offsets = Arc::new(o.offsets);
    let clients = Arc::new(ClientManager::new());
    let shutting_down = Arc::new(AtomicBool::new(false));
    let transactions = Arc::new(Transactions {
        writer: MessageWriter::new(
            Arc::clone(&o.store),
            Arc::clone(&replication),
            Arc::clone(&config),
        ),
        store: Arc::clone(&o.store),
        topics: Arc::clone(&topics),
        registrar: Arc::clone(&registrar),
        clients: Arc::clone(&clients),
        offsets: Arc::clone(&offsets),
        uniq: Arc::clone(&uniq),
        decisions: Decisions::new(Transactions::decision_retention(&config)),
        stats: Default::default(),
        shutting_down: Arc::clone(&shutting_down),
        config: Arc::clone(&config),
    });
    let timers = o.timers.map(|recovered| {
        let parts = TimerParts {
            cfg: config.timer_config(),
            flush_interval: config.timer_flush_interval,
            store: Arc::clone(&o.store),
            writer: crate::writer::MessageWriter::new(
                Arc::clone(&o.store),
                Arc::clone(&replication),
                Arc::clone(&config),
            ),
            waiters: Arc::clone(&waiters),
            store_host: config.broker_addr(),
            shutting_down: Arc::clone(&shutting_down),
        };
        Arc::new(TimerService::new(parts, recovered))
    });
    let groups = Arc::new(o.groups);
    let filter_cache = Arc::new(FilterCache::new());
    let pop = Arc::new(crate::pop::PopService::new(crate::pop::service::PopParts {
        config: Arc::clone(&config),
        live: Arc::clone(&live),
        store: Arc::clone(&o.store),
        writer: MessageWriter::new(
            Arc::clone(&o.store),
            Arc::clone(&replication),
            Arc::clone(&config),
        ),
        topics: Arc::clone(&topics),
        groups: Arc::clone(&groups),
        offsets: Arc::clone(&offsets),
        waiters: Arc::clone(&waiters),
        filter_cache: Arc::clone(&filter_cache),
        registrar: Arc::clone(&registrar),
        shutting_down: Arc::clone(&shutting_down),
    }));
    Arc::new(Broker {
        pop,
        live,
        uniq,
        store: o.store,
        replication,
        topics,
        groups,
        offsets,
        delay_offsets: Arc::new(o.delay_offsets),
        request_modes: Arc::new(o.request_modes),
        clients,
        locks: Arc::new(LockManager::new()),
        waiters,
        filter_cache,
        registrar,
        stats: Arc::new(BrokerStats {
            metrics: crate::metrics::BrokerMetrics::new(config.observe.records()),
            ..BrokerStats::default()
        }),
        rates: Arc::default(),
        transactions,
        started_at: Instant::now(),
        shutting_down,
        timers,
        auth,
        config,
        transport,
    })
}

/// Serves clients on the listener bound at the start.
fn serve(broker: &Arc<Broker>, listener: TcpListener) -> ServerHandle {
    let mut server_cfg = ServerConfig::default();
    server_cfg.connection.max_frame_size = broker.config.max_frame_size;
    server_cfg.connection.max_inflight_requests = broker.config.server_max_inflight_per_connection;
    server_cfg.max_connections = broker.config.server_max_connections;
    server_cfg.max_inflight_requests = broker.config.server_max_inflight_requests;
    server_cfg.security = broker.transport.listener("client");
    let processor = Arc::new(BrokerProcessor::new(broker));
    RemotingServer::serve(listener, processor, server_cfg)
}

/// The broker's background tasks: registration, metadata persistence,
/// client expiry, replication housekeeping, delayed delivery, transaction
/// checks, timers.
fn spawn_services(broker: &Arc<Broker>) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(Arc::clone(&broker.registrar).run_rounds()),
        tokio::spawn(Arc::clone(&broker.registrar).run_periodic()),
        tokio::spawn(persist_offsets(Arc::clone(broker))),
        tokio::spawn(expire_clients(Arc::clone(broker))),
        tokio::spawn(sample_rates(Arc::clone(broker))),
    ];
    tasks.extend(crate::replication::tasks::spawn(broker));
    // Delayed delivery and the transaction check run on masters and on
    // ledger members (which work while they lead); a configured slave
    // never does either.
    if broker.replication.ha_slave().is_none() {
        tasks.extend(broker.delay_delivery().start());
        tasks.push(Arc::clone(&broker.transactions).start_check_service());
        tasks.push(tokio::spawn(Arc::clone(&broker.pop).run_revive()));
    }
    // Timers run everywhere: the broker taking sends delivers, the others
    // keep their wheel current and confirm deliveries.
    if let Some(t) = &broker.timers {
        tasks.extend(t.start());
    }
    tasks
}

/// Persists consumer and delay offsets every flushConsumerOffsetInterval.
async fn persist_offsets(b: Arc<Broker>) {
    let mut tick = tokio::time::interval(b.config.flush_consumer_offset_interval);
    tick.tick().await;
    loop {
        tick.tick().await;
        let b2 = Arc::clone(&b);
        let _ = tokio::task::spawn_blocking(move || {
            b2.offsets.persist();
            b2.delay_offsets.persist();
        })
        .await;
    }
}

/// Every second: samples the counters for the runtime-info rates; every
/// 10 s the stats items (VIEW_BROKER_STATS_DATA, consumeTps).
async fn sample_rates(b: Arc<Broker>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    for n in 0u64.. {
        tick.tick().await;
        let now = basalt_common::time::now_millis();
        b.rates.record(&b.stats, now);
        if n % 10 == 0 {
            let totals = (
                b.stats
                    .put_messages
                    .load(std::sync::atomic::Ordering::Relaxed),
                b.stats
                    .get_messages
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
            b.stats.items.sample(n / 10, now, totals);
        }
    }
}

/// Every 10 s: drops clients silent past channelExpiredTimeout (telling
/// their groups) and evicts expired queue locks.
async fn expire_clients(b: Arc<Broker>) {
    let clients = b.client_path();
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        for group in b.clients.expire(b.config.channel_expired_timeout) {
            clients.notify_consumer_ids_changed(&group);
        }
        b.locks.evict_expired();
    }
}
