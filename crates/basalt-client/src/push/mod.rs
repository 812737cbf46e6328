//! [`PushConsumer`]: pulls on the application's behalf and hands messages to
//! a listener (Java `DefaultMQPushConsumer`).
//!
//! * Rebalance (every `rebalance_interval`, and at once on
//!   NOTIFY_CONSUMER_IDS_CHANGED): GET_CONSUMER_LIST_BY_GROUP, sort,
//!   allocate ([`AllocateStrategy`]), add and drop process queues.
//! * One pull task per queue with long polling and flow control.
//! * Concurrent consumption through a bounded set of workers, or orderly
//!   consumption (one batch at a time per queue, queues locked at the broker).
//! * The committed offset of a queue is the smallest offset still in flight,
//!   so a crash never skips an unconsumed message (at-least-once).
//! * Failed messages go back with CONSUMER_SEND_MSG_BACK (falling back to a
//!   plain send to `%RETRY%<group>`); the retry topic is subscribed
//!   automatically in clustering mode.

pub mod allocate;
mod consume;
pub(crate) mod offset_store;
mod options;
mod process_queue;
mod pull_loop;
mod rebalance;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use basalt_remoting::protocol::{self, ConsumerData, SubscriptionData};
use basalt_remoting::transport::BoxFuture;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

pub use allocate::AllocateStrategy;
use options::Listener;
pub use options::{
    AsyncMessageListener, ConsumeContext, ConsumeStatus, PushConsumeFrom, PushMessageModel,
    PushOptions,
};

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::filter::build_subscription;
use crate::instance::{ClientInstance, ConsumerInner};
use crate::message::{MessageExt, TopicQueue};
use crate::producer::Producer;
use consume::ConsumeRequest;
use offset_store::OffsetStore;
use process_queue::ProcessQueue;

const CREATED: u8 = 0;
const RUNNING: u8 = 1;
const STOPPING: u8 = 2;

/// A push consumer. Cheap to clone; clones share one consumer.
///
/// ```no_run
/// # async fn demo() -> basalt_client::Result<()> {
/// use basalt_client::{ClientConfig, ConsumeStatus, PushConsumer};
/// let consumer = PushConsumer::new("CG", ClientConfig::new("127.0.0.1:9876"));
/// consumer.subscribe("TopicTest", "TagA || TagB")?;
/// consumer.register_listener(|msgs, _ctx| {
///     for m in msgs { println!("{} {:?}", m.msg_id, m.body); }
///     ConsumeStatus::Success
/// });
/// consumer.start().await?;
/// // ...
/// consumer.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PushConsumer {
    inner: Arc<PushInner>,
}

/// The consumer's state, shared by its tasks.
pub(crate) struct PushInner {
    group: String,
    /// `%RETRY%<group>`.
    retry_topic: String,
    instance: Arc<ClientInstance>,
    options: PushOptions,
    state: AtomicU8,
    subscriptions: RwLock<BTreeMap<String, SubscriptionData>>,
    /// Readable queues per subscribed topic, from the routes.
    topic_queues: RwLock<HashMap<String, BTreeSet<TopicQueue>>>,
    process_queues: Mutex<BTreeMap<TopicQueue, Arc<ProcessQueue>>>,
    pull_tasks: Mutex<HashMap<TopicQueue, JoinHandle<()>>>,
    offsets: OnceLock<OffsetStore>,
    listener: Mutex<Option<Listener>>,
    consume_tx: Mutex<Option<mpsc::UnboundedSender<ConsumeRequest>>>,
    permits: Arc<Semaphore>,
    retry_producer: Producer,
    rebalance_lock: tokio::sync::Mutex<()>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    start_ms: AtomicI64,
}

impl std::fmt::Debug for PushConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumer")
            .field("group", &self.inner.group)
            .field("client_id", &self.inner.instance.client_id())
            .finish()
    }
}

