//! [`RemotingClient`]: one lazily opened connection per address.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::connection::spawn_connection;
use super::{Channel, ClientDispatch, ClientRequestHandler, RemotingClientConfig};
use crate::command::RemotingCommand;
use crate::error::RemotingError;

/// A client of remoting servers (NameServers, brokers).
///
/// Keeps one connection per address, opened on first use and reopened on the
/// next call after it fails. Cheap to clone; clones share the connections.
#[derive(Clone)]
pub struct RemotingClient {
    inner: Arc<Inner>,
}

struct Inner {
    config: RemotingClientConfig,
    dispatch: Arc<ClientDispatch>,
    channels: Mutex<HashMap<String, Channel>>,
    /// One connect at a time per address; others wait for its result.
    connecting: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Drop for Inner {
    /// The last clone going away closes the connections; their tasks do not
    /// keep the client alive, so nothing else would.
    fn drop(&mut self) {
        for ch in self.channels.get_mut().values() {
            ch.close();
        }
    }
}

impl Default for RemotingClient {
    fn default() -> Self {
        Self::new(RemotingClientConfig::default())
    }
}

impl RemotingClient {
    /// A client that answers server-initiated requests with
    /// REQUEST_CODE_NOT_SUPPORTED.
    pub fn new(config: RemotingClientConfig) -> Self {
        Self::build(config, None)
    }

    /// A client whose connections hand server-initiated requests (e.g.
    /// NOTIFY_CONSUMER_IDS_CHANGED) to `handler`.
    pub fn with_handler(
        config: RemotingClientConfig,
        handler: Arc<dyn ClientRequestHandler>,
    ) -> Self {
        Self::build(config, Some(handler))
    }

    fn build(config: RemotingClientConfig, handler: Option<Arc<dyn ClientRequestHandler>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                dispatch: Arc::new(ClientDispatch(handler)),
                channels: Mutex::new(HashMap::new()),
                connecting: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Sends `cmd` to `addr` ("host:port") and waits for the response.
    /// `timeout` covers connecting, queueing and waiting.
    pub async fn invoke(
        &self,
        addr: &str,
        cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let deadline = Instant::now() + timeout;
        let channel = self.channel_by(addr, deadline).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        let cmd = self.hooked(cmd);
        let code = cmd.code;
        match channel.request(cmd, left).await {
            Err(RemotingError::Timeout { addr, .. }) => Err(RemotingError::Timeout {
                addr,
                code,
                millis: timeout.as_millis() as u64,
            }),
            other => other,
        }
    }

    /// Sends a oneway request to `addr` (no response).
    pub async fn invoke_oneway(
        &self,
        addr: &str,
        cmd: RemotingCommand,
    ) -> Result<(), RemotingError> {
        let deadline = Instant::now() + self.inner.config.connect_timeout;
        let channel = self.channel_by(addr, deadline).await?;
        channel.send_oneway(self.hooked(cmd)).await
    }

    /// `cmd` after the configured [`RequestHook`](super::RequestHook).
    fn hooked(&self, mut cmd: RemotingCommand) -> RemotingCommand {
        if let Some(hook) = &self.inner.config.hook {
            hook.before_request(&mut cmd);
        }
        cmd
    }

    /// The connection to `addr`, opened if needed.
    pub async fn channel(&self, addr: &str) -> Result<Channel, RemotingError> {
        self.channel_by(addr, Instant::now() + self.inner.config.connect_timeout)
            .await
    }

    /// Closes the connection to `addr`, if open; the next call reconnects.
    pub fn close_channel(&self, addr: &str) {
        if let Some(ch) = self.inner.channels.lock().remove(addr) {
            ch.close();
        }
    }

    /// Closes every connection.
    pub fn shutdown(&self) {
        let all: Vec<Channel> = self.inner.channels.lock().drain().map(|(_, c)| c).collect();
        for ch in all {
            ch.close();
        }
    }

    fn live(&self, addr: &str) -> Option<Channel> {
        let mut map = self.inner.channels.lock();
        match map.get(addr) {
            Some(ch) if !ch.is_closed() => Some(ch.clone()),
            Some(_) => {
                map.remove(addr);
                None
            }
            None => None,
        }
    }

    async fn channel_by(&self, addr: &str, deadline: Instant) -> Result<Channel, RemotingError> {
        if let Some(ch) = self.live(addr) {
            return Ok(ch);
        }
        let gate = self
            .inner
            .connecting
            .lock()
            .entry(addr.to_string())
            .or_default()
            .clone();
        let _guard = tokio::time::timeout_at(deadline, gate.lock())
            .await
            .map_err(|_| self.connect_timeout(addr))?;
        // Someone else may have connected while we waited.
        if let Some(ch) = self.live(addr) {
            return Ok(ch);
        }
        let connect_deadline = deadline.min(Instant::now() + self.inner.config.connect_timeout);
        let stream = tokio::time::timeout_at(connect_deadline, TcpStream::connect(addr))
            .await
            .map_err(|_| self.connect_timeout(addr))?
            .map_err(|source| RemotingError::Io {
                addr: addr.to_string(),
                source,
            })?;
        let stream = match &self.inner.config.security {
            Some(sec) => tokio::time::timeout_at(connect_deadline, sec.connect(stream, addr))
                .await
                .map_err(|_| self.connect_timeout(addr))?
                .map_err(|e| RemotingError::Io {
                    addr: addr.to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        e.to_string(),
                    ),
                })?,
            None => stream.into(),
        };
        let (channel, _handle) = spawn_connection(
            stream,
            addr.to_string(),
            self.inner.dispatch.clone(),
            &self.inner.config.connection,
            None,
        )
        .map_err(|source| RemotingError::Io {
            addr: addr.to_string(),
            source,
        })?;
        tracing::debug!(addr, id = channel.id(), "connected");
        self.inner
            .channels
            .lock()
            .insert(addr.to_string(), channel.clone());
        Ok(channel)
    }

    fn connect_timeout(&self, addr: &str) -> RemotingError {
        RemotingError::ConnectTimeout {
            addr: addr.to_string(),
            millis: self.inner.config.connect_timeout.as_millis() as u64,
        }
    }
}
