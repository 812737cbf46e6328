//! The producers and consumers an instance serves ([`ClientRegistry`]), the
//! HEART_BEAT it sends for them, and UNREGISTER_CLIENT when one leaves.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, UnregisterClientRequestHeader};
use basalt_remoting::protocol::{ConsumerData, HeartbeatData, ProducerData};
use basalt_remoting::transport::BoxFuture;
use parking_lot::Mutex;

use super::ClientInstance;
use crate::error::{ClientError, Result};
use crate::message::TopicQueue;
use crate::route::MASTER_ID;

/// Producer group of the instance's internal producer, which resends failed
/// messages to the retry topic when CONSUMER_SEND_MSG_BACK fails.
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";

/// What the instance needs from a consumer it serves.
pub(crate) trait ConsumerInner: Send + Sync + 'static {
    fn group(&self) -> &str;
    /// This consumer's entry in HEART_BEAT.
    fn consumer_data(&self) -> ConsumerData;
    /// Topics whose routes this consumer needs.
    fn subscribed_topics(&self) -> Vec<String>;
    /// A route refresh found these readable queues for `topic`; returns
    /// whether they differ from what the consumer knew.
    fn update_subscribe_info(&self, topic: &str, queues: &BTreeSet<TopicQueue>) -> bool;
    /// Whether the consumer lacks queue information for `topic`.
    fn needs_subscribe_info(&self, topic: &str) -> bool;
    /// Rebalance now (push consumers; others do nothing).
    fn rebalance(self: Arc<Self>) -> BoxFuture<'static, ()>;
    /// Commit consumed offsets (the periodic persist).
    fn persist_offsets(self: Arc<Self>) -> BoxFuture<'static, ()>;
    /// GET_CONSUMER_RUNNING_INFO's body (`ConsumerRunningInfo` JSON), with
    /// `extra` added to its properties.
    fn running_info(&self, extra: BTreeMap<String, String>) -> Vec<u8>;
    /// RESET_CONSUMER_CLIENT_OFFSET: restart the held queues of `topic`
    /// found in `offsets` from those offsets.
    fn reset_offsets(
        self: Arc<Self>,
        topic: String,
        offsets: BTreeMap<TopicQueue, i64>,
    ) -> BoxFuture<'static, ()>;
}

/// The producer groups and consumers an instance serves (Java
/// `MQClientInstance`'s `producerTable` and `consumerTable`), and the lock
/// that lets one heartbeat round run at a time.
///
/// Invariants: a producer group is registered at most once; a consumer
/// group has at most one live consumer (a registration whose consumer was
/// dropped may be replaced). Consumers are held weakly, so the registry
/// never keeps one alive.
pub(crate) struct ClientRegistry {
    producers: Mutex<BTreeSet<String>>,
    consumers: Mutex<BTreeMap<String, Weak<dyn ConsumerInner>>>,
    heartbeat_lock: tokio::sync::Mutex<()>,
}

