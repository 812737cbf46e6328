//! The Basalt NameServer: brokers register their topics here, clients look
//! up routes (docs/protocol.md#nameserver).
//!
//! * [`RouteInfoManager`] — the route tables as pure logic (time is passed in);
//! * [`NamesrvProcessor`] — the request handlers over the remoting protocol;
//! * [`kv_config`] — the KV config (`kvConfig.json`), ordered topics' layouts;
//! * [`NameServer`] — a server plus the timer that expires silent brokers,
//!   embeddable in another process or run alone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use basalt_remoting::{RemotingServer, ServerConfig, ServerHandle};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub mod kv_config;
mod kv_requests;
pub mod processor;
pub mod route_info;

pub use processor::NamesrvProcessor;
pub use route_info::{
    BrokerAddrKey, BrokerRegistration, DEFAULT_BROKER_EXPIRY_MS, RegisterBrokerResult,
    RouteInfoManager,
};

/// NameServer settings.
#[derive(Debug, Clone)]
pub struct NamesrvConfig {
    /// Where to listen (port 0 picks a free port).
    pub listen: SocketAddr,
    /// A broker not heard from for this long is removed (unless it asked
    /// for its own timeout when registering).
    pub broker_expiry: Duration,
    /// How often silent brokers are looked for.
    pub scan_interval: Duration,
    /// Connections open at once; more are closed as soon as they are
    /// accepted (the broker's `serverMaxConnections`).
    pub max_connections: usize,
    /// Where the KV config is kept (Java `kvConfigPath`,
    /// `~/namesrv/kvConfig.json`); None keeps it in memory only.
    pub kv_config_path: Option<PathBuf>,
    /// Routes carry `orderTopicConf` (Java `orderMessageEnable`).
    pub order_message_enable: bool,
    /// TLS on the listener (`tls.server.mode`, docs/tls.md); None: plain.
    pub security: Option<std::sync::Arc<basalt_remoting::ServerSecurity>>,
    /// The auth gate (docs/auth.md#nameserver): with
    /// `authenticationEnabled`, the NameServer's writes need a super user
    /// its settings name. None: every request passes.
    pub auth: Option<Arc<basalt_auth::AuthGate>>,
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 9876)),
            broker_expiry: Duration::from_millis(DEFAULT_BROKER_EXPIRY_MS as u64),
            scan_interval: Duration::from_secs(5),
            max_connections: basalt_remoting::transport::DEFAULT_MAX_CONNECTIONS,
            kv_config_path: None,
            order_message_enable: false,
            security: None,
            auth: None,
        }
    }
}

/// Errors starting the NameServer.
#[derive(Debug, thiserror::Error)]
pub enum NamesrvError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    KvConfig(#[from] kv_config::KvConfigError),
}

/// Entry point.
pub struct NameServer;

impl NameServer {
    /// Binds the listener and starts the expiry timer. Must run inside a
    /// tokio runtime.
    pub async fn start(config: NamesrvConfig) -> Result<NameServerHandle, NamesrvError> {
        let expiry_ms = config.broker_expiry.as_millis().min(i64::MAX as u128) as i64;
        let kv = match &config.kv_config_path {
            Some(path) => kv_config::KvConfigManager::load(path)?,
            None => kv_config::KvConfigManager::in_memory(),
        };
        let processor = Arc::new(
            NamesrvProcessor::with_kv(
                RouteInfoManager::new(expiry_ms),
                Arc::new(kv),
                config.order_message_enable,
            )
            .with_auth(config.auth.clone()),
        );
        let server_config = ServerConfig {
            max_connections: config.max_connections,
            security: config.security.clone(),
            ..ServerConfig::default()
        };
        let server =
            RemotingServer::bind_with_config(config.listen, processor.clone(), server_config)
                .await
                .map_err(|source| NamesrvError::Bind {
                    addr: config.listen,
                    source,
                })?;
        let (stop_tx, mut stop_rx) = watch::channel(false);
        let p = processor.clone();
        let period = config.scan_interval.max(Duration::from_millis(10));
        let scanner = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        p.scan_expired(basalt_common::time::now_millis());
                    }
                    _ = stop_rx.wait_for(|s| *s) => break,
                }
            }
        });
        tracing::info!(addr = %server.local_addr(), "name server started");
        Ok(NameServerHandle {
            server,
            processor,
            stop_tx,
            scanner,
        })
    }
}

/// A running NameServer.
pub struct NameServerHandle {
    server: ServerHandle,
    processor: Arc<NamesrvProcessor>,
    stop_tx: watch::Sender<bool>,
    scanner: JoinHandle<()>,
}

impl NameServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The processor and its route tables.
    pub fn processor(&self) -> &Arc<NamesrvProcessor> {
        &self.processor
    }

    /// Stops the timer and the server, closing every connection.
    pub async fn shutdown(self) {
        self.stop_tx.send_replace(true);
        let _ = self.scanner.await;
        self.server.shutdown().await;
        tracing::info!("name server stopped");
    }
}
