//! The runtime: one tokio task owns a [`LedgerCore`] and a [`LedgerStore`], feeds
//! the core its events and executes its commands; one I/O thread runs the syncs,
//! hard-state writes and checkpoints, in submission order, holding no lock.
//!
//! The public API the broker uses is [`Ledger`] (start), [`LedgerHandle`]
//! (append, status, read, transfer, purge, shutdown) and [`LedgerStatus`].
//!
//! Layout: this file holds the public error type, the start-up path and the
//! runtime task's state; [`LedgerHandle`] is in `ledger_handle`, [`LedgerStatus`]
//! in `status`; `event_loop` is the task's loop and stepping, `command_exec`
//! executes the core's commands, `io_worker` runs the I/O thread, and
//! `checkpoints`, `shutdown` and `space` (full disks) do what they say.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use bytes::BytesMut;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::config::LedgerConfig;
use crate::core::{AppendReceipt, ClientId, CoreInit, HardState, LedgerCore, TransferError};
use crate::protocol::{Envelope, NodeId};
use crate::store::{LedgerReader, LedgerStore, LedgerStoreError, StoreOptions};
use crate::transport::Transport;
use crate::transport::tcp::{TcpListener, TcpTransport};

mod checkpoints;
mod command_exec;
mod event_loop;
mod io_worker;
mod ledger_handle;
mod shutdown;
mod space;
mod status;

use io_worker::{IoDone, IoJob, spawn_io_threads};
pub use ledger_handle::LedgerHandle;
pub use status::LedgerStatus;
use status::status_of;

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

/// One body of an append, as the stamp callback sees it: its final index and
/// entry position (the body itself starts at `pos + 48`).
pub struct StampSlot<'a> {
    pub index: i64,
    pub pos: i64,
    pub body: &'a mut [u8],
}

type Stamp = Box<dyn FnOnce(&mut [StampSlot<'_>]) + Send>;
type Reply<T> = oneshot::Sender<Result<T, LedgerError>>;

/// Starts ledger members.
pub struct Ledger;

impl Ledger {
    /// Opens the store, binds `peers[self_id]` and starts the member over TCP.
    pub async fn start(config: LedgerConfig) -> Result<LedgerHandle, LedgerError> {
        config.validate().map_err(LedgerError::Config)?;
        let addr = config.peers[&config.self_id].clone();
        let listener = TcpListener::bind_secure(&addr, config.server_security.clone()).await?;
        Ledger::start_with_listener(config, listener).await
    }

    /// Starts the member over TCP on an already bound listener (tests bind port 0
    /// first to learn the addresses that go into `config.peers`).
    pub async fn start_with_listener(
        config: LedgerConfig,
        listener: TcpListener,
    ) -> Result<LedgerHandle, LedgerError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let transport = TcpTransport::start_secure(
            listener,
            &config.group,
            &config.self_id,
            &config.peers,
            tx,
            config.binary_push,
            config.client_security.clone(),
        );
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
        let (io_tx, done_rx, prefault_tx) = spawn_io_threads(&config)?;
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

/// The runtime task's state: it alone owns the member's core and store, the
/// callers waiting for answers, and the bookkeeping of jobs on the I/O thread.
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
}
