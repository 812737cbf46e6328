//! The revive service: when a popped message's invisible time passes
//! without an ack, it is put back, a copy in the group's POP retry topic
//! with its reconsume count raised, or, past the group's `retryMaxTimes`,
//! in the group's DLQ (docs/pop.md#revive). It sleeps until the earliest
//! deadline or a new checkpoint; it never polls.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use basalt_common::constants::property;
use basalt_common::record::{RecordDraft, RecordView};
use basalt_store::{GetMessageRequest, GetMessageStatus};

use super::PopError;
use super::handle::pop_retry_topic;
use super::records::{Ack, ReviveRecord};
use super::service::PopService;
use super::state::MsgKey;

/// Most messages revived in one pass.
const REVIVE_BATCH: usize = 256;

/// Where a revived message goes.
enum Revived {
    Retry,
    DeadLetter,
    Gone,
}

impl PopService {
    /// Runs until the broker stops: revives what is due while this broker
    /// takes writes; forgets the table while it does not.
    pub(crate) async fn run_revive(self: Arc<Self>) {
        let mut role = self.writer.writable_changes();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            if !self.writer.is_writable() {
                self.state.lock().unload();
                match role.as_mut() {
                    Some(r) => {
                        if r.changed().await.is_err() {
                            return;
                        }
                        continue;
                    }
                    None => return,
                }
            }
            let wake = self.wake.notified();
            tokio::pin!(wake);
            wake.as_mut().enable();
            if let Err(e) = self.ensure_loaded().await {
                tracing::warn!(error = %e, "POP: in-flight table not rebuilt");
            }
            let now = basalt_common::time::now_millis();
            let next = self.state.lock().next_deadline();
            if next.is_some_and(|d| d <= now) {
                self.revive_due(now).await;
                continue;
            }
            let sleep = next.map_or(Duration::from_secs(3600), |d| {
                Duration::from_millis((d - now).max(1) as u64)
            });
            tokio::select! {
                _ = &mut wake => {}
                _ = tokio::time::sleep(sleep) => {}
                _ = role_changed(&mut role) => {}
            }
        }
    }

    /// Revives the messages due at `now`, then records them as done.
    async fn revive_due(&self, now: i64) {
        let due = self.state.lock().take_due(now, REVIVE_BATCH);
        let mut done: BTreeMap<(String, String, i32, i64), Vec<i64>> = BTreeMap::new();
        for (key, entry) in due {
            match self.revive_one(&key).await {
                Ok(_) => done
                    .entry((key.0.clone(), key.1.clone(), key.2, entry.pop_time))
                    .or_default()
                    .push(key.3),
                Err(e) => {
                    tracing::warn!(group = %key.0, topic = %key.1, queue = key.2, offset = key.3,
                        error = %e, "POP revive failed; tried again in a second");
                    self.state.lock().retry_later(key, entry, 1000);
                }
            }
        }
        for ((group, topic, queue_id, pop_time), offsets) in done {
            let start_offset = offsets.iter().copied().min().unwrap_or(0);
            let rec = ReviveRecord::Ack(Ack {
                ack_offset: start_offset,
                ack_offsets: if offsets.len() > 1 {
                    offsets
                } else {
                    Vec::new()
                },
                start_offset,
                group,
                topic,
                queue_id,
                pop_time,
                broker_name: self.config.broker_name.clone(),
            });
            if let Err(e) = self.write_record(rec).await {
                tracing::warn!(error = %e, "POP: revive marker not written (a restart may revive again)");
            }
        }
        self.commit_rebuild_point();
    }

    /// Puts one message back: its retry copy, or its DLQ copy past the
    /// group's limit. A message no longer in the store is gone.
    async fn revive_one(&self, key: &MsgKey) -> Result<Revived, PopError> {
        let (group, topic, q, offset) = key;
        let r = self.store.get_message(
            &GetMessageRequest {
                topic,
                queue_id: *q,
                offset: *offset,
                max_msgs: 1,
                max_bytes: None,
                correct_offsets: false,
            },
            None,
        );
        let Some(raw) = r
            .messages
            .first()
            .filter(|_| r.status == GetMessageStatus::Found)
        else {
            return Ok(Revived::Gone);
        };
        let v = RecordView::parse(raw, false)
            .map_err(|e| PopError::Internal(format!("stored message unreadable: {e}")))?;
        if v.queue_offset != *offset {
            return Ok(Revived::Gone);
        }
        let origin = match v.property(property::RETRY_TOPIC) {
            Some(t) => String::from_utf8_lossy(t).into_owned(),
            None => topic.clone(),
        };
        let max = self.groups.get(group).map_or(16, |g| g.retry_max_times);
        let (dest, kind) = if v.reconsume_times >= max {
            (basalt_common::topic::dlq_topic(group), Revived::DeadLetter)
        } else {
            (pop_retry_topic(group, &origin), Revived::Retry)
        };
        self.put_copy(&v, &dest, &origin).await?;
        if matches!(kind, Revived::DeadLetter) {
            tracing::info!(group = %group, topic = %origin, offset, "POP: message moved to the DLQ");
        }
        Ok(kind)
    }
}

impl PopService {
    /// Stores a copy of a popped message in `dest` (a POP retry topic or a
    /// DLQ, created if missing), its reconsume count raised by one, naming
    /// the topic it came from and its original id.
    pub(crate) async fn put_copy(
        &self,
        v: &RecordView<'_>,
        dest: &str,
        origin: &str,
    ) -> Result<(), PopError> {
        self.ensure_group_topic(dest).await?;
        let mut props =
            basalt_common::properties::without(v.properties, &[property::CRC32, property::DELAY]);
        if basalt_common::properties::find(&props, property::RETRY_TOPIC).is_none() {
            basalt_common::properties::append(&mut props, property::RETRY_TOPIC, origin);
        }
        if basalt_common::properties::find(&props, property::ORIGIN_MESSAGE_ID).is_none() {
            let id = v
                .property(property::UNIQ_KEY)
                .map(|u| String::from_utf8_lossy(u).into_owned())
                .unwrap_or_else(|| basalt_common::msgid::encode(v.store_host, v.physical_offset));
            basalt_common::properties::append(&mut props, property::ORIGIN_MESSAGE_ID, &id);
        }
        let draft = RecordDraft {
            topic: dest,
            queue_id: 0,
            flag: v.flag,
            sys_flag: v.sys_flag,
            born_timestamp: v.born_timestamp,
            born_host: v.born_host,
            store_host: self.config.broker_addr(),
            reconsume_times: v.reconsume_times + 1,
            prepared_transaction_offset: 0,
            body: v.body,
            properties: &props,
        };
        let put = self.writer.put(&[draft], true).await;
        if put.status != basalt_store::PutMessageStatus::PutOk {
            return Err(PopError::Internal(format!(
                "put back to {dest}: {} {}",
                put.status,
                put.detail.unwrap_or_default()
            )));
        }
        Ok(())
    }
}

/// Resolves when the broker's writable state changes; never without a
/// replication mode that can change it.
async fn role_changed(role: &mut Option<tokio::sync::watch::Receiver<bool>>) {
    match role {
        Some(r) => {
            if r.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}
