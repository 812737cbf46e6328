//! [`PullConsumer`]: the application chooses queues and offsets and pulls
//! itself (Java `DefaultMQPullConsumer`, consume type CONSUME_ACTIVELY).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use basalt_remoting::protocol::{self, ConsumerData};
use basalt_remoting::transport::BoxFuture;

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::filter::build_subscription;
use crate::instance::{ClientInstance, ConsumerInner};
use crate::message::TopicQueue;
use crate::pull::{PullArgs, PullResult, pull, sys_flag};
use crate::route::subscribe_queues;

/// How long a blocking pull may be held by default (Java
/// `brokerSuspendMaxTimeMillis`, 20 s).
pub const DEFAULT_BROKER_SUSPEND_MAX_TIME: Duration = Duration::from_secs(20);

const CREATED: u8 = 0;
const RUNNING: u8 = 1;
const STOPPED: u8 = 2;

/// A pull consumer. Cheap to clone; clones share one consumer.
///
/// Pulls carry their tag expression (SUBSCRIPTION flag), so the broker
/// filters without a registered subscription; the client filters again by
/// tag string.
#[derive(Clone)]
pub struct PullConsumer {
    inner: Arc<PullInner>,
}

struct PullInner {
    group: String,
    instance: Arc<ClientInstance>,
    state: AtomicU8,
}

impl std::fmt::Debug for PullConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullConsumer")
            .field("group", &self.inner.group)
            .finish()
    }
}

impl PullConsumer {
    pub fn new(group: impl Into<String>, config: ClientConfig) -> Self {
        Self::with_instance(group, ClientInstance::new(config))
    }

    pub fn with_instance(group: impl Into<String>, instance: Arc<ClientInstance>) -> Self {
        Self {
            inner: Arc::new(PullInner {
                group: group.into(),
                instance,
                state: AtomicU8::new(CREATED),
            }),
        }
    }

    pub fn group(&self) -> &str {
        &self.inner.group
    }

    pub fn instance(&self) -> &Arc<ClientInstance> {
        &self.inner.instance
    }

    /// Registers the group (heartbeats as CONSUME_ACTIVELY).
    pub async fn start(&self) -> Result<()> {
        let inner = &self.inner;
        basalt_common::topic::validate_group(&inner.group)
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        if inner
            .state
            .compare_exchange(CREATED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(ClientError::InvalidArgument(
                "the consumer was already started".into(),
            ));
        }
        let weak: Weak<dyn ConsumerInner> =
            Arc::downgrade(&(inner.clone() as Arc<dyn ConsumerInner>));
        if let Err(e) = inner.instance.register_consumer(weak) {
            inner.state.store(STOPPED, Ordering::Release);
            return Err(e);
        }
        inner.instance.acquire();
        inner.instance.send_heartbeat_to_all_brokers().await;
        Ok(())
    }

    /// Unregisters from the brokers and stops the instance if this was its
    /// last user.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if inner
            .state
            .compare_exchange(RUNNING, STOPPED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        inner.instance.unregister_consumer(&inner.group).await;
        inner.instance.release().await;
    }

    fn check_running(&self) -> Result<()> {
        if self.inner.state.load(Ordering::Acquire) == RUNNING {
            Ok(())
        } else {
            Err(ClientError::NotStarted)
        }
    }

    /// The readable queues of `topic`, sorted (`fetchSubscribeMessageQueues`).
    pub async fn fetch_queues(&self, topic: &str) -> Result<Vec<TopicQueue>> {
        let route = self.inner.instance.fetch_route(topic).await?;
        // Learn the broker addresses too.
        let _ = self.inner.instance.update_route(topic).await;
        let queues = subscribe_queues(topic, &route);
        if queues.is_empty() {
            return Err(ClientError::NoRoute {
                topic: topic.to_string(),
            });
        }
        Ok(queues.into_iter().collect())
    }

    /// Pulls up to `max_nums` messages from `offset` without waiting for new
    /// ones (`pull`); `timeout` bounds the request.
    pub async fn pull(
        &self,
        mq: &TopicQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
        timeout: Duration,
    ) -> Result<PullResult> {
        self.pull_impl(mq, sub_expression, offset, max_nums, None, timeout)
            .await
    }

