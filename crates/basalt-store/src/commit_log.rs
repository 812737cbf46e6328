//! The CommitLog: one append-only log of records for every topic
//! (docs/storage-format.md#commitlog-files).
//!
//! Appends go through one lock (the "put lock") whose critical section is
//! only: pick the file, reserve the queue offset, copy the pre-encoded bytes,
//! stamp offsets and store time. Encoding and the body CRC happen before the
//! lock is taken.
//!
//! Invariants:
//! * records never span files; when a record does not fit (with room left for
//!   the 8-byte end-of-file filler), the filler is written and the record goes
//!   to the next file;
//! * every record's PHYSICALOFFSET equals its position in the log, and its
//!   QUEUEOFFSET is the next offset of its topic queue at append time;
//! * the flushed offset published to waiters never exceeds what was fsynced.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use basalt_common::record::{self, RecordDraft, RecordHead};
use basalt_common::sysflag;
use bytes::Bytes;
use parking_lot::Mutex;

use crate::config::StoreConfig;
use crate::disk_space::DiskSpaceMonitor;
use crate::error::{Result, StoreError};
use crate::health::Health;
use crate::mapped_file::MappedFile;
use crate::mapped_file_queue::MappedFileQueue;
use crate::put::{AppendResult, PutMessageResult, PutMessageStatus};
use crate::signal::{OffsetWatch, Signal, WaitError};
use crate::transient_pool::TransientStorePool;

thread_local! {
    /// Per-thread encode buffer, so appends do not allocate.
    static ENCODE_BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(8 * 1024));
}

/// Next queue offset of every topic queue, owned by the put lock.
#[derive(Debug, Default)]
pub struct TopicQueueTable {
    next: HashMap<String, Vec<i64>>,
}

impl TopicQueueTable {
    pub fn get(&self, topic: &str, queue_id: i32) -> i64 {
        self.next
            .get(topic)
            .and_then(|v| v.get(queue_id as usize))
            .copied()
            .unwrap_or(0)
    }

    pub fn set(&mut self, topic: &str, queue_id: i32, next: i64) {
        let qid = queue_id as usize;
        let v = match self.next.get_mut(topic) {
            Some(v) => v,
            None => self.next.entry(topic.to_string()).or_default(),
        };
        if v.len() <= qid {
            v.resize(qid + 1, 0);
        }
        v[qid] = next;
    }

    pub fn remove_topic(&mut self, topic: &str) {
        self.next.remove(topic);
    }

