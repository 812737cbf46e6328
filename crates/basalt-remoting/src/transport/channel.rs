//! [`Channel`]: the handle to one connection shared by its tasks and users.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};

use crate::command::RemotingCommand;
use crate::error::RemotingError;

static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(1);
static NEXT_CHANNEL_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh request id (process-wide counter; wraps like Java's).
pub fn next_opaque() -> i32 {
    NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed)
}

/// A cheap, clonable handle to one connection.
///
/// Commands sent through it are queued (bounded) for the connection's writer
/// task. Requests sent through it are answered by responses with the same
/// opaque, which the connection's reader routes back here.
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Inner>,
}

struct Inner {
    id: u64,
    remote_addr: SocketAddr,
    local_addr: SocketAddr,
    /// How errors name the peer: the address the client asked for, or the
    /// remote socket address on the server side.
    label: String,
    tx: mpsc::Sender<RemotingCommand>,
    /// Bodies larger than this are refused before they are queued.
    max_frame_size: usize,
    pending: Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>,
    closed: AtomicBool,
    close_tx: watch::Sender<bool>,
}

impl Channel {
    pub(crate) fn new(
        remote_addr: SocketAddr,
        local_addr: SocketAddr,
        label: String,
        tx: mpsc::Sender<RemotingCommand>,
        max_frame_size: usize,
    ) -> Self {
        let (close_tx, _) = watch::channel(false);
        Self {
            inner: Arc::new(Inner {
                id: NEXT_CHANNEL_ID.fetch_add(1, Ordering::Relaxed),
                remote_addr,
                local_addr,
                label,
                tx,
                max_frame_size,
                pending: Mutex::new(HashMap::new()),
                closed: AtomicBool::new(false),
                close_tx,
            }),
        }
    }

    /// A channel with no socket behind it: what is sent through it arrives
    /// on the returned receiver (at most `capacity` queued). The gRPC
    /// service gives one to each 5.x client, so the broker's processors
    /// (heartbeats, transaction check-backs) reach gRPC clients the way
    /// they reach remoting ones. Responses sent to it complete nothing.
    pub fn detached(
        remote_addr: SocketAddr,
        local_addr: SocketAddr,
        label: String,
        capacity: usize,
    ) -> (Self, mpsc::Receiver<RemotingCommand>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            Self::new(remote_addr, local_addr, label, tx, usize::MAX),
            rx,
        )
    }

    /// Unique id of this connection within the process.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote_addr
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// The peer as errors name it.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Closes the connection: the writer sends what is already queued, then
    /// both tasks stop. Pending requests fail with `ConnectionClosed`.
    pub fn close(&self) {
        if !self.inner.closed.swap(true, Ordering::SeqCst) {
            self.inner.close_tx.send_replace(true);
        }
        self.fail_pending();
    }

    pub(crate) fn close_signal(&self) -> watch::Receiver<bool> {
        self.inner.close_tx.subscribe()
    }

    /// Queues a command as is (opaque and flags untouched). Waits while the
    /// write queue is full. A body over the connection's frame limit is
    /// refused here rather than sent to a peer that would drop the connection.
    pub async fn send(&self, cmd: RemotingCommand) -> Result<(), RemotingError> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        if cmd.body_len() > self.inner.max_frame_size {
            return Err(RemotingError::FrameTooLarge {
                len: cmd.body_len() as i64,
                max: self.inner.max_frame_size,
            });
        }
        self.inner
            .tx
            .send(cmd)
            .await
            .map_err(|_| self.closed_error())
    }

    /// Sends a oneway request: a fresh opaque, the oneway flag, no reply.
    pub async fn send_oneway(&self, mut cmd: RemotingCommand) -> Result<(), RemotingError> {
        cmd.opaque = next_opaque();
        cmd.mark_oneway();
        self.send(cmd).await
    }

    /// Sends a request and waits for its response (matched by opaque).
    pub async fn request(
        &self,
        mut cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let opaque = next_opaque();
        let code = cmd.code;
        cmd.opaque = opaque;
        cmd.flag &= !(crate::command::FLAG_RESPONSE | crate::command::FLAG_ONEWAY);
        let (tx, rx) = oneshot::channel();
        self.inner.pending.lock().insert(opaque, tx);
        // close() marks the channel closed before it drains `pending`, so a
        // request registered after the drain sees the flag here.
        if self.is_closed() {
            self.inner.pending.lock().remove(&opaque);
            return Err(self.closed_error());
        }
        let work = async {
            self.send(cmd).await?;
            rx.await.map_err(|_| self.closed_error())
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(result) => {
                if result.is_err() {
                    self.inner.pending.lock().remove(&opaque);
                }
                result
            }
            Err(_) => {
                self.inner.pending.lock().remove(&opaque);
                Err(RemotingError::Timeout {
                    addr: self.inner.label.clone(),
                    code,
                    millis: timeout.as_millis() as u64,
                })
            }
        }
    }

    /// Routes a response to the request waiting for it. A response nobody
    /// waits for (timed out, or never asked) is dropped.
    pub(crate) fn complete(&self, resp: RemotingCommand) {
        let waiter = self.inner.pending.lock().remove(&resp.opaque);
        match waiter {
            Some(tx) => {
                let _ = tx.send(resp);
            }
            None => tracing::debug!(
                peer = %self.inner.label,
                opaque = resp.opaque,
                code = resp.code,
                "response for no pending request (timed out?)"
            ),
        }
    }

    fn fail_pending(&self) {
        let drained: Vec<_> = self.inner.pending.lock().drain().collect();
        drop(drained);
    }

    fn closed_error(&self) -> RemotingError {
        RemotingError::ConnectionClosed {
            addr: self.inner.label.clone(),
        }
    }
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.inner.id)
            .field("remote", &self.inner.remote_addr)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl PartialEq for Channel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Channel {}

impl std::hash::Hash for Channel {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.id.hash(state)
    }
}
