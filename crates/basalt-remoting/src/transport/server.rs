//! [`RemotingServer`]: accepts connections and serves them with a processor.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::{Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::connection::spawn_connection;
use super::{Channel, RequestProcessor, ServerConfig};

/// How long `shutdown` waits for connections to flush before aborting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Entry point: binds a listener and serves every connection with one processor.
pub struct RemotingServer;

impl RemotingServer {
    /// Binds `addr` (port 0 picks a free port) with default limits.
    pub async fn bind<P: RequestProcessor>(
        addr: impl ToSocketAddrs,
        processor: Arc<P>,
    ) -> io::Result<ServerHandle> {
        Self::bind_with_config(addr, processor, ServerConfig::default()).await
    }

    pub async fn bind_with_config<P: RequestProcessor>(
        addr: impl ToSocketAddrs,
        processor: Arc<P>,
        config: ServerConfig,
    ) -> io::Result<ServerHandle> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self::serve(listener, processor, config))
    }

    /// Serves connections on a listener the caller bound (so it knows the
    /// real address before anything else starts).
    pub fn serve<P: RequestProcessor>(
        listener: TcpListener,
        processor: Arc<P>,
        config: ServerConfig,
    ) -> ServerHandle {
        let local_addr = listener
            .local_addr()
            .expect("a bound TCP listener has a local address");
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let channels: Arc<Mutex<HashMap<u64, Channel>>> = Arc::default();
        let accept = tokio::spawn(accept_loop(
            listener,
            processor,
            config,
            shutdown_rx,
            channels.clone(),
        ));
        tracing::info!(%local_addr, "remoting server listening");
        ServerHandle {
            local_addr,
            shutdown_tx,
            accept: Some(accept),
            channels,
        }
    }
}

/// A running server. Dropping it without [`ServerHandle::shutdown`] leaves the
/// server running until the runtime stops.
pub struct ServerHandle {
    local_addr: SocketAddr,
    shutdown_tx: watch::Sender<bool>,
    accept: Option<JoinHandle<()>>,
    channels: Arc<Mutex<HashMap<u64, Channel>>>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The open connections.
    pub fn channels(&self) -> Vec<Channel> {
        self.channels.lock().values().cloned().collect()
    }

    /// Stops accepting, closes every connection (each sends what it has
    /// queued) and waits for their tasks, aborting those still writing after
    /// a grace period.
    pub async fn shutdown(mut self) {
        self.shutdown_tx.send_replace(true);
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
    }
}

/// How often a refused connection is logged at most.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Counts connections refused over the cap and logs them at most once per
/// [`REFUSAL_LOG_INTERVAL`], so a client hammering a full server cannot
/// flood the log.
struct RefusalLog {
    last: Option<Instant>,
    unreported: u64,
}

impl RefusalLog {
    fn refused(&mut self, peer: SocketAddr, open: usize, max: usize) {
        self.unreported += 1;
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < REFUSAL_LOG_INTERVAL)
        {
            return;
        }
        tracing::warn!(%peer, open, max, refused = self.unreported,
            "connection limit reached: closing new connections (serverMaxConnections)");
        self.last = Some(now);
        self.unreported = 0;
    }
}

/// Waits for a connection's tasks, then takes it out of the server's table.
async fn run_registered(
    id: u64,
    handle: JoinHandle<()>,
    registry: Arc<Mutex<HashMap<u64, Channel>>>,
) {
    let _ = handle.await;
    let mut map = registry.lock();
    map.remove(&id);
    // Give back the table's memory after a crowd has left.
    if map.capacity() > 64 && map.len() < map.capacity() / 4 {
        map.shrink_to_fit();
    }
}

async fn accept_loop<P: RequestProcessor>(
    listener: TcpListener,
    processor: Arc<P>,
    config: ServerConfig,
    mut shutdown: watch::Receiver<bool>,
    channels: Arc<Mutex<HashMap<u64, Channel>>>,
) {
    let max_connections = config.max_connections.max(1);
    let inflight = Arc::new(Semaphore::new(config.max_inflight_requests.max(1)));
    let mut refusals = RefusalLog {
        last: None,
        unreported: 0,
    };
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = super::signalled(&mut shutdown) => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // A connection still closing counts: it holds its socket.
                    let open = conns.len();
                    if open >= max_connections {
                        drop(stream);
                        refusals.refused(peer, open, max_connections);
                        continue;
                    }
                    if let Some(sec) = config.security.clone().filter(|s| !s.is_noop()) {
                        // TLS and the cluster-secret handshake run in the
                        // connection's own task: a slow peer holds up no accept.
                        let (p, cc) = (processor.clone(), config.connection.clone());
                        let (inf, registry) = (inflight.clone(), channels.clone());
                        conns.spawn(async move {
                            let Ok(up) = sec.accept(stream, peer).await else { return };
                            match spawn_connection(up, peer.to_string(), p, &cc, Some(inf)) {
                                Ok((channel, handle)) => {
                                    tracing::debug!(%peer, id = channel.id(), tls = true, "connection accepted");
                                    let id = channel.id();
                                    registry.lock().insert(id, channel);
                                    run_registered(id, handle, registry).await;
                                }
                                Err(e) => tracing::warn!(%peer, error = %e, "cannot set up connection"),
                            }
                        });
                        continue;
                    }
                    let spawned = spawn_connection(
                        stream,
                        peer.to_string(),
                        processor.clone(),
                        &config.connection,
                        Some(inflight.clone()),
                    );
                    match spawned {
                        Ok((channel, handle)) => {
                            let id = channel.id();
                            channels.lock().insert(id, channel);
                            conns.spawn(run_registered(id, handle, channels.clone()));
                            tracing::debug!(%peer, id, "connection accepted");
                        }
                        Err(e) => tracing::warn!(%peer, error = %e, "cannot set up connection"),
                    }
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly
                    // instead of spinning on the error.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    drop(listener);
    let open: Vec<Channel> = channels.lock().values().cloned().collect();
    for ch in open {
        ch.close();
    }
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        tracing::warn!("connections still writing after the grace period; aborting them");
        conns.abort_all();
    }
}
