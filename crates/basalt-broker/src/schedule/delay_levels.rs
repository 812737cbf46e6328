//! Delayed delivery (RocketMQ 4.x `ScheduleMessageService`): a message with
//! a delay level is stored in `SCHEDULE_TOPIC_XXXX` queue `level - 1` with its
//! delivery time as the ConsumeQueue tags code; one task per level waits for
//! that time and re-puts the message to its real topic and queue.
//! Progress per level is kept in delayOffset.json.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use basalt_common::constants::{property, topic as reserved};
use basalt_common::record::{RecordDraft, RecordView};
use basalt_common::time::now_millis;
use basalt_store::dispatch::DelayLevels;
use basalt_store::{MessageStore, PutMessageStatus};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::clients::waiters::PullWaiters;
use crate::metadata::file::ConfigFile;
use crate::metadata::formats::{parse_delay_offsets, render_delay_offsets};
use crate::writer::MessageWriter;

/// Next schedule-queue offset to deliver, per delay level
/// (delayOffset.json). Invariant: an offset only moves forward, except when
/// a slave copies its master's table.
#[derive(Debug)]
pub struct DelayOffsets {
    file: ConfigFile,
    offsets: Mutex<BTreeMap<i32, i64>>,
    dirty: AtomicBool,
}

impl DelayOffsets {
    /// Loads delayOffset.json (or its .bak). Blocking.
    pub fn load(root: &Path) -> Self {
        let file = ConfigFile::new(root, "delayOffset.json");
        let offsets = file.load(parse_delay_offsets).unwrap_or_default();
        DelayOffsets {
            file,
            offsets: Mutex::new(offsets),
            dirty: AtomicBool::new(false),
        }
    }

    /// Replaces the table with a master's (a slave's metadata sync).
    pub fn replace_from_json(&self, text: &str) {
        match parse_delay_offsets(text) {
            Ok(t) => {
                *self.offsets.lock() = t;
                self.dirty.store(true, Ordering::Release);
                self.persist();
            }
            Err(e) => tracing::warn!(error = %e, "bad delay offsets from the master"),
        }
    }

    pub fn offset(&self, level: i32) -> i64 {
        self.offsets.lock().get(&level).copied().unwrap_or(0)
    }

    pub(crate) fn set_offset(&self, level: i32, offset: i64) {
        self.offsets.lock().insert(level, offset);
        self.dirty.store(true, Ordering::Release);
    }

    /// `{"offsetTable":{1:0,2:15}}` (GET_ALL_DELAY_OFFSET body and file).
    pub fn encode(&self) -> String {
        render_delay_offsets(&self.offsets.lock())
    }

    pub fn persist(&self) {
        // The flag is read under the file's save lock, so concurrent callers
        // (the periodic flush, a slave's sync, shutdown) write in turn and
        // the last write holds the newest table.
        let saved = self.file.save_latest(|| {
            self.dirty
                .swap(false, Ordering::AcqRel)
                .then(|| self.encode())
        });
        if let Err(e) = saved {
            self.dirty.store(true, Ordering::Release);
            tracing::error!(error = %e, "cannot persist delayOffset.json");
        }
    }
}

/// What delayed delivery needs: the schedule queues, the write path, the
/// progress table, and the broker's lifecycle.
#[derive(Debug, Clone)]
pub struct DelayDelivery {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) writer: MessageWriter,
    pub(crate) waiters: Arc<PullWaiters>,
    pub(crate) offsets: Arc<DelayOffsets>,
    pub(crate) levels: DelayLevels,
    pub(crate) store_host: std::net::SocketAddr,
    pub(crate) shutting_down: Arc<std::sync::atomic::AtomicBool>,
}

impl DelayDelivery {
    /// Starts one delivery task per delay level.
    pub fn start(self) -> Vec<JoinHandle<()>> {
        (1..=self.levels.max_level())
            .map(|level| {
                let d = self.clone();
                tokio::spawn(async move { d.run_level(level).await })
            })
            .collect()
    }

    async fn run_level(self, level: i32) {
        let queue_id = level - 1;
        let delay = self.levels.delay_of(level);
        let notify = self.waiters.notify_for(reserved::SCHEDULE_TOPIC, queue_id);
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            if !self.writer.is_writable() {
                // A ledger member delivers only while it is the master; check
                // again on a slow timer (a configured slave never starts this).
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let offset = self.offsets.offset(level);
            let Some(cq) = self
                .store
                .get_consume_queue(reserved::SCHEDULE_TOPIC, queue_id)
            else {
                notified.await;
                continue;
            };
            if offset < cq.min_offset() {
                self.offsets.set_offset(level, cq.min_offset());
                continue;
            }
            let Some(unit) = cq.unit_at(offset) else {
                notified.await;
                continue;
            };
            let now = now_millis();
            // A delivery time further out than the level's delay means the
            // clock went back; deliver now rather than wait for it.
            let deliver_at = if unit.tags_code > now + delay {
                now
            } else {
                unit.tags_code
            };
            if deliver_at > now {
                tokio::time::sleep(Duration::from_millis((deliver_at - now) as u64)).await;
                continue;
            }
            match self.deliver(unit.physical_offset, unit.size).await {
                Ok(()) => self.offsets.set_offset(level, offset + 1),
                Err(e) => {
                    tracing::warn!(level, offset, error = %e, "delayed delivery failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Re-puts one delayed message to its real topic and queue.
    async fn deliver(&self, phys: i64, size: i32) -> Result<(), String> {
        let Some(rec) = self.store.log().read_bytes(phys, size as usize) else {
            // Expired from the CommitLog: nothing to deliver.
            return Ok(());
        };
        let v = RecordView::parse(&rec, false).map_err(|e| e.to_string())?;
        let text = |k: &str| v.property(k).and_then(|b| std::str::from_utf8(b).ok());
        let (Some(topic), Some(qid)) = (text(property::REAL_TOPIC), text(property::REAL_QID))
        else {
            tracing::error!(
                phys,
                "delayed message without REAL_TOPIC/REAL_QID; dropping it"
            );
            return Ok(());
        };
        let queue_id: i32 = qid.parse().map_err(|_| format!("bad REAL_QID {qid:?}"))?;
        let props =
            basalt_common::properties::without(v.properties, &[property::DELAY, property::CRC32]);
        let draft = RecordDraft {
            topic,
            queue_id,
            flag: v.flag,
            sys_flag: v.sys_flag,
            born_timestamp: v.born_timestamp,
            born_host: v.born_host,
            store_host: self.store_host,
            reconsume_times: v.reconsume_times,
            prepared_transaction_offset: v.prepared_transaction_offset,
            body: v.body,
            properties: &props,
        };
        let r = self.writer.put(&[draft], false).await;
        if r.status == PutMessageStatus::PutOk {
            Ok(())
        } else {
            Err(format!("{}: {}", r.status, r.detail.unwrap_or_default()))
        }
    }
}
