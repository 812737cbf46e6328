//! The copy a due timer becomes, and how to tell whether it exists.
//!
//! As RocketMQ's `TimerMessageStore.convertMessage`: the copy goes to
//! `REAL_TOPIC`/`REAL_QID` with the timer message's body, flag, sys flag,
//! born time and host, reconsume times and properties (its `UNIQ_KEY`, so
//! consumers see the message id the producer was given, and its timer
//! properties), minus `REAL_TOPIC`/`REAL_QID`, plus `TIMER_ENQUEUE_MS` (when
//! the timer message was stored) and `TIMER_DEQUEUE_MS` (now). Basalt adds
//! `BSLT_TIMER_ORIGIN`, the timer message's CommitLog offset.
//!
//! A store RocketMQ 5 wrote holds its timer store's copies, which carry no
//! `BSLT_TIMER_ORIGIN`: such a copy is recognised by its `TIMER_DEQUEUE_MS`
//! (set only on a timer store's copy) and a `TIMER_OUT_MS` equal to the
//! timer message's. RocketMQ's cancel markers (`TIMER_DEL_UNIQKEY`) are
//! never delivered, as RocketMQ puts none (docs/storage-format.md).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use basalt_common::constants::{property, topic as reserved};
use basalt_common::properties;
use basalt_common::record::{RecordDraft, RecordView};
use basalt_common::time::now_millis;
use basalt_store::PutMessageStatus;
use basalt_store::timer::TimerEntry;
use bytes::Bytes;

use super::TimerService;
use crate::writer::MessageWriter;

/// A copy ready to be put, owning its parts.
#[derive(Debug, Clone)]
pub(crate) struct PreparedCopy {
    pub(crate) origin: i64,
    topic: String,
    queue_id: i32,
    flag: i32,
    sys_flag: i32,
    born_timestamp: i64,
    born_host: SocketAddr,
    store_host: SocketAddr,
    reconsume_times: i32,
    body: Bytes,
    properties: Vec<u8>,
}

/// What became of a copy's put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PutOutcome {
    Stored,
    /// The copy can never be stored (too large, illegal): given up.
    Refused(String),
    /// Not known to be stored: delivery stops and starts a new run, which
    /// finds the copy if it did get into the log.
    Uncertain(String),
}

fn text<'a>(v: &RecordView<'a>, key: &str) -> Option<&'a str> {
    v.property(key).and_then(|b| std::str::from_utf8(b).ok())
}

