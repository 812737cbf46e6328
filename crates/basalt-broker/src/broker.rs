//! The running broker: the parts a start assembles ([`Broker`]), the handles
//! its processors and services get, and its shutdown ([`BrokerHandle`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use basalt_common::msgid::UniqKeyGenerator;
use basalt_remoting::ServerHandle;
use basalt_store::MessageStore;
use thiserror::Error;
use tokio::task::JoinHandle;

use crate::clients::locks::LockManager;
use crate::clients::registry::ClientManager;
use crate::clients::waiters::PullWaiters;
use crate::config::BrokerConfig;
use crate::filter::FilterCache;
use crate::live_config::LiveBrokerConfig;
use crate::metadata::groups::SubscriptionGroupManager;
use crate::metadata::offsets::ConsumerOffsetManager;
use crate::metadata::topics::TopicConfigManager;
use crate::processor::paths::{AdminPath, BrokerStats, ClientPath, PullPath, ReplyPath, SendPath};
use crate::registration::Registrar;
use crate::replication::Replication;
use crate::runtime_stats::RateSampler;
use crate::schedule::{DelayDelivery, DelayOffsets, TimerService};
use crate::transaction::Transactions;
use crate::writer::MessageWriter;

/// Why a broker could not start.
#[derive(Debug, Error)]
pub enum BrokerError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("store: {0}")]
    Store(#[from] basalt_store::StoreError),
    #[error("metadata: {0}")]
    Metadata(#[from] crate::metadata::journal::JournalError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

/// The parts of a running broker, assembled once by [`crate::start`]. Each
/// part is shared with the handles that need it; nothing outside reaches a
/// part except through an accessor. Invariant: the replication mode never
/// changes after start.
pub struct Broker {
    pub(crate) config: Arc<BrokerConfig>,
    /// The settings operators may change at run time (UPDATE_BROKER_CONFIG).
    pub(crate) live: Arc<LiveBrokerConfig>,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) replication: Arc<Replication>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
    pub(crate) delay_offsets: Arc<DelayOffsets>,
    pub(crate) clients: Arc<ClientManager>,
    pub(crate) locks: Arc<LockManager>,
    pub(crate) waiters: Arc<PullWaiters>,
    pub(crate) filter_cache: Arc<FilterCache>,
    pub(crate) registrar: Arc<Registrar>,
    /// PULL or POP per (topic, group) for server-side assignment.
    pub(crate) request_modes: Arc<crate::metadata::request_modes::RequestModes>,
    pub(crate) stats: Arc<BrokerStats>,
    /// Rates of `stats`, sampled once a second.
    pub(crate) rates: Arc<RateSampler>,
    pub(crate) transactions: Arc<Transactions>,
    pub(crate) uniq: Arc<UniqKeyGenerator>,
    pub(crate) started_at: Instant,
    pub(crate) shutting_down: Arc<AtomicBool>,
    /// Timer messages (None with timerWheelEnable=false).
    pub(crate) timers: Option<Arc<TimerService>>,
    /// POP consumption: in-flight messages and the revive service.
    pub(crate) pop: Arc<crate::pop::PopService>,
    /// Authentication and authorization of requests (docs/auth.md).
    pub(crate) auth: Arc<basalt_auth::AuthGate>,
    /// TLS of the listeners and links (docs/tls.md).
    pub(crate) transport: Arc<crate::transport_security::TransportSecurity>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("name", &self.config.broker_name)
            .field("id", &self.config.broker_id)
            .field("replication", &self.replication)
            .finish()
    }
}

impl Broker {
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The authentication and authorization gate, for protocols served
    /// next to remoting (gRPC) to check their calls with.
    pub fn auth_gate(&self) -> &Arc<basalt_auth::AuthGate> {
        &self.auth
    }

    /// Counts a refused call in `basalt_auth_failures_total`.
    pub fn record_auth_failure(&self, reason: &'static str) {
        self.stats.metrics.record_auth_failure(reason);
    }

    /// Where the gRPC service counts its calls (`basalt_grpc_*`).
    pub fn grpc_metrics(&self) -> &crate::metrics::GrpcMetrics {
        self.stats.metrics.grpc()
    }

    pub fn store(&self) -> &Arc<MessageStore> {
        &self.store
    }

    pub fn replication(&self) -> &Replication {
        &self.replication
    }

    pub fn topics(&self) -> &TopicConfigManager {
        &self.topics
    }

    pub fn consumer_offsets(&self) -> &ConsumerOffsetManager {
        &self.offsets
    }

    /// Timer messages, when enabled.
    pub fn timers(&self) -> Option<&Arc<TimerService>> {
        self.timers.as_ref()
    }

    /// `ip:port` clients use.
    pub fn broker_addr(&self) -> String {
        self.config.broker_addr().to_string()
    }

    /// Whether this broker takes sends now (see [`Replication::is_writable`]).
    pub fn is_writable(&self) -> bool {
        self.replication.is_writable()
    }

