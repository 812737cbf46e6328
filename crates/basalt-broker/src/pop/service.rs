//! [`PopService`]: the POP state of one broker and the revive log it is
//! kept in. Every change is first written to the revive log (through the
//! CommitLog, so it is replicated) and then applied to the in-flight table.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use basalt_common::constants::{perm, property};
use basalt_common::record::{RecordDraft, RecordView};
use basalt_store::{GetMessageRequest, GetMessageStatus, MessageStore};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::PopError;
use super::records::{self, REVIVE_GROUP, ReviveRecord};
use super::state::PopState;
use crate::clients::waiters::PullWaiters;
use crate::config::BrokerConfig;
use crate::filter::FilterCache;
use crate::live_config::LiveBrokerConfig;
use crate::metadata::groups::SubscriptionGroupManager;
use crate::metadata::offsets::ConsumerOffsetManager;
use crate::metadata::topics::TopicConfigManager;
use crate::registration::Registrar;
use crate::writer::MessageWriter;

/// The POP machinery of one broker. Owns the in-flight table; invariant:
/// the table only ever holds what the revive log says (a record is applied
/// after it is stored, a rebuild replays the log).
pub struct PopService {
    pub(crate) config: Arc<BrokerConfig>,
    pub(crate) live: Arc<LiveBrokerConfig>,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) writer: MessageWriter,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
    pub(crate) waiters: Arc<PullWaiters>,
    pub(crate) filter_cache: Arc<FilterCache>,
    pub(crate) registrar: Arc<Registrar>,
    pub(crate) shutting_down: Arc<AtomicBool>,
    pub(crate) state: Mutex<PopState>,
    /// FIFO batches by queue (in memory; docs/pop.md#fifo).
    pub(crate) order: Mutex<super::order::OrderState>,
    /// Serializes rebuilds of the table.
    load_lock: tokio::sync::Mutex<()>,
    /// Queues a pop is reading now, (group, topic, queue): a second pop of
    /// the same queue skips it rather than pop the same offsets.
    busy: Mutex<HashSet<(String, String, i32)>>,
    /// Wakes the revive loop (a new, possibly earlier, deadline).
    pub(crate) wake: Notify,
    pub(crate) revive_topic: String,
    /// Where the next pop of all queues starts, for fairness.
    pub(crate) rotate: AtomicUsize,
}

/// A claim on one queue for one group's pop; released on drop.
pub(crate) struct QueueClaim<'a> {
    busy: &'a Mutex<HashSet<(String, String, i32)>>,
    key: (String, String, i32),
}

impl Drop for QueueClaim<'_> {
    fn drop(&mut self) {
        self.busy.lock().remove(&self.key);
    }
}

impl std::fmt::Debug for PopService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PopService")
            .field("revive_topic", &self.revive_topic)
            .field("in_flight", &self.state.lock().len())
            .finish()
    }
}

/// The parts a [`PopService`] is made of.
pub(crate) struct PopParts {
    pub config: Arc<BrokerConfig>,
    pub live: Arc<LiveBrokerConfig>,
    pub store: Arc<MessageStore>,
    pub writer: MessageWriter,
    pub topics: Arc<TopicConfigManager>,
    pub groups: Arc<SubscriptionGroupManager>,
    pub offsets: Arc<ConsumerOffsetManager>,
    pub waiters: Arc<PullWaiters>,
    pub filter_cache: Arc<FilterCache>,
    pub registrar: Arc<Registrar>,
    pub shutting_down: Arc<AtomicBool>,
}

impl PopService {
    pub(crate) fn new(p: PopParts) -> Self {
        let revive_topic = records::revive_topic(&p.config.broker_cluster_name);
        PopService {
            config: p.config,
            live: p.live,
            store: p.store,
            writer: p.writer,
            topics: p.topics,
            groups: p.groups,
            offsets: p.offsets,
            waiters: p.waiters,
            filter_cache: p.filter_cache,
            registrar: p.registrar,
            shutting_down: p.shutting_down,
            state: Mutex::new(PopState::default()),
            order: Mutex::new(Default::default()),
            load_lock: tokio::sync::Mutex::new(()),
            busy: Mutex::new(HashSet::new()),
            wake: Notify::new(),
            revive_topic,
            rotate: AtomicUsize::new(0),
        }
    }

