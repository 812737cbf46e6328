//! Rebalancing a push consumer's queues (Java `RebalanceImpl` /
//! `RebalancePushImpl`), and the broker locks of orderly consumption.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use basalt_common::constants::topic::RETRY_GROUP_PREFIX;
use tokio::sync::watch;

use super::process_queue::ProcessQueue;
use super::{PushConsumeFrom, PushInner, PushMessageModel, consume, pull_loop};
use crate::error::{ClientError, Result};
use crate::message::TopicQueue;

/// Orderly consumers renew their queue locks this often
/// (`REBALANCE_LOCK_INTERVAL`).
const LOCK_RENEW_INTERVAL: Duration = Duration::from_secs(20);

/// A queue whose locks could not all be taken is retried this much later
/// (`rebalanceLater(500)`).
const RELOCK_DELAY: Duration = Duration::from_millis(500);

impl PushInner {
    /// One rebalance of every subscribed topic.
    pub(crate) async fn do_rebalance(self: &Arc<Self>) {
        if !self.is_running() {
            return;
        }
        let _one_at_a_time = self.rebalance_lock.lock().await;
        if !self.is_running() {
            return;
        }
        let topics: Vec<String> = self.subscriptions.read().keys().cloned().collect();
        for topic in &topics {
            if let Err(e) = self.rebalance_topic(topic).await
                && !topic.starts_with(RETRY_GROUP_PREFIX)
            {
                tracing::warn!(group = %self.group, topic, error = %e, "rebalance failed");
            }
        }
        // Queues of topics no longer subscribed (`truncateMessageQueueNotMyTopic`).
        let stale: Vec<(TopicQueue, Arc<ProcessQueue>)> = self
            .process_queues
            .lock()
            .iter()
            .filter(|(mq, _)| !topics.contains(&mq.topic))
            .map(|(m, p)| (m.clone(), p.clone()))
            .collect();
        for (mq, pq) in stale {
            pq.set_dropped();
            self.remove_unnecessary(&mq).await;
            self.forget_queue(&mq, &pq);
        }
    }

    async fn rebalance_topic(self: &Arc<Self>, topic: &str) -> Result<()> {
        let queues = self.topic_queues.read().get(topic).cloned();
        let assigned: BTreeSet<TopicQueue> = match self.options.message_model {
            PushMessageModel::Broadcasting => match queues {
                Some(q) => q,
                None => return Ok(()),
            },
            PushMessageModel::Clustering => {
                let Some(queues) = queues else {
                    return Err(ClientError::NoRoute {
                        topic: topic.to_string(),
                    });
                };
                let mut cids = self.instance.consumer_id_list(topic, &self.group).await?;
                if cids.is_empty() {
                    return Ok(());
                }
                cids.sort();
                // A BTreeSet iterates in Java's MessageQueue order.
                let all: Vec<TopicQueue> = queues.into_iter().collect();
                self.options
                    .allocate_strategy
                    .allocate(self.instance.client_id(), &all, &cids)
                    .into_iter()
                    .collect()
            }
        };
        self.update_process_queues(topic, &assigned).await;
        Ok(())
    }

    /// Drops the queues of `topic` not in `assigned` (or whose pull task
    /// ended), adds the new ones, and starts pulling them. Returns whether
    /// anything changed (`updateProcessQueueTableInRebalance`).
    pub(crate) async fn update_process_queues(
        self: &Arc<Self>,
        topic: &str,
        assigned: &BTreeSet<TopicQueue>,
    ) -> bool {
        let dropped = self.drop_unassigned(topic, assigned).await;
        let (started, lock_failed) = self.add_assigned(assigned).await;
        let changed = dropped || !started.is_empty();
        if lock_failed {
            let weak = Arc::downgrade(self);
            tokio::spawn(async move {
                tokio::time::sleep(RELOCK_DELAY).await;
                if let Some(me) = weak.upgrade() {
                    me.instance.rebalance_now();
                }
            });
        }
        if changed {
            // Tell the brokers the subscription changed (`messageQueueChanged`)
            // before the new pulls carry the new version.
            if let Some(sub) = self.subscriptions.write().get_mut(topic) {
                sub.sub_version = basalt_common::time::now_millis().max(sub.sub_version + 1);
            }
            self.instance.send_heartbeat_to_all_brokers().await;
        }
        self.start_pulls(started);
        changed
    }

