//! Basalt's storage engine: RocketMQ's on-disk formats and services.
//!
//! * [`commit_log`] — the single append-only log of records for all topics;
//! * [`consume_queue`] — 20-byte units per topic queue pointing into it;
//! * [`index`] — lookup by message key;
//! * [`checkpoint`] and the abort file — what recovery starts from;
//! * [`services`] — flush (group commit / interval), commit (transient pool),
//!   ConsumeQueue flush, cleanup;
//! * [`dispatch`] — turns records into ConsumeQueue units and index entries;
//! * [`recovery`] — normal and abnormal crash recovery;
//! * [`store`] — [`MessageStore`], the façade the broker uses;
//! * [`check`] — offline validation and listing for operators;
//! * [`repair`] — cutting a damaged store back to a valid prefix, offline;
//! * [`export`] — making a stopped store readable by RocketMQ 5, offline;
//! * [`timer`] — the TimerLog, timing wheel and checkpoint of timer messages.
//!
//! The store knows nothing of the network.

pub mod check;
pub mod checkpoint;
pub mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod consume_queue_table;
pub mod disk_space;
pub mod dispatch;
pub mod error;
pub mod export;
pub mod faults;
pub mod flush_stats;
#[doc(hidden)]
pub mod fuzzing;

pub mod fs_util;
pub mod health;
pub mod index;
pub mod mapped_file;
pub mod mapped_file_policy;
pub mod mapped_file_queue;
pub mod message_log;
pub mod names;
pub mod put;
pub mod record_check;
pub mod recovery;
pub mod repair;
pub mod retention;
pub mod services;
pub mod signal;
pub mod store;
pub mod timer;
pub mod transient_pool;

pub use config::StoreConfig;
pub use error::{Result, StoreError};
pub use message_log::MessageLog;
pub use put::{AppendResult, PutMessageResult, PutMessageStatus};
pub use store::{
    BoundaryType, GetMessageRequest, GetMessageResult, GetMessageStatus, MessageFilter,
    MessageSource, MessageStore, QueryMessageResult,
};
