//! The tokio transport: one reader task and one writer task per connection,
//! requests processed concurrently, responses matched by opaque.
//!
//! * [`RemotingServer`] accepts connections and hands every request to a
//!   [`RequestProcessor`] (static dispatch, no boxing on the hot path).
//! * [`RemotingClient`] keeps one connection per address and matches
//!   responses to requests by opaque.
//! * [`Channel`] is a cheap handle to one connection, usable from either side
//!   (servers use it to send requests to clients).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::codec::DEFAULT_MAX_FRAME_SIZE;
use crate::command::RemotingCommand;

mod channel;
mod client;
mod connection;
mod read_buffer;
mod server;
mod writer;

pub use channel::{Channel, next_opaque};
pub use client::RemotingClient;
pub use server::{RemotingServer, ServerHandle};

/// Handles the requests that arrive on a connection.
///
/// `process` runs in its own task for every request, so a long-polling pull
/// does not hold up the connection. The returned response gets the request's
/// opaque and the response flag; no reply is ever sent for a oneway request.
/// Answer unknown codes with [`RemotingCommand::not_supported`].
pub trait RequestProcessor: Send + Sync + 'static {
    fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>> + Send;

    /// Called once when a connection has closed, after its writer has stopped.
    fn on_channel_closed(&self, _channel: &Channel) {}
}

/// A boxed future, for the object-safe [`ClientRequestHandler`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Handles requests a server sends to a [`RemotingClient`] (e.g.
/// NOTIFY_CONSUMER_IDS_CHANGED). Object-safe so the client needs no type
/// parameter; every [`RequestProcessor`] is one.
pub trait ClientRequestHandler: Send + Sync + 'static {
    fn handle<'a>(
        &'a self,
        channel: &'a Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'a, Option<RemotingCommand>>;

    fn on_channel_closed(&self, _channel: &Channel) {}
}

impl<P: RequestProcessor> ClientRequestHandler for P {
    fn handle<'a>(
        &'a self,
        channel: &'a Channel,
        request: RemotingCommand,
    ) -> BoxFuture<'a, Option<RemotingCommand>> {
        Box::pin(self.process(channel, request))
    }

    fn on_channel_closed(&self, channel: &Channel) {
        RequestProcessor::on_channel_closed(self, channel)
    }
}

/// Requests from one peer processed at once before its connection stops
/// being read (see [`ConnectionConfig::max_inflight_requests`]).
pub const DEFAULT_MAX_INFLIGHT_PER_CONNECTION: usize = 4096;
/// Connections a server keeps open at once (see [`ServerConfig::max_connections`]).
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Requests a server processes at once over all its connections (see
/// [`ServerConfig::max_inflight_requests`]).
pub const DEFAULT_MAX_INFLIGHT_REQUESTS: usize = 65_536;

/// Limits of one connection.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Largest frame accepted from the peer (16 MiB by default).
    pub max_frame_size: usize,
    /// Commands queued for the writer before senders wait (backpressure).
    pub write_queue_capacity: usize,
    /// Requests from the peer being processed at once before the reader
    /// stops reading (backpressure onto the peer's TCP window). A suspended
    /// long-polling pull counts until it is answered.
    pub max_inflight_requests: usize,
    /// Whether the writer yields once after the first queued command to
    /// gather the rest of a burst into one write. Worth it on a server,
    /// where one group commit answers many requests from their own tasks
    /// at once; on a client each send queues its own request, and the
    /// extra wake-up costs more CPU than the syscalls it saves.
    pub gather_bursts: bool,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            write_queue_capacity: 16 * 1024,
            max_inflight_requests: DEFAULT_MAX_INFLIGHT_PER_CONNECTION,
            gather_bursts: true,
        }
    }
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub connection: ConnectionConfig,
    /// Connections open at once. One accepted beyond this is closed at
    /// once (and logged, at most every few seconds); the others keep being
    /// served. At least 1.
    pub max_connections: usize,
    /// Requests processed at once over all connections; when reached, every
    /// connection's reader waits for a request to finish. At least 1.
    pub max_inflight_requests: usize,
    /// TLS (tls.server.mode) and, on replication ports, the cluster-secret
    /// handshake, run on each accepted connection before its first frame.
    /// None: plain TCP straight away (the accept path as without TLS).
    pub security: Option<Arc<basalt_tls::ServerSecurity>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            connection: ConnectionConfig::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_inflight_requests: DEFAULT_MAX_INFLIGHT_REQUESTS,
            security: None,
        }
    }
}

/// Called on every request a [`RemotingClient`] sends, just before it goes
/// out (Java's `RPCHook.doBeforeRequest`): e.g. to sign it.
pub trait RequestHook: Send + Sync {
    fn before_request(&self, cmd: &mut crate::command::RemotingCommand);
}

impl std::fmt::Debug for dyn RequestHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestHook")
    }
}

/// Settings of a [`RemotingClient`]: connection limits and the connect timeout.
#[derive(Debug, Clone)]
pub struct RemotingClientConfig {
    pub connection: ConnectionConfig,
    /// Upper bound for establishing a connection (the invoke timeout also applies).
    pub connect_timeout: Duration,
    /// TLS and/or the cluster-secret handshake on each new connection.
    pub security: Option<Arc<basalt_tls::ClientSecurity>>,
    /// Applied to each request before it is sent (signing).
    pub hook: Option<Arc<dyn RequestHook>>,
}

impl Default for RemotingClientConfig {
    fn default() -> Self {
        Self {
            connection: ConnectionConfig {
                gather_bursts: false,
                ..ConnectionConfig::default()
            },
            connect_timeout: Duration::from_secs(3),
            security: None,
            hook: None,
        }
    }
}

/// Resolves once the flag behind `rx` is true (or its sender is gone).
pub(crate) async fn signalled(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// The processor behind a client's connections: a handler if one was given,
/// REQUEST_CODE_NOT_SUPPORTED otherwise.
pub(crate) struct ClientDispatch(pub(crate) Option<Arc<dyn ClientRequestHandler>>);

impl RequestProcessor for ClientDispatch {
    async fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        match &self.0 {
            Some(h) => h.handle(channel, request).await,
            None => Some(RemotingCommand::not_supported(&request)),
        }
    }

    fn on_channel_closed(&self, channel: &Channel) {
        if let Some(h) = &self.0 {
            h.on_channel_closed(channel);
        }
    }
}
