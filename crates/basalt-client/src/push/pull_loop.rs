//! The pull task of one assigned queue (Java `DefaultMQPushConsumerImpl.pullMessage`
//! and its callback): flow control, long-polling pulls, dispatch to the
//! consume side, and the reactions to each pull status.

use std::sync::Arc;
use std::time::Duration;

use basalt_remoting::code::response;

use super::process_queue::ProcessQueue;
use super::{MessageModel, PushInner};
use crate::error::ClientError;
use crate::message::TopicQueue;
use crate::pull::{PullArgs, PullStatus, pull, sys_flag};

/// Retry delay after the broker answered FLOW_CONTROL.
const DELAY_WHEN_BROKER_FLOW_CONTROL: Duration = Duration::from_millis(20);

/// Pulls `mq` from `next_offset` until the queue is dropped or the consumer stops.
pub(crate) async fn run(
    inner: Arc<PushInner>,
    mq: Arc<TopicQueue>,
    pq: Arc<ProcessQueue>,
    mut next_offset: i64,
) {
    let mut stop = inner.stop.subscribe();
    let clustering = inner.options.message_model == MessageModel::Clustering;
    loop {
        if pq.is_dropped() || *stop.borrow() {
            return;
        }
        pq.touch_pull();

        // Flow control: wait until the consume side frees space.
        {
            let space = pq.space_notified();
            tokio::pin!(space);
            space.as_mut().enable();
            if let Some(why) = over_threshold(&inner, &pq) {
                tracing::trace!(queue = %mq, why, "flow control");
                tokio::select! {
                    _ = space => {}
                    _ = pq.dropped() => return,
                    _ = stop.wait_for(|s| *s) => return,
                }
                continue;
            }
        }

        // Orderly clustering consumption pulls only under a live lock.
        if inner.options.consume_orderly && clustering && !pq.holds_lock() {
            tokio::select! {
                _ = pq.wait_ready() => {}
                _ = pq.dropped() => return,
                _ = stop.wait_for(|s| *s) => return,
            }
            continue;
        }

        let Some(sub) = inner.subscriptions.read().get(&mq.topic).cloned() else {
            if !pause(
                &inner,
                &pq,
                &mut stop,
                inner.options.pull_time_delay_when_exception,
            )
            .await
            {
                return;
            }
            continue;
        };
        let commit_offset = if clustering {
            inner.offsets().read_memory(&mq).unwrap_or(0)
        } else {
            0
        };
        let mut flag = sys_flag::SUSPEND;
        if commit_offset > 0 {
            flag |= sys_flag::COMMIT_OFFSET;
        }
        let args = PullArgs {
            group: &inner.group,
            mq: &mq,
            subscription: &sub,
            post_subscription: inner.options.post_subscription_when_pull,
            offset: next_offset,
            max_nums: inner.options.pull_batch_size,
            max_bytes: Some(inner.options.pull_batch_size_in_bytes),
            sys_flag: flag,
            commit_offset,
            suspend_timeout: inner.options.broker_suspend_max_time,
            rpc_timeout: inner.options.consumer_timeout_when_suspend,
            lite: false,
        };
        let result = tokio::select! {
            r = pull(&inner.instance, args) => r,
            _ = pq.dropped() => return,
            _ = stop.wait_for(|s| *s) => return,
        };
        match result {
            Ok(r) => match r.status {
                PullStatus::Found => {
                    let prev = next_offset;
                    next_offset = r.next_begin_offset;
                    if let Some(first) = r.msgs.first() {
                        if r.next_begin_offset < prev || first.queue_offset < prev {
                            tracing::warn!(queue = %mq, prev, next = r.next_begin_offset,
                                first = first.queue_offset, "pull result offsets go backwards");
                        }
                        inner.submit(&mq, &pq, r.msgs);
                        if !inner.options.pull_interval.is_zero()
                            && !pause(&inner, &pq, &mut stop, inner.options.pull_interval).await
                        {
                            return;
                        }
                    }
                }
                PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => {
                    next_offset = r.next_begin_offset;
                    // Nothing in flight: the consumed offset may follow the
                    // pull offset past filtered-out messages (`correctTagsOffset`).
                    if pq.count() == 0 {
                        inner.offsets().update(&mq, next_offset, true);
                    }
                }
                PullStatus::OffsetIllegal => {
                    tracing::warn!(group = %inner.group, queue = %mq, requested = next_offset,
                        next = r.next_begin_offset, "pull offset moved; dropping the queue until the next rebalance");
                    pq.set_dropped();
                    let store = inner.offsets();
                    store.update(&mq, r.next_begin_offset, false);
                    store.persist(&mq).await;
                    store.remove(&mq);
                    inner.forget_queue(&mq, &pq);
                    inner.instance.rebalance_now();
                    return;
                }
            },
            Err(e) => {
                let delay = if e.response_code() == Some(response::FLOW_CONTROL) {
                    DELAY_WHEN_BROKER_FLOW_CONTROL
                } else {
                    inner.options.pull_time_delay_when_exception
                };
                if !matches!(
                    e,
                    ClientError::Broker {
                        code: response::SUBSCRIPTION_NOT_LATEST,
                        ..
                    }
                ) && !mq
                    .topic
                    .starts_with(basalt_common::constants::topic::RETRY_GROUP_PREFIX)
                {
                    tracing::warn!(group = %inner.group, queue = %mq, error = %e, "pull failed");
                }
                if !pause(&inner, &pq, &mut stop, delay).await {
                    return;
                }
            }
        }
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

/// Waits `delay`; false if the queue was dropped or the consumer stopped meanwhile.
async fn pause(
    _inner: &PushInner,
    pq: &ProcessQueue,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    delay: Duration,
) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => true,
        _ = pq.dropped() => false,
        _ = stop.wait_for(|s| *s) => false,
    }
}