    pub fn len(&self) -> usize {
        self.next.values().map(|v| v.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct Writer {
    table: TopicQueueTable,
}

/// See the module documentation.
pub struct CommitLog {
    config: Arc<StoreConfig>,
    queue: Arc<MappedFileQueue>,
    writer: Mutex<Writer>,
    health: Arc<Health>,
    /// Usage of the store's disk (sampled by the cleanup service and when
    /// a file is created).
    disk: Arc<DiskSpaceMonitor>,
    /// When (ms since the epoch) a failed file creation was last logged.
    create_failure_logged: std::sync::atomic::AtomicI64,
    transient: bool,
    /// Global offset known to be on disk; SYNC_FLUSH waiters wait on it.
    flushed: OffsetWatch,
    /// Wakes the flush service.
    pub(crate) flush_signal: Arc<Signal>,
    /// Wakes the commit service (transient pool mode).
    pub(crate) commit_signal: Arc<Signal>,
    /// Wakes the dispatcher when new bytes become readable.
    pub(crate) visible_signal: Arc<Signal>,
    put_count: AtomicU64,
    put_bytes: AtomicU64,
    /// fsync durations and group-commit sizes.
    flush_stats: crate::flush_stats::FlushStats,
    /// While the SYNC_FLUSH flusher gathers a group, appends wake it only
    /// once the put count reaches this (0: every append wakes it).
    flush_wake_at: AtomicU64,
    /// What the cleanup must keep for the broker's schedulers.
    retention: crate::retention::RetentionFloors,
}

impl std::fmt::Debug for CommitLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitLog")
            .field("queue", &self.queue)
            .field("flushed", &self.flushed.get())
            .finish()
    }
}

/// Error of an append that did not happen.
#[derive(Debug, Clone)]
pub struct AppendError {
    pub status: PutMessageStatus,
    pub detail: String,
}

impl From<AppendError> for PutMessageResult {
    fn from(e: AppendError) -> Self {
        PutMessageResult::failed(e.status, e.detail)
    }
}

fn illegal(detail: impl Into<String>) -> AppendError {
    AppendError {
        status: PutMessageStatus::MessageIllegal,
        detail: detail.into(),
    }
}

impl CommitLog {
    pub fn new(config: Arc<StoreConfig>, health: Arc<Health>) -> Self {
        let mut queue = MappedFileQueue::new(config.commit_log_dir(), config.commit_log_file_size)
            .with_disk(config.disk.clone());
        let transient = config.transient_store_pool_enable;
        if transient {
            queue = queue.with_pool(Arc::new(TransientStorePool::new(
                config.transient_store_pool_size,
                config.commit_log_file_size,
            )));
        }
        CommitLog {
            disk: Arc::new(DiskSpaceMonitor::new(&config)),
            create_failure_logged: std::sync::atomic::AtomicI64::new(0),
            config,
            queue: Arc::new(queue),
            writer: Mutex::new(Writer {
                table: TopicQueueTable::default(),
            }),
            health,
            transient,
            flushed: OffsetWatch::new(0),
            flush_signal: Arc::new(Signal::new()),
            commit_signal: Arc::new(Signal::new()),
            visible_signal: Arc::new(Signal::new()),
            put_count: AtomicU64::new(0),
            flush_stats: Default::default(),
            flush_wake_at: AtomicU64::new(0),
            retention: Default::default(),
            put_bytes: AtomicU64::new(0),
        }
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }
    pub fn files(&self) -> &Arc<MappedFileQueue> {
        &self.queue
    }
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }
    pub fn disk(&self) -> &Arc<DiskSpaceMonitor> {
        &self.disk
    }
    /// The lowest offsets others still need (cleanup keeps them).
    pub fn retention(&self) -> &crate::retention::RetentionFloors {
        &self.retention
    }
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    /// Starts pre-allocating the next file in the background.
    pub fn start_allocator(&self) {
        self.queue.start_allocator(self.config.warm_mapped_file);
    }

    /// Offset of the oldest byte still stored.
    pub fn min_offset(&self) -> i64 {
        self.queue.min_offset()
    }

    /// Offset just past the last readable byte.
    pub fn max_offset(&self) -> i64 {
        self.queue.max_offset()
    }

    /// Offset just past the last appended byte (may be not yet readable in
    /// transient pool mode).
    pub fn max_wrote_offset(&self) -> i64 {
        self.queue.max_wrote_offset()
    }

    /// Offset up to which data is on disk.
    pub fn flushed_offset(&self) -> i64 {
        self.flushed.get()
    }

    /// See `flush_wake_at`.
    pub(crate) fn set_flush_wake_at(&self, count: u64) {
        self.flush_wake_at.store(count, Ordering::Relaxed);
    }

    /// fsync durations and group-commit sizes of this log's flushes.
    pub fn flush_stats(&self) -> &crate::flush_stats::FlushStats {
        &self.flush_stats
    }

    /// Messages and bytes appended since start.
    pub fn put_stats(&self) -> (u64, u64) {
        (
            self.put_count.load(Ordering::Relaxed),
            self.put_bytes.load(Ordering::Relaxed),
        )
    }