impl PushConsumer {
    /// A consumer of `group` with its own client instance and default options.
    pub fn new(group: impl Into<String>, config: ClientConfig) -> Self {
        Self::with_options(group, config, PushOptions::default())
    }

    pub fn with_options(
        group: impl Into<String>,
        config: ClientConfig,
        options: PushOptions,
    ) -> Self {
        Self::with_instance(group, ClientInstance::new(config), options)
    }

    /// A consumer sharing `instance` with other producers and consumers.
    pub fn with_instance(
        group: impl Into<String>,
        instance: Arc<ClientInstance>,
        options: PushOptions,
    ) -> Self {
        let group = group.into();
        let permits = Arc::new(Semaphore::new(options.consume_thread_max.max(1)));
        Self {
            inner: Arc::new(PushInner {
                retry_topic: basalt_common::topic::retry_topic(&group),
                group,
                retry_producer: Producer::internal(instance.clone()),
                instance,
                options,
                state: AtomicU8::new(CREATED),
                subscriptions: RwLock::new(BTreeMap::new()),
                topic_queues: RwLock::new(HashMap::new()),
                process_queues: Mutex::new(BTreeMap::new()),
                pull_tasks: Mutex::new(HashMap::new()),
                offsets: OnceLock::new(),
                listener: Mutex::new(None),
                consume_tx: Mutex::new(None),
                permits,
                rebalance_lock: tokio::sync::Mutex::new(()),
                stop: watch::channel(false).0,
                tasks: Mutex::new(Vec::new()),
                start_ms: AtomicI64::new(0),
            }),
        }
    }

    pub fn group(&self) -> &str {
        &self.inner.group
    }

    pub fn instance(&self) -> &Arc<ClientInstance> {
        &self.inner.instance
    }

    pub fn options(&self) -> &PushOptions {
        &self.inner.options
    }

