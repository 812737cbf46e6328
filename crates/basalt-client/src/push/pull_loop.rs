//! The pull task of one assigned queue (Java `DefaultMQPushConsumerImpl.pullMessage`
//! and its callback): flow control, long-polling pulls, dispatch to the
//! consume side, and the reactions to each pull status.

use std::sync::Arc;
use std::time::Duration;

use basalt_remoting::code::response;
use basalt_remoting::protocol::SubscriptionData;
use tokio::sync::watch;

use super::process_queue::ProcessQueue;
use super::{PushInner, PushMessageModel};
use crate::error::ClientError;
use crate::message::TopicQueue;
use crate::pull::{PullArgs, PullResult, PullStatus, pull, sys_flag};

/// Retry delay after the broker answered FLOW_CONTROL.
const DELAY_WHEN_BROKER_FLOW_CONTROL: Duration = Duration::from_millis(20);

/// Pulls `mq` from `next_offset` until the queue is dropped or the consumer stops.
pub(crate) async fn run(
    inner: Arc<PushInner>,
    mq: Arc<TopicQueue>,
    pq: Arc<ProcessQueue>,
    next_offset: i64,
) {
    let stop = inner.stop.subscribe();
    let clustering = inner.options.message_model == PushMessageModel::Clustering;
    QueuePuller {
        inner,
        mq,
        pq,
        stop,
        clustering,
        next_offset,
    }
    .run()
    .await
}

/// Whether a pull may go out now.
enum Gate {
    Open,
    /// It waited for space or a lock: check the queue again.
    Waited,
    /// The queue was dropped or the consumer stopped.
    Closed,
}

/// The state of one queue's pull task.
struct QueuePuller {
    inner: Arc<PushInner>,
    mq: Arc<TopicQueue>,
    pq: Arc<ProcessQueue>,
    stop: watch::Receiver<bool>,
    clustering: bool,
    /// Where the next pull starts.
    next_offset: i64,
}

impl QueuePuller {
    async fn run(mut self) {
        loop {
            if self.pq.is_dropped() || *self.stop.borrow() {
                return;
            }
            self.pq.touch_pull();
            match self.wait_until_pullable().await {
                Gate::Open => {}
                Gate::Waited => continue,
                Gate::Closed => return,
            }
            let Some(sub) = self.inner.subscriptions.read().get(&self.mq.topic).cloned() else {
                if !self
                    .pause(self.inner.options.pull_time_delay_when_exception)
                    .await
                {
                    return;
                }
                continue;
            };
            let args = pull_args(
                &self.inner,
                &self.mq,
                &sub,
                self.next_offset,
                self.clustering,
            );
            let result = tokio::select! {
                r = pull(&self.inner.instance, args) => r,
                _ = self.pq.dropped() => return,
                _ = self.stop.wait_for(|s| *s) => return,
            };
            let go_on = match result {
                Ok(r) => self.on_pulled(r).await,
                Err(e) => self.on_pull_error(e).await,
            };
            if !go_on {
                return;
            }
        }
    }

    /// Flow control (wait until the consume side frees space), and for
    /// orderly clustering consumption, a live broker lock.
    async fn wait_until_pullable(&mut self) -> Gate {
        let (inner, pq) = (&self.inner, &self.pq);
        {
            let space = pq.space_notified();
            tokio::pin!(space);
            space.as_mut().enable();
            if let Some(why) = over_threshold(inner, pq) {
                tracing::trace!(queue = %self.mq, why, "flow control");
                tokio::select! {
                    _ = space => {}
                    _ = pq.dropped() => return Gate::Closed,
                    _ = self.stop.wait_for(|s| *s) => return Gate::Closed,
                }
                return Gate::Waited;
            }
        }
        if inner.options.consume_orderly && self.clustering && !pq.holds_lock() {
            tokio::select! {
                _ = pq.wait_ready() => {}
                _ = pq.dropped() => return Gate::Closed,
                _ = self.stop.wait_for(|s| *s) => return Gate::Closed,
            }
            return Gate::Waited;
        }
        Gate::Open
    }

