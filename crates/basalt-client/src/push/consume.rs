//! The consume side of a push consumer: concurrent consumption (Java
//! `ConsumeMessageConcurrentlyService`), orderly consumption
//! (`ConsumeMessageOrderlyService`) and sending failed messages back.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use basalt_common::constants::property;
use tokio::sync::{mpsc, watch};

use super::process_queue::ProcessQueue;
use super::{ConsumeContext, ConsumeStatus, Listener, PushInner, PushMessageModel};
use crate::message::{MessageExt, TopicQueue};

/// Failed messages whose send-back also failed are consumed again this much later.
const RESUBMIT_DELAY: Duration = Duration::from_secs(5);

/// A batch for the listener (concurrent mode).
pub(crate) struct ConsumeRequest {
    pub mq: Arc<TopicQueue>,
    pub pq: Arc<ProcessQueue>,
    pub msgs: Vec<MessageExt>,
}

/// Starts requests in arrival order, each once a worker permit is free.
/// With one permit, consumption is strictly sequential.
pub(crate) async fn dispatcher(
    inner: Arc<PushInner>,
    mut rx: mpsc::UnboundedReceiver<ConsumeRequest>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let req = tokio::select! {
            r = rx.recv() => match r { Some(r) => r, None => return },
            _ = stop.wait_for(|s| *s) => return,
        };
        let permit = tokio::select! {
            p = inner.permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = stop.wait_for(|s| *s) => return,
        };
        let me = inner.clone();
        tokio::spawn(async move {
            me.consume_concurrently(req).await;
            drop(permit);
        });
    }
}

impl PushInner {
    /// Hands pulled messages to the consume side.
    pub(crate) fn submit(
        &self,
        mq: &Arc<TopicQueue>,
        pq: &Arc<ProcessQueue>,
        msgs: Vec<MessageExt>,
    ) {
        if self.options.consume_orderly {
            pq.put_owned(msgs);
            return;
        }
        pq.put(&msgs);
        let Some(tx) = self.consume_tx.lock().clone() else {
            return;
        };
        let batch = self.options.consume_message_batch_max_size.max(1);
        if msgs.len() <= batch {
            let _ = tx.send(ConsumeRequest {
                mq: mq.clone(),
                pq: pq.clone(),
                msgs,
            });
            return;
        }
        let mut it = msgs.into_iter().peekable();
        while it.peek().is_some() {
            let chunk: Vec<MessageExt> = it.by_ref().take(batch).collect();
            let _ = tx.send(ConsumeRequest {
                mq: mq.clone(),
                pq: pq.clone(),
                msgs: chunk,
            });
        }
    }

    /// Shows a retried message under its original topic
    /// (`resetRetryAndNamespace`).
    fn prepare_for_listener(&self, msgs: &mut [MessageExt]) {
        for m in msgs.iter_mut() {
            if m.topic == self.retry_topic
                && let Some(orig) = m.property(property::RETRY_TOPIC).map(str::to_string)
            {
                m.topic = orig;
            }
        }
    }

    /// Runs the listener; a panic counts as `ReconsumeLater`.
    async fn call_listener(
        &self,
        msgs: Vec<MessageExt>,
        mut ctx: ConsumeContext,
    ) -> (Vec<MessageExt>, ConsumeContext, ConsumeStatus) {
        let listener = self.listener.lock().clone();
        let Some(listener) = listener else {
            return (msgs, ctx, ConsumeStatus::ReconsumeLater);
        };
        match listener {
            Listener::Blocking(f) => {
                let fallback = ctx.clone();
                let joined = tokio::task::spawn_blocking(move || {
                    let r = catch_unwind(AssertUnwindSafe(|| f(&msgs, &mut ctx)));
                    (msgs, ctx, r)
                })
                .await;
                match joined {
                    Ok((msgs, ctx, Ok(status))) => (msgs, ctx, status),
                    Ok((msgs, ctx, Err(_))) => {
                        tracing::warn!(group = %self.group, "the listener panicked; reconsuming later");
                        (msgs, ctx, ConsumeStatus::ReconsumeLater)
                    }
                    Err(e) => {
                        // The blocking pool refused the job (runtime shutting down).
                        tracing::warn!(group = %self.group, error = %e, "listener call failed");
                        (Vec::new(), fallback, ConsumeStatus::ReconsumeLater)
                    }
                }
            }
            Listener::Async(l) => {
                let r = CatchUnwind(l.consume(&msgs, &mut ctx)).await;
                let status = r.unwrap_or_else(|()| {
                    tracing::warn!(group = %self.group, "the listener panicked; reconsuming later");
                    ConsumeStatus::ReconsumeLater
                });
                (msgs, ctx, status)
            }
        }
    }

