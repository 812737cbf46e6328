//! [`Producer`]: sends messages (Java `DefaultMQProducer` / `DefaultMQProducerImpl`).
//!
//! A send picks a writable queue round-robin, writes a `SEND_MESSAGE_V2`
//! request (short header keys `a`..`n`, docs/protocol.md#send) and, for a synchronous
//! send, retries on connection failures and on the response codes Java
//! retries on, avoiding the broker that just failed, all within one overall
//! timeout.
//!
//! The send path takes no lock besides a read lock on the route cache and
//! the transport's own; it builds each request's ext fields once per
//! attempt and shares the body (`Bytes`) instead of copying it.

mod send_request;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use basalt_common::constants::topic as reserved;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::instance::{CLIENT_INNER_PRODUCER_GROUP, ClientInstance};
use crate::message::{Message, TopicQueue};
use crate::route::TopicPublishInfo;
use send_request::{Prepared, process_send_response};

/// Producer settings (Java `DefaultMQProducer` fields and defaults).
#[derive(Debug, Clone)]
pub struct ProducerOptions {
    /// Overall time a send may take, retries included (3 s).
    pub send_timeout: Duration,
    /// Extra attempts of a synchronous send after a retriable failure (2).
    pub retry_times_when_send_failed: u32,
    /// Resend to another broker when the broker stored the message but
    /// answered FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE.
    pub retry_another_broker_when_not_store_ok: bool,
    /// Largest body accepted (4 MiB).
    pub max_message_size: usize,
    /// Bodies of at least this many bytes are zlib-compressed (4096);
    /// `None` never compresses.
    pub compress_over: Option<usize>,
    /// Template topic for auto-created topics (`TBW102`).
    pub create_topic_key: String,
    /// Queues per broker of an auto-created topic (4).
    pub default_topic_queue_nums: i32,
    /// `SEND_MESSAGE_V2` with short header keys (Java `sendSmartMsg`, true);
    /// false sends `SEND_MESSAGE` with the long V1 names.
    pub send_smart_msg: bool,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        Self {
            send_timeout: Duration::from_secs(3),
            retry_times_when_send_failed: 2,
            retry_another_broker_when_not_store_ok: false,
            max_message_size: basalt_common::constants::DEFAULT_MAX_MESSAGE_SIZE,
            compress_over: Some(4096),
            create_topic_key: reserved::AUTO_CREATE_TOPIC.into(),
            default_topic_queue_nums: 4,
            send_smart_msg: true,
        }
    }
}

/// How the broker stored a sent message (`SendStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendStatus {
    SendOk,
    /// Stored, but the flush to disk did not finish in time (SYNC_FLUSH).
    FlushDiskTimeout,
    /// Stored, but the slave did not confirm in time (SYNC_MASTER).
    FlushSlaveTimeout,
    /// Stored, but no slave is available (SYNC_MASTER).
    SlaveNotAvailable,
}

impl SendStatus {
    /// The Java enum name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SendOk => "SEND_OK",
            Self::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            Self::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            Self::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
        }
    }
}

/// What a broker answered to a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    pub status: SendStatus,
    /// The client id(s) (`UNIQ_KEY`); comma-separated for a batch.
    pub msg_id: String,
    /// The broker's offset msgId(s); comma-separated for a batch.
    pub offset_msg_id: String,
    /// The queue the message went to.
    pub queue: TopicQueue,
    /// ConsumeQueue offset of the (first) message.
    pub queue_offset: i64,
    pub transaction_id: Option<String>,
    /// `MSG_REGION` of the response (`DefaultRegion` if absent).
    pub region_id: String,
    /// `TRACE_ON` of the response.
    pub trace_on: bool,
}

const CREATED: u8 = 0;
const RUNNING: u8 = 1;
const STOPPED: u8 = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Sync,
    Oneway,
}