impl ClientRegistry {
    pub(crate) fn new() -> Self {
        Self {
            producers: Mutex::new(BTreeSet::new()),
            consumers: Mutex::new(BTreeMap::new()),
            heartbeat_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Adds a producer group; `client_id` names the instance in the error.
    pub(crate) fn add_producer(&self, group: &str, client_id: &str) -> Result<()> {
        if !self.producers.lock().insert(group.to_string()) {
            return Err(ClientError::InvalidArgument(format!(
                "the producer group {group} is already registered in client {client_id}"
            )));
        }
        Ok(())
    }

    /// Adds a consumer under its group; `client_id` names the instance in
    /// the error.
    pub(crate) fn add_consumer(
        &self,
        consumer: Weak<dyn ConsumerInner>,
        client_id: &str,
    ) -> Result<()> {
        let Some(c) = consumer.upgrade() else {
            return Err(ClientError::NotStarted);
        };
        let mut map = self.consumers.lock();
        if map.get(c.group()).is_some_and(|w| w.strong_count() > 0) {
            return Err(ClientError::InvalidArgument(format!(
                "the consumer group {} is already registered in client {client_id}",
                c.group(),
            )));
        }
        map.insert(c.group().to_string(), consumer);
        Ok(())
    }

    pub(crate) fn remove_producer(&self, group: &str) {
        self.producers.lock().remove(group);
    }

    pub(crate) fn remove_consumer(&self, group: &str) {
        self.consumers.lock().remove(group);
    }

    /// The registered consumers still alive, in group order.
    pub(crate) fn live_consumers(&self) -> Vec<Arc<dyn ConsumerInner>> {
        self.consumers
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The live consumer of `group`, if any.
    pub(crate) fn consumer(&self, group: &str) -> Option<Arc<dyn ConsumerInner>> {
        self.consumers.lock().get(group).and_then(Weak::upgrade)
    }

    /// HEART_BEAT's body: every producer group (plus the internal producer's
    /// when there is a consumer, which may resend to retry topics) and
    /// every live consumer.
    pub(crate) fn heartbeat_data(&self, client_id: &str) -> HeartbeatData {
        let consumers = self.live_consumers();
        let mut producer_data_set: Vec<ProducerData> = self
            .producers
            .lock()
            .iter()
            .map(|g| ProducerData {
                group_name: g.clone(),
            })
            .collect();
        if !consumers.is_empty()
            && !producer_data_set
                .iter()
                .any(|p| p.group_name == CLIENT_INNER_PRODUCER_GROUP)
        {
            producer_data_set.push(ProducerData {
                group_name: CLIENT_INNER_PRODUCER_GROUP.into(),
            });
        }
        HeartbeatData {
            client_id: client_id.to_string(),
            consumer_data_set: consumers.iter().map(|c| c.consumer_data()).collect(),
            heartbeat_fingerprint: None,
            producer_data_set,
            without_sub: None,
        }
    }
}

impl ClientInstance {
    pub(crate) fn register_producer(&self, group: &str) -> Result<()> {
        self.registry.add_producer(group, &self.client_id)
    }

    pub(crate) fn register_consumer(&self, consumer: Weak<dyn ConsumerInner>) -> Result<()> {
        self.registry.add_consumer(consumer, &self.client_id)
    }

    /// Removes a producer group and tells every broker (UNREGISTER_CLIENT).
    pub(crate) async fn unregister_producer(&self, group: &str) {
        self.registry.remove_producer(group);
        self.unregister_client(Some(group), None).await;
    }

    /// Removes a consumer group and tells every broker (UNREGISTER_CLIENT).
    pub(crate) async fn unregister_consumer(&self, group: &str) {
        self.registry.remove_consumer(group);
        self.unregister_client(None, Some(group)).await;
    }

    async fn unregister_client(&self, producer: Option<&str>, consumer: Option<&str>) {
        let header = UnregisterClientRequestHeader {
            client_id: self.client_id.clone(),
            producer_group: producer.map(str::to_string),
            consumer_group: consumer.map(str::to_string),
        };
        for (_, _, addr) in self.routes.broker_addresses() {
            let cmd = self
                .request(request::UNREGISTER_CLIENT)
                .with_ext(header.to_ext());
            if let Err(e) = self
                .invoke_ok(&addr, cmd, self.config.request_timeout)
                .await
            {
                tracing::warn!(broker = %addr, error = %e, "UNREGISTER_CLIENT failed");
            }
        }
    }

    /// Sends HEART_BEAT to every known broker (only masters when this client
    /// has no consumer). Returns how many brokers answered SUCCESS.
    pub async fn send_heartbeat_to_all_brokers(&self) -> usize {
        let _one_at_a_time = self.registry.heartbeat_lock.lock().await;
        let data = self.registry.heartbeat_data(&self.client_id);
        if data.consumer_data_set.is_empty() && data.producer_data_set.is_empty() {
            return 0;
        }
        let body = match serde_json::to_vec(&data) {
            Ok(b) => bytes::Bytes::from(b),
            Err(e) => {
                tracing::error!(error = %e, "cannot encode the heartbeat");
                return 0;
            }
        };
        let only_masters = data.consumer_data_set.is_empty();
        let mut set = tokio::task::JoinSet::new();
        for (_, id, addr) in self.routes.broker_addresses() {
            if only_masters && id != MASTER_ID {
                continue;
            }
            let cmd = self.request(request::HEART_BEAT).with_body(body.clone());
            let remoting = self.remoting.clone();
            let timeout = self.config.request_timeout;
            set.spawn(async move {
                let r = remoting.invoke(&addr, cmd, timeout).await;
                (addr, r)
            });
        }
        let mut ok = 0;
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((_, Ok(resp))) if resp.code == response::SUCCESS => ok += 1,
                Ok((addr, Ok(resp))) => tracing::warn!(broker = %addr, code = resp.code,
                    remark = ?resp.remark, "heartbeat refused"),
                Ok((addr, Err(e))) => {
                    tracing::warn!(broker = %addr, error = %e, "heartbeat failed")
                }
                Err(e) => tracing::error!(error = %e, "heartbeat task failed"),
            }
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A consumer that only has a group.
    struct Plain(String);

    impl ConsumerInner for Plain {
        fn group(&self) -> &str {
            &self.0
        }
        fn consumer_data(&self) -> ConsumerData {
            ConsumerData {
                group_name: self.0.clone(),
                ..Default::default()
            }
        }
        fn subscribed_topics(&self) -> Vec<String> {
            Vec::new()
        }
        fn update_subscribe_info(&self, _: &str, _: &BTreeSet<TopicQueue>) -> bool {
            false
        }
        fn needs_subscribe_info(&self, _: &str) -> bool {
            false
        }
        fn rebalance(self: Arc<Self>) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
        fn persist_offsets(self: Arc<Self>) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
        fn running_info(&self, _: BTreeMap<String, String>) -> Vec<u8> {
            Vec::new()
        }
        fn reset_offsets(
            self: Arc<Self>,
            _: String,
            _: BTreeMap<TopicQueue, i64>,
        ) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    fn consumer(group: &str) -> Arc<dyn ConsumerInner> {
        Arc::new(Plain(group.into()))
    }

    fn groups(data: &HeartbeatData) -> (Vec<String>, Vec<String>) {
        (
            data.producer_data_set
                .iter()
                .map(|p| p.group_name.clone())
                .collect(),
            data.consumer_data_set
                .iter()
                .map(|c| c.group_name.clone())
                .collect(),
        )
    }

    #[test]
    fn a_producer_group_registers_once() {
        let reg = ClientRegistry::new();
        reg.add_producer("PG", "c1").unwrap();
        let e = reg.add_producer("PG", "c1").unwrap_err();
        assert!(e.to_string().contains("PG"), "{e}");
        reg.remove_producer("PG");
        reg.add_producer("PG", "c1").unwrap();
    }

    #[test]
    fn a_consumer_group_has_one_live_consumer() {
        let reg = ClientRegistry::new();
        let first = consumer("CG");
        reg.add_consumer(Arc::downgrade(&first), "c1").unwrap();
        let second = consumer("CG");
        assert!(reg.add_consumer(Arc::downgrade(&second), "c1").is_err());
        assert!(Arc::ptr_eq(&reg.consumer("CG").unwrap(), &first));
        // Once the first is gone its registration may be replaced.
        drop(first);
        assert!(reg.consumer("CG").is_none());
        assert!(reg.live_consumers().is_empty());
        reg.add_consumer(Arc::downgrade(&second), "c1").unwrap();
        assert_eq!(reg.live_consumers().len(), 1);
        // A consumer already dropped cannot register.
        let gone = Arc::downgrade(&consumer("CG2"));
        assert!(matches!(
            reg.add_consumer(gone, "c1"),
            Err(ClientError::NotStarted)
        ));
    }

    #[test]
    fn the_heartbeat_adds_the_inner_producer_only_for_consumers() {
        let reg = ClientRegistry::new();
        assert_eq!(groups(&reg.heartbeat_data("c1")), (vec![], vec![]));
        reg.add_producer("PG", "c1").unwrap();
        let data = reg.heartbeat_data("c1");
        assert_eq!(data.client_id, "c1");
        assert_eq!(groups(&data), (vec!["PG".to_string()], vec![]));
        let c = consumer("CG");
        reg.add_consumer(Arc::downgrade(&c), "c1").unwrap();
        assert_eq!(
            groups(&reg.heartbeat_data("c1")),
            (
                vec!["PG".to_string(), CLIENT_INNER_PRODUCER_GROUP.to_string()],
                vec!["CG".to_string()]
            )
        );
        // Registered explicitly (a consumer's retry producer): listed once.
        reg.add_producer(CLIENT_INNER_PRODUCER_GROUP, "c1").unwrap();
        let (producers, _) = groups(&reg.heartbeat_data("c1"));
        assert_eq!(producers, ["CLIENT_INNER_PRODUCER", "PG"]);
    }
}