    pub fn uptime(&self) -> Duration {
        self.started_at.elapsed()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// The write path: the local store and the replication mode's copies.
    pub fn writer(&self) -> MessageWriter {
        MessageWriter::new(
            Arc::clone(&self.store),
            Arc::clone(&self.replication),
            Arc::clone(&self.config),
        )
    }

    pub(crate) fn send_path(&self) -> SendPath {
        SendPath {
            config: Arc::clone(&self.config),
            live: Arc::clone(&self.live),
            store: Arc::clone(&self.store),
            writer: self.writer(),
            topics: Arc::clone(&self.topics),
            groups: Arc::clone(&self.groups),
            registrar: Arc::clone(&self.registrar),
            uniq: Arc::clone(&self.uniq),
            delays: self.config.delay_levels(),
            stats: Arc::clone(&self.stats),
        }
    }

    pub(crate) fn pull_path(&self) -> PullPath {
        PullPath {
            config: Arc::clone(&self.config),
            live: Arc::clone(&self.live),
            store: Arc::clone(&self.store),
            replication: Arc::clone(&self.replication),
            topics: Arc::clone(&self.topics),
            groups: Arc::clone(&self.groups),
            clients: Arc::clone(&self.clients),
            offsets: Arc::clone(&self.offsets),
            waiters: Arc::clone(&self.waiters),
            filter_cache: Arc::clone(&self.filter_cache),
            stats: Arc::clone(&self.stats),
            shutting_down: Arc::clone(&self.shutting_down),
        }
    }

    pub(crate) fn client_path(&self) -> ClientPath {
        ClientPath {
            config: Arc::clone(&self.config),
            live: Arc::clone(&self.live),
            store: Arc::clone(&self.store),
            replication: Arc::clone(&self.replication),
            topics: Arc::clone(&self.topics),
            groups: Arc::clone(&self.groups),
            clients: Arc::clone(&self.clients),
            offsets: Arc::clone(&self.offsets),
            locks: Arc::clone(&self.locks),
            registrar: Arc::clone(&self.registrar),
            request_modes: Arc::clone(&self.request_modes),
        }
    }

    pub(crate) fn admin_path(&self) -> AdminPath {
        AdminPath {
            config: Arc::clone(&self.config),
            live: Arc::clone(&self.live),
            store: Arc::clone(&self.store),
            replication: Arc::clone(&self.replication),
            topics: Arc::clone(&self.topics),
            groups: Arc::clone(&self.groups),
            offsets: Arc::clone(&self.offsets),
            clients: Arc::clone(&self.clients),
            waiters: Arc::clone(&self.waiters),
            delay_offsets: Arc::clone(&self.delay_offsets),
            timers: self.timers.clone(),
            registrar: Arc::clone(&self.registrar),
            stats: Arc::clone(&self.stats),
            rates: Arc::clone(&self.rates),
            transactions: Arc::clone(&self.transactions),
            started_at: self.started_at,
        }
    }

    pub(crate) fn reply_path(&self) -> ReplyPath {
        ReplyPath {
            send: self.send_path(),
            clients: Arc::clone(&self.clients),
        }
    }

    /// The transaction service.
    pub fn transactions(&self) -> &Arc<Transactions> {
        &self.transactions
    }

    pub(crate) fn delay_delivery(&self) -> DelayDelivery {
        DelayDelivery {
            store: Arc::clone(&self.store),
            writer: self.writer(),
            waiters: Arc::clone(&self.waiters),
            offsets: Arc::clone(&self.delay_offsets),
            levels: self.config.delay_levels(),
            store_host: self.config.broker_addr(),
            shutting_down: Arc::clone(&self.shutting_down),
        }
    }

    /// Writes every metadata table and shuts the store down. Blocking.
    fn persist_and_close(&self) {
        if let Some(t) = &self.timers {
            t.shutdown();
        }
        self.delay_offsets.persist();
        self.offsets.persist();
        self.topics.persist_and_stop();
        self.groups.persist_and_stop();
        self.store.shutdown();
    }
}

/// A running broker. Dropping it does not stop it; call [`BrokerHandle::shutdown`].
pub struct BrokerHandle {
    pub(crate) broker: Arc<Broker>,
    pub(crate) server: Option<ServerHandle>,
    pub(crate) tasks: Vec<JoinHandle<()>>,
    /// Where `/metrics` is served (metricsExporterType=PROM).
    pub(crate) metrics_addr: Option<SocketAddr>,
    /// Where the dashboard is served (dashboardEnable=true).
    pub(crate) dashboard_addr: Option<SocketAddr>,
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

    /// The Prometheus endpoint's address, when it is served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The dashboard's address, when it is served.
    pub fn dashboard_addr(&self) -> Option<SocketAddr> {
        self.dashboard_addr
    }

    /// Clean shutdown: stop serving, unregister, stop replicating, persist
    /// metadata, shut the store down (flushing everything).
    pub async fn shutdown(mut self) {
        self.broker.shutting_down.store(true, Ordering::Release);
        for t in self.tasks.drain(..) {
            t.abort();
        }
        self.broker.registrar.unregister().await;
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
        self.broker.replication.shutdown(&self.broker.store).await;
        let b = Arc::clone(&self.broker);
        let _ = tokio::task::spawn_blocking(move || b.persist_and_close()).await;
        self.broker.registrar.client().shutdown();
        tracing::info!(broker = %self.broker.config.broker_name, "broker stopped");
    }
}
