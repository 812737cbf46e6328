//! Dispatch ("reput"): turns CommitLog records into ConsumeQueue units and
//! IndexFile entries, and tells listeners (long-polling pulls) that messages
//! arrived.
//!
//! One thread runs it; it is the only writer of every ConsumeQueue and of the
//! index. It reads only readable CommitLog bytes below the dispatch limit
//! (normally the readable end; in ledger mode the committed end).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use basalt_common::constants::topic as reserved;
use basalt_common::hash;
use basalt_common::record::{self, RecordHead, RecordView};
use basalt_common::sysflag;
use parking_lot::RwLock;

use crate::commit_log::CommitLog;
use crate::consume_queue::{ConsumeQueueTable, CqUnit};
use crate::error::Result;
use crate::index::{IndexRequest, IndexService};
use crate::names::{Unplaceable, check_queue_address};

/// What dispatch needs from one record.
#[derive(Debug, Clone, Copy)]
pub struct DispatchRequest<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub commit_log_offset: i64,
    pub msg_size: i32,
    pub tags_code: i64,
    pub store_timestamp: i64,
    pub consume_queue_offset: i64,
    pub keys: Option<&'a str>,
    pub uniq_key: Option<&'a str>,
    pub sys_flag: i32,
}

/// Delay levels (`messageDelayLevel`), in milliseconds, level 1 first.
#[derive(Debug, Clone)]
pub struct DelayLevels(pub Vec<i64>);

impl Default for DelayLevels {
    fn default() -> Self {
        DelayLevels::parse("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
            .expect("default delay levels parse")
    }
}

impl DelayLevels {
    /// Parses RocketMQ's `messageDelayLevel` ("1s 5s 1m 2h 1d").
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        let mut v = Vec::new();
        for word in s.split_whitespace() {
            let (num, unit) = word.split_at(word.len() - 1);
            let n: i64 = num
                .parse()
                .map_err(|_| format!("bad delay level {word:?}"))?;
            let ms = match unit {
                "s" => 1000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(format!("bad delay level unit in {word:?}")),
            };
            v.push(n * ms);
        }
        if v.is_empty() {
            return Err("no delay levels".into());
        }
        Ok(DelayLevels(v))
    }

    /// Delay of `level` (1-based), clamped to the configured range.
    pub fn delay_of(&self, level: i32) -> i64 {
        let idx = (level.max(1) as usize - 1).min(self.0.len() - 1);
        self.0[idx]
    }

    pub fn max_level(&self) -> i32 {
        self.0.len() as i32
    }
}

impl<'a> DispatchRequest<'a> {
    /// Builds the request from a parsed record, or says why the record
    /// cannot be placed in a ConsumeQueue (see [`crate::names`]).
    pub fn from_record(view: &RecordView<'a>, delays: &DelayLevels) -> Result<Self, Unplaceable> {
        let topic = std::str::from_utf8(view.topic).map_err(|_| Unplaceable::TopicNotUtf8)?;
        check_queue_address(topic, view.queue_id)?;
        let mut tags = None;
        let mut keys = None;
        let mut uniq = None;
        let mut delay = None;
        for (k, v) in basalt_common::properties::iter(view.properties) {
            match k {
                b"TAGS" => tags = Some(v),
                b"KEYS" => keys = std::str::from_utf8(v).ok(),
                b"UNIQ_KEY" => uniq = std::str::from_utf8(v).ok(),
                b"DELAY" => delay = Some(v),
                _ => {}
            }
        }
        let tags_code = if topic == reserved::SCHEDULE_TOPIC {
            // Delayed messages are indexed by delivery time, not tag.
            let level = delay
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| d.parse::<i32>().ok())
                .unwrap_or(1);
            view.store_timestamp + delays.delay_of(level)
        } else {
            hash::tags_code(tags)
        };
        Ok(DispatchRequest {
            topic,
            queue_id: view.queue_id,
            commit_log_offset: view.physical_offset,
            msg_size: view.total_size() as i32,
            tags_code,
            store_timestamp: view.store_timestamp,
            consume_queue_offset: view.queue_offset,
            keys,
            uniq_key: uniq,
            sys_flag: view.sys_flag,
        })
    }
}

/// Told when messages become consumable (wakes held long-polling pulls).
pub trait ArrivalListener: Send + Sync {
    /// A message was added to `topic`/`queue_id`, whose max offset is now
    /// `max_offset`.
    fn arrived(&self, topic: &str, queue_id: i32, max_offset: i64, tags_code: i64);
}

/// Writes ConsumeQueue units and index entries for dispatch requests.
pub struct Dispatcher {
    pub(crate) consume_queues: Arc<ConsumeQueueTable>,
    pub(crate) index: Option<Arc<IndexService>>,
    pub(crate) delays: DelayLevels,
    listener: RwLock<Option<Arc<dyn ArrivalListener>>>,
    /// Store time of the last record dispatched.
    last_store_timestamp: AtomicI64,
    /// Records passed over because they cannot be placed (see [`crate::names`]).
    unplaceable: AtomicU64,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher").finish_non_exhaustive()
    }
}

