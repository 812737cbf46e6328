//! POP consumption (RocketMQ 5.x): a consumer *pops* messages, which stay
//! invisible to the group for an invisible time; it *acks* each one, or the
//! message reappears (through the group's retry topic) with its delivery
//! attempt raised, and past the group's `retryMaxTimes` lands in the group's
//! DLQ. Format and behaviour: docs/pop.md.
//!
//! This module is the narrow interface the remoting POP processor and the
//! gRPC MessagingService both call: [`Broker::pop`], [`Broker::ack`] and
//! [`Broker::change_invisible`]. Checkpoints (CK) and acks are written as
//! records of the revive topic `rmq_sys_REVIVE_LOG_<cluster>` through the
//! CommitLog, so they are replicated and survive restarts and fail-over.

pub mod batch_ack;
pub mod fetch;
pub mod handle;
pub mod order;
mod order_pop;
pub mod records;
mod revive;
pub mod service;
pub mod state;

use std::sync::Arc;
use std::time::Duration;

use basalt_common::record::StoredMessage;
use thiserror::Error;

use self::handle::ExtraInfo;
use self::records::{Ack, CheckPoint, ReviveRecord};
pub use self::service::PopService;
use self::state::MsgKey;
use crate::broker::Broker;

/// Why a POP operation failed. Each variant maps to one remoting response
/// code and one gRPC status.
#[derive(Debug, Error)]
pub enum PopError {
    /// The topic does not exist on this broker.
    #[error("topic {0} not exist")]
    TopicNotFound(String),
    /// The consumer group does not exist and may not be created.
    #[error("subscription group {0} not exist")]
    GroupNotFound(String),
    /// The group or topic may not be consumed (permissions, consumeEnable).
    #[error("no permission: {0}")]
    Forbidden(String),
    /// The request is malformed (bad queue id, bad filter, bad duration).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The receipt handle does not parse.
    #[error("bad receipt handle: {0}")]
    BadHandle(String),
    /// The handle's invisible time has passed; the message may already be
    /// visible again (or delivered to someone else).
    #[error("receipt handle expired")]
    HandleExpired,
    /// The handle names a message this broker has no checkpoint for (acked
    /// already, or revived).
    #[error("message not found for receipt handle")]
    NotFound,
    /// A FIFO queue is locked by an un-acked batch (order pop).
    #[error("queue locked by an in-flight ordered batch")]
    Locked,
    /// This broker does not take POP now (a slave, or shutting down).
    #[error("service not available: {0}")]
    Unavailable(String),
    /// Anything else: store failure, unreadable record.
    #[error("internal: {0}")]
    Internal(String),
}

/// One POP request: what to pop, for whom, for how long.
#[derive(Debug, Clone)]
pub struct PopRequest {
    pub group: String,
    pub topic: String,
    /// One queue, or `None` for every readable queue of the topic.
    pub queue_id: Option<i32>,
    /// At most this many messages (clamped to 1..=32 as Java does).
    pub max_messages: u32,
    /// How long popped messages stay invisible to the group.
    pub invisible: Duration,
    /// Long polling: how long to wait for a message when none is there
    /// (zero: answer at once). Woken by new messages, never by polling.
    pub poll_timeout: Duration,
    /// `TAG` or `SQL92`.
    pub expression_type: String,
    /// `*`, `a || b`, or a SQL92 selector.
    pub expression: String,
    /// FIFO: lock the queue until the popped batch is acked.
    pub fifo: bool,
    /// The client's attempt id (idempotent retries of the same receive).
    pub attempt_id: Option<String>,
}

/// A popped message: the stored message as read (its topic is the retry
/// topic when it is a redelivery; `origin_topic` is the one the consumer
/// subscribed to), its receipt handle and delivery details.
#[derive(Debug, Clone)]
pub struct PoppedMessage {
    pub message: StoredMessage,
    /// The topic the consumer popped (the message's real topic).
    pub origin_topic: String,
    /// Opaque handle for [`Broker::ack`] / [`Broker::change_invisible`]
    /// (the `POP_CK` extra-info string, docs/pop.md#receipt-handle).
    pub receipt_handle: String,
    /// 1 on first delivery, raised by one on each redelivery.
    pub delivery_attempt: u32,
    /// Unix millis when the message becomes visible again if not acked.
    pub invisible_until_ms: i64,
}

impl Broker {
    /// Pops up to `max_messages` messages; waits up to `poll_timeout` for
    /// the first when there are none. An empty vector means none came.
    pub async fn pop(&self, req: PopRequest) -> Result<Vec<PoppedMessage>, PopError> {
        let out = self.pop.pop_batch(&req, false).await?;
        Ok(out.messages.into_iter().map(|(m, _)| m).collect())
    }

