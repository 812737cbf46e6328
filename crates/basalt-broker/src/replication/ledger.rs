//! Ledger mode (RocketMQ's `enableDLegerCommitLog`): the broker's records are
//! the bodies of a replicated ledger's entries, so a message is acknowledged
//! only once a majority has it on disk, and the group elects a new master by
//! itself when the leader dies.
//!
//! * A send on the leader becomes one ledger entry per message; the append
//!   path stamps each record with its queue offset, its physical offset (the
//!   entry position + 48, as RocketMQ does) and its store time.
//! * Every member dispatches only *committed* entries into its own
//!   ConsumeQueues and index, so all members serve identical queues.
//! * The leader is the master (brokerId 0) once its term has committed its
//!   first entry and its queues have caught up; the others are slaves.

mod ack_log;
mod dispatch;
mod ops;
mod retention;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use basalt_common::record::{self, RecordDraft};
use basalt_common::sysflag;
use basalt_ledger::{
    AckMode, Ledger, LedgerConfig, LedgerError, LedgerHandle, LedgerStatus, NodeId, Role, StampSlot,
};
use basalt_store::commit_log::TopicQueueTable;
use basalt_store::fs_util::LockFile;
use basalt_store::{
    AppendResult, MessageLog, MessageSource, MessageStore, PutMessageResult, PutMessageStatus,
};
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::broker::BrokerError;
use crate::config::BrokerConfig;
pub use ack_log::{LEDGER_ACK_LOG_FILE, LedgerAckLog};

/// Reads records from the ledger's committed data (the store's [`MessageLog`]
/// in ledger mode).
pub struct LedgerLog {
    reader: basalt_ledger::LedgerReader,
    file_size: i64,
}

impl MessageLog for LedgerLog {
    fn min_offset(&self) -> i64 {
        // Entry positions start at the first retained file.
        self.reader
            .entry(self.reader.begin_index())
            .map(|e| e.body_pos())
            .unwrap_or(0)
    }
    fn max_offset(&self) -> i64 {
        self.reader.committed_pos()
    }
    fn read_bytes(&self, offset: i64, size: usize) -> Option<Bytes> {
        self.reader.read(offset, size).ok()
    }
    fn roll_next_file(&self, offset: i64) -> i64 {
        offset + self.file_size - offset % self.file_size
    }
}

/// Where the stamp callback put a send, read back once the append commits.
struct StampedSend {
    /// Physical offset of each record's body in the ledger.
    phys_offsets: Vec<i64>,
    /// Queue offset of the first record (0 for unconsumable records).
    first_queue_offset: i64,
    store_timestamp: i64,
    bytes: usize,
}

/// The ledger of a ledger-mode broker and what the broker keeps beside it.
pub struct LedgerMode {
    pub handle: LedgerHandle,
    /// Next queue offset of every topic queue; only the leader's append path
    /// (the stamp callback) uses it, after it was rebuilt for the term.
    table: Arc<Mutex<TopicQueueTable>>,
    /// The leader may take sends: its term committed, queues caught up, table rebuilt.
    writable: AtomicBool,
    /// Next ledger index to dispatch (everything below is in the ConsumeQueues).
    dispatched: watch::Sender<i64>,
    /// Next ledger index to dispatch as last recorded in `ledgerDispatched`,
    /// after the queues were fsynced: retention never purges past it.
    dispatched_durable: AtomicI64,
    /// Broker id this member registers with while it is not the leader.
    pub follower_id: i64,
    self_id: NodeId,
    progress_file: PathBuf,
    stopped: AtomicBool,
    /// The term whose queue offset table is built (-1: none).
    term_ready: AtomicI64,
    /// Follows `writable`, for services that start and stop with it.
    writable_tx: watch::Sender<bool>,
    /// The ledger directory's lock, released once the ledger has stopped.
    lock: Mutex<Option<LockFile>>,
    /// Where acknowledged sends are noted (`ledgerAckLogEnable`).
    ack_log: Option<LedgerAckLog>,
}

/// A running ledger whose store is not open yet. Holds the lock on the
/// ledger's directory.
pub struct StartedLedger {
    handle: LedgerHandle,
    file_size: i64,
    follower_id: i64,
    self_id: NodeId,
    lock: LockFile,
    ack_log: Option<LedgerAckLog>,
}

