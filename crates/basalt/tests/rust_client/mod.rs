//! The unchanged RocketMQ Rust client (`rocketmq-client-rust` 1.0.0) as
//! process tests use it: its task runtime, producers and push consumers
//! started with deadlines, and an [`Inbox`] for what consumers receive.
//!
//! COMPAT_CLIENT_LOG=<filter> shows the client's own logs.

#![allow(dead_code)]

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ClientRuntime, ClientRuntimeConfig, DefaultMQProducer, DefaultMQPushConsumer, TelemetryHandle,
};
use rocketmq_protocol::protocol::remoting_command_defaults::{
    RemotingCommandDefaults, RemotingCommandFactory,
};
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use tokio::sync::Notify;

use crate::standalone::{Standalone, left};

/// The client's own task runtime, shared by the tests of a binary (the
/// way the client's examples and tests build it).
static CLIENT_RUNTIME_OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
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

pub async fn shutdown_producer(mut p: DefaultMQProducer) {
    tokio::time::timeout(Duration::from_secs(30), p.shutdown())
        .await
        .expect("producer shutdown in time");
}

pub async fn shutdown_push_consumer(mut c: DefaultMQPushConsumer) {
    tokio::time::timeout(Duration::from_secs(30), c.shutdown())
        .await
        .expect("push consumer shutdown in time");
}

/// Everything consumers (or listeners) of a test received, in arrival order.
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
