//! [`LinkProxy`]: a fault-injecting TCP proxy for one direction of one link
//! between two processes under test.
//!
//! A ledger member opens its own connection to each peer and sends its
//! requests over it, so the link "a → b" is the connections a opens to b: a's
//! requests to b and b's answers. Putting one proxy in front of b for a (a's
//! `dLegerPeers` names the proxy as b's address) lets a test cut, delay or
//! black-hole that one direction while b → a still works.
//!
//! Modes ([`LinkMode`]):
//! - `Pass`: bytes are forwarded both ways.
//! - `Delay(d)`: each chunk read waits `d` before it is forwarded, in order
//!   (a slow link: latency, and less throughput).
//! - `Cut`: every live connection is closed, and new ones are closed as soon
//!   as they are accepted (a peer that sends a reset).
//! - `Blackhole`: live connections stay open but nothing more is forwarded,
//!   and new ones are accepted and never answered (a partition that drops
//!   packets: the sender sees time-outs, not errors). Connections held in a
//!   black hole are closed when the mode changes, since bytes were lost in
//!   the middle of their streams.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What a [`LinkProxy`] does with the bytes of its link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    Pass,
    Delay(Duration),
    Cut,
    Blackhole,
}

/// A listening proxy to `target`; see the module documentation. Stops when
/// dropped.
pub struct LinkProxy {
    addr: SocketAddr,
    mode: watch::Sender<(u64, LinkMode)>,
    task: tokio::task::JoinHandle<()>,
}

impl LinkProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `target`.
    pub async fn start(target: SocketAddr) -> LinkProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (mode, rx) = watch::channel((0u64, LinkMode::Pass));
        let task = tokio::spawn(accept_loop(listener, target, rx));
        LinkProxy { addr, mode, task }
    }

    /// The address peers connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches the mode; every connection sees it at once.
    pub fn set(&self, mode: LinkMode) {
        self.mode.send_modify(|(generation, m)| {
            *generation += 1;
            *m = mode;
        });
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    mode: watch::Receiver<(u64, LinkMode)>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        let _ = inbound.set_nodelay(true);
        conns.spawn(serve(inbound, target, mode.clone()));
        // Reap finished connections so the set stays small.
        while conns.try_join_next().is_some() {}
    }
}

/// One proxied connection, until either side closes or the mode ends it.
async fn serve(inbound: TcpStream, target: SocketAddr, mut mode: watch::Receiver<(u64, LinkMode)>) {
    let (generation, m) = *mode.borrow_and_update();
    match m {
        LinkMode::Cut => return,
        LinkMode::Blackhole => {
            // Hold it silently until the mode changes, then close it.
            let _keep = inbound;
            let _ = mode.changed().await;
            return;
        }
        LinkMode::Pass | LinkMode::Delay(_) => {}
    }
    let Ok(Ok(outbound)) =
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(target)).await
    else {
        return;
    };
    let _ = outbound.set_nodelay(true);
    let (in_r, in_w) = inbound.into_split();
    let (out_r, out_w) = outbound.into_split();
    let state = Arc::new(mode.clone());
    // Ends when either side closes, or when the link is cut or black-holed
    // (a delay only changes how the pumps forward). Dropping the pumps
    // closes both sockets.
    let ended = async {
        loop {
            if mode.changed().await.is_err() {
                return;
            }
            let (g, m) = *mode.borrow_and_update();
            if g != generation && matches!(m, LinkMode::Cut) {
                return;
            }
            if matches!(m, LinkMode::Blackhole) {
                // Keep the sockets open, forward nothing, close at the next
                // change: the streams lost bytes and cannot be resumed.
                let _ = mode.changed().await;
                return;
            }
        }
    };
    tokio::select! {
        _ = ended => {}
        _ = pump(in_r, out_w, Arc::clone(&state)) => {}
        _ = pump(out_r, in_w, state) => {}
    }
}

/// Forwards `from` to `to` under the current mode, until either closes.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<watch::Receiver<(u64, LinkMode)>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let m = mode.borrow().1;
        match m {
            LinkMode::Pass => {}
            LinkMode::Delay(d) => tokio::time::sleep(d).await,
            // The connection is being torn down; drop what arrived.
            LinkMode::Cut | LinkMode::Blackhole => continue,
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
