//! The two tasks of a connection: the reader here, the writer in
//! [`super::writer`].
//!
//! The reader decodes frames, routes responses to waiting requests and runs
//! each request until it first waits, then leaves it to a task of its own.
//! It holds no buffer while the peer is quiet: it waits for the socket to be
//! readable and only then takes memory to read into (see [`ReadBuffer`]).
//! A TLS connection runs the same loops, monomorphised over its halves
//! ([`ReadSide`]); the plain path keeps tokio's owned TCP halves.

use std::future::Future;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use basalt_tls::Upgraded;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;

use super::read_buffer::ReadBuffer;
use super::writer::write_loop;
use super::{Channel, ConnectionConfig, RequestProcessor};
use crate::codec::FrameDecoder;
use crate::command::RemotingCommand;

/// The bounds on requests in flight a connection's reader obeys: its own,
/// and optionally one shared by every connection of a server.
#[derive(Clone)]
struct InflightLimits {
    connection: Arc<Semaphore>,
    server: Option<Arc<Semaphore>>,
}

/// Held by a request while it is processed; dropping it lets the reader go on.
struct InflightPermit {
    _connection: OwnedSemaphorePermit,
    _server: Option<OwnedSemaphorePermit>,
}

impl InflightLimits {
    /// `per_connection` permits for this connection, plus the server's pool.
    fn new(per_connection: usize, server: Option<Arc<Semaphore>>) -> Self {
        Self {
            connection: Arc::new(Semaphore::new(per_connection.max(1))),
            server,
        }
    }

    /// Waits for a permit of this connection, then one of the server's.
    /// A connection at its own limit thus never holds server permits.
    async fn acquire(&self) -> Option<InflightPermit> {
        let connection = self.connection.clone().acquire_owned().await.ok()?;
        let server = match &self.server {
            Some(pool) => Some(pool.clone().acquire_owned().await.ok()?),
            None => None,
        };
        Some(InflightPermit {
            _connection: connection,
            _server: server,
        })
    }
}

/// Starts the tasks of a connection and returns its channel plus a handle
/// that completes when both tasks have stopped and `on_channel_closed` ran.
pub(crate) fn spawn_connection<P: RequestProcessor>(
    stream: impl Into<Upgraded>,
    label: String,
    processor: Arc<P>,
    config: &ConnectionConfig,
    server_inflight: Option<Arc<Semaphore>>,
) -> io::Result<(Channel, JoinHandle<()>)> {
    let stream = stream.into();
    let remote = stream.tcp().peer_addr()?;
    let local = stream.tcp().local_addr()?;
    stream.tcp().set_nodelay(true)?;
    let parts = (remote, local, label, processor, config, server_inflight);
    Ok(match stream {
        Upgraded::Plain(s) => {
            let (rd, wr) = s.into_split();
            start_tasks(rd, wr, parts)
        }
        Upgraded::Tls(t) => {
            let (rd, wr) = tokio::io::split(*t);
            start_tasks(rd, wr, parts)
        }
    })
}

type Parts<'a, P> = (
    std::net::SocketAddr,
    std::net::SocketAddr,
    String,
    Arc<P>,
    &'a ConnectionConfig,
    Option<Arc<Semaphore>>,
);

fn start_tasks<P: RequestProcessor, R: ReadSide, W: AsyncWrite + Send + Unpin + 'static>(
    rd: R,
    wr: W,
    (remote, local, label, processor, config, server_inflight): Parts<'_, P>,
) -> (Channel, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(config.write_queue_capacity.max(1));
    let channel = Channel::new(remote, local, label, tx, config.max_frame_size);
    let decoder = FrameDecoder::new(config.max_frame_size);
    let limits = InflightLimits::new(config.max_inflight_requests, server_inflight);

    let writer = tokio::spawn(write_loop(wr, rx, channel.clone(), config.gather_bursts));
    let ch = channel.clone();
    let handle = tokio::spawn(async move {
        read_loop(rd, &ch, &processor, decoder, limits).await;
        ch.close();
        let _ = writer.await;
        processor.on_channel_closed(&ch);
        tracing::debug!(peer = %ch.label(), id = ch.id(), "connection closed");
    });
    (channel, handle)
}