    pub(crate) async fn consume_concurrently(self: &Arc<Self>, req: ConsumeRequest) {
        if req.pq.is_dropped() {
            return;
        }
        let mut msgs = req.msgs;
        self.prepare_for_listener(&mut msgs);
        let ctx = ConsumeContext::new(req.mq.clone(), self.options.suspend_current_queue_time);
        let (msgs, ctx, status) = self.call_listener(msgs, ctx).await;
        if req.pq.is_dropped() || msgs.is_empty() {
            return;
        }
        self.process_consume_result(status, &ctx, &req.mq, &req.pq, msgs)
            .await;
    }

    /// Java's `processConsumeResult`: failed messages go back to the broker;
    /// the rest leave the process queue, and the queue's committed offset
    /// becomes the smallest offset still in flight.
    async fn process_consume_result(
        self: &Arc<Self>,
        status: ConsumeStatus,
        ctx: &ConsumeContext,
        mq: &Arc<TopicQueue>,
        pq: &Arc<ProcessQueue>,
        msgs: Vec<MessageExt>,
    ) {
        let n = msgs.len() as i64;
        let ack = match status {
            ConsumeStatus::Success => (ctx.ack_index as i64).min(n - 1),
            ConsumeStatus::ReconsumeLater => -1,
        };
        let mut done = Vec::with_capacity(msgs.len());
        let mut back_failed = Vec::new();
        for (i, mut m) in msgs.into_iter().enumerate() {
            if i as i64 <= ack {
                done.push(m.queue_offset);
                continue;
            }
            match self.options.message_model {
                PushMessageModel::Broadcasting => {
                    tracing::warn!(group = %self.group, msg_id = %m.msg_id,
                        "broadcast consumption failed; the message is dropped");
                    done.push(m.queue_offset);
                }
                PushMessageModel::Clustering => {
                    if !pq.contains(m.queue_offset) {
                        continue;
                    }
                    // Boxed: the send-back future is large and rarely
                    // needed; inline it would grow every consume task.
                    let back = Box::pin(self.send_back(&m, ctx.delay_level_when_next_consume));
                    if back.await {
                        done.push(m.queue_offset);
                    } else {
                        m.reconsume_times += 1;
                        back_failed.push(m);
                    }
                }
            }
        }
        let offset = pq.remove(done);
        if offset >= 0 && !pq.is_dropped() {
            self.offsets().update(mq, offset, true);
        }
        if !back_failed.is_empty() {
            let me = self.clone();
            let mq = mq.clone();
            let pq = pq.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(RESUBMIT_DELAY) => {}
                    _ = pq.dropped() => return,
                }
                if let Some(tx) = me.consume_tx.lock().clone() {
                    let _ = tx.send(ConsumeRequest {
                        mq,
                        pq,
                        msgs: back_failed,
                    });
                }
            });
        }
    }

    /// CONSUMER_SEND_MSG_BACK to the broker the message came from; if that
    /// fails, a plain send to `%RETRY%<group>` (Java `sendMessageBack` and
    /// `sendMessageBackAsNormalMessage`). True if either worked.
    pub(crate) async fn send_back(&self, msg: &MessageExt, delay_level: i32) -> bool {
        let max = self.max_reconsume_times();
        let addr = self
            .instance
            .master_addr(&msg.broker_name)
            .or_else(|| (msg.store_host.port() != 0).then(|| msg.store_host.to_string()));
        if let Some(addr) = addr {
            match self
                .instance
                .consumer_send_msg_back(&addr, msg, &self.group, delay_level, max)
                .await
            {
                Ok(()) => return true,
                Err(e) => tracing::warn!(group = %self.group, msg_id = %msg.msg_id, error = %e,
                    "CONSUMER_SEND_MSG_BACK failed; resending to the retry topic"),
            }
        }
        let retry = self.resend_message(msg, msg.reconsume_times + 1, max);
        match self.retry_producer.send_internal(&retry).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(group = %self.group, msg_id = %msg.msg_id, error = %e,
                    "resending to the retry topic failed");
                false
            }
        }
    }

    /// The message Java builds to resend a failed one to the retry topic.
    fn resend_message(&self, msg: &MessageExt, reconsume_times: i32, max: i32) -> crate::Message {
        let mut m = msg.to_message(basalt_common::topic::retry_topic(&self.group));
        for k in [
            property::TAGS,
            property::KEYS,
            property::WAIT,
            property::DELAY,
            property::MIN_OFFSET,
            property::MAX_OFFSET,
            property::TRAN_MSG,
        ] {
            m.properties.remove(k);
        }
        let origin = msg
            .property(property::ORIGIN_MESSAGE_ID)
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(&msg.msg_id)
            .to_string();
        m.properties.set(property::ORIGIN_MESSAGE_ID, origin);
        m.properties.set(property::RETRY_TOPIC, msg.topic.clone());
        m.properties
            .set(property::RECONSUME_TIME, reconsume_times.to_string());
        m.properties
            .set(property::MAX_RECONSUME_TIMES, max.to_string());
        m.delay_level = 3 + msg.reconsume_times;
        m
    }
}