impl TimerService {
    /// Reads the timer message of `e` and prepares its copy; None when
    /// there is nothing to put (expired, unusable, or — for a message older
    /// than the run — a copy already in the log). Blocking.
    pub(crate) fn prepare_copy(&self, e: &TimerEntry, run_start: i64) -> Option<PreparedCopy> {
        let dropped = || {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            None
        };
        let Some(rec) = self.store.log().read_bytes(e.phys, e.size as usize) else {
            tracing::warn!(
                phys = e.phys,
                "timer message expired from the CommitLog before its time"
            );
            return dropped();
        };
        let view = match RecordView::parse(&rec, false) {
            Ok(v)
                if v.topic == reserved::TIMER_TOPIC.as_bytes()
                    && v.queue_offset == e.queue_offset =>
            {
                v
            }
            _ => {
                tracing::error!(
                    phys = e.phys,
                    queue_offset = e.queue_offset,
                    "TimerLog entry does not point at its timer message; passing over it"
                );
                return dropped();
            }
        };
        if view.property(property::TIMER_DEL_UNIQKEY).is_some() {
            tracing::info!(
                phys = e.phys,
                "a RocketMQ timer cancel marker is not delivered"
            );
            return dropped();
        }
        if e.phys < run_start && self.copy_exists(&view, e.phys) {
            self.stats.already_delivered.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let (Some(topic), Some(qid)) = (
            text(&view, property::REAL_TOPIC),
            text(&view, property::REAL_QID).and_then(|q| q.parse::<i32>().ok()),
        ) else {
            tracing::error!(
                phys = e.phys,
                "timer message without REAL_TOPIC/REAL_QID; dropping it"
            );
            return dropped();
        };
        let mut props = properties::without(
            view.properties,
            &[
                property::CRC32,
                property::REAL_TOPIC,
                property::REAL_QID,
                property::TIMER_ENQUEUE_MS,
                property::TIMER_DEQUEUE_MS,
                property::TIMER_ORIGIN,
            ],
        );
        let enqueued = view.store_timestamp.to_string();
        properties::append(&mut props, property::TIMER_ENQUEUE_MS, &enqueued);
        properties::append(
            &mut props,
            property::TIMER_DEQUEUE_MS,
            &now_millis().to_string(),
        );
        properties::append(&mut props, property::TIMER_ORIGIN, &e.phys.to_string());
        Some(PreparedCopy {
            origin: e.phys,
            topic: topic.to_string(),
            queue_id: qid,
            flag: view.flag,
            sys_flag: view.sys_flag,
            born_timestamp: view.born_timestamp,
            born_host: view.born_host,
            store_host: self.store_host,
            reconsume_times: view.reconsume_times,
            body: rec.slice_ref(view.body),
            properties: props,
        })
    }

    /// Whether the log holds a copy of the timer message `view` stored at
    /// `origin`: the index is asked for `REAL_TOPIC#UNIQ_KEY` and the
    /// answers are checked for `BSLT_TIMER_ORIGIN` (or, on a copy
    /// RocketMQ's timer store made, its `TIMER_OUT_MS`). Blocking.
    pub(crate) fn copy_exists(&self, view: &RecordView<'_>, origin: i64) -> bool {
        let (Some(topic), Some(uniq)) = (
            text(view, property::REAL_TOPIC),
            text(view, property::UNIQ_KEY),
        ) else {
            return false;
        };
        let want = origin.to_string();
        let out_ms = view.property(property::TIMER_OUT_MS);
        self.store
            .query_message(topic, uniq, 256, 0, i64::MAX)
            .messages
            .iter()
            .any(|m| {
                let Ok(v) = RecordView::parse(m, false) else {
                    return false;
                };
                match v.property(property::TIMER_ORIGIN) {
                    Some(o) => o == want.as_bytes(),
                    None => is_rocketmq_copy(&v, out_ms),
                }
            })
    }

    /// Whether the timer of `e` needs nothing more on a follower: its
    /// message is gone, or its copy is in the log. Blocking.
    pub(crate) fn confirmed(&self, e: &TimerEntry) -> bool {
        let Some(rec) = self.store.log().read_bytes(e.phys, e.size as usize) else {
            return true;
        };
        match RecordView::parse(&rec, false) {
            Ok(v) => self.copy_exists(&v, e.phys),
            Err(_) => true,
        }
    }
}

/// Whether `v`, a message without `BSLT_TIMER_ORIGIN`, is the copy
/// RocketMQ's timer store made of a timer message whose `TIMER_OUT_MS` is
/// `out_ms`: it has `TIMER_DEQUEUE_MS` and the same `TIMER_OUT_MS`.
fn is_rocketmq_copy(v: &RecordView<'_>, out_ms: Option<&[u8]>) -> bool {
    v.property(property::TIMER_DEQUEUE_MS).is_some()
        && out_ms.is_some_and(|want| v.property(property::TIMER_OUT_MS) == Some(want))
}

/// Puts a copy, waiting as a producer's send with `WAIT=true` does: flushed
/// under SYNC_FLUSH, on a slave under SYNC_MASTER, committed in a ledger.
pub(crate) async fn put_copy(writer: MessageWriter, c: PreparedCopy) -> PutOutcome {
    let draft = RecordDraft {
        topic: &c.topic,
        queue_id: c.queue_id,
        flag: c.flag,
        sys_flag: c.sys_flag,
        born_timestamp: c.born_timestamp,
        born_host: c.born_host,
        store_host: c.store_host,
        reconsume_times: c.reconsume_times,
        prepared_transaction_offset: 0,
        body: &c.body,
        properties: &c.properties,
    };
    let r = writer.put(&[draft], true).await;
    let detail = || format!("{}: {}", r.status, r.detail.clone().unwrap_or_default());
    match r.status {
        PutMessageStatus::PutOk => PutOutcome::Stored,
        PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded => {
            PutOutcome::Refused(detail())
        }
        _ => PutOutcome::Uncertain(detail()),
    }
}
