//! The Basalt broker: RocketMQ's request processors over the store.
//!
//! * [`config`] — broker.conf settings (properties or TOML); [`live_config`]
//!   the few an operator may change while the broker runs; [`config_keys`]
//!   sorts keys into applied, ignored on purpose and unknown (with a
//!   suggestion); [`config_layers`] records where each value came from;
//! * [`broker`] — the running broker: its parts, registration, shutdown;
//!   [`start`] brings one up;
//! * [`replication`] — how messages are written and copied: standalone,
//!   classic HA master or slave, or a DLedger ledger; chosen once at start;
//! * [`processor`] — request handlers: send, pull (long polling), client
//!   membership and offsets, admin;
//! * [`metadata`] — the tables kept in `config/*.json`: topics, subscription
//!   groups, consumer offsets;
//! * [`clients`] — connected producers and consumers, queue locks, held pulls;
//! * [`schedule`] — delivery at a later time: delay levels and timer
//!   messages;
//! * [`transaction`] — transactional messages: ending them, checking them
//!   back with their producers;
//! * [`filter`] — subscription filters for pulls: TAG expressions and
//!   SQL92 selectors over message properties.

mod auth;
pub mod broker;
pub mod clients;
pub mod config;
pub mod config_keys;
pub mod config_layers;
mod config_properties;
pub mod dashboard;
pub mod filter;
pub mod http_serve;
pub mod live_config;
pub mod messaging_api;
pub mod metadata;
pub mod metrics;
pub mod pop;
pub mod processor;
mod registration;
pub mod replication;
pub mod runtime_stats;
pub mod schedule;
mod start;
pub mod stats_items;
pub mod store_check;
pub mod store_export;
pub mod transaction;
pub mod transport_security;
pub mod writer;

pub use broker::{Broker, BrokerError, BrokerHandle};
pub use config::BrokerConfig;
pub use start::start;
