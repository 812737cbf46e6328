//! `MessageStore`: the store as the broker sees it — open (lock, load,
//! recover, start services), put, pull, offsets, lookups, clean shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use basalt_common::config::FlushDiskType;
use basalt_common::record::{RecordDraft, RecordView};
use bytes::Bytes;
use parking_lot::Mutex;

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::{ConsumeQueue, ConsumeQueueTable, UNIT_SIZE};
use crate::dispatch::{ArrivalListener, DelayLevels, DispatchLimit, DispatchService, Dispatcher};
use crate::error::{Result, StoreError};
use crate::fs_util::{self, LockFile};
use crate::health::Health;
use crate::index::IndexService;
use crate::message_log::MessageLog;
use crate::put::{PutMessageResult, PutMessageStatus};
use crate::recovery::{self, RecoveryReport};
use crate::services::{self, ServiceThread};

/// Result of a pull from the store (`GetMessageStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetMessageStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

impl GetMessageStatus {
    pub fn name(self) -> &'static str {
        match self {
            Self::Found => "FOUND",
            Self::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            Self::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            Self::OffsetFoundNull => "OFFSET_FOUND_NULL",
            Self::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            Self::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            Self::OffsetTooSmall => "OFFSET_TOO_SMALL",
            Self::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            Self::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

/// Decides which messages a pull returns.
pub trait MessageFilter {
    /// Cheap check on the ConsumeQueue tags code.
    fn matches_tags_code(&self, tags_code: i64) -> bool;
    /// Exact check on the stored record (default: accept).
    fn matches_record(&self, _record: &[u8]) -> bool {
        true
    }
}

/// What a pull asks the store for.
#[derive(Debug, Clone, Copy)]
pub struct GetMessageRequest<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub offset: i64,
    pub max_msgs: usize,
    /// Extra byte limit (`maxMsgBytes`), if any.
    pub max_bytes: Option<usize>,
    /// False on a slave without `offsetCheckInSlave`: offsets are then not
    /// corrected in error cases (nextBeginOffset stays the request's).
    pub correct_offsets: bool,
}

/// Records found by a pull, sent as they are stored.
#[derive(Debug, Clone)]
pub struct GetMessageResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    /// Each message's stored record (zero-copy views of the CommitLog).
    pub messages: Vec<Bytes>,
    pub buffer_total_size: usize,
    /// The consumer lags so far that its data is probably not in memory.
    pub suggest_pulling_from_slave: bool,
}

/// Which way SEARCH_OFFSET_BY_TIMESTAMP rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoundaryType {
    /// First offset stored at or after the time.
    #[default]
    Lower,
    /// Last offset stored at or before the time.
    Upper,
}

/// Messages found by key.
#[derive(Debug, Clone, Default)]
pub struct QueryMessageResult {
    pub messages: Vec<Bytes>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phy_offset: i64,
}

/// A snapshot of store figures for runtime info and metrics.
#[derive(Debug, Clone, Default)]
pub struct StoreStats {
    pub commit_log_min_offset: i64,
    pub commit_log_max_offset: i64,
    pub commit_log_flushed_offset: i64,
    pub dispatch_behind_bytes: i64,
    pub put_message_times_total: u64,
    pub put_message_size_total: u64,
    pub consume_queue_count: usize,
    pub poisoned: bool,
}

/// Where a store's records live. Chosen when the store is opened and fixed
/// for its lifetime.
#[derive(Clone)]
pub enum MessageSource {
    /// The store's own CommitLog, which it appends to, flushes, dispatches
    /// into the ConsumeQueues and cleans.
    CommitLog,
    /// A log owned by someone else (ledger mode). The owner appends and
    /// dispatches into the ConsumeQueues; the store refuses puts, runs no
    /// CommitLog service, and reads records from this log.
    External(Arc<dyn MessageLog>),
}

impl std::fmt::Debug for MessageSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageSource::CommitLog => f.write_str("CommitLog"),
            MessageSource::External(_) => f.write_str("External"),
        }
    }
}

