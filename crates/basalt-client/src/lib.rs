//! Basalt's async RocketMQ client (tokio). It speaks the standard remoting
//! protocol (docs/protocol.md), so it works against Basalt and against Apache
//! RocketMQ brokers alike.
//!
//! * [`Producer`] — sync, async, oneway, to-queue and batch sends with
//!   Java's queue selection, retries and auto-create fallback;
//! * [`PullConsumer`] — explicit pulls (optionally long-polling), offsets;
//! * [`PushConsumer`] — rebalanced, flow-controlled, at-least-once
//!   consumption with a listener, concurrent or orderly;
//! * [`Admin`] — topics, clusters, broker runtime info, consumer progress,
//!   message lookup by key and by offset msgId;
//! * [`ClientInstance`] — what they share: connections, routes, heartbeats,
//!   timers, and the handling of broker-to-client requests
//!   (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO,
//!   RESET_CONSUMER_CLIENT_OFFSET).
//!
//! Errors are [`ClientError`].
//!
//! # Behaviour worth knowing
//!
//! * Requests use the binary ROCKETMQ header by default
//!   ([`ClientConfig::serialize_type`]); responses are read in either form.
//!   The client reports language JAVA and version 401 (V4_9_4).
//! * Client ids are `ip@pid#nanos` unless an instance name is set, so two
//!   consumers in one process are two members of their group.
//! * A message without `UNIQ_KEY` gets one; [`SendResult::msg_id`] is it.
//!   Bodies of 4 KiB or more are zlib-compressed (Java's default).
//! * A push consumer commits, per queue, the smallest offset still in
//!   flight (or one past the last pulled when none is): a crash re-delivers,
//!   it never skips. Commits go out every `persist_consumer_offset_interval`,
//!   when a queue is given up, and at shutdown; pulls also carry them.
//! * Failed messages go back with CONSUMER_SEND_MSG_BACK; if that fails the
//!   client itself sends them to `%RETRY%<group>`, and if that fails too
//!   they are consumed again locally after 5 s.
//!
//! # Not implemented
//!
//! Transactional messages (CHECK_TRANSACTION_STATE is logged and ignored),
//! request-reply, SQL92 filters (tags only), namespaces, POP consumption,
//! CONSUME_MESSAGE_DIRECTLY, heartbeat V2, LZ4/ZSTD bodies (delivered still
//! compressed), reading from slaves beyond following `suggestWhichBrokerId`.

pub mod admin;
mod admin_auth;
mod admin_config;
mod admin_ledger;
mod admin_ops;
pub use admin_config::{ConsumeQueueUnit, ConsumeQueueView};
pub use admin_ops::{ConsumerRunningInfo, ProcessQueueInfo, ProducerConnection};
mod api;
pub mod config;
pub mod decode;
pub mod error;
pub mod filter;
#[doc(hidden)]
pub mod fuzzing;
pub mod instance;
pub mod message;
pub mod producer;
pub mod pull;
pub mod pull_consumer;
pub mod push;
pub mod route;
mod util;

pub use admin::{Admin, ConsumeProgress, ConsumerConnection, QueueProgress, QueueStats};
pub use basalt_common::properties::Properties;
pub use basalt_remoting::protocol::{ClusterInfo, TopicConfig, TopicRouteData};
pub use basalt_remoting::{LanguageCode, SerializeType};
pub use config::ClientConfig;
pub use error::{ClientError, Result};
pub use instance::ClientInstance;
pub use message::{Message, MessageExt, TopicQueue};
pub use producer::{Producer, ProducerOptions, SendResult, SendStatus};
pub use pull::{PullResult, PullStatus};
pub use pull_consumer::PullConsumer;
pub use push::{
    AllocateStrategy, AsyncMessageListener, ConsumeContext, ConsumeStatus, PushConsumeFrom,
    PushConsumer, PushMessageModel, PushOptions,
};
