//! DLedger RPCs over TCP in RocketMQ remoting frames (codes and JSON bodies in
//! [`crate::wire`], Basalt's binary push in [`crate::wire_bin`], which one in
//! [`super::tcp_codec`]), on `basalt-remoting`'s [`RemotingServer`] and
//! [`RemotingClient`].
//!
//! * Inbound: the server hands each request frame to [`LedgerProcessor`], which
//!   decodes it, gives it a transport-local request id, pushes it into the
//!   member's inbox and waits for the core's response with that id (the server
//!   runs requests concurrently, so a follower's answer waiting for an fsync does
//!   not hold up the next push).
//! * Outbound: one task per peer makes the connection, sends a HELLO on each new
//!   one to choose the push encoding, and sends what was queued meanwhile; once
//!   the connection is up and nothing is queued, [`Transport::send`] queues each
//!   request on the connection itself (no task of ours is woken per request).
//!   Either way requests go out in the order the core emitted them (each send is
//!   queued before the next one is looked at); each response is decoded and
//!   pushed into the inbox with the core's request id.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Waker};
use std::time::Duration;

use basalt_remoting::code::response as rcode;
use basalt_remoting::{
    Channel, RemotingClient, RemotingClientConfig, RemotingCommand, RemotingServer,
    RequestProcessor, ServerHandle,
};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use super::tcp_codec::{self, PushEncoding};
use super::{Inbox, Transport};
use crate::protocol::{Envelope, NodeId, Request, RequestId, Response, ResponseCode, Rpc};
use crate::wire::{self, Ids};

/// How long an inbound request waits for the core's answer, and an outbound one
/// for the peer's.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// After a failed connect, requests to that peer are dropped for this long.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(200);

struct Inner {
    group: String,
    self_id: NodeId,
    inbox: Inbox,
    /// Inbound requests waiting for the core's answer, by transport-local id.
    waiting: Mutex<HashMap<RequestId, oneshot::Sender<Response>>>,
    next_inbound: AtomicU64,
    links: BTreeMap<NodeId, PeerLink>,
    client: RemotingClient,
    /// Offer the binary push on new connections.
    binary_push: bool,
}

/// The way to one peer: the queue its task sends from while there is no
/// connection (or something is still queued), and the connection once it is
/// up with an empty queue. Invariant: `ready` is set only while `queue` is
/// empty, and both change only under `ready`'s lock, so requests keep their
/// order.
struct PeerLink {
    queue: mpsc::UnboundedSender<(RequestId, Request)>,
    ready: Mutex<Option<(Channel, PushEncoding)>>,
}

/// Serves the ledger RPC codes on a remoting server. Requests that arrive before
/// the member starts are answered SYSTEM_BUSY.
#[derive(Default)]
pub struct LedgerProcessor {
    inner: OnceLock<Arc<Inner>>,
}

fn system_error(remark: String) -> RemotingCommand {
    RemotingCommand::response(rcode::SYSTEM_ERROR, Some(remark))
}

impl RequestProcessor for LedgerProcessor {
    async fn process(
        &self,
        channel: &Channel,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        let code = request.code;
        if code == crate::wire_bin::HELLO {
            // Answered before the member starts too: the encoding is the
            // connection's, whatever the member's state.
            return Some(tcp_codec::answer_hello(&request));
        }
        let Some(inner) = self.inner.get().cloned() else {
            return Some(RemotingCommand::response(
                rcode::SYSTEM_BUSY,
                Some("ledger member not started".into()),
            ));
        };
        let decoded = match tcp_codec::decode_request(code, &request.body) {
            Ok(d) => d,
            Err(wire::WireError::UnknownCode(_)) => {
                return Some(RemotingCommand::not_supported(&request));
            }
            Err(e) => {
                tracing::warn!(peer = %channel.remote_addr(), error = %e, "bad ledger request");
                return Some(system_error(e.to_string()));
            }
        };
        let from = decoded
            .local_id
            .clone()
            .unwrap_or_else(|| NodeId::from(format!("client@{}", channel.remote_addr())));
        let ids = Ids {
            group: &inner.group,
            local_id: &inner.self_id,
            remote_id: &from,
        };
        let refuse = |code_: ResponseCode| {
            let body = tcp_codec::error_response(code, &ids, -1, code_);
            Some(RemotingCommand::response(rcode::SUCCESS, None).with_body(body))
        };
        if decoded.group.as_deref().is_some_and(|g| g != inner.group) {
            return refuse(ResponseCode::UnknownGroup);
        }
        if decoded
            .remote_id
            .as_ref()
            .is_some_and(|r| *r != inner.self_id)
        {
            return refuse(ResponseCode::UnknownMember);
        }
        let id = inner.next_inbound.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        inner.waiting.lock().insert(id, tx);
        let env = Envelope {
            from: from.clone(),
            to: inner.self_id.clone(),
            rpc: Rpc::Request {
                id,
                body: decoded.request,
            },
        };
        if inner.inbox.send(env).is_err() {
            inner.waiting.lock().remove(&id);
            return Some(RemotingCommand::response(
                rcode::SYSTEM_BUSY,
                Some("ledger member stopped".into()),
            ));
        }
        match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(resp)) => {
                let body = tcp_codec::encode_response(code, &ids, &resp);
                Some(RemotingCommand::response(rcode::SUCCESS, None).with_body(body))
            }
            _ => {
                // The core dropped the request (DLedger does so for pushes that a
                // COMPARE overtook): the sender's own timeout handles it.
                inner.waiting.lock().remove(&id);
                None
            }
        }
    }
}