    /// Pulls, letting the broker hold the request up to `suspend` until a
    /// message arrives (long polling, `pullBlockIfNotFound`).
    pub async fn pull_blocking(
        &self,
        mq: &TopicQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
        suspend: Duration,
    ) -> Result<PullResult> {
        let rpc_timeout = suspend + Duration::from_secs(10);
        self.pull_impl(
            mq,
            sub_expression,
            offset,
            max_nums,
            Some(suspend),
            rpc_timeout,
        )
        .await
    }

    async fn pull_impl(
        &self,
        mq: &TopicQueue,
        sub_expression: &str,
        offset: i64,
        max_nums: i32,
        suspend: Option<Duration>,
        rpc_timeout: Duration,
    ) -> Result<PullResult> {
        self.check_running()?;
        if offset < 0 {
            return Err(ClientError::InvalidArgument(format!("offset {offset} < 0")));
        }
        if max_nums <= 0 {
            return Err(ClientError::InvalidArgument(format!(
                "max_nums {max_nums} <= 0"
            )));
        }
        let mut sub = build_subscription(&mq.topic, sub_expression)?;
        sub.sub_version = 0;
        let flag = if suspend.is_some() {
            sys_flag::SUSPEND
        } else {
            0
        };
        pull(
            &self.inner.instance,
            PullArgs {
                group: &self.inner.group,
                mq,
                subscription: &sub,
                post_subscription: true,
                offset,
                max_nums,
                max_bytes: None,
                sys_flag: flag,
                commit_offset: 0,
                suspend_timeout: suspend.unwrap_or(DEFAULT_BROKER_SUSPEND_MAX_TIME),
                rpc_timeout,
                lite: false,
            },
        )
        .await
    }

    /// The group's committed offset of `mq`; `None` if the broker has none.
    pub async fn query_offset(&self, mq: &TopicQueue) -> Result<Option<i64>> {
        self.inner
            .instance
            .query_consumer_offset(&self.inner.group, mq)
            .await
    }

    /// Commits `offset` (the next offset to consume) for `mq` at its master.
    pub async fn update_offset(&self, mq: &TopicQueue, offset: i64) -> Result<()> {
        self.inner
            .instance
            .update_consumer_offset(&self.inner.group, mq, offset, false)
            .await
    }

    pub async fn min_offset(&self, mq: &TopicQueue) -> Result<i64> {
        self.inner.instance.min_offset(mq).await
    }

    pub async fn max_offset(&self, mq: &TopicQueue) -> Result<i64> {
        self.inner.instance.max_offset(mq).await
    }

    /// The first offset stored at or after `timestamp_ms`.
    pub async fn search_offset(&self, mq: &TopicQueue, timestamp_ms: i64) -> Result<i64> {
        self.inner.instance.search_offset(mq, timestamp_ms).await
    }
}

impl ConsumerInner for PullInner {
    fn group(&self) -> &str {
        &self.group
    }

    fn consumer_data(&self) -> ConsumerData {
        ConsumerData {
            consume_from_where: protocol::ConsumeFromWhere::ConsumeFromLastOffset,
            consume_type: protocol::ConsumeType::ConsumeActively,
            group_name: self.group.clone(),
            message_model: protocol::MessageModel::Clustering,
            subscription_data_set: Vec::new(),
            unit_mode: false,
        }
    }

    fn subscribed_topics(&self) -> Vec<String> {
        Vec::new()
    }

    fn update_subscribe_info(&self, _topic: &str, _queues: &BTreeSet<TopicQueue>) -> bool {
        false
    }

    fn needs_subscribe_info(&self, _topic: &str) -> bool {
        false
    }

    fn rebalance(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    fn persist_offsets(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    fn reset_offsets(
        self: Arc<Self>,
        _topic: String,
        _offsets: BTreeMap<TopicQueue, i64>,
    ) -> BoxFuture<'static, ()> {
        // The application tracks a pull consumer's offsets itself.
        Box::pin(async {})
    }

    fn running_info(&self, mut extra: BTreeMap<String, String>) -> Vec<u8> {
        extra.insert("PROP_CONSUME_TYPE".into(), "CONSUME_ACTIVELY".into());
        extra.insert("consumerGroup".into(), self.group.clone());
        let body = serde_json::json!({
            "mqTable": {},
            "properties": extra,
            "statusTable": {},
            "subscriptionSet": [],
        });
        serde_json::to_vec(&body).unwrap_or_default()
    }
}
