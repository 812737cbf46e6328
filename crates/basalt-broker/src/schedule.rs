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
use basalt_store::PutMessageStatus;
use basalt_store::dispatch::DelayLevels;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::config_file::ConfigFile;

/// Next schedule-queue offset to deliver, per delay level.
#[derive(Debug)]
pub struct ScheduleService {
    file: ConfigFile,
    pub levels: DelayLevels,
    offsets: Mutex<BTreeMap<i32, i64>>,
    dirty: AtomicBool,
}

impl ScheduleService {
    pub fn load(root: &Path, levels: DelayLevels) -> Self {
        let file = ConfigFile::new(root, "delayOffset.json");
        let offsets = file.load(parse_delay_offsets).unwrap_or_default();
        ScheduleService {
            file,
            levels,
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

    fn set_offset(&self, level: i32, offset: i64) {
        self.offsets.lock().insert(level, offset);
        self.dirty.store(true, Ordering::Release);
    }

    /// `{"offsetTable":{1:0,2:15}}` (GET_ALL_DELAY_OFFSET body and file).
    pub fn encode(&self) -> String {
        let mut out = Vec::new();
        out.extend_from_slice(b"{\"offsetTable\":");
        basalt_remoting::fastjson::write_bare_key_i64_map(
            &mut out,
            self.offsets.lock().iter().map(|(k, v)| (*k as i64, *v)),
        );
        out.push(b'}');
        String::from_utf8(out).unwrap_or_default()
    }

    pub fn persist(&self) {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        if let Err(e) = self.file.save(&self.encode()) {
            self.dirty.store(true, Ordering::Release);
            tracing::error!(error = %e, "cannot persist delayOffset.json");
        }
    }
}

/// Parses `{"offsetTable":{1:0,2:15}}`.
fn parse_delay_offsets(text: &str) -> Result<BTreeMap<i32, i64>, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct F {
        #[serde(default)]
        offset_table: BTreeMap<String, i64>,
    }
    let f: F = basalt_remoting::fastjson::from_str(text).map_err(|e| e.to_string())?;
    f.offset_table
        .into_iter()
        .map(|(k, v)| k.parse::<i32>().map(|k| (k, v)).map_err(|e| e.to_string()))
        .collect()
}

/// Starts one delivery task per delay level.
pub fn start(broker: Arc<Broker>) -> Vec<JoinHandle<()>> {
    (1..=broker.schedule.levels.max_level())
        .map(|level| {
            let b = Arc::clone(&broker);
            tokio::spawn(async move { run_level(b, level).await })
        })
        .collect()
}

async fn run_level(broker: Arc<Broker>, level: i32) {
    let queue_id = level - 1;
    let delay = broker.schedule.levels.delay_of(level);
    let notify = broker
        .waiters
        .notify_for(reserved::SCHEDULE_TOPIC, queue_id);
    loop {
        if broker.is_shutting_down() {
            return;
        }
        if broker.is_slave() {
            // A ledger member delivers only while it is the master; check
            // again on a slow timer (a configured slave never starts this).
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let notified = notify.notified();

        tokio::pin!(notified);
        notified.as_mut().enable();
        let offset = broker.schedule.offset(level);
        let Some(cq) = broker
            .store
            .get_consume_queue(reserved::SCHEDULE_TOPIC, queue_id)
        else {
            notified.await;
            continue;
        };
        if offset < cq.min_offset() {
            broker.schedule.set_offset(level, cq.min_offset());
            continue;
        }
        let Some(unit) = cq.unit_at(offset) else {
            notified.await;
            continue;
        };
        let now = now_millis();
        // A delivery time further out than the level's delay means the clock
        // went back; deliver now rather than wait for it.
        let deliver_at = if unit.tags_code > now + delay {
            now
        } else {
            unit.tags_code
        };
        if deliver_at > now {
            tokio::time::sleep(Duration::from_millis((deliver_at - now) as u64)).await;
            continue;
        }
        match deliver(&broker, unit.physical_offset, unit.size).await {
            Ok(()) => broker.schedule.set_offset(level, offset + 1),
            Err(e) => {
                tracing::warn!(level, offset, error = %e, "delayed delivery failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Re-puts one delayed message to its real topic and queue.
async fn deliver(broker: &Broker, phys: i64, size: i32) -> Result<(), String> {
    let Some(rec) = broker.store.log().read_bytes(phys, size as usize) else {
        // Expired from the CommitLog: nothing to deliver.
        return Ok(());
    };
    let v = RecordView::parse(&rec, false).map_err(|e| e.to_string())?;
    let text = |k: &str| v.property(k).and_then(|b| std::str::from_utf8(b).ok());
    let (Some(topic), Some(qid)) = (text(property::REAL_TOPIC), text(property::REAL_QID)) else {
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
        store_host: broker.config.broker_addr(),
        reconsume_times: v.reconsume_times,
        prepared_transaction_offset: v.prepared_transaction_offset,
        body: v.body,
        properties: &props,
    };
    let r = broker.put(&[draft], false).await;
    if r.status == PutMessageStatus::PutOk {
        Ok(())
    } else {
        Err(format!("{}: {}", r.status, r.detail.unwrap_or_default()))
    }
}