/// The threads of a running store.
struct Services {
    cq_flush: ServiceThread,
    /// Present only when the store owns its CommitLog.
    log: Option<CommitLogServices>,
}

/// The threads that write, dispatch and clean the store's own CommitLog.
struct CommitLogServices {
    flush: ServiceThread,
    commit: Option<ServiceThread>,
    cleanup: ServiceThread,
    dispatch: Arc<DispatchService>,
}

/// The storage engine. See the module documentation.
pub struct MessageStore {
    config: Arc<StoreConfig>,
    health: Arc<Health>,
    commit_log: Arc<CommitLog>,
    consume_queues: Arc<ConsumeQueueTable>,
    index: Option<Arc<IndexService>>,
    dispatcher: Arc<Dispatcher>,
    checkpoint: Arc<Checkpoint>,
    services: Mutex<Option<Services>>,
    recovery: RecoveryReport,
    total_memory: u64,
    shut_down: AtomicBool,
    /// Where records are read from: the CommitLog, or the external log.
    log: Arc<dyn MessageLog>,
    /// The records live in an external log ([`MessageSource::External`]).
    external: bool,
    /// Held while the store is open; released by a clean shutdown.
    lock: Mutex<Option<LockFile>>,
}

impl std::fmt::Debug for MessageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStore")
            .field("root", &self.config.root_dir)
            .finish()
    }
}

impl MessageStore {
    /// Opens (creating if needed) the store at `config.root_dir`: takes the
    /// lock, loads and recovers every file, writes the abort marker and starts
    /// the services.
    pub fn open(config: StoreConfig) -> Result<Arc<MessageStore>> {
        Self::open_with_delays(config, DelayLevels::default())
    }

    pub fn open_with_delays(config: StoreConfig, delays: DelayLevels) -> Result<Arc<MessageStore>> {
        Self::open_with_source(config, delays, MessageSource::CommitLog)
    }