    /// Subscribes to `topic` with a tag expression (`"TagA || TagB"`, `"*"`).
    /// May be called after start: the brokers learn it from the next
    /// heartbeat, which is sent at once.
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        basalt_common::topic::validate_topic(topic)
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let sub = build_subscription(topic, expression)?;
        self.inner
            .subscriptions
            .write()
            .insert(topic.to_string(), sub);
        if self.inner.is_running() {
            let inner = self.inner.clone();
            let topic = topic.to_string();
            tokio::spawn(async move {
                let _ = inner.instance.update_route(&topic).await;
                inner.instance.send_heartbeat_to_all_brokers().await;
                inner.instance.rebalance_now();
            });
        }
        Ok(())
    }

    /// Stops consuming `topic` (its queues are dropped at the next rebalance).
    pub fn unsubscribe(&self, topic: &str) {
        self.inner.subscriptions.write().remove(topic);
        self.inner.topic_queues.write().remove(topic);
        if self.inner.is_running() {
            self.inner.instance.rebalance_now();
        }
    }

    /// Sets a synchronous listener; it runs on tokio's blocking pool, at most
    /// `consume_thread_max` calls at once.
    pub fn register_listener<F>(&self, f: F)
    where
        F: Fn(&[MessageExt], &mut ConsumeContext) -> ConsumeStatus + Send + Sync + 'static,
    {
        *self.inner.listener.lock() = Some(Listener::Blocking(Arc::new(f)));
    }

    /// Sets an asynchronous listener, polled on the runtime's workers.
    pub fn register_async_listener<L: AsyncMessageListener>(&self, listener: L) {
        *self.inner.listener.lock() = Some(Listener::Async(Arc::new(listener)));
    }

    /// Starts consuming: registers with the instance, fetches routes, sends a
    /// heartbeat and triggers the first rebalance.
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        basalt_common::topic::validate_group(&inner.group)
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        if inner.listener.lock().is_none() {
            return Err(ClientError::InvalidArgument(
                "register a message listener before starting".into(),
            ));
        }
        if inner
            .state
            .compare_exchange(CREATED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(ClientError::InvalidArgument(
                "the consumer was already started".into(),
            ));
        }
        inner
            .start_ms
            .store(basalt_common::time::now_millis(), Ordering::Relaxed);
        if inner.options.message_model == PushMessageModel::Clustering {
            let retry = basalt_common::topic::retry_topic(&inner.group);
            let sub = build_subscription(&retry, crate::filter::SUB_ALL)?;
            inner.subscriptions.write().insert(retry, sub);
        }
        let store = match inner.open_offset_store() {
            Ok(s) => s,
            Err(e) => {
                inner.state.store(CREATED, Ordering::Release);
                return Err(e);
            }
        };
        let _ = inner.offsets.set(store);
        let weak: Weak<dyn ConsumerInner> =
            Arc::downgrade(&(inner.clone() as Arc<dyn ConsumerInner>));
        if let Err(e) = inner.instance.register_consumer(weak) {
            inner.state.store(STOPPING, Ordering::Release);
            return Err(e);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        *inner.consume_tx.lock() = Some(tx);
        {
            let mut tasks = inner.tasks.lock();
            tasks.push(tokio::spawn(consume::dispatcher(
                inner.clone(),
                rx,
                inner.stop.subscribe(),
            )));
            if inner.options.consume_orderly
                && inner.options.message_model == PushMessageModel::Clustering
            {
                tasks.push(tokio::spawn(rebalance::lock_renewal(
                    Arc::downgrade(inner),
                    inner.stop.subscribe(),
                )));
            }
        }
        inner.instance.acquire();
        let topics: Vec<String> = inner.subscriptions.read().keys().cloned().collect();
        for t in &topics {
            if let Err(e) = inner.instance.update_route(t).await
                && !t.starts_with(basalt_common::constants::topic::RETRY_GROUP_PREFIX)
            {
                tracing::warn!(topic = %t, error = %e, "no route yet for a subscribed topic");
            }
        }
        inner.instance.send_heartbeat_to_all_brokers().await;
        inner.instance.rebalance_now();
        Ok(())
    }

    /// Stops pulling, waits (up to `await_termination`) for listener calls in
    /// progress, commits every offset, drops the queues and unregisters
    /// from the brokers. Messages pulled but not consumed are not committed,
    /// so they are delivered again (to this group) later.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if inner
            .state
            .compare_exchange(RUNNING, STOPPING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        inner.stop.send_replace(true);
        inner.consume_tx.lock().take();
        let pulls: Vec<JoinHandle<()>> = inner.pull_tasks.lock().drain().map(|(_, h)| h).collect();
        for h in pulls {
            let _ = h.await;
        }
        let tasks: Vec<JoinHandle<()>> = std::mem::take(&mut *inner.tasks.lock());
        for t in tasks {
            let _ = t.await;
        }
        let all = inner.options.consume_thread_max.max(1) as u32;
        match tokio::time::timeout(
            inner.options.await_termination,
            inner.permits.acquire_many(all),
        )
        .await
        {
            Ok(Ok(p)) => p.forget(),
            _ => tracing::warn!(group = %inner.group,
                "listener calls still running at shutdown; their offsets are not committed"),
        }
        inner.permits.close();
        // Rebalancing is over: take the rebalance lock so none is half-way.
        let _no_rebalance = inner.rebalance_lock.lock().await;
        let queues: Vec<(TopicQueue, Arc<ProcessQueue>)> =
            std::mem::take(&mut *inner.process_queues.lock())
                .into_iter()
                .collect();
        let held: BTreeSet<TopicQueue> = queues.iter().map(|(m, _)| m.clone()).collect();
        if let Some(store) = inner.offsets.get() {
            store.persist_all(&held).await;
        }
        for (_, pq) in &queues {
            pq.set_dropped();
        }
        if inner.options.consume_orderly
            && inner.options.message_model == PushMessageModel::Clustering
        {
            inner.unlock_all(&held).await;
        }
        inner.instance.unregister_consumer(&inner.group).await;
        inner.instance.release().await;
    }

    /// The queues this consumer currently holds.
    pub fn assigned_queues(&self) -> BTreeSet<TopicQueue> {
        self.inner.process_queues.lock().keys().cloned().collect()
    }

    /// The in-memory consumed offset of a queue (what the next commit sends).
    pub fn committed_offset(&self, mq: &TopicQueue) -> Option<i64> {
        self.inner.offsets.get().and_then(|s| s.read_memory(mq))
    }

    /// Runs a rebalance now and waits for it (normally timer-driven).
    pub async fn rebalance(&self) {
        self.inner.do_rebalance().await;
    }

    /// Commits every held queue's offset now (normally timer-driven).
    pub async fn persist_offsets(&self) {
        self.inner.persist_all().await;
    }
}