/// Sends messages. Cheap to clone; clones share one producer.
///
/// ```no_run
/// # async fn demo() -> basalt_client::Result<()> {
/// use basalt_client::{ClientConfig, Message, Producer};
/// let producer = Producer::new("PG", ClientConfig::new("127.0.0.1:9876"));
/// producer.start().await?;
/// let r = producer.send(&Message::new("TopicTest", "hello").with_tags("TagA")).await?;
/// println!("{} at {} offset {}", r.msg_id, r.queue, r.queue_offset);
/// producer.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

struct Inner {
    group: String,
    instance: Arc<ClientInstance>,
    options: ProducerOptions,
    state: AtomicU8,
    /// Internal producers (consumer retries) do not register with the instance.
    registered: bool,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("group", &self.inner.group)
            .field("client_id", &self.inner.instance.client_id())
            .finish()
    }
}

impl Producer {
    /// A producer of `group` with its own client instance and default options.
    pub fn new(group: impl Into<String>, config: ClientConfig) -> Self {
        Self::with_options(group, config, ProducerOptions::default())
    }

    pub fn with_options(
        group: impl Into<String>,
        config: ClientConfig,
        options: ProducerOptions,
    ) -> Self {
        Self::with_instance(group, ClientInstance::new(config), options)
    }