impl StartedLedger {
    /// What the broker's store reads records from: the ledger's committed data.
    pub fn message_source(&self) -> MessageSource {
        MessageSource::External(Arc::new(LedgerLog {
            reader: self.handle.reader().clone(),
            file_size: self.file_size,
        }))
    }

    /// Stops the ledger (the store could not be opened).
    pub async fn abandon(self) {
        self.handle.shutdown().await;
    }
}

impl std::fmt::Debug for LedgerMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerMode")
            .field("self", &self.self_id)
            .finish()
    }
}

/// `n0-127.0.0.1:40911;n1-…` → id → address.
fn peers(cfg: &BrokerConfig) -> Result<BTreeMap<NodeId, String>, BrokerError> {
    LedgerConfig::parse_peers(&cfg.dleger_peers)
        .map_err(|e| BrokerError::Other(format!("dLegerPeers: {e}")))
}

impl LedgerMode {
    /// The ledger's settings for this broker: RocketMQ's layout
    /// (`{root}/dledger-{selfId}`) and timings short enough to fail over in
    /// about a second.
    pub fn ledger_config(cfg: &BrokerConfig) -> Result<LedgerConfig, BrokerError> {
        let peers = peers(cfg)?;
        let dir = cfg
            .store_path_root_dir
            .join(format!("dledger-{}", cfg.dleger_self_id));
        let group = if cfg.dleger_group.is_empty() {
            cfg.broker_name.clone()
        } else {
            cfg.dleger_group.clone()
        };
        let mut lc = LedgerConfig::new(group, cfg.dleger_self_id.as_str(), peers, dir);
        lc.heartbeat_interval_ms = cfg.dleger_heartbeat_interval.as_millis() as u64;
        lc.min_vote_interval_ms = (lc.heartbeat_interval_ms / 2).max(50);
        lc.max_vote_interval_ms = (lc.heartbeat_interval_ms * 2).max(lc.min_vote_interval_ms + 50);
        lc.data_file_size = cfg.mapped_file_size_commit_log as i64;
        if cfg.mapped_file_size_commit_log < 16 * 1024 * 1024 {
            // Small test stores: small index files too (the default is 160 MiB,
            // and every file's blocks are allocated when it is created).
            lc.index_file_size = basalt_ledger::entry::INDEX_UNIT_SIZE as i64 * 64 * 1024;
        }
        lc.max_wait_ack_ms = cfg.sync_flush_timeout.as_millis() as u64;
        lc.ack_mode = if cfg.dleger_ack_in_memory {
            AckMode::Memory
        } else {
            AckMode::Durable
        };
        lc.binary_push = cfg.dleger_binary_push;
        if !cfg.dleger_preferred_leader.is_empty() {
            lc.preferred_leader = Some(NodeId::new(&cfg.dleger_preferred_leader));
        }
        lc.validate()
            .map_err(|e| BrokerError::Other(format!("ledger: {e}")))?;
        Ok(lc)
    }

    /// Locks the ledger's directory and starts the ledger. The store is
    /// opened next, over [`StartedLedger::message_source`], and then
    /// [`LedgerMode::attach`]ed.
    pub async fn start(
        cfg: &BrokerConfig,
        transport: &crate::transport_security::TransportSecurity,
    ) -> Result<StartedLedger, BrokerError> {
        let mut lc = Self::ledger_config(cfg)?;
        lc.server_security = transport.replication_listener("ledger");
        lc.client_security = transport.replication_client("ledger");
        let file_size = lc.data_file_size;
        let ids: Vec<NodeId> = lc.peers.keys().cloned().collect();
        let self_id = lc.self_id.clone();
        let follower_id = ids
            .iter()
            .position(|i| *i == self_id)
            .map(|p| p as i64 + 1)
            .unwrap_or(1);
        // The store's lock covers only its own files: a second process on
        // the same root must not reach the ledger before it finds out.
        basalt_store::fs_util::create_dir_all_durable(&lc.data_dir)?;
        let lock = LockFile::acquire(&lc.data_dir.join("lock"))?;
        let ack_log = if cfg.ledger_ack_log {
            Some(LedgerAckLog::open(&cfg.store_path_root_dir)?)
        } else {
            None
        };
        let handle = Ledger::start(lc)
            .await
            .map_err(|e| BrokerError::Other(format!("ledger: {e}")))?;
        Ok(StartedLedger {
            handle,
            file_size,
            follower_id,
            self_id,
            lock,
            ack_log,
        })
    }

