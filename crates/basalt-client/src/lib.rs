//! Basalt's async RocketMQ client (tokio). It speaks the standard remoting
//! protocol (spec §1–3), so it works against Basalt and against Apache
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
//!   timers, and the handling of broker-to-client requests.
//!
//! Errors are [`ClientError`].

pub mod admin;
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
pub use message::{Message, MessageExt, MessageQueue};
pub use producer::{Producer, ProducerOptions, SendResult, SendStatus};
pub use pull::{PullResult, PullStatus};
pub use pull_consumer::PullConsumer;
pub use push::{
    AllocateStrategy, AsyncMessageListener, ConsumeContext, ConsumeFromWhere, ConsumeStatus,
    MessageModel, PushConsumer, PushOptions,
};