    /// Drops the held queues of `topic` that are not in `assigned`, were
    /// dropped, or whose pull task ended. Returns whether it dropped any.
    async fn drop_unassigned(&self, topic: &str, assigned: &BTreeSet<TopicQueue>) -> bool {
        let to_remove: Vec<(TopicQueue, Arc<ProcessQueue>)> = {
            let table = self.process_queues.lock();
            let tasks = self.pull_tasks.lock();
            table
                .iter()
                .filter(|(mq, pq)| {
                    mq.topic == topic
                        && (!assigned.contains(*mq)
                            || pq.is_dropped()
                            || tasks.get(*mq).is_none_or(|t| t.is_finished()))
                })
                .map(|(m, p)| (m.clone(), p.clone()))
                .collect()
        };
        let dropped = !to_remove.is_empty();
        for (mq, pq) in to_remove {
            pq.set_dropped();
            self.remove_unnecessary(&mq).await;
            self.forget_queue(&mq, &pq);
        }
        dropped
    }

    /// Adds a process queue for each queue of `assigned` not held yet
    /// (locked at the broker first in orderly clustering mode), from its
    /// start offset. Returns the queues added with their start offsets, and
    /// whether some lock could not be taken.
    async fn add_assigned(
        &self,
        assigned: &BTreeSet<TopicQueue>,
    ) -> (Vec<(TopicQueue, Arc<ProcessQueue>, i64)>, bool) {
        let locks = self.needs_locks();
        let mut started = Vec::new();
        let mut lock_failed = false;
        for mq in assigned {
            if self.process_queues.lock().contains_key(mq) {
                continue;
            }
            let pq = Arc::new(ProcessQueue::new());
            if locks {
                if !self.lock_queue(mq).await {
                    lock_failed = true;
                    continue;
                }
                pq.set_locked(true);
            }
            self.offsets().remove(mq);
            match self.compute_pull_from_where(mq).await {
                Ok(offset) => {
                    let inserted = {
                        let mut table = self.process_queues.lock();
                        if table.contains_key(mq) {
                            false
                        } else {
                            table.insert(mq.clone(), pq.clone());
                            true
                        }
                    };
                    if inserted {
                        tracing::info!(group = %self.group, queue = %mq, offset, "queue assigned");
                        started.push((mq.clone(), pq, offset));
                    }
                }
                Err(e) => tracing::warn!(group = %self.group, queue = %mq, error = %e,
                    "cannot compute the start offset; retrying at the next rebalance"),
            }
        }
        (started, lock_failed)
    }

    /// Spawns the pull task (and in orderly mode the consume loop) of each
    /// newly added queue, unless the consumer is stopping.
    fn start_pulls(self: &Arc<Self>, started: Vec<(TopicQueue, Arc<ProcessQueue>, i64)>) {
        for (mq, pq, offset) in started {
            if !self.is_running() {
                break;
            }
            let shared = Arc::new(mq.clone());
            let task = tokio::spawn(pull_loop::run(
                self.clone(),
                shared.clone(),
                pq.clone(),
                offset,
            ));
            self.pull_tasks.lock().insert(mq, task);
            if self.options.consume_orderly {
                tokio::spawn(consume::orderly_loop(self.clone(), shared, pq));
            }
        }
    }

    fn needs_locks(&self) -> bool {
        self.options.consume_orderly && self.options.message_model == PushMessageModel::Clustering
    }

    /// Commits and forgets a queue's offset, and releases its broker lock
    /// (`removeUnnecessaryMessageQueue`).
    pub(crate) async fn remove_unnecessary(&self, mq: &TopicQueue) {
        self.offsets().persist(mq).await;
        self.offsets().remove(mq);
        if self.needs_locks()
            && let Some(addr) = self.instance.master_addr(&mq.broker_name)
            && let Err(e) = self
                .instance
                .unlock_batch_mq(&addr, &self.group, std::slice::from_ref(mq))
                .await
        {
            tracing::debug!(queue = %mq, error = %e, "unlock failed");
        }
    }

    /// Restarts the held queues of `topic` listed in `offsets` from those
    /// offsets: drop them (in-flight results are discarded), commit the new
    /// offsets, and let a rebalance take them up again (Java
    /// `MQClientInstance.resetOffset`).
    pub(crate) async fn reset_offsets_now(
        self: &Arc<Self>,
        topic: &str,
        offsets: &BTreeMap<TopicQueue, i64>,
    ) {
        if !self.is_running() {
            return;
        }
        let _no_rebalance = self.rebalance_lock.lock().await;
        let held: Vec<(TopicQueue, Arc<ProcessQueue>, i64)> = self
            .process_queues
            .lock()
            .iter()
            .filter(|(mq, _)| mq.topic == topic)
            .filter_map(|(mq, pq)| offsets.get(mq).map(|o| (mq.clone(), pq.clone(), *o)))
            .collect();
        for (mq, pq, offset) in held {
            pq.set_dropped();
            self.forget_queue(&mq, &pq);
            let store = self.offsets();
            store.update(&mq, offset, false);
            store.persist(&mq).await;
            store.remove(&mq);
        }
        self.instance.rebalance_now();
    }

