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
use crate::fs_util::LockFile;
use crate::health::Health;
use crate::index::IndexService;
use crate::message_log::MessageLog;
use crate::put::{PutMessageResult, PutMessageStatus};
use crate::recovery::{self, RecoveryReport};
use crate::services::{self, ServiceThread};

mod open;
mod read;

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

    /// Deletes the ConsumeQueue and index files whose every unit points
    /// below `min_offset`, the first offset the log still holds, and moves
    /// each queue's min offset to its first unit at or above it (ledger mode
    /// calls this after its retention purged ledger files; classic mode's
    /// cleanup does the same for the CommitLog). Returns the files deleted.
    pub fn delete_queue_files_below(&self, min_offset: i64) -> Result<usize> {
        let mut n = 0;
        for q in self.consume_queues.all() {
            n += q.delete_expired(min_offset)?;
        }
        if let Some(index) = &self.index {
            n += index.delete_expired(min_offset)?;
        }
        Ok(n)
    }

    /// fsyncs every ConsumeQueue and the index now (ledger mode records its
    /// dispatch progress only after this).
    pub fn flush_consume_queues(&self) -> Result<()> {
        let r = (|| {
            self.consume_queues.pay_sync_debt()?;
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

    /// fsyncs everything appended so far, now (tools, benchmarks and the
    /// power-loss simulator; the flush service does this on its own
    /// schedule). The checkpoint's durable offset follows in memory, as
    /// after a flush of the service.
    pub fn flush_commit_log(&self) -> Result<()> {
        self.commit_log.commit(0)?;
        self.commit_log.flush_noting(0, |flushed, ts| {
            services::note_flush(&self.commit_log, &self.checkpoint, flushed, ts)
        })?;
        Ok(())
    }

    /// One thorough round of the ConsumeQueue flush service, now: every
    /// queue and the index fsynced, then the checkpoint written. A failed
    /// fsync poisons the store.
    pub fn flush_queues_and_checkpoint(&self) -> Result<()> {
        let mut written = services::CheckpointWritten::nothing();
        let r = services::flush_queues_and_checkpoint(
            &self.dispatcher,
            &self.checkpoint,
            0,
            &mut written,
        );
        if let Err(e) = &r {
            self.health.poison(e);
        }
        r
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

    /// Deletes every ConsumeQueue file whose units all point before the
    /// CommitLog's first kept offset (Java `cleanExpiredConsumerQueue`, the
    /// part of each cleanup round that needs no deleted CommitLog file).
    /// Returns the files deleted. Nothing with an external log.
    pub fn clean_expired_consume_queues(&self) -> Result<usize> {
        if self.commit_log_dispatch().is_none() {
            return Ok(0);
        }
        let min = self.commit_log.min_offset();
        let mut deleted = 0;
        for q in self.consume_queues.all() {
            deleted += q.delete_expired(min)?;
        }
        Ok(deleted)
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
        if let Err(e) = self
            .config
            .disk
            .remove_file(&abort)
            .map_err(StoreError::from)
        {
            tracing::error!(error = %e, "could not remove the abort file");
        } else if let Err(e) = self.config.disk.sync_dir(&self.config.root_dir) {
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
