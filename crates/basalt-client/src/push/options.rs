//! The push consumer's settings and the types its listener sees:
//! [`PushOptions`], [`PushMessageModel`], [`PushConsumeFrom`], the listener
//! traits, [`ConsumeStatus`] and [`ConsumeContext`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use basalt_remoting::transport::BoxFuture;

use super::AllocateStrategy;
use crate::message::{MessageExt, TopicQueue};

/// Whether each message goes to one consumer of the group or to all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PushMessageModel {
    /// Queues are split among the group; offsets live on the brokers.
    #[default]
    Clustering,
    /// Every consumer reads every queue; offsets live in a local file.
    Broadcasting,
}

/// Where a consumer starts in a queue its group has no offset for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PushConsumeFrom {
    /// At the queue's end (retry topics: at the start).
    #[default]
    LastOffset,
    /// At the queue's start.
    FirstOffset,
    /// At the first message stored at or after `consume_timestamp`.
    Timestamp,
}

/// What the listener says about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeStatus {
    /// Consumed (up to [`ConsumeContext::ack_index`]).
    Success,
    /// Try again later: concurrent mode sends the messages back for
    /// redelivery; orderly mode suspends the queue and retries in place.
    ReconsumeLater,
}

/// Per-batch context handed to the listener, which may adjust it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeContext {
    /// The queue the batch came from.
    pub queue: Arc<TopicQueue>,
    /// Concurrent mode: with `Success`, messages `0..=ack_index` succeeded
    /// and the rest are retried (default: all succeeded).
    pub ack_index: i32,
    /// Delay level for retried messages: 0 lets the broker choose
    /// (3 + reconsume times), -1 sends them straight to the DLQ.
    pub delay_level_when_next_consume: i32,
    /// Orderly mode: how long the queue waits before a retry.
    pub suspend_time: Duration,
}

impl ConsumeContext {
    pub(super) fn new(queue: Arc<TopicQueue>, suspend_time: Duration) -> Self {
        Self {
            queue,
            ack_index: i32::MAX,
            delay_level_when_next_consume: 0,
            suspend_time,
        }
    }
}

/// A listener that consumes asynchronously on the tokio runtime.
pub trait AsyncMessageListener: Send + Sync + 'static {
    fn consume<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        ctx: &'a mut ConsumeContext,
    ) -> BoxFuture<'a, ConsumeStatus>;
}

pub(super) type BlockingListener =
    dyn Fn(&[MessageExt], &mut ConsumeContext) -> ConsumeStatus + Send + Sync;

/// The registered listener, sync or async.
#[derive(Clone)]
pub(super) enum Listener {
    /// Runs on tokio's blocking pool.
    Blocking(Arc<BlockingListener>),
    Async(Arc<dyn AsyncMessageListener>),
}

/// Push-consumer settings (Java `DefaultMQPushConsumer` fields and defaults).
#[derive(Debug, Clone)]
pub struct PushOptions {
    pub message_model: PushMessageModel,
    pub consume_from_where: PushConsumeFrom,
    /// For [`PushConsumeFrom::Timestamp`], in ms since the epoch (Java
    /// default: half an hour before start).
    pub consume_timestamp: Option<i64>,
    /// Listener calls running at once (20).
    pub consume_thread_max: usize,
    /// Messages per pull (32).
    pub pull_batch_size: i32,
    /// Bytes per pull (256 KiB), sent as `maxMsgBytes`.
    pub pull_batch_size_in_bytes: i32,
    /// Messages per listener call (1).
    pub consume_message_batch_max_size: usize,
    /// Pulling pauses while a queue has this many messages in flight (1000).
    pub pull_threshold_for_queue: usize,
    /// … or this many MiB of bodies (100).
    pub pull_threshold_size_for_queue_mib: usize,
    /// … or (concurrent mode) this span of offsets in flight (2000).
    pub consume_concurrently_max_span: i64,
    /// Deliveries before a message goes to the DLQ; -1 = 16 (concurrent) or
    /// unlimited (orderly).
    pub max_reconsume_times: i32,
    /// Consume each queue one batch at a time, in order, holding a broker
    /// lock on it (clustering).
    pub consume_orderly: bool,
    /// Orderly mode: wait after a failed batch (1 s).
    pub suspend_current_queue_time: Duration,
    /// Send the subscription in every pull (SUBSCRIPTION flag).
    pub post_subscription_when_pull: bool,
    /// Pause between pulls of a queue (0).
    pub pull_interval: Duration,
    /// How long the broker may hold a pull (15 s).
    pub broker_suspend_max_time: Duration,
    /// RPC timeout of a held pull (30 s).
    pub consumer_timeout_when_suspend: Duration,
    /// Wait before retrying a failed pull (3 s).
    pub pull_time_delay_when_exception: Duration,
    /// How long `shutdown` waits for listener calls in progress (5 s).
    pub await_termination: Duration,
    /// Broadcasting: directory of the offset files (default
    /// `~/.rocketmq_offsets`).
    pub local_offset_store_dir: Option<PathBuf>,
    pub allocate_strategy: AllocateStrategy,
}

impl Default for PushOptions {
    fn default() -> Self {
        Self {
            message_model: PushMessageModel::Clustering,
            consume_from_where: PushConsumeFrom::LastOffset,
            consume_timestamp: None,
            consume_thread_max: 20,
            pull_batch_size: 32,
            pull_batch_size_in_bytes: 256 * 1024,
            consume_message_batch_max_size: 1,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue_mib: 100,
            consume_concurrently_max_span: 2000,
            max_reconsume_times: -1,
            consume_orderly: false,
            suspend_current_queue_time: Duration::from_secs(1),
            post_subscription_when_pull: false,
            pull_interval: Duration::ZERO,
            broker_suspend_max_time: Duration::from_secs(15),
            consumer_timeout_when_suspend: Duration::from_secs(30),
            pull_time_delay_when_exception: Duration::from_secs(3),
            await_termination: Duration::from_secs(5),
            local_offset_store_dir: None,
            allocate_strategy: AllocateStrategy::Averagely,
        }
    }
}
