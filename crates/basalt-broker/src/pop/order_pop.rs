//! The FIFO side of [`PopService`]: order pops, their acks and changes of
//! invisible time (see [`super::order`]).

use std::collections::BTreeSet;

use basalt_common::record::RecordView;
use basalt_store::{GetMessageRequest, GetMessageStatus, MessageFilter};

use super::fetch::PopOutcome;
use super::handle::{ExtraInfo, retry_flag_of};
use super::order::{ORDER_REVIVE_QID, OrderBatch, QueueKey, QueueTurn};
use super::service::PopService;
use super::{PopError, PopRequest, PoppedMessage};
use crate::filter::SubscriptionFilter;

impl PopService {
    /// Pops one queue in order: nothing while the group's last batch there
    /// is live; otherwise the messages from the group's offset, skipping
    /// those an expired batch had acked, and moving those past the group's
    /// retry limit to the DLQ.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn pop_queue_ordered(
        &self,
        req: &PopRequest,
        filter: &SubscriptionFilter,
        topic: &str,
        q: i32,
        want: usize,
        init_min: bool,
        out: &mut PopOutcome,
    ) -> Result<(), PopError> {
        let key: QueueKey = (req.group.clone(), topic.to_string(), q);
        let now = basalt_common::time::now_millis();
        let turn = self.order.lock().turn(&key, now);
        let (mut attempts, acked) = match turn {
            QueueTurn::Locked(_) => return Ok(()),
            QueueTurn::Free { attempts, acked } => (attempts, acked),
        };
        let offset = match self.offsets.query(&req.group, topic, q) {
            Some(o) => o,
            None => {
                let o = self.init_offset(topic, q, init_min);
                self.offsets.commit(&req.group, topic, q, o);
                o
            }
        };
        let f: Option<&dyn MessageFilter> = if filter.matches_all() {
            None
        } else {
            Some(filter)
        };
        let r = self.store.get_message(
            &GetMessageRequest {
                topic,
                queue_id: q,
                offset,
                max_msgs: want + acked.len(),
                max_bytes: None,
                correct_offsets: true,
            },
            f,
        );
        out.rest += (r.max_offset - r.next_begin_offset).max(0);
        if r.status != GetMessageStatus::Found || r.messages.is_empty() {
            self.order.lock().clear(&key);
            if r.next_begin_offset != offset && r.next_begin_offset >= 0 {
                self.offsets
                    .commit(&req.group, topic, q, r.next_begin_offset);
            }
            return Ok(());
        }
        let max = self
            .groups
            .get(&req.group)
            .map_or(16, |g| g.retry_max_times.max(0)) as u32;
        let mut batch = OrderBatch {
            pop_time: out.pop_time,
            deadline: out.pop_time.saturating_add(out.invisible_ms),
            offsets: Vec::new(),
            next_begin: r.next_begin_offset,
            acked: BTreeSet::new(),
            attempts: Default::default(),
        };
        for raw in &r.messages {
            let Ok(v) = RecordView::parse(raw, false) else {
                continue;
            };
            let o = v.queue_offset;
            let n = attempts.remove(&o).unwrap_or(0);
            // Acked in an expired batch, or sent to the DLQ: done, but the
            // batch holds it so the group's offset moves over it in order.
            let done = acked.contains(&o) || (n > max && self.dead_letter(&req.group, &v).await?);
            batch.offsets.push(o);
            if done {
                batch.acked.insert(o);
                continue;
            }
            batch.attempts.insert(o, n);
            if out.messages.len() >= want {
                // Beyond what was asked: not handed out, not acked; popped
                // again with the next batch.
                batch.offsets.pop();
                batch.attempts.remove(&o);
                batch.next_begin = o;
                break;
            }
            let mut message = v.to_message();
            message.reconsume_times = n as i32;
            let handle = ExtraInfo {
                ck_offset: offset,
                pop_time: out.pop_time,
                invisible_ms: out.invisible_ms,
                revive_qid: ORDER_REVIVE_QID,
                retry_flag: retry_flag_of(topic).to_string(),
                broker_name: self.config.broker_name.clone(),
                queue_id: q,
                queue_offset: o,
            };
            let popped = PoppedMessage {
                origin_topic: req.topic.clone(),
                receipt_handle: handle.encode(),
                delivery_attempt: n + 1,
                invisible_until_ms: handle.deadline(),
                message,
            };
            out.messages.push((popped, raw.clone()));
        }
        let handed: Vec<i64> = batch
            .offsets
            .iter()
            .copied()
            .filter(|o| !batch.acked.contains(o))
            .collect();
        if handed.is_empty() {
            // Everything found was done already: move past it.
            self.offsets.commit(&req.group, topic, q, batch.next_begin);
            self.order.lock().clear(&key);
            return Ok(());
        }
        if let Some(first) = batch.first_unacked().filter(|f| *f > offset) {
            self.offsets.commit(&req.group, topic, q, first);
        }
        out.orders.extend(
            handed
                .iter()
                .map(|o| (topic.to_string(), q, *o, batch.attempts[o])),
        );
        out.queues.push((topic.to_string(), q, offset, handed));
        self.order.lock().start(key, batch);
        Ok(())
    }

    /// Moves a message past the group's retry limit to its DLQ.
    async fn dead_letter(&self, group: &str, v: &RecordView<'_>) -> Result<bool, PopError> {
        let dlq = basalt_common::topic::dlq_topic(group);
        let origin = v.topic_str().into_owned();
        self.put_copy(v, &dlq, &origin).await?;
        tracing::info!(group, topic = %origin, offset = v.queue_offset, "POP: ordered message moved to the DLQ");
        Ok(true)
    }

    /// Acks a message of an order batch; moves the group's offset over the
    /// acked prefix and frees the queue once the batch is done.
    pub(crate) fn ack_ordered(
        &self,
        group: &str,
        stored_topic: &str,
        h: &ExtraInfo,
    ) -> Result<(), PopError> {
        let key: QueueKey = (group.to_string(), stored_topic.to_string(), h.queue_id);
        let (commit, done) = self.order.lock().ack(&key, h)?;
        let current = self
            .offsets
            .query(group, stored_topic, h.queue_id)
            .unwrap_or(0);
        if commit > current {
            self.offsets.commit(group, stored_topic, h.queue_id, commit);
        }
        if done {
            // A pop held on this queue may go on now.
            self.waiters
                .notify_for(stored_topic, h.queue_id)
                .notify_waiters();
        }
        Ok(())
    }

    /// Extends an order batch's invisible time; the handle keeps its pop
    /// time (every handle of the batch stays valid).
    pub(crate) fn change_ordered(
        &self,
        group: &str,
        stored_topic: &str,
        h: &ExtraInfo,
        invisible_ms: i64,
    ) -> Result<ExtraInfo, PopError> {
        let key: QueueKey = (group.to_string(), stored_topic.to_string(), h.queue_id);
        let now = basalt_common::time::now_millis();
        let deadline = now.saturating_add(invisible_ms);
        self.order.lock().extend(&key, h, deadline, now)?;
        Ok(ExtraInfo {
            invisible_ms: deadline - h.pop_time,
            ..h.clone()
        })
    }
}
