//! The pop path: read a group's next messages from the topic's queues and
//! its POP retry topic, checkpoint them in the revive log, move the group's
//! offsets past them; wait (long polling) when there are none.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use basalt_common::constants::{perm, topic as reserved};
use basalt_common::record::RecordView;
use basalt_store::{GetMessageRequest, GetMessageStatus, MessageFilter};
use bytes::Bytes;

use super::handle::{ExtraInfo, pop_retry_topic, retry_flag_of};
use super::records::{CheckPoint, ReviveRecord};
use super::service::PopService;
use super::{PopError, PopRequest, PoppedMessage};
use crate::filter::{SQL92, SubscriptionFilter};

/// Longest a pop is held waiting for messages.
const MAX_POLL: std::time::Duration = std::time::Duration::from_secs(60);

/// Most messages one pop returns (Java's cap on maxMsgNums).
pub const MAX_POP_MESSAGES: u32 = 32;

/// What one pop found.
#[derive(Debug, Default)]
pub(crate) struct PopOutcome {
    pub pop_time: i64,
    pub invisible_ms: i64,
    /// Messages left behind the popped ones in the queues read.
    pub rest: i64,
    /// Each message with its stored record (for the remoting body).
    pub messages: Vec<(PoppedMessage, Bytes)>,
    /// (stored topic, queue id, checkpoint start offset, message offsets).
    pub queues: Vec<(String, i32, i64, Vec<i64>)>,
    /// Order pops: (stored topic, queue id, offset, earlier deliveries).
    pub orders: Vec<(String, i32, i64, u32)>,
}

/// The checked parts of a pop request.
struct PopPlan {
    queues: Vec<i32>,
    retry_topic: String,
    filter: Arc<SubscriptionFilter>,
}

impl PopService {
    fn plan(&self, req: &PopRequest) -> Result<PopPlan, PopError> {
        self.check_writable()?;
        basalt_common::topic::validate_group(&req.group)
            .map_err(|e| PopError::BadRequest(e.to_string()))?;
        basalt_common::topic::validate_topic(&req.topic)
            .map_err(|e| PopError::BadRequest(e.to_string()))?;
        let g = self
            .groups
            .get_or_create(&req.group, self.live.auto_create_subscription_group())
            .map_err(|_| PopError::GroupNotFound(req.group.clone()))?;
        if !g.consume_enable {
            return Err(PopError::Forbidden(format!(
                "subscription group no permission, {}",
                req.group
            )));
        }
        let t = self
            .topics
            .get(&req.topic)
            .ok_or_else(|| PopError::TopicNotFound(req.topic.clone()))?;
        if !perm::is_readable(t.perm) {
            return Err(PopError::Forbidden(format!(
                "the topic[{}] peeking message is forbidden",
                req.topic
            )));
        }
        let queues = match req.queue_id {
            Some(q) if q < 0 || q >= t.read_queue_nums => {
                return Err(PopError::BadRequest(format!(
                    "queueId[{q}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
                    req.topic, t.read_queue_nums
                )));
            }
            Some(q) => vec![q],
            None => (0..t.read_queue_nums).collect(),
        };
        let filter = self.compile_filter(req)?;
        Ok(PopPlan {
            queues,
            retry_topic: pop_retry_topic(&req.group, &req.topic),
            filter,
        })
    }

    fn compile_filter(&self, req: &PopRequest) -> Result<Arc<SubscriptionFilter>, PopError> {
        let expr_type = if req.expression_type.is_empty() {
            crate::filter::TAG
        } else {
            req.expression_type.as_str()
        };
        let expression = if req.expression.is_empty() {
            "*"
        } else {
            req.expression.as_str()
        };
        let f = if expr_type == SQL92 {
            if !self.config.enable_property_filter {
                return Err(PopError::BadRequest(
                    "The broker does not support consumer to filter message by SQL92".into(),
                ));
            }
            self.filter_cache.sql92(expression)
        } else {
            SubscriptionFilter::compile(expr_type, expression).map(Arc::new)
        };
        f.map_err(|e| PopError::BadRequest(format!("parse the filter failed: {e}")))
    }