    /// Opens the store over `source`. With [`MessageSource::External`] the
    /// recovery checks only the ConsumeQueues (the log's owner re-dispatches
    /// what they miss) and no CommitLog service starts.
    pub fn open_with_source(
        config: StoreConfig,
        delays: DelayLevels,
        source: MessageSource,
    ) -> Result<Arc<MessageStore>> {
        config.validate().map_err(StoreError::Config)?;
        let config = Arc::new(config);
        fs_util::create_dir_all_durable(&config.root_dir)?;
        let lock = LockFile::acquire(&config.lock_path())?;
        let health = Arc::new(Health::new());
        let commit_log = Arc::new(CommitLog::new(Arc::clone(&config), Arc::clone(&health)));
        commit_log.files().load()?;
        let consume_queues = Arc::new(ConsumeQueueTable::new(
            config.consume_queue_dir(),
            config.consume_queue_file_size(),
        ));
        consume_queues.load()?;
        let index = if config.message_index_enable {
            let idx = IndexService::new(
                config.index_dir(),
                config.max_hash_slot_num,
                config.max_index_num,
            );
            idx.load()?;
            Some(Arc::new(idx))
        } else {
            None
        };
        let checkpoint = match Checkpoint::load(&config.checkpoint_path()) {
            Ok(c) => Arc::new(c),
            Err(e @ StoreError::Corrupt { .. }) => {
                // Recovering from the first file is always correct, only slower.
                tracing::error!(error = %e, "checkpoint unreadable; recovering from the oldest CommitLog file");
                let _ = std::fs::remove_file(config.checkpoint_path());
                Arc::new(Checkpoint::load(&config.checkpoint_path())?)
            }
            Err(e) => return Err(e),
        };
        let dispatcher = Arc::new(Dispatcher::new(
            Arc::clone(&consume_queues),
            index.clone(),
            delays,
        ));

        let abort_path = config.abort_path();
        let abnormal = abort_path.exists();
        let external = matches!(source, MessageSource::External(_));
        let report = if external {
            // The records live elsewhere (ledger mode): only the ConsumeQueues'
            // own validity is checked here; the owner of the log re-dispatches.
            recovery::recover_consume_queues_only(&consume_queues)?
        } else {
            recovery::recover(
                &commit_log,
                &consume_queues,
                &dispatcher,
                &checkpoint,
                abnormal,
            )?
        };
        tracing::info!(
            abnormal = report.abnormal,
            log_end = report.log_end,
            scanned_bytes = report.bytes_scanned,
            cut_bytes = report.cut_bytes,
            elapsed_ms = report.elapsed.as_millis() as u64,
            stop = %report.stop,
            "store recovered"
        );
        // Everything dispatched from here on: after an abnormal recovery the
        // scan already re-dispatched up to the end; after a normal one the
        // queues may lag the log.
        let reput_from = if report.abnormal {
            report.dispatch_stopped_at.unwrap_or(report.log_end)
        } else {
            let max_cq = consume_queues
                .all()
                .iter()
                .map(|q| q.max_physic_offset())
                .max()
                .unwrap_or(-1);
            max_cq.clamp(commit_log.min_offset(), report.log_end)
        };

        // The abort marker: present while running, removed on clean shutdown.
        // Empty, as RocketMQ's: creating it needs no free block, so a store
        // on a full disk still opens.
        fs_util::create_marker(&abort_path)?;

        let log: Arc<dyn MessageLog> = match source {
            MessageSource::CommitLog => Arc::clone(&commit_log) as Arc<dyn MessageLog>,
            MessageSource::External(log) => log,
        };
        let store = MessageStore {
            total_memory: total_memory_bytes(),
            config: Arc::clone(&config),
            health: Arc::clone(&health),
            commit_log: Arc::clone(&commit_log),
            consume_queues: Arc::clone(&consume_queues),
            index: index.clone(),
            dispatcher: Arc::clone(&dispatcher),
            checkpoint: Arc::clone(&checkpoint),
            services: Mutex::new(None),
            recovery: report,
            shut_down: AtomicBool::new(false),
            log,
            external,
            lock: Mutex::new(Some(lock)),
        };
        let cq_flush = services::start_consume_queue_flush_service(
            Arc::clone(&commit_log),
            Arc::clone(&dispatcher),
            Arc::clone(&checkpoint),
            Arc::clone(&health),
        );
        // An external log's owner appends and dispatches; the local CommitLog
        // stays empty, and a prepared file would only hold reserved blocks.
        let log = (!external).then(|| store.start_commit_log_services(reput_from));
        *store.services.lock() = Some(Services { cq_flush, log });
        Ok(Arc::new(store))
    }

    /// Starts the threads that own the CommitLog: the file allocator, flush
    /// (and commit, with the transient pool), dispatch from `reput_from`,
    /// and cleanup.
    fn start_commit_log_services(&self, reput_from: i64) -> CommitLogServices {
        let commit_log = &self.commit_log;
        commit_log.start_allocator();
        let flush =
            services::start_flush_service(Arc::clone(commit_log), Arc::clone(&self.checkpoint));
        let commit = self
            .config
            .transient_store_pool_enable
            .then(|| services::start_commit_service(Arc::clone(commit_log)));
        let dispatch = Arc::new(DispatchService::start(
            Arc::clone(commit_log),
            Arc::clone(&self.dispatcher),
            reput_from,
        ));
        let cleanup = services::start_cleanup_service(
            Arc::clone(commit_log),
            Arc::clone(&self.consume_queues),
            self.index.clone(),
            Arc::clone(&dispatch),
        );
        CommitLogServices {
            flush,
            commit,
            cleanup,
            dispatch,
        }
    }

