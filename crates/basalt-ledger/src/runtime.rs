//! The runtime: one tokio task owns a [`LedgerCore`] and a [`LedgerStore`], feeds
//! the core its events and executes its commands; one I/O thread runs the syncs,
//! hard-state writes and checkpoints, in submission order, holding no lock.
//!
//! The public API the broker uses is [`Ledger`] (start), [`LedgerHandle`]
//! (append, status, read, transfer, purge, shutdown) and [`LedgerStatus`].

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::config::LedgerConfig;
use crate::core::{
    AppendReceipt, ClientId, CoreInit, Event, HardState, LedgerAppendError, LedgerCommand,
    LedgerCore, LogRead, Role, TransferError,
};
use crate::entry::{Entry, EntryKind};
use crate::protocol::{Envelope, NodeId};
use crate::store::{
    CheckpointJob, LedgerReader, LedgerStore, LedgerStoreError, StoreOptions, SyncJob, meta,
};
use crate::transport::Transport;
use crate::transport::tcp::{TcpListener, TcpTransport};

mod space;

/// Why a ledger call failed.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Not written: this member does not lead. Retry at the leader, if known.
    #[error("not leader (leader {leader_id:?} at {leader_addr:?})")]
    NotLeader {
        leader_id: Option<NodeId>,
        leader_addr: Option<String>,
    },
    /// Not written: a leadership transfer is in progress; retry shortly.
    #[error("leadership transfer in progress")]
    Transferring,
    /// Not written: too many appends wait for commit.
    #[error("too many pending appends")]
    Busy,
    #[error("entry of {body_len} bytes exceeds the maximum {max}")]
    TooLarge { body_len: u64, max: u64 },
    /// The store failed an I/O operation and refuses writes until restarted.
    #[error("ledger store poisoned")]
    Poisoned,
    /// Not written: the disk has no room for the entries' files. The store is
    /// not poisoned; appends succeed again once space is freed.
    #[error("no room on the disk for the entries: {0}")]
    NoSpace(String),
    /// Written but not committed in time: the outcome is unknown.
    #[error("append not committed in time (outcome unknown)")]
    Timeout,
    /// Written but leadership was lost first: the outcome is unknown.
    #[error("leadership lost before commit (outcome unknown)")]
    LeadershipLost,
    #[error("leadership transfer failed: {0}")]
    Transfer(#[from] TransferError),
    #[error("ledger stopped")]
    Shutdown,
    #[error(transparent)]
    Store(#[from] LedgerStoreError),
    #[error("invalid ledger config: {0}")]
    Config(String),
    #[error("ledger listener: {0}")]
    Io(#[from] std::io::Error),
}

/// What a member is and has, published after every step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerStatus {
    pub role: Role,
    pub term: i64,
    pub leader_id: Option<NodeId>,
    pub leader_addr: Option<String>,
    pub ledger_begin_index: i64,
    pub ledger_end_index: i64,
    pub committed_index: i64,
    /// Byte position just past the last committed entry.
    pub committed_pos: i64,
    /// A leader whose term has committed its first entry: everything in its log
    /// is committed, so it can serve as master (RocketMQ waits for this before
    /// switching a DLedger broker to master).
    pub leader_ready: bool,
    pub poisoned: bool,
}

/// One body of an append, as the stamp callback sees it: its final index and
/// entry position (the body itself starts at `pos + 48`).
pub struct StampSlot<'a> {
    pub index: i64,
    pub pos: i64,
    pub body: &'a mut [u8],
}