    /// Messages popped and neither acked nor revived yet.
    pub fn in_flight(&self) -> usize {
        self.state.lock().len() + self.order.lock().unacked()
    }

    /// In-flight messages per (group, topic read).
    pub fn in_flight_by_group(&self) -> std::collections::HashMap<(String, String), usize> {
        self.state.lock().per_group_topic()
    }

    /// How far the oldest overdue message is past its deadline, in ms (0
    /// when none is overdue): the revive service's lag.
    pub fn revive_lag_ms(&self) -> i64 {
        let now = basalt_common::time::now_millis();
        self.state
            .lock()
            .next_deadline()
            .map_or(0, |d| (now - d).max(0))
    }

    /// Refuses POP work on a broker that does not take writes.
    pub(crate) fn check_writable(&self) -> Result<(), PopError> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(PopError::Unavailable("the broker is shutting down".into()));
        }
        if !self.writer.is_writable() {
            return Err(PopError::Unavailable(format!(
                "broker {} does not take writes (a slave, or not the leader)",
                self.config.broker_name
            )));
        }
        if !perm::is_readable(self.live.broker_permission()) {
            return Err(PopError::Forbidden(format!(
                "the broker[{}] pop message is forbidden",
                self.config.broker_addr()
            )));
        }
        Ok(())
    }

    /// Claims a queue for one pop, or `None` when another pop holds it.
    pub(crate) fn claim(&self, group: &str, topic: &str, queue_id: i32) -> Option<QueueClaim<'_>> {
        let key = (group.to_string(), topic.to_string(), queue_id);
        if !self.busy.lock().insert(key.clone()) {
            return None;
        }
        Some(QueueClaim {
            busy: &self.busy,
            key,
        })
    }

    /// Writes one revive-log record (durably, replicated as any message)
    /// and applies it to the in-flight table.
    pub(crate) async fn write_record(&self, rec: ReviveRecord) -> Result<(), PopError> {
        self.ensure_revive_topic()?;
        let (tag, body) = rec.encode();
        let mut props = Vec::new();
        basalt_common::properties::append(&mut props, property::TAGS, tag);
        let host = self.config.broker_addr();
        let draft = RecordDraft {
            topic: &self.revive_topic,
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: basalt_common::time::now_millis(),
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &body,
            properties: &props,
        };
        let r = self.writer.put(&[draft], true).await;
        let Some(append) = r
            .append
            .filter(|_| r.status == basalt_store::PutMessageStatus::PutOk)
        else {
            return Err(PopError::Internal(format!(
                "revive log write: {} {}",
                r.status,
                r.detail.unwrap_or_default()
            )));
        };
        let was_empty_or_earlier = matches!(rec, ReviveRecord::Ck(_));
        self.state.lock().apply(&rec, append.queue_offset);
        if was_empty_or_earlier {
            self.wake.notify_one();
        }
        Ok(())
    }

    fn ensure_revive_topic(&self) -> Result<(), PopError> {
        if self.topics.contains(&self.revive_topic) {
            return Ok(());
        }
        self.topics
            .create_if_missing(&self.revive_topic, 1, perm::READ | perm::WRITE)
            .map(|_| ())
            .map_err(|e| PopError::Internal(format!("revive topic: {e}")))
    }

    /// Rebuilds the in-flight table from the revive log, once after start
    /// and after each time this broker starts taking writes again.
    pub(crate) async fn ensure_loaded(&self) -> Result<(), PopError> {
        if self.state.lock().loaded {
            return Ok(());
        }
        let _g = self.load_lock.lock().await;
        if self.state.lock().loaded {
            return Ok(());
        }
        let t = &self.revive_topic;
        let min = self.store.min_offset_in_queue(t, 0);
        let max = self.store.max_offset_in_queue(t, 0);
        let start = self
            .offsets
            .query(REVIVE_GROUP, t, 0)
            .unwrap_or(min)
            .clamp(min, max.max(min));
        let mut fresh = PopState::default();
        fresh.applied_to = start;
        let mut at = start;
        let mut records = 0u64;
        let mut popped = PoppedTo::default();
        while at < max {
            let r = self.store.get_message(
                &GetMessageRequest {
                    topic: t,
                    queue_id: 0,
                    offset: at,
                    max_msgs: 1024,
                    max_bytes: None,
                    correct_offsets: true,
                },
                None,
            );
            for raw in &r.messages {
                let Ok(v) = RecordView::parse(raw, false) else {
                    continue;
                };
                let tag = v.property(property::TAGS).unwrap_or_default();
                if let Some(rec) = ReviveRecord::decode(tag, v.body) {
                    fresh.apply(&rec, v.queue_offset);
                    popped.note(&rec);
                    records += 1;
                }
            }
            if r.status != GetMessageStatus::Found || r.next_begin_offset <= at {
                break;
            }
            at = r.next_begin_offset;
        }
        fresh.applied_to = fresh.applied_to.max(at);
        fresh.loaded = true;
        let moved = popped.commit_past(&self.offsets);
        tracing::info!(
            revive_topic = %t,
            from = start,
            to = at,
            records,
            in_flight = fresh.len(),
            offsets_moved = moved,
            "POP in-flight table rebuilt from the revive log"
        );
        *self.state.lock() = fresh;
        self.wake.notify_one();
        Ok(())
    }

    /// Records where a rebuild would start (the revive group's offset).
    pub(crate) fn commit_rebuild_point(&self) {
        let point = self.state.lock().rebuild_point();
        self.offsets
            .commit(REVIVE_GROUP, &self.revive_topic, 0, point);
    }

    /// A group's retry / dead-letter topic, created read-write with one
    /// queue if missing and registered with the NameServers.
    pub(crate) async fn ensure_group_topic(&self, topic: &str) -> Result<(), PopError> {
        if self.topics.contains(topic) {
            return Ok(());
        }
        let change = self
            .topics
            .create_if_missing(topic, 1, perm::READ | perm::WRITE)
            .map_err(|e| PopError::Internal(format!("create {topic}: {e}")))?;
        self.registrar
            .publish_topic_change(&change)
            .await
            .map_err(|e| PopError::Internal(format!("register {topic}: {e}")))
    }
}