    /// Acks one popped message: it is not delivered to the group again.
    /// `topic` is the topic the consumer popped (not the retry topic).
    pub async fn ack(
        &self,
        group: &str,
        topic: &str,
        receipt_handle: &str,
    ) -> Result<(), PopError> {
        let h = ExtraInfo::parse(receipt_handle, None)?;
        self.pop.ack(group, topic, &h).await
    }

    /// Makes a popped message invisible for `invisible` from now on, and
    /// returns the new receipt handle (the old one is spent).
    pub async fn change_invisible(
        &self,
        group: &str,
        topic: &str,
        receipt_handle: &str,
        invisible: Duration,
    ) -> Result<String, PopError> {
        let h = ExtraInfo::parse(receipt_handle, None)?;
        let new = self
            .pop
            .change_invisible(group, topic, &h, invisible)
            .await?;
        Ok(new.encode())
    }

    /// The POP machinery (in-flight counts, revive lag).
    pub fn pop_service(&self) -> &Arc<PopService> {
        &self.pop
    }
}

impl PopService {
    /// Checks what an ack or change names: this broker takes writes, the
    /// group name is valid, the topic exists.
    fn check_target(&self, group: &str, topic: &str) -> Result<(), PopError> {
        self.check_writable()?;
        basalt_common::topic::validate_group(group)
            .map_err(|e| PopError::BadRequest(e.to_string()))?;
        if !self.topics.contains(topic) {
            return Err(PopError::TopicNotFound(topic.to_string()));
        }
        Ok(())
    }

    /// The in-flight message a handle names, checked against the table.
    async fn inflight_key(
        &self,
        group: &str,
        topic: &str,
        h: &ExtraInfo,
    ) -> Result<(MsgKey, state::InFlight), PopError> {
        self.check_target(group, topic)?;
        self.ensure_loaded().await?;
        let key = (
            group.to_string(),
            h.stored_topic(topic, group),
            h.queue_id,
            h.queue_offset,
        );
        match self.state.lock().get(&key) {
            Some(e) if e.pop_time == h.pop_time => Ok((key, e)),
            _ => Err(PopError::NotFound),
        }
    }

    /// ACK_MESSAGE: writes the ack, then forgets the message.
    pub(crate) async fn ack(
        &self,
        group: &str,
        topic: &str,
        h: &ExtraInfo,
    ) -> Result<(), PopError> {
        if h.revive_qid == order::ORDER_REVIVE_QID {
            self.check_target(group, topic)?;
            return self.ack_ordered(group, &h.stored_topic(topic, group), h);
        }
        let (key, _) = self.inflight_key(group, topic, h).await?;
        let rec = ReviveRecord::Ack(Ack {
            ack_offset: key.3,
            ack_offsets: Vec::new(),
            start_offset: h.ck_offset,
            group: key.0,
            topic: key.1,
            queue_id: key.2,
            pop_time: h.pop_time,
            broker_name: self.config.broker_name.clone(),
        });
        self.write_record(rec).await
    }

    /// CHANGE_MESSAGE_INVISIBLETIME: a new checkpoint of the one message,
    /// popped now, invisible for `invisible`; it replaces the old one.
    pub(crate) async fn change_invisible(
        &self,
        group: &str,
        topic: &str,
        h: &ExtraInfo,
        invisible: Duration,
    ) -> Result<ExtraInfo, PopError> {
        let invisible_ms = invisible.as_millis().min(i64::MAX as u128) as i64;
        if h.revive_qid == order::ORDER_REVIVE_QID {
            self.check_target(group, topic)?;
            return self.change_ordered(group, &h.stored_topic(topic, group), h, invisible_ms);
        }
        let (key, entry) = self.inflight_key(group, topic, h).await?;
        let now = basalt_common::time::now_millis();
        if entry.deadline() <= now {
            return Err(PopError::HandleExpired);
        }
        // A new pop time, never equal to the old one (that would make the
        // old handle valid for the new checkpoint).
        let pop_time = now.max(h.pop_time + 1);
        let ck = CheckPoint {
            start_offset: key.3,
            pop_time,
            invisible_time: invisible_ms,
            num: 1,
            queue_id: key.2,
            topic: key.1.clone(),
            group: key.0.clone(),
            offset_diffs: vec![0],
            broker_name: self.config.broker_name.clone(),
        };
        self.write_record(ReviveRecord::Ck(ck)).await?;
        Ok(ExtraInfo {
            ck_offset: key.3,
            pop_time,
            invisible_ms,
            ..h.clone()
        })
    }
}