impl Dispatcher {
    pub fn new(
        consume_queues: Arc<ConsumeQueueTable>,
        index: Option<Arc<IndexService>>,
        delays: DelayLevels,
    ) -> Self {
        Dispatcher {
            consume_queues,
            index,
            delays,
            listener: RwLock::new(None),
            last_store_timestamp: AtomicI64::new(0),
            unplaceable: AtomicU64::new(0),
        }
    }

    /// The delay levels delayed records are scheduled by.
    pub fn delays(&self) -> &DelayLevels {
        &self.delays
    }

    /// Records passed over since the store opened because they cannot be
    /// placed in a ConsumeQueue.
    pub fn unplaceable_records(&self) -> u64 {
        self.unplaceable.load(Ordering::Relaxed)
    }

    /// Dispatches one stored record. A record that cannot be placed (a topic
    /// that is no file name, a queue id out of range) is reported and passed
    /// over, as RocketMQ passes over a record it cannot build a dispatch
    /// request for: it stays in the CommitLog, `basalt store check` lists it,
    /// and every other record is still dispatched. Errors are I/O errors
    /// (the caller retries the same record; nothing is skipped).
    pub fn dispatch_record(&self, view: &RecordView<'_>, notify: bool) -> Result<()> {
        match DispatchRequest::from_record(view, &self.delays) {
            Ok(req) => self.dispatch(&req, notify),
            Err(why) => {
                self.unplaceable.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    offset = view.physical_offset,
                    topic = %String::from_utf8_lossy(view.topic),
                    queue = view.queue_id,
                    reason = %why,
                    "record cannot be placed in a ConsumeQueue; passing over it"
                );
                Ok(())
            }
        }
    }

    /// Store time of the last record dispatched.
    pub fn last_store_timestamp(&self) -> i64 {
        self.last_store_timestamp.load(Ordering::Acquire)
    }

    pub fn set_listener(&self, l: Arc<dyn ArrivalListener>) {
        *self.listener.write() = Some(l);
    }

    /// Dispatches one record. `notify` says whether to tell the listener
    /// (not during recovery).
    pub fn dispatch(&self, req: &DispatchRequest<'_>, notify: bool) -> Result<()> {
        if sysflag::is_consumable(req.sys_flag) {
            let cq = self.consume_queues.get_or_create(req.topic, req.queue_id)?;
            cq.put_unit(
                req.consume_queue_offset,
                CqUnit {
                    physical_offset: req.commit_log_offset,
                    size: req.msg_size,
                    tags_code: req.tags_code,
                },
            )?;
            if notify && let Some(l) = self.listener.read().as_ref() {
                l.arrived(req.topic, req.queue_id, cq.max_offset(), req.tags_code);
            }
        }
        if let Some(index) = &self.index
            && sysflag::transaction_type(req.sys_flag) != sysflag::TRANSACTION_ROLLBACK_TYPE
        {
            index.build_index(&IndexRequest {
                topic: req.topic,
                physical_offset: req.commit_log_offset,
                store_timestamp: req.store_timestamp,
                uniq_key: req.uniq_key,
                keys: req.keys,
            })?;
        }
        // After the writes: a flush that samples this time covers them.
        self.last_store_timestamp
            .store(req.store_timestamp, Ordering::Release);
        Ok(())
    }
}