    /// Reacts to a pull's status; false when the task should end.
    async fn on_pulled(&mut self, r: PullResult) -> bool {
        let (inner, mq, pq) = (&self.inner, &self.mq, &self.pq);
        match r.status {
            PullStatus::Found => {
                let prev = self.next_offset;
                self.next_offset = r.next_begin_offset;
                if let Some(first) = r.msgs.first() {
                    if r.next_begin_offset < prev || first.queue_offset < prev {
                        tracing::warn!(queue = %mq, prev, next = r.next_begin_offset,
                            first = first.queue_offset, "pull result offsets go backwards");
                    }
                    inner.submit(mq, pq, r.msgs);
                    if !inner.options.pull_interval.is_zero() {
                        return self.pause(self.inner.options.pull_interval).await;
                    }
                }
                true
            }
            PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => {
                self.next_offset = r.next_begin_offset;
                // Nothing in flight: the consumed offset may follow the
                // pull offset past filtered-out messages (`correctTagsOffset`).
                if pq.count() == 0 {
                    inner.offsets().update(mq, self.next_offset, true);
                }
                true
            }
            PullStatus::OffsetIllegal => {
                tracing::warn!(group = %inner.group, queue = %mq, requested = self.next_offset,
                    next = r.next_begin_offset, "pull offset moved; dropping the queue until the next rebalance");
                pq.set_dropped();
                let store = inner.offsets();
                store.update(mq, r.next_begin_offset, false);
                store.persist(mq).await;
                store.remove(mq);
                inner.forget_queue(mq, pq);
                inner.instance.rebalance_now();
                false
            }
        }
    }

    /// Logs a failed pull and waits before the next; false when the task
    /// should end.
    async fn on_pull_error(&mut self, e: ClientError) -> bool {
        let delay = if e.response_code() == Some(response::FLOW_CONTROL) {
            DELAY_WHEN_BROKER_FLOW_CONTROL
        } else {
            self.inner.options.pull_time_delay_when_exception
        };
        if !matches!(
            e,
            ClientError::Broker {
                code: response::SUBSCRIPTION_NOT_LATEST,
                ..
            }
        ) && !self
            .mq
            .topic
            .starts_with(basalt_common::constants::topic::RETRY_GROUP_PREFIX)
        {
            tracing::warn!(group = %self.inner.group, queue = %self.mq, error = %e, "pull failed");
        }
        self.pause(delay).await
    }

    /// Waits `delay`; false if the queue was dropped or the consumer stopped meanwhile.
    async fn pause(&mut self, delay: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(delay) => true,
            _ = self.pq.dropped() => false,
            _ = self.stop.wait_for(|s| *s) => false,
        }
    }
}

/// The long-polling pull of `mq` from `offset`, committing the consumed
/// offset along (clustering).
fn pull_args<'a>(
    inner: &'a PushInner,
    mq: &'a TopicQueue,
    sub: &'a SubscriptionData,
    offset: i64,
    clustering: bool,
) -> PullArgs<'a> {
    let commit_offset = if clustering {
        inner.offsets().read_memory(mq).unwrap_or(0)
    } else {
        0
    };
    let mut flag = sys_flag::SUSPEND;
    if commit_offset > 0 {
        flag |= sys_flag::COMMIT_OFFSET;
    }
    PullArgs {
        group: &inner.group,
        mq,
        subscription: sub,
        post_subscription: inner.options.post_subscription_when_pull,
        offset,
        max_nums: inner.options.pull_batch_size,
        max_bytes: Some(inner.options.pull_batch_size_in_bytes),
        sys_flag: flag,
        commit_offset,
        suspend_timeout: inner.options.broker_suspend_max_time,
        rpc_timeout: inner.options.consumer_timeout_when_suspend,
        lite: false,
    }
}

/// Why pulling should wait, if it should (`pullThresholdForQueue`,
/// `pullThresholdSizeForQueue`, `consumeConcurrentlyMaxSpan`).
fn over_threshold(inner: &PushInner, pq: &ProcessQueue) -> Option<&'static str> {
    let o = &inner.options;
    if pq.count() > o.pull_threshold_for_queue {
        return Some("cached message count");
    }
    if pq.size_bytes() / (1024 * 1024) > o.pull_threshold_size_for_queue_mib {
        return Some("cached message size");
    }
    if !o.consume_orderly && pq.max_span() > o.consume_concurrently_max_span {
        return Some("offset span");
    }
    None
}