impl PushInner {
    fn is_running(&self) -> bool {
        self.state.load(Ordering::Acquire) == RUNNING
    }

    /// The offset store of the message model: the brokers' (clustering) or
    /// a local file (broadcasting, default `~/.rocketmq_offsets`).
    fn open_offset_store(&self) -> Result<OffsetStore> {
        match self.options.message_model {
            PushMessageModel::Clustering => {
                Ok(OffsetStore::remote(&self.group, self.instance.clone()))
            }
            PushMessageModel::Broadcasting => {
                let dir = self
                    .options
                    .local_offset_store_dir
                    .clone()
                    .unwrap_or_else(|| {
                        std::env::var_os("HOME")
                            .map(PathBuf::from)
                            .unwrap_or_else(|| PathBuf::from("."))
                            .join(".rocketmq_offsets")
                    });
                OffsetStore::local(&self.group, self.instance.clone(), &dir)
            }
        }
    }

    fn offsets(&self) -> &OffsetStore {
        // Set in start() before any task that reads it exists.
        self.offsets
            .get_or_init(|| OffsetStore::remote(&self.group, self.instance.clone()))
    }

    /// Deliveries allowed before the DLQ (`getMaxReconsumeTimes`).
    fn max_reconsume_times(&self) -> i32 {
        match self.options.max_reconsume_times {
            -1 if self.options.consume_orderly => i32::MAX,
            -1 => 16,
            n => n,
        }
    }

    async fn persist_all(&self) {
        if !self.is_running() {
            return;
        }
        let held: BTreeSet<TopicQueue> = self.process_queues.lock().keys().cloned().collect();
        self.offsets().persist_all(&held).await;
    }

    fn consume_from_where_java(&self) -> protocol::ConsumeFromWhere {
        match self.options.consume_from_where {
            PushConsumeFrom::LastOffset => protocol::ConsumeFromWhere::ConsumeFromLastOffset,
            PushConsumeFrom::FirstOffset => protocol::ConsumeFromWhere::ConsumeFromFirstOffset,
            PushConsumeFrom::Timestamp => protocol::ConsumeFromWhere::ConsumeFromTimestamp,
        }
    }