    /// Removes `pq` from the tables if it is still the one registered for `mq`.
    pub(crate) fn forget_queue(&self, mq: &TopicQueue, pq: &Arc<ProcessQueue>) {
        let mut table = self.process_queues.lock();
        if table.get(mq).is_some_and(|p| Arc::ptr_eq(p, pq)) {
            table.remove(mq);
            self.pull_tasks.lock().remove(mq);
        }
    }

    /// Where a newly assigned queue starts (`computePullFromWhereWithException`):
    /// the stored offset if the group has one, else per `consume_from_where`.
    pub(crate) async fn compute_pull_from_where(&self, mq: &TopicQueue) -> Result<i64> {
        let stored = self.offsets().read_store(mq).await?;
        if let Some(o) = stored.filter(|o| *o >= 0) {
            return Ok(o);
        }
        let retry = mq.topic.starts_with(RETRY_GROUP_PREFIX);
        match self.options.consume_from_where {
            PushConsumeFrom::LastOffset if retry => Ok(0),
            PushConsumeFrom::LastOffset => self.instance.max_offset(mq).await,
            PushConsumeFrom::FirstOffset => Ok(0),
            PushConsumeFrom::Timestamp if retry => self.instance.max_offset(mq).await,
            PushConsumeFrom::Timestamp => {
                let ts = self.options.consume_timestamp.unwrap_or_else(|| {
                    self.start_ms.load(std::sync::atomic::Ordering::Relaxed) - 30 * 60 * 1000
                });
                self.instance.search_offset(mq, ts).await
            }
        }
    }

    /// LOCK_BATCH_MQ for one queue at its master.
    async fn lock_queue(&self, mq: &TopicQueue) -> bool {
        let addr = match self.instance.master_of(mq).await {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(queue = %mq, error = %e, "cannot lock: no master");
                return false;
            }
        };
        match self
            .instance
            .lock_batch_mq(&addr, &self.group, std::slice::from_ref(mq))
            .await
        {
            Ok(locked) => locked.contains(mq),
            Err(e) => {
                tracing::debug!(queue = %mq, error = %e, "lock failed");
                false
            }
        }
    }

    /// Renews the locks of every held queue, per broker (`lockAll`).
    pub(crate) async fn lock_all(&self) {
        let by_broker = self.queues_by_broker();
        for (broker, queues) in by_broker {
            let Some(addr) = self.instance.master_addr(&broker) else {
                continue;
            };
            let mqs: Vec<TopicQueue> = queues.iter().map(|(m, _)| m.clone()).collect();
            match self.instance.lock_batch_mq(&addr, &self.group, &mqs).await {
                Ok(locked) => {
                    for (mq, pq) in &queues {
                        pq.set_locked(locked.contains(mq));
                    }
                }
                Err(e) => tracing::warn!(broker = %addr, error = %e, "lock renewal failed"),
            }
        }
    }

    /// Releases the broker locks of `held` (shutdown).
    pub(crate) async fn unlock_all(&self, held: &BTreeSet<TopicQueue>) {
        let mut by_broker: BTreeMap<String, Vec<TopicQueue>> = BTreeMap::new();
        for mq in held {
            by_broker
                .entry(mq.broker_name.clone())
                .or_default()
                .push(mq.clone());
        }
        for (broker, mqs) in by_broker {
            if let Some(addr) = self.instance.master_addr(&broker)
                && let Err(e) = self
                    .instance
                    .unlock_batch_mq(&addr, &self.group, &mqs)
                    .await
            {
                tracing::debug!(broker = %addr, error = %e, "unlock failed");
            }
        }
    }

    fn queues_by_broker(&self) -> BTreeMap<String, Vec<(TopicQueue, Arc<ProcessQueue>)>> {
        let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
        for (mq, pq) in self.process_queues.lock().iter() {
            out.entry(mq.broker_name.clone())
                .or_default()
                .push((mq.clone(), pq.clone()));
        }
        out
    }
}

/// Orderly clustering consumers: renew the queue locks periodically.
pub(crate) async fn lock_renewal(weak: Weak<PushInner>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + LOCK_RENEW_INTERVAL,
        LOCK_RENEW_INTERVAL,
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let Some(me) = weak.upgrade() else { return };
        me.lock_all().await;
    }
}