/// The listening side of a member, bound before the member starts so that tests
/// can use port 0 and learn the address first.
pub struct TcpListener {
    server: ServerHandle,
    processor: Arc<LedgerProcessor>,
}

impl TcpListener {
    /// Binds `addr` ("host:port"; port 0 picks a free port).
    pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
        Self::bind_secure(addr, None).await
    }

    /// Binds `addr` with TLS and/or the cluster-secret handshake on every
    /// accepted connection (an outsider failing it never gets a frame read).
    pub async fn bind_secure(
        addr: &str,
        security: Option<Arc<basalt_tls::ServerSecurity>>,
    ) -> std::io::Result<TcpListener> {
        let processor = Arc::new(LedgerProcessor::default());
        let config = basalt_remoting::ServerConfig {
            security,
            ..Default::default()
        };
        let server = RemotingServer::bind_with_config(addr, processor.clone(), config).await?;
        Ok(TcpListener { server, processor })
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.server.local_addr()
    }
}

/// The TCP transport of one member. See the module documentation.
pub struct TcpTransport {
    inner: Arc<Inner>,
    server: Mutex<Option<ServerHandle>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl TcpTransport {
    /// Starts serving on `listener` and connecting to `peers` (id → address, self
    /// excluded or not), delivering into `inbox`. `binary_push` offers Basalt's
    /// binary push on each connection (false: JSON only, as DLedger).
    pub fn start(
        listener: TcpListener,
        group: &str,
        self_id: &NodeId,
        peers: &BTreeMap<NodeId, String>,
        inbox: Inbox,
        binary_push: bool,
    ) -> Arc<TcpTransport> {
        Self::start_secure(listener, group, self_id, peers, inbox, binary_push, None)
    }

    /// As [`TcpTransport::start`], dialing peers with `security` (TLS and/or
    /// the cluster-secret handshake).
    pub fn start_secure(
        listener: TcpListener,
        group: &str,
        self_id: &NodeId,
        peers: &BTreeMap<NodeId, String>,
        inbox: Inbox,
        binary_push: bool,
        security: Option<Arc<basalt_tls::ClientSecurity>>,
    ) -> Arc<TcpTransport> {
        // Appends to a follower go out in bursts (one per replication
        // round), so the writer gathers them as a server's does.
        let client = RemotingClient::new(RemotingClientConfig {
            connection: basalt_remoting::ConnectionConfig {
                gather_bursts: true,
                ..basalt_remoting::ConnectionConfig::default()
            },
            connect_timeout: Duration::from_secs(1),
            security,
            ..RemotingClientConfig::default()
        });
        let mut links = BTreeMap::new();
        let mut receivers = Vec::new();
        for (id, addr) in peers {
            if id == self_id {
                continue;
            }
            let (tx, rx) = mpsc::unbounded_channel();
            links.insert(
                id.clone(),
                PeerLink {
                    queue: tx,
                    ready: Mutex::new(None),
                },
            );
            receivers.push((id.clone(), addr.clone(), rx));
        }
        let inner = Arc::new(Inner {
            group: group.to_string(),
            self_id: self_id.clone(),
            inbox,
            waiting: Mutex::new(HashMap::new()),
            next_inbound: AtomicU64::new(1),
            links,
            client,
            binary_push,
        });
        let tasks = receivers
            .into_iter()
            .map(|(id, addr, rx)| tokio::spawn(peer_loop(inner.clone(), id, addr, rx)))
            .collect();
        // The processor was created before the member: wire it up now.
        let _ = listener.processor.inner.set(inner.clone());
        Arc::new(TcpTransport {
            inner,
            server: Mutex::new(Some(listener.server)),
            tasks,
        })
    }
}

impl Transport for TcpTransport {
    fn send(&self, env: Envelope) {
        match env.rpc {
            Rpc::Request { id, body } => {
                let Some(link) = self.inner.links.get(&env.to) else {
                    return;
                };
                let mut ready = link.ready.lock();
                match ready.as_ref() {
                    Some((ch, enc)) if !ch.is_closed() => {
                        let (ch, enc) = (ch.clone(), *enc);
                        send_one(&self.inner, &env.to, ch, enc, id, body);
                    }
                    _ => {
                        // Not connected: the peer's task connects and sends.
                        *ready = None;
                        let _ = link.queue.send((id, body));
                    }
                }
            }
            Rpc::Response { id, body } => {
                if let Some(tx) = self.inner.waiting.lock().remove(&id) {
                    let _ = tx.send(body);
                }
            }
        }
    }

