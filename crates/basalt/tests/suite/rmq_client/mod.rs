//! Helpers shared by the tests that drive the real RocketMQ Rust client
//! (`rocketmq-client-rust` 1.0.0) against `basalt standalone`: the client's
//! runtime, producers and topics, an inbox for what consumers receive, and
//! raw remoting probes of the broker's offsets.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, GetMaxOffsetRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
};
use basalt_remoting::{RemotingClient, RemotingCommand};
use rocketmq_client_rust::{
    ClientRuntime, ClientRuntimeConfig, DefaultMQProducer, DefaultMQPushConsumer, TelemetryHandle,
};
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_protocol::protocol::remoting_command_defaults::{
    RemotingCommandDefaults, RemotingCommandFactory,
};
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use tokio::sync::Notify;

use crate::standalone::{Standalone, left};

/// The client's own task runtime, shared by the tests of this binary (the
/// way the client's examples and tests build it).
pub static CLIENT_RUNTIME_OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
    RuntimeOwner::plan(RuntimeConfig {
        thread_name: "compat-client".to_string(),
        ..Default::default()
    })
    .expect("client runtime configuration")
    .build()
    .expect("client runtime owner")
});

pub fn client_runtime(scope: &str) -> Arc<ClientRuntime> {
    client_runtime_with(scope, RemotingCommandDefaults::default())
}

/// A client runtime whose requests carry `defaults`: the header encoding
/// (JSON or the binary ROCKETMQ form) and the protocol version it reports.
pub fn client_runtime_with(scope: &str, defaults: RemotingCommandDefaults) -> Arc<ClientRuntime> {
    client_logging();
    ClientRuntime::try_new_with_remoting_command_factory(
        CLIENT_RUNTIME_OWNER
            .root_context()
            .component(rocketmq_runtime::ScopeId::try_from(scope.to_string()).expect("scope id")),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
        RemotingCommandFactory::new(defaults),
    )
    .expect("client runtime")
}

/// How long a stopped consumer's offset commits (UPDATE_CONSUMER_OFFSET,
/// oneway) may take to show up on the broker.
pub fn commit_deadline() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

/// Installs a log subscriber for the client's own tracing output when
/// COMPAT_CLIENT_LOG is set (an EnvFilter, e.g. `rocketmq_client_rust=debug`).
pub fn client_logging() {
    if let Ok(filter) = std::env::var("COMPAT_CLIENT_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

pub async fn start_producer(broker: &Standalone, group: &str) -> DefaultMQProducer {
    start_producer_with(broker, group, RemotingCommandDefaults::default()).await
}

pub async fn start_producer_with(
    broker: &Standalone,
    group: &str,
    wire: RemotingCommandDefaults,
) -> DefaultMQProducer {
    let mut p = DefaultMQProducer::builder(client_runtime_with(group, wire))
        .producer_group(group.to_string())
        .name_server_addr(broker.namesrv_addr())
        .send_msg_timeout(10_000)
        .build();
    tokio::time::timeout(Duration::from_secs(30), p.start())
        .await
        .expect("producer start in time")
        .expect("producer start");
    p
}

/// Creates `topic` with `queues` queues through the client's admin API. The
/// broker answers once the NameServer has the topic (as RocketMQ does), so
/// the route is there at once.
pub async fn create_topic(
    producer: &mut DefaultMQProducer,
    topic: &str,
    queues: usize,
) -> Vec<MessageQueue> {
    producer
        .create_topic("TBW102", topic, queues as i32, HashMap::new())
        .await
        .expect("create topic through the client admin API");
    let mut mqs = producer
        .fetch_publish_message_queues(topic)
        .await
        .expect("route of a topic just created");
    assert_eq!(mqs.len(), queues, "queues routed for {topic}: {mqs:?}");
    mqs.sort_by_key(|q| q.queue_id());
    mqs
}

/// Everything the consumers of a test received, in arrival order.
pub struct Inbox<T> {
    all: Mutex<Vec<T>>,
    changed: Notify,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Inbox {
            all: Mutex::new(Vec::new()),
            changed: Notify::new(),
        }
    }
}

impl<T: Clone> Inbox<T> {
    pub fn push(&self, r: T) {
        self.all.lock().unwrap_or_else(|e| e.into_inner()).push(r);
        self.changed.notify_waiters();
    }

    pub fn snapshot(&self) -> Vec<T> {
        self.all.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until `done(received so far)` holds, at most until `deadline`.
    pub async fn wait_until(&self, deadline: Instant, mut done: impl FnMut(&[T]) -> bool) -> bool {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(&self.snapshot()) {
                return true;
            }
            if tokio::time::timeout(left(deadline), notified)
                .await
                .is_err()
            {
                return done(&self.snapshot());
            }
        }
    }
}

pub async fn shutdown_push_consumer(mut c: DefaultMQPushConsumer) {
    tokio::time::timeout(Duration::from_secs(30), c.shutdown())
        .await
        .expect("push consumer shutdown in time");
}

pub async fn shutdown_producer(mut p: DefaultMQProducer) {
    tokio::time::timeout(Duration::from_secs(30), p.shutdown())
        .await
        .expect("producer shutdown in time");
}

/// Raw remoting access to the broker, to read offsets independently of the
/// client under test.
pub struct Probe {
    client: RemotingClient,
    addr: String,
}

impl Probe {
    pub fn new(broker: &Standalone) -> Probe {
        Probe {
            client: RemotingClient::default(),
            addr: broker.broker_addr(),
        }
    }

    pub async fn call(&self, cmd: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(&self.addr, cmd, Duration::from_secs(10))
            .await
            .expect("raw request to the broker")
    }

    pub async fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        let h = GetMaxOffsetRequestHeader {
            topic: topic.into(),
            queue_id,
            committed: None,
        };
        let r = self
            .call(RemotingCommand::request(request::GET_MAX_OFFSET).with_ext(h.to_ext()))
            .await;
        assert_eq!(r.code, response::SUCCESS, "GET_MAX_OFFSET: {:?}", r.remark);
        OffsetResponseHeader::from_ext(&r.ext_fields)
            .expect("max offset header")
            .offset
    }

    /// Waits until a queue's max offset reaches `want` (dispatch caught up).
    pub async fn wait_max_offset(&self, topic: &str, queue_id: i32, want: i64, deadline: Instant) {
        loop {
            let max = self.max_offset(topic, queue_id).await;
            if max >= want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "queue {queue_id} max offset stuck at {max} < {want}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The committed offset of `group` on a queue, `None` if not committed.
    pub async fn committed(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let h = QueryConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id,
            set_zero_if_not_found: Some(false),
        };
        let r = self
            .call(RemotingCommand::request(request::QUERY_CONSUMER_OFFSET).with_ext(h.to_ext()))
            .await;
        if r.code != response::SUCCESS {
            return None;
        }
        OffsetResponseHeader::from_ext(&r.ext_fields)
            .ok()
            .map(|h| h.offset)
    }

    /// Waits until `group` has committed the max offset of every queue.
    pub async fn wait_committed_to_max(
        &self,
        group: &str,
        topic: &str,
        queues: i32,
        deadline: Instant,
    ) {
        loop {
            let mut lagging = Vec::new();
            for q in 0..queues {
                let max = self.max_offset(topic, q).await;
                let c = self.committed(group, topic, q).await;
                if c != Some(max) {
                    lagging.push((q, c, max));
                }
            }
            if lagging.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "group {group} did not commit every queue to its max offset: (queue, committed, max) {lagging:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