    /// Puts the store opened over `started` to work: dispatches the ledger's
    /// committed entries into its queues, from where the last run stopped.
    pub fn attach(
        started: StartedLedger,
        cfg: &BrokerConfig,
        store: &Arc<MessageStore>,
    ) -> Arc<LedgerMode> {
        debug_assert!(store.has_external_log());
        let StartedLedger {
            handle,
            follower_id,
            self_id,
            lock,
            ack_log,
            ..
        } = started;
        let progress_file = cfg
            .store_path_root_dir
            .join("config")
            .join("ledgerDispatched");
        // A ledger that begins past this is one that started over at the
        // leader's first kept entry: the dispatch loop rebuilds the queues.
        // (Retention never purges past the recorded progress.)
        let resume = dispatch::read_progress(&progress_file).max(0);
        let (dispatched, _) = watch::channel(resume);
        let lm = Arc::new(LedgerMode {
            handle,
            table: Arc::new(Mutex::new(TopicQueueTable::default())),
            writable: AtomicBool::new(false),
            dispatched,
            dispatched_durable: AtomicI64::new(resume),
            follower_id,
            self_id,
            progress_file,
            stopped: AtomicBool::new(false),
            term_ready: AtomicI64::new(-1),
            writable_tx: watch::channel(false).0,
            lock: Mutex::new(Some(lock)),
            ack_log,
        });
        tracing::info!(member = %lm.self_id, resume, "ledger mode: dispatching committed entries");
        let me = Arc::clone(&lm);
        let st = Arc::clone(store);
        tokio::spawn(async move { me.dispatch_loop(st).await });
        let me = Arc::clone(&lm);
        let st = Arc::clone(store);
        tokio::spawn(async move { me.retention_loop(st).await });
        lm
    }

    pub fn status(&self) -> LedgerStatus {
        self.handle.status()
    }

    /// Whether this member takes sends now.
    pub fn is_writable(&self) -> bool {
        self.writable.load(Ordering::Acquire)
    }

    /// Tells whenever this member starts or stops taking sends.
    pub fn writable_changes(&self) -> watch::Receiver<bool> {
        self.writable_tx.subscribe()
    }

    fn set_writable(&self, w: bool) {
        self.writable.store(w, Ordering::Release);
        self.writable_tx.send_replace(w);
    }

    /// The physical offset every committed record is below.
    pub fn committed_end(&self) -> i64 {
        self.handle.reader().committed_pos()
    }

    /// Waits until every entry appended so far is committed (or leadership
    /// is lost) and dispatched, then returns the committed end: no record
    /// below it is still in flight, and the queues and the index hold all
    /// of them. None when that does not happen within `timeout`.
    pub async fn settled_end(&self, timeout: Duration) -> Option<i64> {
        let end = self.handle.status().ledger_end_index;
        let settle = async {
            if end >= 0 {
                self.handle.wait_committed(end).await.ok()?;
                let mut d = self.dispatched.subscribe();
                d.wait_for(|i| *i > end).await.ok()?;
            }
            Some(self.committed_end())
        };
        tokio::time::timeout(timeout, settle).await.ok().flatten()
    }

    /// The ledger index below which everything is dispatched.
    pub fn dispatched_index(&self) -> i64 {
        *self.dispatched.borrow()
    }

    /// Runtime-info entries for operators.
    pub fn runtime_info(&self) -> Vec<(String, String)> {
        let s = self.status();
        let lag = (s.ledger_end_index - s.committed_index).max(0);
        vec![
            ("ledgerSelfId".into(), self.self_id.to_string()),
            ("ledgerRole".into(), ops::role_name(s.role).into()),
            ("ledgerTerm".into(), s.term.to_string()),
            (
                "ledgerLeaderId".into(),
                s.leader_id.map(|l| l.to_string()).unwrap_or_default(),
            ),
            ("ledgerBeginIndex".into(), s.ledger_begin_index.to_string()),
            ("ledgerEndIndex".into(), s.ledger_end_index.to_string()),
            ("ledgerCommittedIndex".into(), s.committed_index.to_string()),
            ("ledgerCommittedPos".into(), s.committed_pos.to_string()),
            (
                "ledgerDispatchedIndex".into(),
                self.dispatched_index().to_string(),
            ),
            ("ledgerLag".into(), lag.to_string()),
            ("ledgerFollowerLag".into(), self.follower_lags()),
            ("ledgerWritable".into(), self.is_writable().to_string()),
        ]
    }