type Stamp = Box<dyn FnOnce(&mut [StampSlot<'_>]) + Send>;
type Reply<T> = oneshot::Sender<Result<T, LedgerError>>;

enum Control {
    Append {
        bodies: Vec<BytesMut>,
        stamp: Stamp,
        reply: Reply<AppendReceipt>,
    },
    Transfer {
        to: NodeId,
        reply: Reply<()>,
    },
    Purge {
        before_pos: i64,
        reply: Reply<i64>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
}

enum IoJob {
    Sync { through: i64, job: SyncJob },
    Persist { version: u64, state: HardState },
    Checkpoint { job: CheckpointJob },
}

enum IoDone {
    Synced {
        through: i64,
        result: Result<(), LedgerStoreError>,
    },
    Persisted {
        version: u64,
        /// The state written, to write again after a failure for lack of space.
        state: HardState,
        result: Result<(), LedgerStoreError>,
    },
    Checkpointed {
        result: Result<(), LedgerStoreError>,
    },
}

/// Starts ledger members.
pub struct Ledger;

impl Ledger {
    /// Opens the store, binds `peers[self_id]` and starts the member over TCP.
    pub async fn start(config: LedgerConfig) -> Result<LedgerHandle, LedgerError> {
        config.validate().map_err(LedgerError::Config)?;
        let addr = config.peers[&config.self_id].clone();
        let listener = TcpListener::bind(&addr).await?;
        Ledger::start_with_listener(config, listener).await
    }

    /// Starts the member over TCP on an already bound listener (tests bind port 0
    /// first to learn the addresses that go into `config.peers`).
    pub async fn start_with_listener(
        config: LedgerConfig,
        listener: TcpListener,
    ) -> Result<LedgerHandle, LedgerError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let transport =
            TcpTransport::start(listener, &config.group, &config.self_id, &config.peers, tx);
        Ledger::start_with_transport(config, transport, rx).await
    }

    /// Starts the member on any transport; `inbox` receives what the transport
    /// delivers.
    pub async fn start_with_transport(
        config: LedgerConfig,
        transport: Arc<dyn Transport>,
        inbox: mpsc::UnboundedReceiver<Envelope>,
    ) -> Result<LedgerHandle, LedgerError> {
        config.validate().map_err(LedgerError::Config)?;
        let opts = StoreOptions {
            dir: config.data_dir.clone(),
            data_file_size: config.data_file_size,
            index_file_size: config.index_file_size,
        };
        let (store, recovered) = tokio::task::spawn_blocking(move || LedgerStore::open(opts))
            .await
            .map_err(|e| LedgerError::Config(format!("store open task: {e}")))??;
        if let Some((pos, reason)) = &recovered.cut {
            tracing::warn!(member = %config.self_id, pos, reason = %reason, "cut the torn tail of the ledger");
        }
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let start = Instant::now();
        let core = LedgerCore::new(
            &config,
            CoreInit {
                hard_state: recovered.hard_state.clone(),
                committed_index: recovered.committed_index,
                seed,
            },
            &store,
            0,
        );
        let reader = store.reader();
        let (status_tx, status_rx) = watch::channel(status_of(&config, &core, &store, &reader));
        let (control_tx, control_rx) = mpsc::channel(64 * 1024);
        let (io_tx, io_rx) = std::sync::mpsc::channel::<IoJob>();
        let (done_tx, done_rx) = mpsc::unbounded_channel::<IoDone>();
        let (prefault_tx, prefault_rx) = std::sync::mpsc::channel::<crate::store::PrefaultJob>();
        std::thread::Builder::new()
            .name(format!("ledger-prefault-{}", config.self_id))
            .spawn(move || {
                for job in prefault_rx {
                    if !job.run() {
                        tracing::info!("page prefaulting unsupported by the kernel; disabled");
                        return;
                    }
                }
            })
            .map_err(LedgerError::Io)?;
        let dir = config.data_dir.clone();
        std::thread::Builder::new()
            .name(format!("ledger-io-{}", config.self_id))
            .spawn(move || io_thread(dir, io_rx, done_tx))
            .map_err(LedgerError::Io)?;
        let config = Arc::new(config);
        let rt = Runtime {
            config: config.clone(),
            core,
            store,
            reader: reader.clone(),
            transport,
            start,
            status_tx,
            next_client: 1,
            appends: HashMap::new(),
            written: HashMap::new(),
            transfers: HashMap::new(),
            replies: Vec::new(),
            wrote: false,
            failed: Vec::new(),
            io_tx,
            io_pending: 0,
            prefault_tx,
            checkpoint_in_flight: false,
            checkpointed: (
                recovered.checkpoint.map(|c| c.end_index).unwrap_or(-1),
                recovered.committed_index,
            ),
            next_checkpoint: start,
            persist_retry: None,
        };
        tokio::spawn(rt.run(inbox, control_rx, done_rx));
        Ok(LedgerHandle {
            control: control_tx,
            status: status_rx,
            reader,
            config,
        })
    }
}

/// A handle on a running member. Cheap to clone.
///
/// The broker's use: `append` CommitLog records as entry bodies (the stamp
/// rewrites each record's PHYSICALOFFSET to `slot.pos + 48` before it is written);
/// dispatch committed entries in order with [`LedgerHandle::wait_committed`] and
/// [`LedgerReader::entries`] (skipping [`EntryKind::Noop`] entries); serve pulls
/// with [`LedgerReader::read`]; register as master while [`LedgerStatus::role`] is
/// leader and `leader_ready`.
#[derive(Clone)]
pub struct LedgerHandle {
    control: mpsc::Sender<Control>,
    status: watch::Receiver<LedgerStatus>,
    reader: LedgerReader,
    config: Arc<LedgerConfig>,
}

impl LedgerHandle {
    /// Appends `bodies` as consecutive entries and resolves once they are
    /// committed (on a majority of durable logs, in durable ack mode). `stamp` runs
    /// on the leader's single append path, after the entries got their final index
    /// and position and before they are written; it may rewrite the bodies in place
    /// (their length is fixed).
    pub async fn append(
        &self,
        bodies: Vec<BytesMut>,
        stamp: impl FnOnce(&mut [StampSlot<'_>]) + Send + 'static,
    ) -> Result<AppendReceipt, LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.control
            .send(Control::Append {
                bodies,
                stamp: Box::new(stamp),
                reply,
            })
            .await
            .map_err(|_| LedgerError::Shutdown)?;
        rx.await.map_err(|_| LedgerError::Shutdown)?
    }

    /// The current status.
    pub fn status(&self) -> LedgerStatus {
        self.status.borrow().clone()
    }

    /// A watch of the status (changes after every step that changes it).
    pub fn watch(&self) -> watch::Receiver<LedgerStatus> {
        self.status.clone()
    }

    /// Zero-copy reads of committed entries and bytes.
    pub fn reader(&self) -> &LedgerReader {
        &self.reader
    }

    pub fn config(&self) -> &LedgerConfig {
        &self.config
    }

    /// Waits until the committed index reaches `index`; returns it.
    pub async fn wait_committed(&self, index: i64) -> Result<i64, LedgerError> {
        let mut w = self.status.clone();
        let s = w
            .wait_for(|s| s.committed_index >= index)
            .await
            .map_err(|_| LedgerError::Shutdown)?;
        Ok(s.committed_index)
    }

    /// Asks this member, the leader, to hand leadership to `to` (it stops
    /// accepting appends, brings `to` up to date and tells it to elect itself).
    /// Resolves when this member has stepped down.
    pub async fn transfer_leadership(&self, to: NodeId) -> Result<(), LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.control
            .send(Control::Transfer { to, reply })
            .await
            .map_err(|_| LedgerError::Shutdown)?;
        rx.await.map_err(|_| LedgerError::Shutdown)?
    }

    /// Deletes the data files entirely before `pos` (and before the committed
    /// position); returns the new first index.
    pub async fn purge_before(&self, pos: i64) -> Result<i64, LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.control
            .send(Control::Purge {
                before_pos: pos,
                reply,
            })
            .await
            .map_err(|_| LedgerError::Shutdown)?;
        rx.await.map_err(|_| LedgerError::Shutdown)?
    }

    /// Stops the member: pending appends fail with `Shutdown`, everything written
    /// is synced and a checkpoint written.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self.control.send(Control::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

fn status_of(
    config: &LedgerConfig,
    core: &LedgerCore,
    store: &LedgerStore,
    reader: &LedgerReader,
) -> LedgerStatus {
    let leader_id = core.leader_id().cloned();
    LedgerStatus {
        role: core.role(),
        term: core.term(),
        leader_addr: leader_id
            .as_ref()
            .and_then(|l| config.peers.get(l).cloned()),
        leader_id,
        ledger_begin_index: store.begin_index(),
        ledger_end_index: store.end_index(),
        committed_index: core.committed_index(),
        committed_pos: reader.committed_pos(),
        leader_ready: core.leader_ready(),
        poisoned: core.is_poisoned() || store.is_poisoned(),
    }
}

fn io_thread(
    dir: std::path::PathBuf,
    jobs: std::sync::mpsc::Receiver<IoJob>,
    done: mpsc::UnboundedSender<IoDone>,
) {
    for job in jobs {
        let d = match job {
            IoJob::Sync { through, job } => IoDone::Synced {
                through,
                result: job.run(),
            },
            IoJob::Persist { version, state } => IoDone::Persisted {
                version,
                result: meta::store_hard_state(&dir, &state),
                state,
            },
            IoJob::Checkpoint { job } => IoDone::Checkpointed { result: job.run() },
        };
        if done.send(d).is_err() {
            return;
        }
    }
}

struct Runtime {
    config: Arc<LedgerConfig>,
    core: LedgerCore,
    store: LedgerStore,
    reader: LedgerReader,
    transport: Arc<dyn Transport>,
    start: Instant,
    status_tx: watch::Sender<LedgerStatus>,
    next_client: ClientId,
    /// Appends handed to the core, not yet written.
    appends: HashMap<ClientId, (Vec<BytesMut>, Stamp, Reply<AppendReceipt>)>,
    /// Appends written, waiting for their result.
    written: HashMap<ClientId, Reply<AppendReceipt>>,
    transfers: HashMap<ClientId, Reply<()>>,
    /// Answers to send once the status of the step is published.
    replies: Vec<Box<dyn FnOnce() + Send>>,
    /// Steps since the last `flush_steps` wrote to the store.
    wrote: bool,
    /// Write failures since the last `flush_steps`.
    failed: Vec<String>,
    io_tx: std::sync::mpsc::Sender<IoJob>,
    /// I/O jobs submitted and not completed.
    io_pending: usize,
    /// Page prefaulting, on its own thread (never in the way of an fsync).
    prefault_tx: std::sync::mpsc::Sender<crate::store::PrefaultJob>,
    checkpoint_in_flight: bool,
    /// (durable end, committed index) of the last checkpoint.
    checkpointed: (i64, i64),
    next_checkpoint: Instant,
    /// A hard-state write that failed for lack of space, to retry at this time.
    persist_retry: Option<(Instant, u64, HardState)>,
}

impl Runtime {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<Envelope>,
        mut control: mpsc::Receiver<Control>,
        mut done: mpsc::UnboundedReceiver<IoDone>,
    ) {
        loop {
            let deadline = self.core.next_deadline();
            let wake = if deadline == u64::MAX {
                self.start + Duration::from_secs(3600 * 24)
            } else {
                self.start + Duration::from_millis(deadline)
            };
            let checkpoint_due = self.checkpoint_wanted();
            let wake = if checkpoint_due {
                wake.min(self.next_checkpoint)
            } else {
                wake
            };
            let wake = match &self.persist_retry {
                Some((at, _, _)) => wake.min(*at),
                None => wake,
            };
            tokio::select! {
                biased;
                Some(d) = done.recv() => {
                    self.io_pending -= 1;
                    self.on_io_done(d);
                }
                Some(env) = inbox.recv() => {
                    // Take what else is queued as well: one push round for the burst.
                    self.on_message(env);
                    for _ in 0..256 {
                        match inbox.try_recv() {
                            Ok(env) => self.on_message(env),
                            Err(_) => break,
                        }
                    }
                    self.flush_steps();
                }
                c = control.recv() => match c {
                    Some(Control::Shutdown { reply }) => {
                        self.shutdown(&mut done).await;
                        let _ = reply.send(());
                        return;
                    }
                    Some(c) => {
                        self.on_control(c);
                        for _ in 0..256 {
                            match control.try_recv() {
                                Ok(Control::Shutdown { reply }) => {
                                    self.flush_steps();
                                    self.shutdown(&mut done).await;
                                    let _ = reply.send(());
                                    return;
                                }
                                Ok(c) => self.on_control(c),
                                Err(_) => break,
                            }
                        }
                        self.flush_steps();
                    }
                    None => {
                        self.shutdown(&mut done).await;
                        return;
                    }
                },
                _ = tokio::time::sleep_until(wake) => {
                    if deadline != u64::MAX && Instant::now() >= self.start + Duration::from_millis(deadline) {
                        self.step(Event::Tick);
                    }
                    if self.checkpoint_wanted() && Instant::now() >= self.next_checkpoint {
                        self.checkpoint();
                    }
                    self.retry_persist();
                }
            }
        }
    }

    fn on_control(&mut self, c: Control) {
        match c {
            Control::Append {
                bodies,
                stamp,
                reply,
            } => {
                let lens: Vec<u32> = bodies.iter().map(|b| b.len() as u32).collect();
                if let Err(why) = self.room_for_append(&lens) {
                    let _ = reply.send(Err(LedgerError::NoSpace(why)));
                    return;
                }
                let client = self.next_client;
                self.next_client += 1;
                self.appends.insert(client, (bodies, stamp, reply));
                self.step_deferred(Event::ClientAppend {
                    client,
                    body_lens: lens,
                });
            }
            Control::Transfer { to, reply } => {
                let client = self.next_client;
                self.next_client += 1;
                self.transfers.insert(client, reply);
                self.step_deferred(Event::TransferLeadership { client, to });
            }
            Control::Purge { before_pos, reply } => {
                let _ = reply.send(
                    self.store
                        .purge_before(before_pos)
                        .map_err(LedgerError::from),
                );
                self.publish();
            }
            Control::Shutdown { .. } => {}
        }
    }

    fn on_io_done(&mut self, d: IoDone) {
        match d {
            IoDone::Synced { through, result } => match result {
                Ok(()) => self.step(Event::Synced { through }),
                Err(e) => self.storage_failed(e),
            },
            IoDone::Persisted {
                version,
                state,
                result,
            } => match result {
                Ok(()) => self.step(Event::Persisted { version }),
                Err(e) if e.is_no_space() => self.persist_later(e, version, state),
                Err(e) => self.storage_failed(e),
            },
            IoDone::Checkpointed { result } => {
                self.checkpoint_in_flight = false;
                match result {
                    Ok(()) => {}
                    Err(e) if e.is_no_space() => self.checkpoint_later(e),
                    Err(e) => self.storage_failed(e),
                }
            }
        }
    }

    fn storage_failed(&mut self, e: LedgerStoreError) {
        tracing::error!(member = %self.config.self_id, error = %e, "ledger I/O failed; poisoning the store");
        self.store.poison();
        self.step(Event::StorageFailed {
            reason: e.to_string(),
        });
    }

    /// Steps the core with `ev` and executes the commands, including the follow-up
    /// `Written` / `StorageFailed` events.
    fn step(&mut self, ev: Event) {
        self.step_deferred(ev);
        self.flush_steps();
    }

    /// Steps the core with `ev` and executes its commands, but leaves the
    /// follow-up events to [`Runtime::flush_steps`]: one `Written` (one push round)
    /// covers a burst of appends.
    fn step_deferred(&mut self, ev: Event) {
        let now = self.now_ms();
        let cmds = self.core.step(now, ev, &self.store);
        for cmd in cmds {
            match self.execute(cmd) {
                Ok(w) => self.wrote |= w,
                Err(e) => {
                    tracing::error!(member = %self.config.self_id, error = %e, "ledger write failed; poisoning the store");
                    self.store.poison();
                    self.failed.push(e.to_string());
                }
            }
        }
    }

    /// Feeds the pending `StorageFailed`/`Written` events, then publishes the
    /// status and sends the answers (status first: a caller whose append resolved
    /// sees a status that includes it).
    fn flush_steps(&mut self) {
        loop {
            let ev = if let Some(reason) = self.failed.pop() {
                Event::StorageFailed { reason }
            } else if std::mem::take(&mut self.wrote) {
                Event::Written
            } else {
                break;
            };
            self.step_deferred(ev);
        }
        self.publish();
        for r in self.replies.drain(..) {
            r();
        }
    }

    fn execute(&mut self, cmd: LedgerCommand) -> Result<bool, LedgerStoreError> {
        match cmd {
            LedgerCommand::Send(env) => self.transport.send(env),
            LedgerCommand::AppendAsLeader {
                client,
                term,
                entries,
            } => {
                let mut bodies: Vec<BytesMut> = match client {
                    Some(c) => match self.appends.remove(&c) {
                        Some((mut bodies, stamp, reply)) => {
                            let mut slots: Vec<StampSlot<'_>> = entries
                                .iter()
                                .zip(bodies.iter_mut())
                                .map(|(p, b)| StampSlot {
                                    index: p.index,
                                    pos: p.pos,
                                    body: &mut b[..],
                                })
                                .collect();
                            stamp(&mut slots);
                            self.written.insert(c, reply);
                            bodies
                        }
                        None => {
                            return Err(LedgerStoreError::Invalid(format!(
                                "append for unknown client {c}"
                            )));
                        }
                    },
                    None => entries.iter().map(|_| BytesMut::new()).collect(),
                };
                if bodies.len() != entries.len() {
                    return Err(LedgerStoreError::Invalid(
                        "append body count changed".into(),
                    ));
                }
                let batch: Vec<Entry> = entries
                    .iter()
                    .zip(bodies.drain(..))
                    .map(|(p, b)| Entry::new(p.kind, p.index, term, p.pos, b.freeze()))
                    .collect();
                self.store.append_entries(&batch)?;
                self.prefault();
                debug_assert!(
                    entries
                        .iter()
                        .all(|p| p.kind == EntryKind::Noop || client.is_some())
                );
                return Ok(true);
            }
            LedgerCommand::AppendAsFollower { entries } => {
                self.store.append_entries(&entries)?;
                self.prefault();
                return Ok(true);
            }
            LedgerCommand::Truncate {
                next_index,
                next_pos,
            } => {
                self.store.truncate(next_index, next_pos)?;
                return Ok(true);
            }
            LedgerCommand::Sync { through } => {
                let job = self.store.prepare_sync();
                if !self.submit(IoJob::Sync { through, job }) {
                    return Err(LedgerStoreError::Invalid(
                        "ledger I/O thread is gone".into(),
                    ));
                }
            }
            LedgerCommand::PersistHardState { version, state } => {
                if !self.submit(IoJob::Persist { version, state }) {
                    return Err(LedgerStoreError::Invalid(
                        "ledger I/O thread is gone".into(),
                    ));
                }
            }
            LedgerCommand::CommitAdvanced { committed_index } => {
                self.store.set_committed(committed_index)
            }
            LedgerCommand::AppendResult { client, result } => {
                let reply = self
                    .written
                    .remove(&client)
                    .or_else(|| self.appends.remove(&client).map(|a| a.2));
                if let Some(reply) = reply {
                    let result = result.map_err(|e| self.map_append_error(e));
                    self.replies.push(Box::new(move || {
                        let _ = reply.send(result);
                    }));
                }
            }
            LedgerCommand::TransferResult { client, result } => {
                if let Some(reply) = self.transfers.remove(&client) {
                    let result = result.map_err(LedgerError::from);
                    self.replies.push(Box::new(move || {
                        let _ = reply.send(result);
                    }));
                }
            }
        }
        Ok(false)
    }

    fn prefault(&mut self) {
        if let Some(job) = self.store.prefault_job()
            && self.prefault_tx.send(job).is_err()
        {
            self.store.disable_prefault();
        }
    }

    fn map_append_error(&self, e: LedgerAppendError) -> LedgerError {
        match e {
            LedgerAppendError::NotLeader { leader_id } => LedgerError::NotLeader {
                leader_addr: leader_id
                    .as_ref()
                    .and_then(|l| self.config.peers.get(l).cloned()),
                leader_id,
            },
            LedgerAppendError::Transferring => LedgerError::Transferring,
            LedgerAppendError::Busy => LedgerError::Busy,
            LedgerAppendError::TooLarge { body_len, max } => {
                LedgerError::TooLarge { body_len, max }
            }
            LedgerAppendError::Poisoned => LedgerError::Poisoned,
            LedgerAppendError::LeadershipLost => LedgerError::LeadershipLost,
            LedgerAppendError::Timeout => LedgerError::Timeout,
        }
    }

    fn publish(&mut self) {
        let s = status_of(&self.config, &self.core, &self.store, &self.reader);
        self.status_tx.send_if_modified(|old| {
            if *old != s {
                *old = s;
                true
            } else {
                false
            }
        });
    }

    fn checkpoint_wanted(&self) -> bool {
        !self.checkpoint_in_flight
            && !self.store.is_poisoned()
            && (self.core.durable_index(), self.core.committed_index()) != self.checkpointed
    }

    fn checkpoint(&mut self) {
        let (durable, committed) = (self.core.durable_index(), self.core.committed_index());
        let job = self.store.prepare_checkpoint(durable, committed);
        self.checkpointed = (durable, committed);
        self.next_checkpoint =
            Instant::now() + Duration::from_millis(self.config.checkpoint_interval_ms);
        self.checkpoint_in_flight = self.submit(IoJob::Checkpoint { job });
    }

    async fn shutdown(&mut self, done: &mut mpsc::UnboundedReceiver<IoDone>) {
        self.transport.shutdown();
        for (_, (_, _, reply)) in self.appends.drain() {
            let _ = reply.send(Err(LedgerError::Shutdown));
        }
        for (_, reply) in self.written.drain() {
            let _ = reply.send(Err(LedgerError::Shutdown));
        }
        for (_, reply) in self.transfers.drain() {
            let _ = reply.send(Err(LedgerError::Shutdown));
        }
        if self.store.is_poisoned() {
            return;
        }
        // Everything written becomes durable, then the checkpoint says so.
        let end = self.store.end_index();
        let sync = self.store.prepare_sync();
        if !self.submit(IoJob::Sync {
            through: end,
            job: sync,
        }) || !self.drain_io(done).await
        {
            return;
        }
        let checkpoint = self
            .store
            .prepare_checkpoint(end, self.core.committed_index());
        if self.submit(IoJob::Checkpoint { job: checkpoint }) {
            self.drain_io(done).await;
        }
    }

    fn submit(&mut self, job: IoJob) -> bool {
        if self.io_tx.send(job).is_ok() {
            self.io_pending += 1;
            true
        } else {
            false
        }
    }

    /// Waits for every submitted I/O job; false if one failed.
    async fn drain_io(&mut self, done: &mut mpsc::UnboundedReceiver<IoDone>) -> bool {
        let mut ok = true;
        while self.io_pending > 0 {
            let Some(d) = done.recv().await else {
                return false;
            };
            self.io_pending -= 1;
            let failed = match d {
                IoDone::Synced { result, .. }
                | IoDone::Persisted { result, .. }
                | IoDone::Checkpointed { result } => result.err(),
            };
            if let Some(e) = failed {
                tracing::error!(member = %self.config.self_id, error = %e, "ledger I/O failed during shutdown");
                self.store.poison();
                ok = false;
            }
        }
        ok
    }
}