/// Consumes one queue in offset order, one batch at a time, while this
/// client holds the queue's lock (clustering) — Java's orderly service.
pub(crate) async fn orderly_loop(
    inner: Arc<PushInner>,
    mq: Arc<TopicQueue>,
    pq: Arc<ProcessQueue>,
) {
    let mut stop = inner.stop.subscribe();
    let clustering = inner.options.message_model == PushMessageModel::Clustering;
    let batch = inner.options.consume_message_batch_max_size.max(1);
    loop {
        if pq.is_dropped() || *stop.borrow() {
            return;
        }
        {
            let ready = pq.wait_ready();
            tokio::pin!(ready);
            let can_consume = pq.has_pending() && (!clustering || pq.holds_lock());
            if !can_consume {
                tokio::select! {
                    _ = &mut ready => {}
                    _ = pq.dropped() => return,
                    _ = stop.wait_for(|s| *s) => return,
                }
                continue;
            }
        }
        let permit = tokio::select! {
            p = inner.permits.acquire() => match p { Ok(p) => p, Err(_) => return },
            _ = pq.dropped() => return,
            _ = stop.wait_for(|s| *s) => return,
        };
        let mut msgs = pq.take(batch);
        if msgs.is_empty() {
            continue;
        }
        inner.prepare_for_listener(&mut msgs);
        let ctx = ConsumeContext::new(mq.clone(), inner.options.suspend_current_queue_time);
        let (mut msgs, ctx, status) = inner.call_listener(msgs, ctx).await;
        drop(permit);
        if pq.is_dropped() {
            return;
        }
        let commit = match status {
            ConsumeStatus::Success => true,
            ConsumeStatus::ReconsumeLater => !Box::pin(inner.reconsume_or_give_up(&mut msgs)).await,
        };
        if commit {
            let offset = pq.commit();
            if offset >= 0 {
                inner.offsets().update(&mq, offset, false);
            }
        } else {
            pq.reconsume_later(msgs);
            tokio::select! {
                _ = tokio::time::sleep(ctx.suspend_time) => {}
                _ = pq.dropped() => return,
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}

impl PushInner {
    /// Java's orderly `checkReconsumeTimes`: messages that used up their
    /// deliveries are sent back (to end in the DLQ); returns true if the
    /// batch must be consumed again (any message still has deliveries left,
    /// or could not be sent back).
    async fn reconsume_or_give_up(&self, msgs: &mut [MessageExt]) -> bool {
        let max = self.max_reconsume_times();
        let mut again = false;
        for m in msgs.iter_mut() {
            if m.reconsume_times >= max {
                let retry = self.resend_message(m, m.reconsume_times, max);
                if self.retry_producer.send_internal(&retry).await.is_err() {
                    again = true;
                    m.reconsume_times += 1;
                }
            } else {
                again = true;
                m.reconsume_times += 1;
            }
        }
        again
    }
}

/// Polls a future, turning a panic into `Err(())`.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(&mut *inner).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

#[cfg(test)]
mod tests {
    /// Consume tasks are spawned per batch: their futures must stay small
    /// (the rare send-back path is boxed).
    #[test]
    fn consume_future_is_small() {
        let c = super::super::PushConsumer::new("G", crate::ClientConfig::new("127.0.0.1:1"));
        let inner = c.inner.clone();
        let pq = std::sync::Arc::new(super::ProcessQueue::new());
        let req = super::ConsumeRequest {
            mq: std::sync::Arc::new(crate::TopicQueue::new("T", "b", 0)),
            pq,
            msgs: Vec::new(),
        };
        let fut = async move { inner.consume_concurrently(req).await };
        let size = std::mem::size_of_val(&fut);
        assert!(size < 2048, "consume future is {size} bytes");
    }
}