    /// Follows role changes: a leader whose term is ready waits for its
    /// queues to catch up, rebuilds the queue offset table and starts taking
    /// sends; any other role stops taking them. `on_change` runs after every
    /// switch (to re-register with the NameServers). Returns on shutdown.
    ///
    /// Why the table stays right during a term: it is rebuilt only after the
    /// term's first entry committed (so every entry of earlier terms is
    /// committed and dispatched), and from then on every entry of the log is
    /// stamped by this leader's append path, which advances the table; a
    /// leader never truncates its own log, so no stamped offset is reused.
    pub async fn follow_roles(
        self: Arc<Self>,
        store: Arc<MessageStore>,
        on_change: impl Fn(bool) + Send + Sync,
    ) {
        let mut w = self.handle.watch();
        loop {
            let s = w.borrow_and_update().clone();
            let should_lead = s.role == Role::Leader && s.leader_ready && !s.poisoned;
            if should_lead && !self.is_writable() {
                if self.term_ready.load(Ordering::Acquire) != s.term {
                    // Everything committed must be in the queues before offsets are read.
                    let target = s.committed_index + 1;
                    let mut d = self.dispatched.subscribe();
                    let caught_up =
                        tokio::time::timeout(Duration::from_secs(30), d.wait_for(|i| *i >= target))
                            .await;
                    if caught_up.is_err() {
                        tracing::warn!(target, "queues did not catch up with the ledger; retrying");
                        continue;
                    }
                    let mut t = TopicQueueTable::default();
                    for cq in store.consume_queues().all() {
                        t.set(cq.topic(), cq.queue_id(), cq.max_offset());
                    }
                    *self.table.lock() = t;
                    self.term_ready.store(s.term, Ordering::Release);
                }
                let now = self.handle.status();
                if now.role == Role::Leader && now.term == s.term {
                    self.set_writable(true);
                    tracing::info!(member = %self.self_id, term = s.term, "ledger leader takes sends as master");
                    on_change(true);
                }
            } else if !should_lead && self.is_writable() {
                self.set_writable(false);
                tracing::info!(member = %self.self_id, role = ?s.role, term = s.term, "no longer the ledger leader");
                on_change(false);
            }
            if self.stopped.load(Ordering::Acquire) || w.changed().await.is_err() {
                return;
            }
        }
    }

