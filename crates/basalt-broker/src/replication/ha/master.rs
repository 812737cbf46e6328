//! The master side of HA: accepts slaves, streams the CommitLog to each from
//! the offset it reports, tracks what each slave has confirmed, and lets
//! SYNC_MASTER sends wait for it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use basalt_common::record::{self, RecordHead};
use basalt_store::signal::OffsetWatch;
use basalt_store::{MessageStore, PutMessageStatus};
use basalt_tls::{ServerSecurity, Upgraded};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::encode_header;

/// Settings of the master side.
#[derive(Debug, Clone)]
pub struct HaMasterConfig {
    pub listen: SocketAddr,
    pub heartbeat_interval: Duration,
    pub housekeeping_interval: Duration,
    pub transfer_batch_size: usize,
    /// A slave further behind than this is not "in sync" (SLAVE_NOT_AVAILABLE).
    pub max_gap_not_in_sync: i64,
    /// TLS and the cluster-secret handshake, run on each connection before
    /// it counts as a slave (docs/tls.md). None: open, as RocketMQ's HA.
    pub security: Option<Arc<ServerSecurity>>,
}

/// One connected slave.
#[derive(Debug)]
pub struct SlaveConnection {
    pub addr: SocketAddr,
    /// What the slave last reported, clamped to what was sent to it.
    pub acked: AtomicI64,
    /// Everything below this was sent.
    pub sent: AtomicI64,
    closed: AtomicBool,
}

/// See the module documentation.
pub struct HaMaster {
    store: Arc<MessageStore>,
    cfg: HaMasterConfig,
    local_addr: SocketAddr,
    connections: Mutex<Vec<Arc<SlaveConnection>>>,
    /// Highest offset any connected slave has confirmed.
    acked: OffsetWatch,
    accept: Mutex<Option<JoinHandle<()>>>,
    serving: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for HaMaster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaMaster")
            .field("listen", &self.local_addr)
            .finish()
    }
}

