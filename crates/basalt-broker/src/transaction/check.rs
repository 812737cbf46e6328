//! The check service (RocketMQ's `TransactionalMessageCheckService` and
//! `TransactionalMessageServiceImpl.check`): every `transactionCheckInterval`
//! the writable broker reads each half queue from its progress and asks a
//! producer about every half still open after its check time.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use basalt_common::constants::{perm, topic as reserved};
use basalt_common::record::RecordView;
use basalt_common::time::now_millis;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::request;
use basalt_remoting::header::{CheckTransactionStateRequestHeader, CommandHeader};
use tokio::task::JoinHandle;

use super::messages::{
    HalfInfo, StoredAt, check_body, copy_properties, plain_copy_properties, redraft,
};
use super::ops::OpIndex;
use super::{HalfAt, Transactions};

/// Op messages read at a time.
const OP_READ_BATCH: usize = 32;
/// Longest one queue is worked on per round (RocketMQ's `MAX_PROCESS_TIME_LIMIT`).
const MAX_QUEUE_ROUND: Duration = Duration::from_secs(60);

/// What to do after looking at one half message.
enum Step {
    /// Go on with the next offset.
    Next,
    /// Stop this queue for this round (the rest is too young, or a write failed).
    Stop,
    /// More op messages were read: look at the same offset again.
    Again,
}

/// One round's view of a half queue.
struct QueueRound {
    queue_id: i32,
    /// When the round started (ms): halves stored since are left for the next.
    started_ms: i64,
    ops: OpIndex,
}