/// How far each (group, topic read, queue) was popped, by the checkpoints
/// of the revive log. A pop commits the group's offset past what it took,
/// but offsets reach followers only with the periodic metadata sync, while
/// checkpoints travel in the replicated log: a member that takes over (or
/// a broker killed before its offsets were flushed) moves each offset past
/// its checkpointed pops, so acked messages are not popped again and
/// unacked ones come back through revive only.
#[derive(Default)]
struct PoppedTo(std::collections::HashMap<(String, String, i32), i64>);

impl PoppedTo {
    fn note(&mut self, rec: &ReviveRecord) {
        let ReviveRecord::Ck(ck) = rec else { return };
        let Some(last) = ck.offsets().max() else {
            return;
        };
        let key = (ck.group.clone(), ck.topic.clone(), ck.queue_id);
        let next = self.0.entry(key).or_insert(0);
        *next = (*next).max(last + 1);
    }

    /// Commits each offset the log shows is behind; returns how many moved.
    fn commit_past(&self, offsets: &ConsumerOffsetManager) -> usize {
        let mut moved = 0;
        for ((group, topic, queue), next) in &self.0 {
            if offsets
                .query(group, topic, *queue)
                .is_none_or(|o| o < *next)
            {
                offsets.commit(group, topic, *queue, *next);
                moved += 1;
            }
        }
        moved
    }
}