    fn write_running_info(&self, extra: BTreeMap<String, String>) -> Vec<u8> {
        let mut props: BTreeMap<String, String> = extra;
        props.insert("PROP_CONSUME_TYPE".into(), "CONSUME_PASSIVELY".into());
        props.insert(
            "PROP_CONSUMEORDERLY".into(),
            self.options.consume_orderly.to_string(),
        );
        props.insert(
            "PROP_THREADPOOL_CORE_SIZE".into(),
            self.options.consume_thread_max.to_string(),
        );
        props.insert(
            "PROP_CONSUMER_START_TIMESTAMP".into(),
            self.start_ms.load(Ordering::Relaxed).to_string(),
        );
        props.insert("consumerGroup".into(), self.group.clone());
        props.insert(
            "messageModel".into(),
            match self.options.message_model {
                PushMessageModel::Clustering => "CLUSTERING",
                PushMessageModel::Broadcasting => "BROADCASTING",
            }
            .into(),
        );
        props.insert(
            "consumeFromWhere".into(),
            self.consume_from_where_java().name().to_string(),
        );
        let mut out = b"{\"mqTable\":{".to_vec();
        let queues: Vec<(TopicQueue, Arc<ProcessQueue>)> = self
            .process_queues
            .lock()
            .iter()
            .map(|(m, p)| (m.clone(), p.clone()))
            .collect();
        for (i, (mq, pq)) in queues.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let (min, max, count, size) = pq.snapshot();
            out.extend_from_slice(&serde_json::to_vec(mq).unwrap_or_default());
            out.push(b':');
            let info = serde_json::json!({
                "cachedMsgCount": count,
                "cachedMsgMaxOffset": max,
                "cachedMsgMinOffset": min,
                "cachedMsgSizeInMiB": size / (1024 * 1024),
                "commitOffset": self.offsets().read_memory(mq).unwrap_or(-1),
                "droped": pq.is_dropped(),
                "lastConsumeTimestamp": pq.last_consume_ms(),
                "lastLockTimestamp": 0,
                "lastPullTimestamp": pq.last_pull_ms(),
                "locked": pq.is_locked(),
                "transactionMsgCount": 0,
                "transactionMsgMaxOffset": 0,
                "transactionMsgMinOffset": 0,
                "tryUnlockTimes": 0,
            });
            out.extend_from_slice(&serde_json::to_vec(&info).unwrap_or_default());
        }
        out.extend_from_slice(b"},\"properties\":");
        out.extend_from_slice(&serde_json::to_vec(&props).unwrap_or_default());
        out.extend_from_slice(b",\"statusTable\":{},\"subscriptionSet\":");
        let subs: Vec<SubscriptionData> = self.subscriptions.read().values().cloned().collect();
        out.extend_from_slice(&serde_json::to_vec(&subs).unwrap_or_default());
        out.push(b'}');
        out
    }
}

impl ConsumerInner for PushInner {
    fn group(&self) -> &str {
        &self.group
    }

    fn consumer_data(&self) -> ConsumerData {
        ConsumerData {
            consume_from_where: self.consume_from_where_java(),
            consume_type: protocol::ConsumeType::ConsumePassively,
            group_name: self.group.clone(),
            message_model: match self.options.message_model {
                PushMessageModel::Clustering => protocol::MessageModel::Clustering,
                PushMessageModel::Broadcasting => protocol::MessageModel::Broadcasting,
            },
            subscription_data_set: self.subscriptions.read().values().cloned().collect(),
            unit_mode: false,
        }
    }

    fn subscribed_topics(&self) -> Vec<String> {
        self.subscriptions.read().keys().cloned().collect()
    }

    fn update_subscribe_info(&self, topic: &str, queues: &BTreeSet<TopicQueue>) -> bool {
        if !self.subscriptions.read().contains_key(topic) {
            return false;
        }
        let old = self
            .topic_queues
            .write()
            .insert(topic.to_string(), queues.clone());
        old.as_ref() != Some(queues)
    }

    fn needs_subscribe_info(&self, topic: &str) -> bool {
        self.subscriptions.read().contains_key(topic)
            && !self.topic_queues.read().contains_key(topic)
    }

    fn rebalance(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.do_rebalance().await })
    }

    fn persist_offsets(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.persist_all().await })
    }

    fn running_info(&self, extra: BTreeMap<String, String>) -> Vec<u8> {
        self.write_running_info(extra)
    }

    fn reset_offsets(
        self: Arc<Self>,
        topic: String,
        offsets: BTreeMap<TopicQueue, i64>,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.reset_offsets_now(&topic, &offsets).await })
    }
}