impl HaMaster {
    /// Binds the HA port and starts accepting slaves.
    pub async fn start(
        store: Arc<MessageStore>,
        cfg: HaMasterConfig,
    ) -> std::io::Result<Arc<HaMaster>> {
        let listener = TcpListener::bind(cfg.listen).await?;
        let local_addr = listener.local_addr()?;
        let m = Arc::new(HaMaster {
            store,
            cfg,
            local_addr,
            connections: Mutex::new(Vec::new()),
            acked: OffsetWatch::new(0),
            accept: Mutex::new(None),
            serving: Mutex::new(Vec::new()),
        });
        let weak = Arc::downgrade(&m);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, addr)) = listener.accept().await else {
                    continue;
                };
                let Some(m) = weak.upgrade() else { return };
                let _ = stream.set_nodelay(true);
                let me = Arc::clone(&m);
                let task = tokio::spawn(async move {
                    let m = me;
                    // Proven first: a peer failing the handshake never
                    // becomes a slave (its reports are never read).
                    let stream = match &m.cfg.security {
                        Some(sec) if !sec.is_noop() => match sec.accept(stream, addr).await {
                            Ok(s) => s,
                            Err(_) => return,
                        },
                        _ => Upgraded::Plain(stream),
                    };
                    tracing::info!(slave = %addr, tls = stream.is_tls(), "HA slave connected");
                    let conn = Arc::new(SlaveConnection {
                        addr,
                        acked: AtomicI64::new(-1),
                        sent: AtomicI64::new(-1),
                        closed: AtomicBool::new(false),
                    });
                    m.connections.lock().push(Arc::clone(&conn));
                    let served = match stream {
                        Upgraded::Plain(s) => {
                            let (rd, wr) = s.into_split();
                            m.serve(rd, wr, &conn).await
                        }
                        Upgraded::Tls(t) => {
                            let (rd, wr) = tokio::io::split(*t);
                            m.serve(rd, wr, &conn).await
                        }
                    };
                    if let Err(e) = served {
                        tracing::warn!(slave = %conn.addr, error = %e, "HA slave connection ended");
                    }
                    conn.closed.store(true, Ordering::Release);
                    m.connections.lock().retain(|c| !Arc::ptr_eq(c, &conn));
                });
                let mut serving = m.serving.lock();
                serving.retain(|t| !t.is_finished());
                serving.push(task);
            }
        });
        *m.accept.lock() = Some(task);
        Ok(m)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Connected slaves.
    pub fn connections(&self) -> Vec<Arc<SlaveConnection>> {
        self.connections.lock().clone()
    }

    /// Highest offset confirmed by any slave (-1 if none ever did).
    pub fn acked_offset(&self) -> i64 {
        self.connections()
            .iter()
            .map(|c| c.acked.load(Ordering::Acquire))
            .max()
            .unwrap_or(-1)
    }

    /// Whether some connected slave is within `maxGapNotInSync` of the master.
    pub fn slave_in_sync(&self) -> bool {
        let max = self.store.commit_log().max_offset();
        self.connections().iter().any(|c| {
            let a = c.acked.load(Ordering::Acquire);
            a >= 0 && max - a <= self.cfg.max_gap_not_in_sync
        })
    }

    /// SYNC_MASTER: waits until a slave has confirmed everything up to `end`.
    pub async fn wait_replicated(&self, end: i64, timeout: Duration) -> PutMessageStatus {
        if !self.slave_in_sync() {
            return PutMessageStatus::SlaveNotAvailable;
        }
        match tokio::time::timeout(timeout, self.acked.wait_for(end)).await {
            Ok(Ok(())) => PutMessageStatus::PutOk,
            Ok(Err(_)) => PutMessageStatus::SlaveNotAvailable,
            Err(_) => PutMessageStatus::FlushSlaveTimeout,
        }
    }

    /// Stops accepting and drops every slave.
    pub fn shutdown(&self) {
        if let Some(t) = self.accept.lock().take() {
            t.abort();
        }
        for c in self.connections() {
            c.closed.store(true, Ordering::Release);
        }
        for t in self.serving.lock().drain(..) {
            t.abort();
        }
        self.connections.lock().clear();

        self.acked.fail();
    }

    async fn serve<R, W>(
        self: &Arc<Self>,
        mut rd: R,
        mut wr: W,
        conn: &Arc<SlaveConnection>,
    ) -> std::io::Result<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin,
    {
        let mut next = self.transfer_start(&mut rd, conn).await?;
        let reader = self.spawn_report_reader(rd, conn);
        let dispatch = self
            .store
            .dispatch_service()
            .ok_or_else(|| std::io::Error::other("store is shut down"))?;
        let mut last_write = Instant::now();
        let result: std::io::Result<()> = async {
            loop {
                if conn.closed.load(Ordering::Acquire) || reader.is_finished() {
                    return Err(std::io::Error::other("connection closed"));
                }
                let chunk = self.next_chunk(next);
                match chunk {
                    Some((data, advance)) => {
                        // Marked sent before writing: the slave may confirm
                        // it before this task runs again.
                        conn.sent.store(next + advance, Ordering::Release);
                        wr.write_all(&encode_header(next, data.len() as i32))
                            .await?;
                        wr.write_all(&data).await?;
                        next += advance;
                        last_write = Instant::now();
                    }

                    None => {
                        let idle = self
                            .cfg
                            .heartbeat_interval
                            .saturating_sub(last_write.elapsed());
                        tokio::select! {
                            _ = dispatch.dispatched_beyond(next + 1) => {}
                            _ = tokio::time::sleep(idle) => {
                                wr.write_all(&encode_header(next, 0)).await?;
                                last_write = Instant::now();
                            }
                        }
                    }
                }
            }
        }
        .await;
        reader.abort();
        result
    }

    /// Reads the slave's first offset report (it speaks first) and returns
    /// where the transfer starts: there, or for an empty slave at the
    /// master's oldest data. A report past the master's end means the logs
    /// diverge.
    async fn transfer_start<R: AsyncRead + Unpin>(
        &self,
        rd: &mut R,
        conn: &Arc<SlaveConnection>,
    ) -> std::io::Result<i64> {
        let mut buf = [0u8; 8];
        tokio::time::timeout(self.cfg.housekeeping_interval, rd.read_exact(&mut buf))
            .await
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no offset report from the slave",
                )
            })??;
        let reported = i64::from_be_bytes(buf);
        let log = self.store.commit_log();
        let next = if reported == 0 {
            log.min_offset()
        } else {
            reported
        };
        if next > log.max_offset() {
            return Err(std::io::Error::other(format!(
                "slave reports offset {next}, past the master's end {}: the logs diverge",
                log.max_offset()
            )));
        }
        conn.sent.store(next, Ordering::Release);
        self.record_ack(conn, reported);
        tracing::info!(slave = %conn.addr, from = next, "HA transfer starts");
        Ok(next)
    }

    /// Reads the slave's offset reports until the connection fails or stays
    /// silent for the housekeeping interval.
    fn spawn_report_reader<R: AsyncRead + Unpin + Send + 'static>(
        self: &Arc<Self>,
        mut rd: R,
        conn: &Arc<SlaveConnection>,
    ) -> tokio::task::JoinHandle<std::io::Result<()>> {
        let me = Arc::clone(self);
        let conn = Arc::clone(conn);
        let housekeeping = self.cfg.housekeeping_interval;
        tokio::spawn(async move {
            let mut buf = [0u8; 8];
            loop {
                match tokio::time::timeout(housekeeping, rd.read_exact(&mut buf)).await {
                    Ok(Ok(_)) => me.record_ack(&conn, i64::from_be_bytes(buf)),
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "no report from the slave for the housekeeping interval",
                        ));
                    }
                }
            }
        })
    }

    fn record_ack(&self, conn: &SlaveConnection, reported: i64) {
        // Never trust an offset past what was sent (RocketMQ's known bug).
        let clamped = reported.min(conn.sent.load(Ordering::Acquire));
        conn.acked.fetch_max(clamped, Ordering::AcqRel);
        self.acked.publish(clamped);
    }

    /// The bytes to send from `from`: whole records of one file, at most one
    /// batch (a single larger record goes alone), ending with the file's
    /// filler if reached. Returns the bytes and how far `from` advances.
    fn next_chunk(&self, from: i64) -> Option<(bytes::Bytes, i64)> {
        let log = self.store.commit_log();
        if from >= log.max_offset() {
            return None;
        }
        let data = log.read_to_file_end(from)?;
        let mut at = 0usize;
        loop {
            match record::peek_head(&data[at..]) {
                Some(RecordHead::Message { total_size }) if at + total_size <= data.len() => {
                    if at > 0 && at + total_size > self.cfg.transfer_batch_size {
                        break;
                    }
                    at += total_size;
                }
                Some(RecordHead::Blank) => {
                    // The filler goes along; the slave then rolls to the next file.
                    let file_end = log.roll_next_file(from + at as i64);
                    let with_blank = data.slice(..at + record::BLANK_LEN);
                    return Some((with_blank, file_end - from));
                }
                _ => break,
            }
            if at >= data.len() {
                break;
            }
        }
        if at == 0 {
            return None;
        }
        Some((data.slice(..at), at as i64))
    }
}
