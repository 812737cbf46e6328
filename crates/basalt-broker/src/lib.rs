//! The Basalt broker: RocketMQ's request processors over the store.
//!
//! * [`config`] — broker.conf settings (properties or TOML);
//! * [`broker`] — start, NameServer registration, housekeeping, shutdown;
//! * [`processor`] — send, pull (long polling), client membership, offsets,
//!   admin;
//! * managers: [`topic_config`], [`subscription_group`], [`consumer_offset`],
//!   [`client_manager`], [`lock`], [`schedule`] (delay levels).

pub mod broker;
pub mod client_manager;
pub mod config;
pub mod config_file;
pub mod consumer_offset;
pub mod filter;
pub mod ha;
pub mod ledger;
pub mod lock;
pub mod long_polling;
pub mod processor;
pub mod schedule;
pub mod subscription_group;
pub mod topic_config;

pub use broker::{Broker, BrokerError, BrokerHandle, start};
pub use config::BrokerConfig;
