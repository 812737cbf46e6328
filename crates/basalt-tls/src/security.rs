//! [`ServerSecurity`] and [`ClientSecurity`]: what happens to a fresh TCP
//! connection before the protocol starts, and the [`Upgraded`] stream that
//! comes out.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::client::{ClientTls, server_name};
use crate::peer_auth::{AuthError, PeerSecret};
use crate::server::ServerTls;
use crate::settings::TlsMode;

/// The first byte of a TLS record carrying a handshake (a ClientHello).
pub const TLS_HANDSHAKE_BYTE: u8 = 0x16;
/// Time allowed for the first byte and the TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection ready for the protocol: plain TCP (untouched, so the plain
/// path keeps its types and costs) or TLS over it.
#[derive(Debug)]
pub enum Upgraded {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl From<TcpStream> for Upgraded {
    fn from(s: TcpStream) -> Self {
        Upgraded::Plain(s)
    }
}

impl Upgraded {
    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Upgraded::Plain(s) => s,
            Upgraded::Tls(t) => t.get_ref().0,
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Upgraded::Tls(_))
    }
}

impl AsyncRead for Upgraded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Upgraded::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Upgraded::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Upgraded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Upgraded::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Upgraded::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Upgraded::Plain(s) => Pin::new(s).poll_flush(cx),
            Upgraded::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Upgraded::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Upgraded::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Upgraded::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Upgraded::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }
}

/// Why a connection was closed before the protocol started.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("closed before sending anything")]
    Closed,
    #[error("plain-text connection refused: tls.server.mode=enforcing accepts TLS only")]
    PlainRefused,
    #[error("nothing received within {0:?}")]
    Timeout(Duration),
    #[error("TLS handshake failed: {0}")]
    Handshake(io::Error),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// What a listener does with each accepted connection: the TLS mode (with
/// its reloadable config) and, on replication ports, the cluster-secret
/// handshake. `purpose` names the link in the handshake and in log lines.
#[derive(Debug, Clone)]
pub struct ServerSecurity {
    pub tls: Option<Arc<ServerTls>>,
    pub secret: Option<PeerSecret>,
    pub purpose: &'static str,
}

impl ServerSecurity {
    /// Nothing to do (TLS disabled, no secret): callers keep the plain path.
    pub fn is_noop(&self) -> bool {
        self.tls.is_none() && self.secret.is_none()
    }

    /// Upgrades an accepted connection. Failures are logged here (at a
    /// bounded rate) with the peer and the reason; the caller just drops
    /// the connection.
    pub async fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<Upgraded, SecurityError> {
        let r = self.accept_inner(stream).await;
        if let Err(e) = &r {
            log_refusal(peer, self.purpose, e);
        }
        r
    }

    async fn accept_inner(&self, stream: TcpStream) -> Result<Upgraded, SecurityError> {
        let _ = stream.set_nodelay(true);
        let mut up = match &self.tls {
            None => Upgraded::Plain(stream),
            Some(tls) => {
                let mut first = [0u8; 1];
                let n = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, stream.peek(&mut first))
                    .await
                    .map_err(|_| SecurityError::Timeout(TLS_HANDSHAKE_TIMEOUT))??;
                if n == 0 {
                    return Err(SecurityError::Closed);
                }
                if first[0] == TLS_HANDSHAKE_BYTE {
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config().await);
                    let t = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                        .await
                        .map_err(|_| SecurityError::Timeout(TLS_HANDSHAKE_TIMEOUT))?
                        .map_err(SecurityError::Handshake)?;
                    Upgraded::Tls(Box::new(tokio_rustls::TlsStream::Server(t)))
                } else if tls.mode() == TlsMode::Enforcing {
                    return Err(SecurityError::PlainRefused);
                } else {
                    Upgraded::Plain(stream)
                }
            }
        };
        if let Some(secret) = &self.secret {
            secret.accept(&mut up, self.purpose).await?;
        }
        Ok(up)
    }
}

/// What a dialer does with each new connection: TLS if configured, then
/// the cluster-secret handshake if a secret is set.
#[derive(Debug, Clone)]
pub struct ClientSecurity {
    pub tls: Option<ClientTls>,
    pub secret: Option<PeerSecret>,
    pub purpose: &'static str,
}

impl ClientSecurity {
    /// Upgrades a connection made to `addr` ("host:port"; the host is the
    /// name the server certificate is checked against).
    pub async fn connect(&self, stream: TcpStream, addr: &str) -> Result<Upgraded, SecurityError> {
        let _ = stream.set_nodelay(true);
        let mut up = match &self.tls {
            None => Upgraded::Plain(stream),
            Some(tls) => {
                let t = tokio::time::timeout(
                    TLS_HANDSHAKE_TIMEOUT,
                    tls.connector().connect(server_name(addr), stream),
                )
                .await
                .map_err(|_| SecurityError::Timeout(TLS_HANDSHAKE_TIMEOUT))?
                .map_err(SecurityError::Handshake)?;
                Upgraded::Tls(Box::new(tokio_rustls::TlsStream::Client(t)))
            }
        };
        if let Some(secret) = &self.secret {
            secret.dial(&mut up, self.purpose).await?;
        }
        Ok(up)
    }
}

/// Refusals logged per window at most; the rest are counted and reported
/// with the next line logged.
const LOG_BURST: u64 = 20;
const LOG_WINDOW_SECS: u64 = 10;
static WINDOW: AtomicU64 = AtomicU64::new(0);
static IN_WINDOW: AtomicU64 = AtomicU64::new(0);
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);

fn log_refusal(peer: SocketAddr, purpose: &str, e: &SecurityError) {
    if matches!(e, SecurityError::Closed) {
        return;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / LOG_WINDOW_SECS);
    if WINDOW.swap(now, Ordering::AcqRel) != now {
        IN_WINDOW.store(0, Ordering::Release);
    }
    if IN_WINDOW.fetch_add(1, Ordering::AcqRel) >= LOG_BURST {
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let suppressed = SUPPRESSED.swap(0, Ordering::Relaxed);
    tracing::warn!(%peer, listener = purpose, suppressed, "connection refused: {e}");
}