    /// Appends one message. The returned result says where it went; it is not
    /// necessarily durable yet (see [`CommitLog::wait_flushed`]).
    pub fn append(&self, draft: &RecordDraft<'_>) -> Result<AppendResult, AppendError> {
        self.check_draft(draft)?;
        ENCODE_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            buf.clear();
            let len = self.encode(draft, &mut buf)?;
            self.append_encoded(
                draft.topic,
                draft.queue_id,
                draft.sys_flag,
                &mut buf,
                &[len],
            )
        })
    }

    /// Appends a batch of messages to one topic queue as consecutive records
    /// with consecutive queue offsets, all in one file.
    pub fn append_batch(&self, drafts: &[RecordDraft<'_>]) -> Result<AppendResult, AppendError> {
        let first = drafts.first().ok_or_else(|| illegal("empty batch"))?;
        for d in drafts {
            if d.topic != first.topic || d.queue_id != first.queue_id {
                return Err(illegal(
                    "all messages of a batch must share topic and queue",
                ));
            }
            self.check_draft(d)?;
        }
        ENCODE_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            buf.clear();
            let mut sizes = Vec::with_capacity(drafts.len());
            for d in drafts {
                sizes.push(self.encode(d, &mut buf)?);
            }
            self.append_encoded(
                first.topic,
                first.queue_id,
                first.sys_flag,
                &mut buf,
                &sizes,
            )
        })
    }

    fn encode(&self, d: &RecordDraft<'_>, buf: &mut Vec<u8>) -> Result<usize, AppendError> {
        let r = if self.config.append_prop_crc {
            d.encode_with_crc_trailer(buf)
        } else {
            d.encode_into(buf)
        };
        r.map_err(|e| match e {
            basalt_common::CodecError::TooLarge {
                what: "properties", ..
            } => AppendError {
                status: PutMessageStatus::PropertiesSizeExceeded,
                detail: e.to_string(),
            },
            e => illegal(e.to_string()),
        })
    }

    fn check_draft(&self, d: &RecordDraft<'_>) -> Result<(), AppendError> {
        if d.body.len() > self.config.max_message_size {
            return Err(illegal(format!(
                "message body of {} bytes exceeds maxMessageSize {}",
                d.body.len(),
                self.config.max_message_size
            )));
        }
        if d.properties.len() > basalt_common::properties::MAX_PROPERTIES_LEN {
            return Err(AppendError {
                status: PutMessageStatus::PropertiesSizeExceeded,
                detail: format!("properties of {} bytes exceed 32767", d.properties.len()),
            });
        }
        if d.queue_id < 0 {
            return Err(illegal(format!("queue id {} is negative", d.queue_id)));
        }
        if d.topic.is_empty() {
            return Err(illegal("empty topic"));
        }
        Ok(())
    }

    /// The put lock's critical section. `buf` holds `sizes.len()` encoded
    /// records of one topic queue.
    fn append_encoded(
        &self,
        topic: &str,
        queue_id: i32,
        sys_flag: i32,
        buf: &mut [u8],
        sizes: &[usize],
    ) -> Result<AppendResult, AppendError> {
        let total = buf.len();
        debug_assert_eq!(sizes.iter().sum::<usize>(), total);
        if total + record::BLANK_LEN > self.config.commit_log_file_size {
            return Err(illegal(format!(
                "{total} bytes of records cannot fit in a CommitLog file of {} bytes",
                self.config.commit_log_file_size
            )));
        }
        // Prepared and rolled-back transaction records take no queue offset.
        let takes_queue_offset = sysflag::is_consumable(sys_flag);

        let mut w = self.writer.lock();
        if let Err(e) = self.health.check() {
            return Err(AppendError {
                status: PutMessageStatus::ServiceNotAvailable,
                detail: e.to_string(),
            });
        }
        let mut file = self.writable_file()?;
        if file.remaining() < total + record::BLANK_LEN {
            file.append_blank();
            file = self.writable_file()?;
        }
        let file_start = file.start_offset();
        let pos = file.wrote_position();
        let phys = file_start + pos as i64;
        // The disk's clock: the wall clock, or the simulator's (replayable).
        let store_ts = self.config.disk.now_millis();
        let queue_offset = if takes_queue_offset {
            w.table.get(topic, queue_id)
        } else {
            0
        };
        let seal = self.config.append_prop_crc;
        let mut batch_offsets = Vec::new();
        if sizes.len() > 1 {
            batch_offsets.reserve(sizes.len());
        }
        let placed = file.append_with(total, |dst| {
            dst.copy_from_slice(buf);
            let mut at = 0;
            for (i, len) in sizes.iter().enumerate() {
                let qoff = if takes_queue_offset {
                    queue_offset + i as i64
                } else {
                    0
                };
                let rec = &mut dst[at..at + len];
                record::stamp(rec, qoff, phys + at as i64, store_ts);
                if seal {
                    record::seal_crc(rec);
                }
                if sizes.len() > 1 {
                    batch_offsets.push(phys + at as i64);
                }
                at += len;
            }
        });
        debug_assert_eq!(placed, Some(pos), "room was checked under the put lock");
        self.queue.prefault_ahead(&file, pos, pos + total);
        if takes_queue_offset {
            w.table
                .set(topic, queue_id, queue_offset + sizes.len() as i64);
        }
        file.set_store_timestamp(store_ts);
        drop(w);

        let count = self
            .put_count
            .fetch_add(sizes.len() as u64, Ordering::Relaxed)
            + sizes.len() as u64;
        self.put_bytes.fetch_add(total as u64, Ordering::Relaxed);
        if self.transient {
            self.commit_signal.notify();
        } else {
            self.visible_signal.notify();
            if count >= self.flush_wake_at.load(Ordering::Relaxed) {
                self.flush_signal.notify();
            }
        }
        Ok(AppendResult {
            wrote_offset: phys,
            wrote_bytes: total,
            queue_offset,
            msg_count: sizes.len(),
            store_timestamp: store_ts,
            batch_offsets,
        })
    }

    /// The tail file if it has room for at least a filler, else a new one.
    /// A new file means the disk usage moved: it is sampled again. A file
    /// that cannot be created (a full disk) is CREATE_MAPPED_FILE_FAILED, a
    /// refusal that poisons nothing: puts succeed again once there is room.
    fn writable_file(&self) -> Result<Arc<MappedFile>, AppendError> {
        match self.queue.last_writable(0) {
            Ok(f) => {
                if f.wrote_position() == 0 {
                    self.disk.sample();
                }
                Ok(f)
            }
            Err(e) => {
                self.disk.sample();
                let now = basalt_common::time::now_millis();
                let last = self.create_failure_logged.load(Ordering::Relaxed);
                if now - last >= 1000
                    && self
                        .create_failure_logged
                        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    tracing::error!(error = %e, "cannot create a CommitLog file; puts fail until it can be created");
                }
                Err(AppendError {
                    status: PutMessageStatus::CreateMappedFileFailed,
                    detail: e.to_string(),
                })
            }
        }
    }

    /// Appends raw CommitLog bytes at `offset`, which must be the current end
    /// (an HA slave copying its master). The bytes must be whole records, and
    /// may end with an end-of-file filler. Returns the new end.
    pub fn append_raw(&self, offset: i64, data: &[u8]) -> Result<i64, StoreError> {
        self.health.check()?;
        let _w = self.writer.lock();
        let end = self.queue.max_wrote_offset();
        // An empty log may start where the master's oldest file starts.
        let empty_start =
            self.queue.is_empty() && offset % self.config.commit_log_file_size as i64 == 0;
        if offset != end && !empty_start {
            return Err(StoreError::Corrupt {
                what: "replicated CommitLog data",
                path: self.queue.dir().to_path_buf(),
                offset,
                reason: format!("data starts at {offset} but the local log ends at {end}"),
            });
        }
        let file = self.queue.last_writable(offset).map_err(|e| {
            tracing::error!(error = %e, "cannot create a CommitLog file");
            e
        })?;
        let file_pos = (offset - file.start_offset()) as usize;
        if file_pos + data.len() > file.size() {
            return Err(StoreError::Corrupt {
                what: "replicated CommitLog data",
                path: file.path().to_path_buf(),
                offset,
                reason: format!("{} bytes cross the end of the file", data.len()),
            });
        }
        validate_raw_chunk(data, offset, self.config.check_crc_on_recover).map_err(|reason| {
            StoreError::Corrupt {
                what: "replicated CommitLog data",
                path: file.path().to_path_buf(),
                offset,
                reason,
            }
        })?;
        // A chunk that ends with a filler fills the file.
        let ends_with_blank = ends_with_blank(data);
        file.append(data).ok_or_else(|| StoreError::Corrupt {
            what: "replicated CommitLog data",
            path: file.path().to_path_buf(),
            offset,
            reason: "no room in the file".into(),
        })?;
        if let Some(ts) = last_store_timestamp(data) {
            file.set_store_timestamp(ts);
        }
        if ends_with_blank {
            file.fill_to_end();
        }
        let new_end = file.start_offset() + file.wrote_position() as i64;
        drop(_w);
        self.visible_signal.notify();
        self.flush_signal.notify();
        Ok(new_end)
    }

    /// Waits until everything up to `end_offset` is on disk, or `timeout`.
    pub async fn wait_flushed(&self, end_offset: i64, timeout: Duration) -> PutMessageStatus {
        self.flush_signal.notify();
        match tokio::time::timeout(timeout, self.flushed.wait_for(end_offset)).await {
            Ok(Ok(())) => PutMessageStatus::PutOk,
            Ok(Err(_)) => PutMessageStatus::ServiceNotAvailable,
            Err(_) => PutMessageStatus::FlushDiskTimeout,
        }
    }

    /// Blocking form of [`CommitLog::wait_flushed`].
    pub fn wait_flushed_blocking(&self, end_offset: i64, timeout: Duration) -> PutMessageStatus {
        self.flush_signal.notify();
        match self.flushed.wait_blocking(end_offset, timeout) {
            Ok(()) => PutMessageStatus::PutOk,
            Err(WaitError::Failed) => PutMessageStatus::ServiceNotAvailable,
            Err(WaitError::TimedOut) => PutMessageStatus::FlushDiskTimeout,
        }
    }

    /// Copies write-buffer bytes into the files (transient pool mode) and
    /// wakes the flusher and the dispatcher if anything moved.
    pub(crate) fn commit(&self, least_pages: usize) -> Result<bool> {
        let before = self.queue.committed_where();
        let done = self.queue.commit(least_pages)?;
        if self.queue.committed_where() != before {
            self.visible_signal.notify();
            self.flush_signal.notify();
        }
        Ok(done)
    }

    /// fsyncs pending data (if at least `least_pages` pages wait; 0: any) and
    /// publishes the new flushed offset. On failure the store is poisoned and
    /// waiters are failed. Returns the store time of the last flushed record.
    ///
    /// `note` gets the new flushed offset and that store time after the
    /// fsync returned and before waiters are woken: what it notes (the
    /// checkpoint's durable offset) is in place once a put is answered, so
    /// a thread acting on the answer never sees the older value (the
    /// power-loss simulator's replay depended on which thread ran first).
    pub(crate) fn flush_noting(
        &self,
        least_pages: usize,
        note: impl FnOnce(i64, Option<i64>),
    ) -> Result<Option<i64>> {
        let ts = self
            .queue
            .find_by_offset(self.queue.flushed_where())
            .or_else(|| self.queue.last())
            .map(|f| f.store_timestamp());
        let ts_last = self.queue.last().map(|f| f.store_timestamp());
        let before = self.queue.flushed_where();
        let puts = self.put_count.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        match self.queue.flush(least_pages) {
            Ok(offset) => {
                if offset > before {
                    let micros = started.elapsed().as_micros() as u64;
                    self.flush_stats.record(micros, puts);
                }
                // The newest timestamp whose record is certainly flushed.
                let ts = if offset >= self.queue.max_wrote_offset() {
                    ts_last
                } else {
                    ts
                };
                let ts = ts.filter(|t| *t > 0);
                note(offset, ts);
                self.flushed.publish(offset);
                Ok(ts)
            }
            Err(e) => {
                self.health.poison(&e);
                self.flushed.fail();
                Err(e)
            }
        }
    }

    /// The record at `offset` (zero-copy), or `None` if there is none readable.
    pub fn read_record(&self, offset: i64) -> Option<Bytes> {
        let f = self.queue.find_by_offset(offset)?;
        let pos = (offset - f.start_offset()) as usize;
        let head = f.slice(pos, 8)?;
        match record::peek_head(head)? {
            RecordHead::Message { total_size } => f.bytes(pos, total_size),
            _ => None,
        }
    }

    /// `size` bytes at `offset` (zero-copy), within one file.
    pub fn read_bytes(&self, offset: i64, size: usize) -> Option<Bytes> {
        let f = self.queue.find_by_offset(offset)?;
        f.bytes((offset - f.start_offset()) as usize, size)
    }

    /// Readable bytes from `offset` to the end of its file's readable part.
    pub fn read_to_file_end(&self, offset: i64) -> Option<Bytes> {
        let f = self.queue.find_by_offset(offset)?;
        let pos = (offset - f.start_offset()) as usize;
        let committed = f.committed_position();
        if pos >= committed {
            return None;
        }
        f.bytes(pos, committed - pos)
    }

    /// Store timestamp of the record at `offset`.
    pub fn store_timestamp_at(&self, offset: i64) -> Option<i64> {
        let f = self.queue.find_by_offset(offset)?;
        let pos = (offset - f.start_offset()) as usize;
        let head = f.slice(pos, record::pos::BORN_HOST + 20 + 8)?;
        let sys_flag = record::read_i32(head, record::pos::SYS_FLAG);
        let at = record::store_timestamp_pos(sys_flag);
        Some(record::read_i64(head, at))
    }

    /// Offset of the first byte of the file after the one holding `offset`.
    pub fn roll_next_file(&self, offset: i64) -> i64 {
        let size = self.config.commit_log_file_size as i64;
        offset + size - offset % size
    }

    /// Replaces the topic queue table (after recovery).
    pub fn set_topic_queue_table(&self, table: TopicQueueTable) {
        self.writer.lock().table = table;
    }

    /// Raises next queue offsets to at least the given ones (records recovery
    /// could not dispatch hold them: new puts must not reuse them).
    pub(crate) fn raise_queue_offsets(&self, next: &HashMap<(String, i32), i64>) {
        let table = &mut self.writer.lock().table;
        for ((topic, queue_id), n) in next {
            if table.get(topic, *queue_id) < *n {
                table.set(topic, *queue_id, *n);
            }
        }
    }

    /// The next queue offset of a topic queue.
    pub fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.writer.lock().table.get(topic, queue_id)
    }

    /// Forgets a deleted topic's queue offsets.
    pub fn remove_topic(&self, topic: &str) {
        self.writer.lock().table.remove_topic(topic);
    }

    /// Cuts the log at `offset` (recovery, or a replica discarding a divergent tail).
    pub fn truncate(&self, offset: i64) -> Result<()> {
        let _w = self.writer.lock();
        self.queue.truncate_dirty(offset)?;
        self.queue.set_flushed_and_committed(offset);
        self.flushed.reset(offset);
        Ok(())
    }

    /// After recovery: positions resume at `end`.
    pub(crate) fn set_recovered_end(&self, end: i64) {
        self.queue.set_flushed_and_committed(end);
        self.flushed.reset(end);
    }

    /// Stops background helpers of the file queue.
    pub(crate) fn shutdown_files(&self) {
        self.queue.shutdown();
    }
}