    /// Pops, holding the request up to its poll timeout while there is
    /// nothing; woken by new messages of the queues it reads.
    pub(crate) async fn pop_batch(
        &self,
        req: &PopRequest,
        init_min: bool,
    ) -> Result<PopOutcome, PopError> {
        let plan = self.plan(req)?;
        self.ensure_loaded().await?;
        let deadline = Instant::now() + req.poll_timeout.min(MAX_POLL);
        loop {
            let notifies: Vec<_> = plan
                .queues
                .iter()
                .map(|q| self.waiters.notify_for(&req.topic, *q))
                .chain(std::iter::once(
                    self.waiters.notify_for(&plan.retry_topic, 0),
                ))
                .collect();
            let mut waits: Vec<Pin<Box<tokio::sync::futures::Notified<'_>>>> =
                notifies.iter().map(|n| Box::pin(n.notified())).collect();
            for w in &mut waits {
                w.as_mut().enable();
            }
            let out = self.try_pop(req, &plan, init_min).await?;
            let now = Instant::now();
            if !out.messages.is_empty()
                || now >= deadline
                || self.shutting_down.load(Ordering::Acquire)
            {
                return Ok(out);
            }
            // An order pop also wakes when a batch locking one of its
            // queues expires (an ack wakes it through the queue's wake-up).
            let mut until = deadline;
            if req.fifo {
                let keys: Vec<_> = plan
                    .queues
                    .iter()
                    .map(|q| (req.group.clone(), req.topic.clone(), *q))
                    .collect();
                if let Some(d) = self.order.lock().earliest_deadline(keys.iter()) {
                    let left = d - basalt_common::time::now_millis();
                    until = until.min(now + std::time::Duration::from_millis(left.max(1) as u64));
                }
            }
            tokio::select! {
                _ = any_notified(&mut waits) => {}
                _ = tokio::time::sleep_until(until.into()) => {}
            }
            self.check_writable()?;
        }
    }

    /// NOTIFICATION: whether the group has messages to pop on the topic
    /// (or its retry topic), waiting up to `poll` for one to arrive.
    pub(crate) async fn wait_for_messages(
        &self,
        group: &str,
        topic: &str,
        queue_id: Option<i32>,
        poll: std::time::Duration,
    ) -> Result<bool, PopError> {
        let req = PopRequest {
            group: group.to_string(),
            topic: topic.to_string(),
            queue_id,
            max_messages: 1,
            invisible: std::time::Duration::ZERO,
            poll_timeout: poll,
            expression_type: String::new(),
            expression: String::new(),
            fifo: false,
            attempt_id: None,
        };
        let plan = self.plan(&req)?;
        let deadline = Instant::now() + poll.min(MAX_POLL);
        loop {
            let notifies: Vec<_> = plan
                .queues
                .iter()
                .map(|q| self.waiters.notify_for(topic, *q))
                .chain(std::iter::once(
                    self.waiters.notify_for(&plan.retry_topic, 0),
                ))
                .collect();
            let mut waits: Vec<Pin<Box<tokio::sync::futures::Notified<'_>>>> =
                notifies.iter().map(|n| Box::pin(n.notified())).collect();
            for w in &mut waits {
                w.as_mut().enable();
            }
            let mut queues: Vec<(&str, i32)> = vec![(&plan.retry_topic, 0)];
            queues.extend(plan.queues.iter().map(|q| (topic, *q)));
            let has = queues.iter().any(|(t, q)| {
                let offset = self
                    .offsets
                    .query(group, t, *q)
                    .unwrap_or_else(|| self.init_offset(t, *q, false));
                offset < self.store.max_offset_in_queue(t, *q)
            });
            let now = Instant::now();
            if has || now >= deadline || self.shutting_down.load(Ordering::Acquire) {
                return Ok(has);
            }
            tokio::select! {
                _ = any_notified(&mut waits) => {}
                _ = tokio::time::sleep(deadline - now) => {}
            }
        }
    }

    /// One pass over the retry topic and the topic's queues.
    async fn try_pop(
        &self,
        req: &PopRequest,
        plan: &PopPlan,
        init_min: bool,
    ) -> Result<PopOutcome, PopError> {
        let max = req.max_messages.clamp(1, MAX_POP_MESSAGES) as usize;
        let mut out = PopOutcome {
            pop_time: basalt_common::time::now_millis(),
            invisible_ms: req.invisible.as_millis().min(i64::MAX as u128) as i64,
            ..PopOutcome::default()
        };
        let n = plan.queues.len().max(1);
        let first = self.rotate.fetch_add(1, Ordering::Relaxed) % n;
        let mut order: Vec<(&str, i32)> = Vec::with_capacity(n + 1);
        // Order pops read no retry topic: their messages are popped again
        // from the queue itself.
        if !req.fifo && self.topics.contains(&plan.retry_topic) {
            order.push((&plan.retry_topic, 0));
        }
        for i in 0..plan.queues.len() {
            order.push((&req.topic, plan.queues[(first + i) % n]));
        }
        for (topic, q) in order {
            if out.messages.len() >= max {
                break;
            }
            let Some(_claim) = self.claim(&req.group, topic, q) else {
                continue;
            };
            let want = max - out.messages.len();
            if req.fifo {
                self.pop_queue_ordered(req, &plan.filter, topic, q, want, init_min, &mut out)
                    .await?;
            } else {
                self.pop_queue(req, plan, topic, q, want, init_min, &mut out)
                    .await?;
            }
        }
        Ok(out)
    }

