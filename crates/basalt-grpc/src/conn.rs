//! Accepting connections on the gRPC port: each one goes through the
//! port's [`ServerSecurity`] (TLS by its first byte in permissive mode,
//! TLS only when enforcing, untouched when disabled) in its own task, so a
//! slow handshake holds up no other client; what comes out is handed to
//! tonic as an [`Accepted`] connection.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use basalt_tls::{ServerSecurity, Upgraded};
use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Connections upgraded but not yet taken by the server.
const BACKLOG: usize = 256;
/// Pause after an accept error (e.g. out of file descriptors), so the
/// loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// One connection ready for HTTP/2: plain or TLS, with the addresses tonic
/// puts into each request (`remote_addr`).
pub struct Accepted {
    io: Upgraded,
    info: TcpConnectInfo,
}

impl Connected for Accepted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, b)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Starts accepting on `listener`. Returns the stream of ready connections
/// for tonic and the accept task (abort it to stop accepting).
pub fn accept(
    listener: TcpListener,
    security: Arc<ServerSecurity>,
) -> (
    impl Stream<Item = io::Result<Accepted>> + Send + 'static,
    JoinHandle<()>,
) {
    let (tx, rx) = mpsc::channel::<Accepted>(BACKLOG);
    let local = listener.local_addr().ok();
    let task = tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "gRPC accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            };
            let security = Arc::clone(&security);
            let tx = tx.clone();
            tokio::spawn(async move {
                upgrade(security, stream, peer, local, tx).await;
            });
        }
    });
    let incoming =
        futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|c| (Ok(c), rx)) },
        );
    (incoming, task)
}

/// TLS (or not) for one connection; a refused one is logged by
/// [`ServerSecurity::accept`] and dropped.
async fn upgrade(
    security: Arc<ServerSecurity>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    tx: mpsc::Sender<Accepted>,
) {
    let io = if security.is_noop() {
        let _ = stream.set_nodelay(true);
        Upgraded::Plain(stream)
    } else {
        match security.accept(stream, peer).await {
            Ok(io) => io,
            Err(_) => return,
        }
    };
    let info = TcpConnectInfo {
        local_addr: local,
        remote_addr: Some(peer),
    };
    let _ = tx.send(Accepted { io, info }).await;
}