/// Checks a replicated chunk: whole records (CRC-checked if asked) and
/// optionally a final end-of-file filler.
fn validate_raw_chunk(data: &[u8], base: i64, check_crc: bool) -> std::result::Result<(), String> {
    let mut at = 0;
    while at < data.len() {
        match record::peek_head(&data[at..]) {
            Some(RecordHead::Message { total_size }) => {
                let view = record::RecordView::parse(&data[at..], check_crc)
                    .map_err(|e| format!("record at {}: {e}", base + at as i64))?;
                if view.physical_offset != base + at as i64 {
                    return Err(format!(
                        "record at {} says it is at {}",
                        base + at as i64,
                        view.physical_offset
                    ));
                }
                at += total_size;
            }
            Some(RecordHead::Blank) => return Ok(()),
            other => {
                return Err(format!("no record at {}: {:?}", base + at as i64, other));
            }
        }
    }
    Ok(())
}

fn ends_with_blank(data: &[u8]) -> bool {
    let mut at = 0;
    while at < data.len() {
        match record::peek_head(&data[at..]) {
            Some(RecordHead::Message { total_size }) => at += total_size,
            Some(RecordHead::Blank) => return true,
            _ => return false,
        }
    }
    false
}

fn last_store_timestamp(data: &[u8]) -> Option<i64> {
    let mut at = 0;
    let mut ts = None;
    while at < data.len() {
        match record::peek_head(&data[at..]) {
            Some(RecordHead::Message { total_size }) => {
                if let Ok(v) = record::RecordView::parse(&data[at..], false) {
                    ts = Some(v.store_timestamp);
                }
                at += total_size;
            }
            _ => break,
        }
    }
    ts
}