    /// The offset a group with no offset on a queue starts from: the
    /// queue's start for retry topics and MIN mode; otherwise its end,
    /// unless the queue still holds its first message (RocketMQ's
    /// initPopOffsetByCheckMsgInMem), then its start.
    pub(crate) fn init_offset(&self, topic: &str, q: i32, init_min: bool) -> i64 {
        let min = self.store.min_offset_in_queue(topic, q);
        if init_min || topic.starts_with(reserved::RETRY_GROUP_PREFIX) || min <= 0 {
            min.max(0)
        } else {
            self.store.max_offset_in_queue(topic, q)
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn pop_queue(
        &self,
        req: &PopRequest,
        plan: &PopPlan,
        topic: &str,
        q: i32,
        want: usize,
        init_min: bool,
        out: &mut PopOutcome,
    ) -> Result<(), PopError> {
        let offset = match self.offsets.query(&req.group, topic, q) {
            Some(o) => o,
            None => self.init_offset(topic, q, init_min),
        };
        let filter: Option<&dyn MessageFilter> = if plan.filter.matches_all() {
            None
        } else {
            Some(&*plan.filter)
        };
        let r = self.store.get_message(
            &GetMessageRequest {
                topic,
                queue_id: q,
                offset,
                max_msgs: want,
                max_bytes: None,
                correct_offsets: true,
            },
            filter,
        );
        out.rest += (r.max_offset - r.next_begin_offset).max(0);
        if r.status != GetMessageStatus::Found || r.messages.is_empty() {
            if r.next_begin_offset != offset && r.next_begin_offset >= 0 {
                self.offsets
                    .commit(&req.group, topic, q, r.next_begin_offset);
            }
            return Ok(());
        }
        let mut found = Vec::with_capacity(r.messages.len());
        for raw in &r.messages {
            match RecordView::parse(raw, false) {
                Ok(v) => found.push((v.to_message(), raw.clone())),
                Err(e) => {
                    tracing::warn!(topic, queue = q, error = %e, "pop skips an unreadable record")
                }
            }
        }
        let offsets: Vec<i64> = found.iter().map(|(m, _)| m.queue_offset).collect();
        if !offsets.is_empty() {
            let ck = CheckPoint {
                start_offset: offset,
                pop_time: out.pop_time,
                invisible_time: out.invisible_ms,
                num: offsets.len() as u32,
                queue_id: q,
                topic: topic.to_string(),
                group: req.group.clone(),
                offset_diffs: offsets.iter().map(|o| o - offset).collect(),
                broker_name: self.config.broker_name.clone(),
            };
            self.write_record(ReviveRecord::Ck(ck)).await?;
        }
        self.offsets
            .commit(&req.group, topic, q, r.next_begin_offset);
        for (message, raw) in found {
            let handle = ExtraInfo {
                ck_offset: offset,
                pop_time: out.pop_time,
                invisible_ms: out.invisible_ms,
                revive_qid: 0,
                retry_flag: retry_flag_of(topic).to_string(),
                broker_name: self.config.broker_name.clone(),
                queue_id: q,
                queue_offset: message.queue_offset,
            };
            let popped = PoppedMessage {
                origin_topic: req.topic.clone(),
                receipt_handle: handle.encode(),
                delivery_attempt: message.reconsume_times.max(0) as u32 + 1,
                invisible_until_ms: handle.deadline(),
                message,
            };
            out.messages.push((popped, raw));
        }
        out.queues.push((topic.to_string(), q, offset, offsets));
        Ok(())
    }
}

/// Resolves when any of the wake-ups fires.
async fn any_notified(waits: &mut [Pin<Box<tokio::sync::futures::Notified<'_>>>]) {
    std::future::poll_fn(|cx| {
        for w in waits.iter_mut() {
            if w.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    })
    .await
}