/// The read half of a connection: waits for bytes and appends them to the
/// buffer (0 at end of stream; WouldBlock when woken without data).
pub(crate) trait ReadSide: Send + 'static {
    fn read_into(&mut self, buf: &mut ReadBuffer)
    -> impl Future<Output = io::Result<usize>> + Send;
}

impl ReadSide for OwnedReadHalf {
    /// Takes memory only once the socket is readable.
    async fn read_into(&mut self, buf: &mut ReadBuffer) -> io::Result<usize> {
        self.readable().await?;
        buf.read_with(|b| self.try_read_buf(b))
    }
}

impl<S: AsyncRead + Send + 'static> ReadSide for tokio::io::ReadHalf<S> {
    /// TLS: decrypted bytes come from rustls's own buffer, so there is no
    /// readiness to wait for without reading; the buffer is reserved first.
    async fn read_into(&mut self, buf: &mut ReadBuffer) -> io::Result<usize> {
        buf.read_async(self).await
    }
}

async fn read_loop<P: RequestProcessor, R: ReadSide>(
    mut rd: R,
    channel: &Channel,
    processor: &Arc<P>,
    decoder: FrameDecoder,
    limits: InflightLimits,
) {
    let mut close = channel.close_signal();
    let mut buf = ReadBuffer::default();
    loop {
        loop {
            let cmd = match decoder.decode(buf.bytes()) {
                Ok(Some(cmd)) => cmd,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(peer = %channel.remote_addr(), reason = %e,
                        "closing connection: undecodable frame");
                    return;
                }
            };
            if cmd.is_response() {
                channel.complete(cmd);
                continue;
            }
            let permit = tokio::select! {
                p = limits.acquire() => match p {
                    Some(p) => p,
                    None => return,
                },
                _ = super::signalled(&mut close) => return,
            };
            dispatch(channel, processor, cmd, permit);
        }
        // Quiet: keep no memory while waiting (a partial frame stays).
        buf.release_if_empty();
        let read = tokio::select! {
            r = rd.read_into(&mut buf) => r,
            _ = super::signalled(&mut close) => return,
        };
        match read {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                tracing::debug!(peer = %channel.remote_addr(), error = %e, "read failed");
                return;
            }
        }
    }
}

/// Runs a request inline up to its first pending await: requests then
/// start in arrival order, and one that completes at once costs no task.
/// Only a request that waits (long polling, flush) gets a task of its own,
/// whose first poll registers the real waker. A panicking processor loses
/// only its own request, as it would in a task of its own.
fn dispatch<P: RequestProcessor>(
    channel: &Channel,
    processor: &Arc<P>,
    cmd: RemotingCommand,
    permit: InflightPermit,
) {
    let ch = channel.clone();
    let p = processor.clone();
    let mut task = Box::pin(async move {
        let opaque = cmd.opaque;
        let oneway = cmd.is_oneway();
        // Answer in the header form the request came in: every client
        // decodes both, and one that chose the binary form is spared JSON.
        let serialize_type = cmd.serialize_type;
        let resp = p.process(&ch, cmd).await;
        if let (Some(mut resp), false) = (resp, oneway) {
            resp.opaque = opaque;
            resp.serialize_type = serialize_type;
            resp.mark_response();
            let _ = ch.send(resp).await;
        }
        drop(permit);
    });
    let mut cx = Context::from_waker(Waker::noop());
    match catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(&mut cx))) {
        Ok(Poll::Pending) => {
            tokio::spawn(task);
        }
        Ok(Poll::Ready(())) => {}
        Err(_) => tracing::error!(peer = %channel.remote_addr(),
            "request processor panicked; the request gets no reply"),
    }
}