    /// Appends records as ledger entries and waits for their commit.
    pub async fn put(&self, drafts: &[RecordDraft<'_>], append_crc: bool) -> PutMessageResult {
        if !self.is_writable() {
            return PutMessageResult::failed(
                PutMessageStatus::ServiceNotAvailable,
                "this broker is not the ledger leader (or its term is not ready yet)",
            );
        }
        let Some(first) = drafts.first() else {
            return PutMessageResult::failed(PutMessageStatus::MessageIllegal, "empty batch");
        };
        let bodies = match encode_bodies(drafts, append_crc) {
            Ok(b) => b,
            Err(failed) => return failed,
        };
        let topic = first.topic.to_string();
        let queue_id = first.queue_id;
        let consumable = sysflag::is_consumable(first.sys_flag);
        let table = Arc::clone(&self.table);
        let placed: Arc<Mutex<Option<StampedSend>>> = Arc::new(Mutex::new(None));
        let out = Arc::clone(&placed);
        let stamp = move |slots: &mut [StampSlot<'_>]| {
            let ts = basalt_common::time::now_millis();
            let mut t = table.lock();
            let first_q = if consumable {
                t.get(&topic, queue_id)
            } else {
                0
            };
            let mut offsets = Vec::with_capacity(slots.len());
            let mut bytes = 0;
            for (i, s) in slots.iter_mut().enumerate() {
                let phys = s.pos + basalt_ledger::entry::HEADER_SIZE as i64;
                let qoff = if consumable { first_q + i as i64 } else { 0 };
                record::stamp(s.body, qoff, phys, ts);
                if append_crc {
                    record::seal_crc(s.body);
                }
                offsets.push(phys);
                bytes += s.body.len();
            }
            if consumable {
                t.set(&topic, queue_id, first_q + slots.len() as i64);
            }
            *out.lock() = Some(StampedSend {
                phys_offsets: offsets,
                first_queue_offset: first_q,
                store_timestamp: ts,
                bytes,
            });
        };
        let appended = self
            .handle
            .append(bodies, stamp)
            .await
            .map(|receipt| (receipt, placed.lock().take()));
        // Only a send that will be answered as stored is an acknowledgement.
        if let (Ok((receipt, Some(_))), Some(log)) = (&appended, &self.ack_log) {
            log.record(receipt);
        }
        put_result(appended.map(|(_, placement)| placement))
    }

    /// Stops dispatching and the ledger. The last dispatch progress is
    /// recorded on a blocking thread (its fsyncs would stall a runtime worker).
    pub async fn shutdown(self: &Arc<Self>, store: &Arc<MessageStore>) {
        self.stopped.store(true, Ordering::Release);
        self.set_writable(false);
        let next = self.dispatched_index();
        let (me, st) = (Arc::clone(self), Arc::clone(store));
        if let Err(e) = tokio::task::spawn_blocking(move || me.record_progress(&st, next)).await {
            tracing::warn!(member = %self.self_id, error = %e, "recording the dispatch progress at shutdown failed; a restart re-dispatches from the last record");
        }
        self.handle.shutdown().await;
        // Another process may start this member now.
        self.lock.lock().take();
    }
}

/// Each draft encoded as a ledger entry body, with the CRC trailer when
/// asked; a draft that cannot be encoded fails the whole send.
fn encode_bodies(
    drafts: &[RecordDraft<'_>],
    append_crc: bool,
) -> Result<Vec<BytesMut>, PutMessageResult> {
    let mut bodies = Vec::with_capacity(drafts.len());
    for d in drafts {
        let mut v = Vec::with_capacity(d.encoded_len() + 32);
        let r = if append_crc {
            d.encode_with_crc_trailer(&mut v)
        } else {
            d.encode_into(&mut v)
        };
        if let Err(e) = r {
            return Err(PutMessageResult::failed(
                PutMessageStatus::MessageIllegal,
                e.to_string(),
            ));
        }
        bodies.push(BytesMut::from(&v[..]));
    }
    Ok(bodies)
}

/// The send's result from the ledger append's: where the stamp callback put
/// the records once they committed, or the status a failure maps to.
fn put_result(appended: Result<Option<StampedSend>, LedgerError>) -> PutMessageResult {
    match appended {
        Ok(None) => PutMessageResult::failed(
            PutMessageStatus::UnknownError,
            "append committed without a placement",
        ),
        Ok(Some(placed)) => {
            let offsets = placed.phys_offsets;
            PutMessageResult::ok(AppendResult {
                wrote_offset: offsets[0],
                wrote_bytes: placed.bytes,
                queue_offset: placed.first_queue_offset,
                msg_count: offsets.len(),
                store_timestamp: placed.store_timestamp,
                batch_offsets: if offsets.len() > 1 {
                    offsets
                } else {
                    Vec::new()
                },
            })
        }
        // Written, but not known to be committed: the producer sees the
        // same status as a SYNC_MASTER whose slave did not confirm in time.
        Err(e @ (LedgerError::Timeout | LedgerError::LeadershipLost)) => PutMessageResult {
            status: PutMessageStatus::FlushSlaveTimeout,
            append: None,
            detail: Some(e.to_string()),
        },
        Err(LedgerError::TooLarge { body_len, max }) => PutMessageResult::failed(
            PutMessageStatus::MessageIllegal,
            format!("message of {body_len} bytes exceeds the ledger's {max}"),
        ),
        Err(e) => PutMessageResult::failed(PutMessageStatus::ServiceNotAvailable, e.to_string()),
    }
}
