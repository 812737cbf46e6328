//! [`MessageWriter`]: the one way messages enter this broker's log, whoever
//! writes them (producers, retries, delayed delivery).

use std::sync::Arc;

use basalt_common::record::RecordDraft;
use basalt_store::{MessageStore, PutMessageResult};

use crate::config::BrokerConfig;
use crate::replication::{PutWait, Replication};

/// Writes records through the broker's replication mode: the local store
/// and whatever copy the mode waits for. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MessageWriter {
    store: Arc<MessageStore>,
    replication: Arc<Replication>,
    config: Arc<BrokerConfig>,
}

impl MessageWriter {
    pub fn new(
        store: Arc<MessageStore>,
        replication: Arc<Replication>,
        config: Arc<BrokerConfig>,
    ) -> Self {
        MessageWriter {
            store,
            replication,
            config,
        }
    }

    /// Whether this broker takes writes now (see [`Replication::is_writable`]).
    pub fn is_writable(&self) -> bool {
        self.replication.is_writable()
    }

    /// See [`Replication::writable_changes`].
    pub fn writable_changes(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.replication.writable_changes()
    }

    /// See [`Replication::written_end`].
    pub fn written_end(&self) -> i64 {
        self.replication.written_end(&self.store)
    }

    /// See [`Replication::durable_end`].
    pub fn durable_end(&self) -> i64 {
        self.replication.durable_end(&self.store)
    }

    /// See [`Replication::settled_end`].
    pub async fn settled_end(&self, timeout: std::time::Duration) -> Option<i64> {
        self.replication.settled_end(&self.store, timeout).await
    }

    /// Stores records of one topic queue and waits for what the mode and
    /// the producer ask (`wait_store_msg_ok`: the producer's `WAIT`).
    pub async fn put(
        &self,
        drafts: &[RecordDraft<'_>],
        wait_store_msg_ok: bool,
    ) -> PutMessageResult {
        let wait = PutWait {
            wait_store_msg_ok,
            sync_timeout: self.config.sync_flush_timeout,
            append_crc: self.config.enabled_append_prop_crc,
        };
        self.replication.put(&self.store, drafts, wait).await
    }
}