    fn shutdown(&self) {
        for t in &self.tasks {
            t.abort();
        }
        for link in self.inner.links.values() {
            link.ready.lock().take();
        }
        self.inner.client.shutdown();
        if let Some(server) = self.server.lock().take() {
            tokio::spawn(server.shutdown());
        }
        self.inner.waiting.lock().clear();
    }
}

/// Connects to a peer, sends what was queued meanwhile in order, and hands the
/// connection to [`Transport::send`] once the queue is empty.
async fn peer_loop(
    inner: Arc<Inner>,
    peer: NodeId,
    addr: String,
    mut rx: mpsc::UnboundedReceiver<(RequestId, Request)>,
) {
    let mut channel: Option<(Channel, PushEncoding)> = None;
    while let Some((id, req)) = rx.recv().await {
        if channel.as_ref().is_none_or(|(c, _)| c.is_closed()) {
            match connect(&inner, &peer, &addr).await {
                Some(c) => channel = Some(c),
                None => {
                    channel = None;
                    // Drop what queued meanwhile; the core resends what matters.
                    tokio::time::sleep(RECONNECT_BACKOFF).await;
                    while rx.try_recv().is_ok() {}
                    continue;
                }
            }
        }
        let Some((ch, enc)) = channel.clone() else {
            continue;
        };
        send_one(&inner, &peer, ch.clone(), enc, id, req);
        if let Some(link) = inner.links.get(&peer) {
            let mut ready = link.ready.lock();
            if rx.is_empty() && !ch.is_closed() {
                *ready = Some((ch, enc));
            }
        }
    }
}

/// A new connection to `peer` and the push encoding its HELLO chose.
async fn connect(inner: &Inner, peer: &NodeId, addr: &str) -> Option<(Channel, PushEncoding)> {
    let ch = match inner.client.channel(addr).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(peer = %peer, addr, error = %e, "ledger peer unreachable");
            return None;
        }
    };
    let enc = tcp_codec::negotiate(&ch, inner.binary_push).await;
    tracing::debug!(peer = %peer, addr, encoding = ?enc, "ledger connection");
    Some((ch, enc))
}

/// Queues one request on `ch` and routes its answer into the inbox.
fn send_one(
    inner: &Inner,
    peer: &NodeId,
    ch: Channel,
    enc: PushEncoding,
    id: RequestId,
    req: Request,
) {
    let ids = Ids {
        group: &inner.group,
        local_id: &inner.self_id,
        remote_id: peer,
    };
    let cmd = tcp_codec::encode_request(enc, &ids, &req);
    let code = cmd.code;
    drop(req);
    let inbox = inner.inbox.clone();
    let me = inner.self_id.clone();
    let from = peer.clone();
    let mut task: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
        match ch.request(cmd, REQUEST_TIMEOUT).await {
            Ok(resp) if resp.code == rcode::SUCCESS => {
                match tcp_codec::decode_response(code, &resp.body) {
                    Ok(body) => {
                        let _ = inbox.send(Envelope {
                            from,
                            to: me,
                            rpc: Rpc::Response { id, body },
                        });
                    }
                    Err(e) => tracing::warn!(peer = %from, error = %e, "bad ledger response"),
                }
            }
            Ok(resp) => {
                tracing::debug!(peer = %from, code = resp.code, remark = ?resp.remark, "ledger request refused")
            }
            Err(e) => tracing::debug!(peer = %from, error = %e, "ledger request failed"),
        }
    });
    // Poll once here so the frame is queued before the next request's: pushes
    // reach the follower in the order the leader sent them.
    let mut cx = Context::from_waker(Waker::noop());
    if task.as_mut().poll(&mut cx).is_pending() {
        tokio::spawn(task);
    }
}