/// Where dispatch may read up to.
pub type DispatchLimit = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The background dispatch ("reput") service.
pub struct DispatchService {
    shared: Arc<DispatchShared>,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

struct DispatchShared {
    commit_log: Arc<CommitLog>,
    dispatcher: Arc<Dispatcher>,
    reput_from: AtomicI64,
    stop: AtomicBool,
    limit: RwLock<Option<DispatchLimit>>,
    /// Published after each batch: everything below is dispatched.
    dispatched: crate::signal::OffsetWatch,
}

impl DispatchService {
    pub fn start(commit_log: Arc<CommitLog>, dispatcher: Arc<Dispatcher>, from: i64) -> Self {
        let shared = Arc::new(DispatchShared {
            commit_log,
            dispatcher,
            reput_from: AtomicI64::new(from),
            stop: AtomicBool::new(false),
            limit: RwLock::new(None),
            dispatched: crate::signal::OffsetWatch::new(from),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("basalt-dispatch".into())
            .spawn(move || s.run())
            .expect("spawn dispatch thread");
        DispatchService {
            shared,
            thread: parking_lot::Mutex::new(Some(thread)),
        }
    }

    /// Offset up to which every record has been dispatched.
    pub fn reput_from(&self) -> i64 {
        self.shared.reput_from.load(Ordering::Acquire)
    }

    /// Bytes readable but not yet dispatched.
    pub fn behind(&self) -> i64 {
        (self.shared.limit() - self.reput_from()).max(0)
    }

    /// Overrides where dispatch may read up to (ledger mode: committed end).
    pub fn set_limit(&self, limit: DispatchLimit) {
        *self.shared.limit.write() = Some(limit);
        self.shared.commit_log.visible_signal.notify();
    }

    /// Wakes the service (the limit moved).
    pub fn wake(&self) {
        self.shared.commit_log.visible_signal.notify();
    }

    /// Waits until everything below `offset` is dispatched, or `timeout`.
    pub fn wait_dispatched(&self, offset: i64, timeout: Duration) -> bool {
        self.shared
            .dispatched
            .wait_blocking(offset, timeout)
            .is_ok()
    }

    /// Async form of [`DispatchService::wait_dispatched`], without timeout:
    /// resolves once everything below `offset` is dispatched, or with an
    /// error if the store fails.
    pub async fn dispatched_beyond(&self, offset: i64) -> Result<(), crate::signal::WaitError> {
        self.shared.dispatched.wait_for(offset).await
    }

    /// Offset up to which records are dispatched.
    pub fn dispatched(&self) -> i64 {
        self.shared.dispatched.get()
    }

    /// Restarts dispatch at `offset` (after a truncation).
    pub fn reset(&self, offset: i64) {
        self.shared.reput_from.store(offset, Ordering::Release);
        self.shared.dispatched.reset(offset);
    }

    /// Dispatches what is readable, then stops the thread. Idempotent.
    pub fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.commit_log.visible_signal.notify();
        let t = self.thread.lock().take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

impl Drop for DispatchService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl DispatchShared {
    fn limit(&self) -> i64 {
        match self.limit.read().as_ref() {
            Some(f) => f().min(self.commit_log.max_offset()),
            None => self.commit_log.max_offset(),
        }
    }

    fn run(&self) {
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            let progressed = match self.dispatch_available() {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!(error = %e, "dispatch failed; retrying in 1 s");
                    self.commit_log
                        .visible_signal
                        .wait(Some(Duration::from_secs(1)));
                    continue;
                }
            };
            if stopping {
                // Final drain done (dispatch_available ran after stop was set).
                return;
            }
            if !progressed {
                self.commit_log.visible_signal.wait(None);
            }
        }
    }

    /// Dispatches every readable record below the limit. Returns whether
    /// anything moved.
    fn dispatch_available(&self) -> Result<bool> {
        let mut moved = false;
        loop {
            let from = self.reput_from.load(Ordering::Acquire);
            let limit = self.limit();
            if from >= limit {
                if from < self.commit_log.min_offset() {
                    // Cleanup removed files we never dispatched (should not
                    // happen); resume at the oldest data.
                    self.reput_from
                        .store(self.commit_log.min_offset(), Ordering::Release);
                    continue;
                }
                return Ok(moved);
            }
            let Some(data) = self.commit_log.read_to_file_end(from) else {
                if from < self.commit_log.min_offset() {
                    tracing::warn!(
                        from,
                        min = self.commit_log.min_offset(),
                        "dispatch position was deleted; skipping ahead"
                    );
                    self.reput_from
                        .store(self.commit_log.min_offset(), Ordering::Release);
                    continue;
                }
                return Ok(moved);
            };
            let avail = (limit - from).min(data.len() as i64) as usize;
            let mut at = 0usize;
            while at < avail {
                match record::peek_head(&data[at..]) {
                    Some(RecordHead::Message { total_size }) if at + total_size <= avail => {
                        match RecordView::parse(&data[at..at + total_size], false) {
                            Ok(view) => {
                                if let Err(e) = self.dispatcher.dispatch_record(&view, true) {
                                    // Nothing past this record is dispatched
                                    // until it is: publish what is done.
                                    self.advance(from, at, &mut moved);
                                    return Err(e);
                                }
                            }
                            Err(e) => {
                                tracing::error!(offset = from + at as i64, error = %e,
                                    "unreadable record below the readable end; skipping it");
                            }
                        }
                        at += total_size;
                    }
                    Some(RecordHead::Message { .. }) => break,
                    Some(RecordHead::Blank) => {
                        let next = self.commit_log.roll_next_file(from + at as i64);
                        self.reput_from.store(next, Ordering::Release);
                        self.dispatched.publish(next);
                        moved = true;
                        at = usize::MAX;
                        break;
                    }
                    other => {
                        tracing::error!(offset = from + at as i64, head = ?other,
                            "no record where one is expected; dispatch stops until restart");
                        return Ok(moved);
                    }
                }
            }
            if at == usize::MAX {
                continue;
            }
            if at == 0 {
                return Ok(moved);
            }
            self.advance(from, at, &mut moved);
        }
    }

    /// Records that everything below `from + at` is dispatched.
    fn advance(&self, from: i64, at: usize, moved: &mut bool) {
        if at == 0 {
            return;
        }
        let new_from = from + at as i64;
        self.reput_from.store(new_from, Ordering::Release);
        self.dispatched.publish(new_from);
        *moved = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_levels_parse() {
        let d = DelayLevels::default();
        assert_eq!(d.max_level(), 18);
        assert_eq!(d.delay_of(1), 1000);
        assert_eq!(d.delay_of(18), 7_200_000);
        assert_eq!(d.delay_of(99), 7_200_000);
        assert!(DelayLevels::parse("1x").is_err());
    }
}
