//! The slave side of HA: connects to the master's HA port, reports its max
//! offset, appends what it receives at the same offsets (every record
//! checked), and reconnects with back-off.
//!
//! A slave whose log does not line up with what the master sends (the master
//! sends data for an offset other than the slave's end) has diverged: it
//! stops replicating with an error instead of writing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use basalt_store::MessageStore;
use basalt_tls::{ClientSecurity, Upgraded};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::{HEADER_LEN, decode_header};

/// Settings of the slave side.
#[derive(Debug, Clone)]
pub struct HaSlaveConfig {
    pub report_interval: Duration,
    pub housekeeping_interval: Duration,
    /// Largest chunk accepted from the master.
    pub max_chunk: usize,
    /// TLS and/or the cluster-secret handshake on each connection to the
    /// master (docs/tls.md).
    pub security: Option<Arc<ClientSecurity>>,
}

/// See the module documentation.
pub struct HaSlave {
    store: Arc<MessageStore>,
    cfg: HaSlaveConfig,
    master: Mutex<Option<String>>,
    master_changed: Notify,
    connected: AtomicBool,
    diverged: Mutex<Option<String>>,
    /// The master's offset as of the last chunk or heartbeat received.
    pub master_offset: AtomicI64,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for HaSlave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaSlave")
            .field("master", &*self.master.lock())
            .finish()
    }
}

#[derive(Debug)]
enum SessionEnd {
    Io(std::io::Error),
    Diverged(String),
}

impl From<std::io::Error> for SessionEnd {
    fn from(e: std::io::Error) -> Self {
        SessionEnd::Io(e)
    }
}

impl HaSlave {
    pub fn start(
        store: Arc<MessageStore>,
        cfg: HaSlaveConfig,
        master: Option<String>,
    ) -> Arc<HaSlave> {
        let s = Arc::new(HaSlave {
            store,
            cfg,
            master: Mutex::new(master),
            master_changed: Notify::new(),
            connected: AtomicBool::new(false),
            diverged: Mutex::new(None),
            master_offset: AtomicI64::new(0),
            task: Mutex::new(None),
        });
        let me = Arc::clone(&s);
        *s.task.lock() = Some(tokio::spawn(async move { me.run().await }));
        s
    }

    /// Points the slave at a (new) master HA address.
    pub fn set_master(&self, addr: &str) {
        let mut m = self.master.lock();
        if m.as_deref() != Some(addr) {
            tracing::info!(master = addr, "HA master address");
            *m = Some(addr.to_string());
            drop(m);
            self.master_changed.notify_waiters();
        }
    }

    pub fn master(&self) -> Option<String> {
        self.master.lock().clone()
    }

    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Why replication stopped, if it did.
    pub fn diverged(&self) -> Option<String> {
        self.diverged.lock().clone()
    }

    pub fn shutdown(&self) {
        if let Some(t) = self.task.lock().take() {
            t.abort();
        }
    }

    async fn run(self: Arc<Self>) {
        let mut backoff = Duration::from_millis(200);
        loop {
            let changed = self.master_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(addr) = self.master() else {
                changed.await;
                continue;
            };
            match self.session(&addr).await {
                Ok(()) => {}
                Err(SessionEnd::Diverged(why)) => {
                    tracing::error!(master = %addr, reason = %why,
                        "this slave's CommitLog diverges from the master's; replication stopped. \
                         Inspect both stores (basalt store check) and rebuild the slave.");
                    *self.diverged.lock() = Some(why);
                    self.connected.store(false, Ordering::Release);
                    return;
                }
                Err(SessionEnd::Io(e)) => {
                    tracing::warn!(master = %addr, error = %e, "HA connection to the master lost");
                }
            }
            self.connected.store(false, Ordering::Release);
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = &mut changed => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    async fn session(&self, addr: &str) -> Result<(), SessionEnd> {
        let stream = tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
            })??;
        let _ = stream.set_nodelay(true);
        let stream = match &self.cfg.security {
            Some(sec) => sec.connect(stream, addr).await.map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string())
            })?,
            None => Upgraded::Plain(stream),
        };
        match stream {
            Upgraded::Plain(s) => {
                let (rd, wr) = s.into_split();
                self.transfer(rd, wr, addr).await
            }
            Upgraded::Tls(t) => {
                let (rd, wr) = tokio::io::split(*t);
                self.transfer(rd, wr, addr).await
            }
        }
    }

    /// Reports this log's end, then appends what the master sends.
    async fn transfer<R, W>(&self, mut rd: R, mut wr: W, addr: &str) -> Result<(), SessionEnd>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let log = Arc::clone(self.store.commit_log());
        let report = |off: i64| off.to_be_bytes();
        let mut local_end = log.max_wrote_offset();
        wr.write_all(&report(local_end)).await?;
        self.connected.store(true, Ordering::Release);
        tracing::info!(
            master = addr,
            offset = local_end,
            "HA connected to the master"
        );
        // Reports go out from their own task, so that a read is never
        // cancelled half-way (read_exact is not cancel-safe).
        let reported = Arc::new(tokio::sync::watch::Sender::new(local_end));
        let reporter = {
            let mut rx = reported.subscribe();
            let interval = self.cfg.report_interval;
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                loop {
                    let off = *rx.borrow_and_update();
                    if wr
                        .write_all(&report(off.max(log.max_wrote_offset())))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    tokio::select! {
                        r = rx.changed() => if r.is_err() { return },
                        _ = tokio::time::sleep(interval) => {}
                    }
                }
            })
        };
        let result = self.receive(&mut rd, &log, &mut local_end, &reported).await;
        reporter.abort();
        result
    }

    async fn receive<R: AsyncRead + Unpin>(
        &self,
        rd: &mut R,
        log: &Arc<basalt_store::commit_log::CommitLog>,
        local_end: &mut i64,
        reported: &tokio::sync::watch::Sender<i64>,
    ) -> Result<(), SessionEnd> {
        let mut header = [0u8; HEADER_LEN];
        let mut body = Vec::new();
        loop {
            tokio::time::timeout(self.cfg.housekeeping_interval, rd.read_exact(&mut header))
                .await
                .map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "nothing from the master for the housekeeping interval",
                    )
                })??;
            let (offset, size) = decode_header(&header);
            if size < 0 || size as usize > self.cfg.max_chunk {
                return Err(std::io::Error::other(format!("bad chunk size {size}")).into());
            }
            if size == 0 {
                // Heartbeat: the master's end.
                self.master_offset.store(offset, Ordering::Release);
                continue;
            }
            body.resize(size as usize, 0);
            rd.read_exact(&mut body).await?;
            let empty = log.files().is_empty();
            if offset != *local_end && !(empty && *local_end == 0) {
                return Err(SessionEnd::Diverged(format!(
                    "the master sends data for offset {offset} but this slave's log ends at {local_end}"
                )));
            }
            let store = Arc::clone(&self.store);
            let data = std::mem::take(&mut body);
            let (res, data) = tokio::task::spawn_blocking(move || {
                let r = store.commit_log().append_raw(offset, &data);
                (r, data)
            })
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
            body = data;
            match res {
                Ok(end) => *local_end = end,
                // A full disk is not a divergence: reconnect (the master resends
                // from this log's end) until there is room again.
                Err(e) if e.is_no_space() => {
                    return Err(SessionEnd::Io(std::io::Error::other(format!(
                        "cannot store replicated data: {e}"
                    ))));
                }
                Err(e) => return Err(SessionEnd::Diverged(e.to_string())),
            }
            self.master_offset.fetch_max(*local_end, Ordering::AcqRel);
            reported.send_replace(*local_end);
        }
    }
}