    /// A producer sharing `instance` (its connections, routes and heartbeat).
    pub fn with_instance(
        group: impl Into<String>,
        instance: Arc<ClientInstance>,
        options: ProducerOptions,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                group: group.into(),
                instance,
                options,
                state: AtomicU8::new(CREATED),
                registered: true,
            }),
        }
    }

    /// The instance's internal producer (`CLIENT_INNER_PRODUCER`), running
    /// as long as its consumer does.
    pub(crate) fn internal(instance: Arc<ClientInstance>) -> Self {
        Self {
            inner: Arc::new(Inner {
                group: CLIENT_INNER_PRODUCER_GROUP.into(),
                instance,
                options: ProducerOptions::default(),
                state: AtomicU8::new(RUNNING),
                registered: false,
            }),
        }
    }

    pub fn group(&self) -> &str {
        &self.inner.group
    }

    pub fn options(&self) -> &ProducerOptions {
        &self.inner.options
    }

    pub fn instance(&self) -> &Arc<ClientInstance> {
        &self.inner.instance
    }

    /// Registers the group with the instance, starts its timers and sends a
    /// first heartbeat.
    pub async fn start(&self) -> Result<()> {
        let group = &self.inner.group;
        basalt_common::topic::validate_group(group)
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        if group == "DEFAULT_PRODUCER" || group == CLIENT_INNER_PRODUCER_GROUP {
            return Err(ClientError::InvalidArgument(format!(
                "the producer group {group} is reserved"
            )));
        }
        if self
            .inner
            .state
            .compare_exchange(CREATED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(ClientError::InvalidArgument(
                "the producer was already started".into(),
            ));
        }
        if let Err(e) = self.inner.instance.register_producer(group) {
            self.inner.state.store(STOPPED, Ordering::Release);
            return Err(e);
        }
        self.inner.instance.acquire();
        self.inner.instance.send_heartbeat_to_all_brokers().await;
        Ok(())
    }

    /// Unregisters from every broker and stops the instance if this was its
    /// last user. Sends in flight finish or fail on their own.
    pub async fn shutdown(&self) {
        if self
            .inner
            .state
            .compare_exchange(RUNNING, STOPPED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        if self.inner.registered {
            self.inner
                .instance
                .unregister_producer(&self.inner.group)
                .await;
            self.inner.instance.release().await;
        }
    }

    fn check_running(&self) -> Result<()> {
        if self.inner.state.load(Ordering::Acquire) == RUNNING {
            Ok(())
        } else {
            Err(ClientError::NotStarted)
        }
    }

    /// The writable queues of `topic` (the route, or the auto-create route).
    pub async fn fetch_publish_queues(&self, topic: &str) -> Result<Vec<TopicQueue>> {
        basalt_common::topic::validate_topic(topic)
            .map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let info = self
            .inner
            .instance
            .find_publish_info(topic, self.inner.options.default_topic_queue_nums)
            .await?;
        Ok(info.queues.iter().map(|q| q.mq.clone()).collect())
    }

    /// Sends one message and waits for the broker's answer, retrying on
    /// retriable failures (see the module docs).
    pub async fn send(&self, msg: &Message) -> Result<SendResult> {
        self.check_running()?;
        // The topic name is checked when it is first looked up (a cached
        // route means it passed already).
        msg.validate_content(self.inner.options.max_message_size)?;
        let prepared = Prepared::single(msg, &self.inner.instance, &self.inner.options)?;
        let r = self.send_default(prepared, Mode::Sync).await?;
        r.ok_or_else(|| {
            ClientError::InvalidArgument("a synchronous send returned no result".into())
        })
    }

    /// A send that skips the reserved-property check: consumers resend
    /// received messages (with their system properties) to retry topics.
    pub(crate) async fn send_internal(&self, msg: &Message) -> Result<SendResult> {
        self.check_running()?;
        if msg.body.is_empty() {
            return Err(ClientError::InvalidMessage(
                "the message body length is zero".into(),
            ));
        }
        let prepared = Prepared::single(msg, &self.inner.instance, &self.inner.options)?;
        let r = self.send_default(prepared, Mode::Sync).await?;
        r.ok_or_else(|| {
            ClientError::InvalidArgument("a synchronous send returned no result".into())
        })
    }

    /// Starts a send in its own task; await the handle for the result.
    /// Many of these in flight keep a connection's pipeline full.
    pub fn send_async(&self, msg: Message) -> JoinHandle<Result<SendResult>> {
        let me = self.clone();
        tokio::spawn(async move { me.send(&msg).await })
    }

    /// Sends without waiting for any answer (one attempt).
    pub async fn send_oneway(&self, msg: &Message) -> Result<()> {
        self.check_running()?;
        msg.validate_content(self.inner.options.max_message_size)?;
        let prepared = Prepared::single(msg, &self.inner.instance, &self.inner.options)?;
        self.send_default(prepared, Mode::Oneway).await?;
        Ok(())
    }

    /// Sends to one given queue, once (no retries), as Java's `send(msg, mq)`.
    pub async fn send_to(&self, msg: &Message, mq: &TopicQueue) -> Result<SendResult> {
        self.check_running()?;
        msg.validate(self.inner.options.max_message_size)?;
        if msg.topic != mq.topic {
            return Err(ClientError::InvalidArgument(format!(
                "message topic {} differs from queue topic {}",
                msg.topic, mq.topic
            )));
        }
        let deadline = Instant::now() + self.inner.options.send_timeout;
        let info = self
            .inner
            .instance
            .find_publish_info(&mq.topic, self.inner.options.default_topic_queue_nums)
            .await?;
        let addr = match info.addr_of(&mq.broker_name) {
            Some(a) => a.to_string(),
            None => self
                .inner
                .instance
                .master_addr(&mq.broker_name)
                .ok_or_else(|| ClientError::BrokerNotFound {
                    broker_name: mq.broker_name.clone(),
                })?,
        };
        let mut prepared = Prepared::single(msg, &self.inner.instance, &self.inner.options)?;
        let left = deadline.saturating_duration_since(Instant::now());
        let r = self
            .send_kernel(&prepared, mq, &addr, Mode::Sync, left)
            .await?
            .map(|mut r| {
                r.msg_id = std::mem::take(&mut prepared.msg_ids);
                r
            });
        r.ok_or_else(|| {
            ClientError::InvalidArgument("a synchronous send returned no result".into())
        })
    }

    /// Sends messages of one topic as one `SEND_BATCH_MESSAGE` (docs/protocol.md#send).
    /// All must share the topic and `wait_store_msg_ok`, have no delay level
    /// and not target a retry topic. The result's ids are comma-separated.
    pub async fn send_batch(&self, msgs: &[Message]) -> Result<SendResult> {
        self.check_running()?;
        let prepared = Prepared::batch(msgs, &self.inner.instance, &self.inner.options)?;
        let r = self.send_default(prepared, Mode::Sync).await?;
        r.ok_or_else(|| {
            ClientError::InvalidArgument("a synchronous send returned no result".into())
        })
    }

    /// Java's `sendDefaultImpl`: pick a queue, send, retry elsewhere.
    async fn send_default(&self, mut p: Prepared<'_>, mode: Mode) -> Result<Option<SendResult>> {
        let opts = &self.inner.options;
        let start = Instant::now();
        let deadline = start + opts.send_timeout;
        let instance = &self.inner.instance;
        let info: Arc<TopicPublishInfo> = match instance.routes().publish_info(p.topic) {
            Some(i) => i,
            None => {
                // A topic is checked once, before its first lookup.
                basalt_common::topic::validate_topic(p.topic)
                    .map_err(|e| ClientError::InvalidMessage(e.to_string()))?;
                // Boxed: the first-lookup path is large and runs once per topic.
                tokio::time::timeout_at(
                    deadline,
                    Box::pin(instance.find_publish_info(p.topic, opts.default_topic_queue_nums)),
                )
                .await
                .map_err(|_| ClientError::Timeout {
                    what: format!("route lookup of {}", p.topic),
                    millis: opts.send_timeout.as_millis() as u64,
                })??
            }
        };
        if !info.ok() {
            return Err(ClientError::NoRoute {
                topic: p.topic.to_string(),
            });
        }
        let times = if mode == Mode::Sync {
            1 + opts.retry_times_when_send_failed
        } else {
            1
        };
        let mut last_broker: Option<String> = None;
        let mut last_err: Option<ClientError> = None;
        let mut not_stored: Option<SendResult> = None;
        for _ in 0..times {
            let Some(q) = info.select(last_broker.as_deref()) else {
                break;
            };
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match self
                .send_kernel(&p, &q.mq, &q.addr, mode, deadline - now)
                .await
            {
                Ok(Some(mut r))
                    if r.status != SendStatus::SendOk
                        && opts.retry_another_broker_when_not_store_ok =>
                {
                    last_broker = Some(q.mq.broker_name.clone());
                    r.msg_id.clone_from(&p.msg_ids);
                    not_stored = Some(r);
                }
                Ok(Some(mut r)) => {
                    r.msg_id = std::mem::take(&mut p.msg_ids);
                    return Ok(Some(r));
                }
                Ok(None) => return Ok(None),
                Err(e) if e.is_retriable_send() => {
                    tracing::debug!(broker = %q.mq.broker_name, error = %e, "send failed; retrying");
                    if matches!(e, ClientError::Remoting(_)) {
                        instance.refresh_route_soon(p.topic);
                    }
                    last_broker = Some(q.mq.broker_name.clone());
                    last_err = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(r) = not_stored {
            return Ok(Some(r));
        }
        Err(last_err.unwrap_or_else(|| ClientError::Timeout {
            what: format!("send to {}", p.topic),
            millis: opts.send_timeout.as_millis() as u64,
        }))
    }

    /// Java's `sendKernelImpl` + `MQClientAPIImpl.sendMessage`: one request.
    async fn send_kernel(
        &self,
        p: &Prepared<'_>,
        mq: &TopicQueue,
        addr: &str,
        mode: Mode,
        timeout: Duration,
    ) -> Result<Option<SendResult>> {
        let cmd = p.to_request(
            &self.inner.instance,
            &self.inner.group,
            &self.inner.options,
            mq,
        );
        let instance = &self.inner.instance;
        match mode {
            Mode::Oneway => {
                instance.remoting().invoke_oneway(addr, cmd).await?;
                Ok(None)
            }
            Mode::Sync => {
                let resp = instance.invoke(addr, cmd, timeout).await?;
                process_send_response(addr, resp, mq).map(Some)
            }
        }
    }
}