    /// The dispatch service of the store's own CommitLog (none with an
    /// external log, or after shutdown).
    fn commit_log_dispatch(&self) -> Option<Arc<DispatchService>> {
        self.services
            .lock()
            .as_ref()
            .and_then(|s| s.log.as_ref())
            .map(|l| Arc::clone(&l.dispatch))
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }
    pub fn commit_log(&self) -> &Arc<CommitLog> {
        &self.commit_log
    }
    pub fn consume_queues(&self) -> &Arc<ConsumeQueueTable> {
        &self.consume_queues
    }
    pub fn checkpoint(&self) -> &Arc<Checkpoint> {
        &self.checkpoint
    }
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }
    pub fn store_host(&self) -> SocketAddr {
        self.config.store_host
    }

    /// Where records are read from (fixed when the store was opened).
    pub fn log(&self) -> Arc<dyn MessageLog> {
        Arc::clone(&self.log)
    }

    /// Whether the records live in an external log (ledger mode).
    pub fn has_external_log(&self) -> bool {
        self.external
    }

    /// Registers the listener told about newly consumable messages.
    pub fn set_arrival_listener(&self, l: Arc<dyn ArrivalListener>) {
        self.dispatcher.set_listener(l);
    }

    /// Limits dispatch to what `limit` returns (ledger mode: committed end).
    pub fn set_dispatch_limit(&self, limit: DispatchLimit) {
        if let Some(d) = self.commit_log_dispatch() {
            d.set_limit(limit);
        }
    }

    /// Wakes dispatch after the limit moved.
    pub fn wake_dispatch(&self) {
        if let Some(d) = self.commit_log_dispatch() {
            d.wake();
        }
    }

    fn refuse(&self) -> Option<PutMessageResult> {
        if self.shut_down.load(Ordering::Acquire) {
            return Some(PutMessageResult::failed(
                PutMessageStatus::ServiceNotAvailable,
                "the store is shut down",
            ));
        }
        if self.external {
            return Some(PutMessageResult::failed(
                PutMessageStatus::ServiceNotAvailable,
                "records are appended through the replicated ledger in this mode",
            ));
        }
        self.disk_refusal()
    }

    /// SERVICE_NOT_AVAILABLE naming the disk while its usage is above
    /// `diskSpaceWarningLevelRatio` (see [`crate::disk_space`]); `None`
    /// otherwise. One atomic load. Ledger mode asks this before appending.
    pub fn disk_refusal(&self) -> Option<PutMessageResult> {
        let reason = self.commit_log.disk().refusal()?;
        Some(PutMessageResult::failed(
            PutMessageStatus::ServiceNotAvailable,
            reason,
        ))
    }

    /// The dispatcher that turns records into ConsumeQueue units and index
    /// entries (ledger mode feeds it committed entries itself).
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    /// fsyncs every ConsumeQueue and the index now (ledger mode records its
    /// dispatch progress only after this).
    pub fn flush_consume_queues(&self) -> Result<()> {
        let r = (|| {
            for q in self.consume_queues.all() {
                q.flush(0)?;
            }
            if let Some(i) = &self.index {
                i.flush()?;
            }
            Ok(())
        })();
        if let Err(e) = &r {
            self.health.poison(e);
        }
        r
    }

    /// fsyncs everything appended so far, now (tools and benchmarks; the
    /// flush service does this on its own schedule).
    pub fn flush_commit_log(&self) -> Result<()> {
        self.commit_log.commit(0)?;
        self.commit_log.flush(0).map(|_| ())
    }

    /// Appends one message (not waiting for durability).
    pub fn put_message(&self, draft: &RecordDraft<'_>) -> PutMessageResult {
        if let Some(r) = self.refuse() {
            return r;
        }
        if let Err(why) = crate::names::check_put(draft.topic, draft.queue_id, draft.properties) {
            return PutMessageResult::failed(PutMessageStatus::MessageIllegal, why);
        }

        match self.commit_log.append(draft) {
            Ok(a) => PutMessageResult::ok(a),
            Err(e) => e.into(),
        }
    }

    /// Appends a batch for one topic queue (not waiting for durability).
    pub fn put_messages(&self, drafts: &[RecordDraft<'_>]) -> PutMessageResult {
        if let Some(r) = self.refuse() {
            return r;
        }
        for d in drafts {
            if let Err(why) = crate::names::check_put(d.topic, d.queue_id, d.properties) {
                return PutMessageResult::failed(PutMessageStatus::MessageIllegal, why);
            }
        }
        match self.commit_log.append_batch(drafts) {
            Ok(a) => PutMessageResult::ok(a),
            Err(e) => e.into(),
        }
    }

    /// With SYNC_FLUSH and `wait_store_msg_ok`, waits for the fsync covering
    /// the put (FLUSH_DISK_TIMEOUT after `syncFlushTimeout`).
    pub async fn wait_durable(&self, result: &mut PutMessageResult, wait_store_msg_ok: bool) {
        if result.status != PutMessageStatus::PutOk {
            return;
        }
        let Some(append) = &result.append else { return };
        if self.config.flush_disk_type == FlushDiskType::SyncFlush && wait_store_msg_ok {
            result.status = self
                .commit_log
                .wait_flushed(append.end_offset(), self.config.sync_flush_timeout)
                .await;
            if result.status == PutMessageStatus::ServiceNotAvailable {
                result.detail = Some("fsync failed; the message may not be durable".into());
            }
        }
    }

    /// Blocking form of [`MessageStore::wait_durable`].
    pub fn wait_durable_blocking(&self, result: &mut PutMessageResult, wait_store_msg_ok: bool) {
        if result.status != PutMessageStatus::PutOk {
            return;
        }
        let Some(append) = &result.append else { return };
        if self.config.flush_disk_type == FlushDiskType::SyncFlush && wait_store_msg_ok {
            result.status = self
                .commit_log
                .wait_flushed_blocking(append.end_offset(), self.config.sync_flush_timeout);
        }
    }

    /// Appends and, as configured, waits for durability.
    pub async fn put_message_durable(
        &self,
        draft: &RecordDraft<'_>,
        wait_store_msg_ok: bool,
    ) -> PutMessageResult {
        let mut r = self.put_message(draft);
        self.wait_durable(&mut r, wait_store_msg_ok).await;
        r
    }

    pub fn get_consume_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.consume_queues.get(topic, queue_id)
    }

    /// Reads up to `max_msgs` messages of a queue from `offset`, following
    /// RocketMQ's `DefaultMessageStore.getMessage` rules (docs/protocol.md#pull-results).
    pub fn get_message(
        &self,
        req: &GetMessageRequest<'_>,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult {
        let correct = |old: i64, new: i64| if req.correct_offsets { new } else { old };
        let mut result = GetMessageResult {
            status: GetMessageStatus::NoMatchedLogicQueue,
            next_begin_offset: req.offset,
            min_offset: 0,
            max_offset: 0,
            messages: Vec::new(),
            buffer_total_size: 0,
            suggest_pulling_from_slave: false,
        };
        let Some(cq) = self.consume_queues.get(req.topic, req.queue_id) else {
            result.next_begin_offset = correct(req.offset, 0);
            return result;
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        result.min_offset = min;
        result.max_offset = max;
        let offset = req.offset;
        if max == 0 {
            result.status = GetMessageStatus::NoMessageInQueue;
            result.next_begin_offset = correct(offset, 0);
            return result;
        }
        if offset < min {
            result.status = GetMessageStatus::OffsetTooSmall;
            result.next_begin_offset = correct(offset, min);
            return result;
        }
        if offset == max {
            result.status = GetMessageStatus::OffsetOverflowOne;
            result.next_begin_offset = correct(offset, offset);
            return result;
        }
        if offset > max {
            result.status = GetMessageStatus::OffsetOverflowBadly;
            result.next_begin_offset = correct(offset, if min == 0 { min } else { max });
            return result;
        }
        let Some(run) = cq.units_from(offset) else {
            result.status = GetMessageStatus::OffsetFoundNull;
            result.next_begin_offset = correct(offset, cq.roll_next_file(offset));
            return result;
        };

        let log = self.log();
        let max_phys = log.max_offset();
        let memory = self.total_memory as f64
            * (self.config.access_message_in_memory_max_ratio as f64 / 100.0);
        let max_filter_units = 16_000usize.max(req.max_msgs * UNIT_SIZE) / UNIT_SIZE;
        let mut status = GetMessageStatus::NoMatchedMessage;
        let mut next_phy_file_start = i64::MIN;
        let mut max_phy_pulling = 0i64;
        let mut examined = 0usize;
        for unit in run.iter() {
            if examined >= max_filter_units {
                break;
            }
            let phys = unit.physical_offset;
            let size = unit.size;
            if unit.is_filler() {
                examined += 1;
                continue;
            }
            max_phy_pulling = phys;
            if next_phy_file_start != i64::MIN && phys < next_phy_file_start {
                examined += 1;
                continue;
            }
            let in_disk = (max_phys - phys) as f64 > memory;
            if self.batch_full(size as usize, req, &result, in_disk) {
                break;
            }
            examined += 1;
            if let Some(f) = filter
                && !f.matches_tags_code(unit.tags_code)
            {
                if result.buffer_total_size == 0 {
                    status = GetMessageStatus::NoMatchedMessage;
                }
                continue;
            }
            let Some(bytes) = log.read_bytes(phys, size as usize) else {
                if result.buffer_total_size == 0 {
                    status = GetMessageStatus::MessageWasRemoving;
                }
                next_phy_file_start = log.roll_next_file(phys);
                continue;
            };
            if let Some(f) = filter
                && !f.matches_record(&bytes)
            {
                if result.buffer_total_size == 0 {
                    status = GetMessageStatus::NoMatchedMessage;
                }
                continue;
            }
            result.buffer_total_size += bytes.len();
            result.messages.push(bytes);
            status = GetMessageStatus::Found;
            next_phy_file_start = i64::MIN;
        }
        result.status = status;
        result.next_begin_offset = offset + examined as i64;
        result.suggest_pulling_from_slave = (max_phys - max_phy_pulling) as f64 > memory;
        result
    }

    fn batch_full(
        &self,
        size: usize,
        req: &GetMessageRequest<'_>,
        r: &GetMessageResult,
        in_disk: bool,
    ) -> bool {
        let count = r.messages.len();
        if r.buffer_total_size == 0 || count == 0 {
            return false;
        }
        if req.max_msgs <= count {
            return true;
        }
        if let Some(max_bytes) = req.max_bytes
            && r.buffer_total_size + size > max_bytes
        {
            return true;
        }
        let c = &self.config;
        if in_disk {
            r.buffer_total_size + size > c.max_transfer_bytes_on_message_in_disk
                || count > c.max_transfer_count_on_message_in_disk - 1
        } else {
            r.buffer_total_size + size > c.max_transfer_bytes_on_message_in_memory
                || count > c.max_transfer_count_on_message_in_memory - 1
        }
    }

    /// Whether the record at `phys` is close enough to the end of the log to
    /// count as in memory (`accessMessageInMemoryMaxRatio` of RAM).
    pub fn is_in_memory(&self, phys: i64) -> bool {
        let memory = self.total_memory as f64
            * (self.config.access_message_in_memory_max_ratio as f64 / 100.0);
        ((self.log().max_offset() - phys) as f64) <= memory
    }

    /// The next offset to be written in a queue (0 if the queue does not exist).
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.consume_queues
            .get(topic, queue_id)
            .map(|q| q.max_offset())
            .unwrap_or(0)
    }

    /// The first readable offset of a queue (0 if the queue does not exist).
    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.consume_queues
            .get(topic, queue_id)
            .map(|q| q.min_offset())
            .unwrap_or(0)
    }

    /// CommitLog offset of a queue's message at `offset`.
    pub fn commit_log_offset_in_queue(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Option<i64> {
        let u = self.consume_queues.get(topic, queue_id)?.unit_at(offset)?;
        (!u.is_filler()).then_some(u.physical_offset)
    }

    /// Store time of a queue's message at `offset`.
    pub fn message_store_timestamp(&self, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
        let phys = self.commit_log_offset_in_queue(topic, queue_id, offset)?;
        self.log().store_timestamp_at(phys)
    }

    /// Store time of the oldest readable message of a queue.
    pub fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let min = self.min_offset_in_queue(topic, queue_id);
        self.message_store_timestamp(topic, queue_id, min)
    }

    /// Binary search of a queue by store time (SEARCH_OFFSET_BY_TIMESTAMP).
    pub fn offset_in_queue_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        boundary: BoundaryType,
    ) -> i64 {
        let Some(cq) = self.consume_queues.get(topic, queue_id) else {
            return 0;
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        if max <= min {
            return min;
        }
        let log = self.log();
        let ts_at = |o: i64| -> Option<i64> {
            let u = cq.unit_at(o)?;
            if u.is_filler() {
                return None;
            }
            log.store_timestamp_at(u.physical_offset)
        };
        // First readable message still in the CommitLog.
        let mut lo = min;
        while lo < max && ts_at(lo).is_none() {
            lo += 1;
        }
        if lo >= max {
            return min;
        }
        let hi_last = max - 1;
        match boundary {
            BoundaryType::Lower => {
                // First offset with time >= timestamp; max if none.
                let (mut l, mut h) = (lo, max);
                while l < h {
                    let mid = l + (h - l) / 2;
                    match ts_at(mid) {
                        Some(t) if t < timestamp => l = mid + 1,
                        _ => h = mid,
                    }
                }
                l
            }
            BoundaryType::Upper => {
                // Last offset with time <= timestamp; lo if none.
                let (mut l, mut h) = (lo, hi_last);
                if ts_at(l).map(|t| t > timestamp).unwrap_or(true) {
                    return lo;
                }
                while l < h {
                    let mid = l + (h - l + 1) / 2;
                    match ts_at(mid) {
                        Some(t) if t <= timestamp => l = mid,
                        _ => h = mid - 1,
                    }
                }
                l
            }
        }
    }

    /// The stored record at a CommitLog offset (VIEW_MESSAGE_BY_ID).
    pub fn look_message_by_offset(&self, phys: i64) -> Option<Bytes> {
        self.log().read_record(phys)
    }

    /// Messages of `topic` whose `KEYS` or unique key equals `key`, stored in
    /// `[begin, end]`, newest first, at most `max` (QUERY_MESSAGE).
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin: i64,
        end: i64,
    ) -> QueryMessageResult {
        let mut out = QueryMessageResult::default();
        let Some(index) = &self.index else {
            return out;
        };
        if let Some(last) = index.files().last() {
            out.index_last_update_timestamp = last.end_timestamp();
            out.index_last_update_phy_offset = last.end_phy_offset();
        }
        let log = self.log();
        for phys in index.query_offsets(topic, key, max, begin, end) {
            let Some(rec) = log.read_record(phys) else {
                continue;
            };
            let Ok(view) = RecordView::parse(&rec, false) else {
                continue;
            };
            if view.topic != topic.as_bytes() {
                continue;
            }
            let key_matches = view
                .property(basalt_common::constants::property::UNIQ_KEY)
                .map(|u| u == key.as_bytes())
                .unwrap_or(false)
                || view
                    .property(basalt_common::constants::property::KEYS)
                    .map(|ks| ks.split(|b| *b == b' ').any(|k| k == key.as_bytes()))
                    .unwrap_or(false);
            if key_matches {
                out.messages.push(rec);
            }
        }
        out
    }

    /// Topics that have ConsumeQueues.
    pub fn topics(&self) -> Vec<String> {
        self.consume_queues.topics()
    }

    /// Deletes topics' ConsumeQueues (their records stay in the CommitLog
    /// until it expires).
    pub fn delete_topics(&self, topics: &[String]) -> Result<()> {
        for t in topics {
            self.consume_queues.remove_topic(t)?;
            self.commit_log.remove_topic(t);
        }
        Ok(())
    }

    /// Runs one cleanup round now; `force` deletes every file but the newest
    /// regardless of age (operator command). Nothing with an external log.
    pub fn clean_now(&self, force: bool) -> Result<usize> {
        let Some(dispatch) = self.commit_log_dispatch() else {
            return Ok(0);
        };
        services::clean_once(
            &self.commit_log,
            &self.consume_queues,
            self.index.as_deref(),
            dispatch.dispatched(),
            force,
        )
    }

    /// Bytes readable in the CommitLog but not yet dispatched.
    pub fn dispatch_behind_bytes(&self) -> i64 {
        self.commit_log_dispatch().map(|d| d.behind()).unwrap_or(0)
    }

    /// Waits (bounded) until the CommitLog's dispatch has caught up with
    /// `offset`. False at once with an external log, whose owner dispatches.
    pub fn wait_dispatched(&self, offset: i64, timeout: Duration) -> bool {
        match self.commit_log_dispatch() {
            Some(d) => d.wait_dispatched(offset, timeout),
            None => false,
        }
    }

    /// The CommitLog's dispatch service (HA moves its limit); none with an
    /// external log.
    pub fn dispatch_service(&self) -> Option<Arc<DispatchService>> {
        self.commit_log_dispatch()
    }

    /// Figures for runtime info. The log offsets are those of the log
    /// records are read from: the CommitLog, or in ledger mode the ledger
    /// (whose readable end is its committed end, durable on a quorum), not
    /// the local CommitLog that mode leaves unused.
    pub fn stats(&self) -> StoreStats {
        let (count, bytes) = self.commit_log.put_stats();
        let log = self.log();
        let reads_commit_log = std::ptr::addr_eq(Arc::as_ptr(&log), Arc::as_ptr(&self.commit_log));
        StoreStats {
            commit_log_min_offset: log.min_offset(),
            commit_log_max_offset: log.max_offset(),
            commit_log_flushed_offset: if reads_commit_log {
                self.commit_log.flushed_offset()
            } else {
                log.max_offset()
            },
            dispatch_behind_bytes: self.dispatch_behind_bytes(),
            put_message_times_total: count,
            put_message_size_total: bytes,
            consume_queue_count: self.consume_queues.all().len(),
            poisoned: self.health.is_poisoned(),
        }
    }

    /// Clean shutdown: stop accepting puts, dispatch and flush everything,
    /// write the checkpoint, remove the abort marker. Idempotent.
    pub fn shutdown(&self) {
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return;
        }
        let services = self.services.lock().take();
        let mut dispatch_incomplete = false;
        if let Some(s) = services {
            if let Some(l) = s.log {
                dispatch_incomplete = self.stop_commit_log_services(l);
            }
            s.cq_flush.shutdown();
        }
        self.commit_log.shutdown_files();
        if self.health.is_poisoned() {
            // Keep the abort marker: the next start must recover abnormally.
            tracing::error!("store was poisoned; leaving the abort file for a full recovery");
            self.lock.lock().take();
            return;
        }
        if let Err(e) = self.checkpoint.flush() {
            tracing::error!(error = %e, "final checkpoint write failed");
            self.lock.lock().take();
            return;
        }
        if dispatch_incomplete {
            self.lock.lock().take();
            return;
        }

        let abort = self.config.abort_path();
        if let Err(e) = std::fs::remove_file(&abort).map_err(|e| StoreError::io(&abort, e)) {
            tracing::error!(error = %e, "could not remove the abort file");
        } else if let Err(e) = fs_util::fsync_dir(&self.config.root_dir) {
            tracing::error!(error = %e, "could not fsync the store directory");
        }
        // Another process may open the store now.
        self.lock.lock().take();
    }
    /// Stops the CommitLog's threads. True when dispatch ended short of the
    /// log: it gives up at shutdown when the disk has no room for a
    /// ConsumeQueue file, and then only an abnormal recovery re-dispatches
    /// the rest and restores the queue offsets it holds.
    fn stop_commit_log_services(&self, l: CommitLogServices) -> bool {
        if let Some(c) = l.commit {
            c.shutdown();
        }
        l.flush.shutdown();
        l.dispatch.shutdown();
        let behind = l.dispatch.dispatched() < self.commit_log.max_offset();
        if behind {
            tracing::warn!(
                dispatched = l.dispatch.dispatched(),
                log_end = self.commit_log.max_offset(),
                "not every record is dispatched; the next start recovers from the log"
            );
        }
        l.cleanup.shutdown();
        behind
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn total_memory_bytes() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if pages <= 0 || page <= 0 {
        return 8 * 1024 * 1024 * 1024;
    }
    pages as u64 * page as u64
}