impl Transactions {
    /// Runs check rounds until the broker shuts down. The first round is one
    /// interval after the start; a broker that does not take writes (a slave,
    /// a ledger follower) skips its rounds.
    pub(crate) fn start_check_service(self: Arc<Self>) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.config.transaction_check_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            let mut was_writable = false;
            loop {
                tick.tick().await;
                if self.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if !self.writer.is_writable() {
                    was_writable = false;
                    continue;
                }
                if !was_writable {
                    // What this broker decided before it last took writes
                    // may not be in the log that counts now.
                    self.decisions.clear_decided();
                    was_writable = true;
                }
                self.check_round().await;
                self.decisions.prune();
            }
        })
    }

    /// One round over every half queue.
    pub(crate) async fn check_round(&self) {
        let started_ms = now_millis();
        for queue_id in 0..self.half_queues() {
            self.check_queue(queue_id, started_ms).await;
        }
    }

    async fn check_queue(&self, queue_id: i32, started_ms: i64) {
        let half_start = self.progress(reserved::TRANS_HALF_TOPIC, queue_id);
        let op_start = self.progress(reserved::TRANS_OP_HALF_TOPIC, queue_id);
        let mut round = QueueRound {
            queue_id,
            started_ms,
            ops: OpIndex::new(&self.store, queue_id, op_start, half_start),
        };
        round.ops.read_more(&self.store, OP_READ_BATCH);
        let begun = Instant::now();
        let mut offset = half_start;
        while begun.elapsed() < MAX_QUEUE_ROUND {
            if round.ops.take(offset) {
                offset += 1;
                continue;
            }
            let record = match self.half_at(queue_id, offset) {
                HalfAt::End => break,
                HalfAt::Gone => {
                    offset += 1;
                    continue;
                }
                HalfAt::Record(b) => b,
            };
            match self.examine(&mut round, offset, &record).await {
                Step::Next => offset += 1,
                Step::Again => {}
                Step::Stop => break,
            }
        }
        if offset != half_start {
            self.set_progress(reserved::TRANS_HALF_TOPIC, queue_id, offset);
        }
        let op_progress = round.ops.progress();
        if op_progress != op_start {
            self.set_progress(reserved::TRANS_OP_HALF_TOPIC, queue_id, op_progress);
        }
        tracing::debug!(
            queue_id,
            half_from = half_start,
            half_to = offset,
            op_from = op_start,
            op_to = op_progress,
            "transaction check round"
        );
    }

    /// Decides about the open half at `offset`: give it up, leave it for a
    /// later round, or check it back.
    async fn examine(&self, round: &mut QueueRound, offset: i64, record: &[u8]) -> Step {
        let v = match RecordView::parse(record, false) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(offset, error = %e, "unreadable half message; passing over it");
                return Step::Next;
            }
        };
        let Some(info) = HalfInfo::read(&v) else {
            tracing::error!(
                offset,
                "half message without REAL_TOPIC/REAL_QID/UNIQ_KEY; passing over it"
            );
            return Step::Next;
        };
        let max = self.config.transaction_check_max;
        let reserved_ms = (self.config.file_reserved_time * 3600 * 1000) as i64;
        let now = now_millis();
        if info.check_times.is_some_and(|t| t >= max || t < 0)
            || now - v.born_timestamp > reserved_ms
        {
            return self.discard(&v, &info).await;
        }
        if v.store_timestamp >= round.started_ms {
            return Step::Stop;
        }
        if self.decisions.get(info.transaction_id).is_some() {
            // Decided through another copy lately: resolve this one too.
            return self.resolve_copy(round.queue_id, offset).await;
        }
        let age = now - v.born_timestamp;
        let due_after = info.check_after_ms(self.config.transaction_timeout.as_millis() as i64);
        if info.immunity_secs.is_some() {
            if age <= due_after {
                // Its own check time has not come: keep it at the end of the
                // queue so that younger halves behind it are not held up.
                let prepared = super::messages::text_property(
                    &v,
                    basalt_common::constants::property::TRANSACTION_PREPARED_QUEUE_OFFSET,
                )
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(offset);
                let props = copy_properties(&v, None, Some(prepared));
                return match self.put_copy(&v, &props).await {
                    Some(_) => Step::Next,
                    None => Step::Stop,
                };
            }
        } else if (0..=due_after).contains(&age) {
            return Step::Stop;
        }
        if round.ops.has_unread(&self.store) && round.ops.read_more(&self.store, OP_READ_BATCH) > 0
        {
            return Step::Again;
        }
        self.check_back(&v, &info).await
    }

    /// Puts a copy with one more check at the end of the half queue and
    /// asks a producer of the group about it.
    async fn check_back(&self, v: &RecordView<'_>, info: &HalfInfo<'_>) -> Step {
        let times = info.check_times.map_or(1, |t| t + 1);
        let props = copy_properties(v, Some(times), None);
        let Some(at) = self.put_copy(v, &props).await else {
            return Step::Stop;
        };
        self.stats.checks.fetch_add(1, Ordering::Relaxed);
        let Some(channel) = self.clients.producer_channel(info.producer_group) else {
            tracing::warn!(
                group = info.producer_group,
                txid = info.transaction_id,
                "no live producer of the group to check the transaction with"
            );
            return Step::Next;
        };
        let body = match check_body(v, &props, info, at, self.store_host()) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(txid = info.transaction_id, error = %e, "cannot encode a transaction check");
                return Step::Next;
            }
        };
        let header = CheckTransactionStateRequestHeader {
            topic: Some(reserved::TRANS_HALF_TOPIC.to_string()),
            tran_state_table_offset: at.queue_offset,
            commit_log_offset: at.commit_log_offset,
            msg_id: Some(info.transaction_id.to_string()),
            transaction_id: Some(info.transaction_id.to_string()),
            offset_msg_id: Some(basalt_common::msgid::encode(
                self.store_host(),
                at.commit_log_offset,
            )),
        };
        let mut ext = header.to_ext();
        ext.insert("bname", &self.config.broker_name);
        let cmd = RemotingCommand::request(request::CHECK_TRANSACTION_STATE)
            .with_ext(ext)
            .with_body(body);
        tracing::info!(
            txid = info.transaction_id,
            group = info.producer_group,
            times,
            "checking a transaction with its producer"
        );
        if let Err(e) = channel.send_oneway(cmd).await {
            tracing::warn!(txid = info.transaction_id, error = %e, "cannot send a transaction check");
        }
        Step::Next
    }

    /// Stores a half copy at the end of its queue. `None` (logged) when the
    /// store refused it.
    async fn put_copy(&self, v: &RecordView<'_>, props: &[u8]) -> Option<StoredAt> {
        let draft = redraft(
            v,
            reserved::TRANS_HALF_TOPIC,
            v.queue_id,
            v.sys_flag,
            props,
            self.store_host(),
        );
        let r = self.put(draft).await;
        let at = StoredAt::of(&r);
        if at.is_none() {
            tracing::error!(status = %r.status, detail = ?r.detail, "cannot put a half message back; retrying next round");
        }
        at
    }

    /// Records an op for a copy of a transaction decided through another.
    async fn resolve_copy(&self, queue_id: i32, offset: i64) -> Step {
        match self.write_op(queue_id, offset).await {
            Ok(()) => Step::Next,
            Err(e) => {
                tracing::error!(offset, error = %e, "cannot record an op for a decided transaction");
                Step::Stop
            }
        }
    }

    /// Gives a half up: checked `transactionCheckMax` times, or older than
    /// the log keeps files. Copied to `TRANS_CHECK_MAX_TIME_TOPIC` (created
    /// on first use) for operators, as RocketMQ does.
    async fn discard(&self, v: &RecordView<'_>, info: &HalfInfo<'_>) -> Step {
        let topic = reserved::TRANS_CHECK_MAX_TIME_TOPIC;
        let created = self
            .topics
            .create_if_missing(topic, 1, perm::READ | perm::WRITE)
            .map_err(|e| e.to_string());
        let published = match created {
            Ok(change) => self.registrar.publish_topic_change(&change).await,
            Err(e) => Err(e),
        };
        if let Err(e) = published {
            tracing::error!(error = %e, "cannot create {topic}");
            return Step::Stop;
        }
        let props = plain_copy_properties(v);
        let draft = redraft(v, topic, 0, v.sys_flag, &props, self.store_host());
        let r = self.put(draft).await;
        if !r.status.is_stored() {
            tracing::error!(status = %r.status, "cannot move a half message to {topic}; retrying next round");
            return Step::Stop;
        }
        self.stats.discards.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            txid = info.transaction_id,
            topic = info.real_topic,
            times = ?info.check_times,
            "transaction never resolved; half message moved to {topic}"
        );
        Step::Next
    }
}
