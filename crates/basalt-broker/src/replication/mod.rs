//! How this broker writes messages and who else gets a copy. The mode is
//! chosen once, at start, from the configuration, and never changes:
//!
//! * [`Replication::Standalone`] — a master that serves no slaves
//!   (`haEnable=false`): the local store is the only copy;
//! * [`Replication::HaMaster`] — a classic master: slaves copy its CommitLog
//!   over [`ha`], and a SYNC_MASTER acknowledges a send only once a slave has
//!   it;
//! * [`Replication::HaSlave`] — a classic slave: it copies a master's
//!   CommitLog, serves pulls and refuses sends;
//! * [`Replication::Ledger`] — a member of a DLedger group ([`ledger`]): the
//!   leader takes sends, every member dispatches committed entries.
//!
//! Whatever the mode, the broker asks the same few things of it: put these
//! records, are you taking sends now, which broker id do you register, what
//! do you add to the runtime info, shut down.

pub(crate) mod auth_sync;
pub mod ha;
pub mod ledger;
pub(crate) mod tasks;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use basalt_common::config::BrokerRole;
use basalt_common::record::RecordDraft;
use basalt_store::{MessageStore, PutMessageResult, PutMessageStatus};

use self::ha::master::HaMaster;
use self::ha::slave::HaSlave;
use self::ledger::LedgerMode;

/// See the module documentation.
pub enum Replication {
    Standalone,
    HaMaster {
        ha: Arc<HaMaster>,
        /// SYNC_MASTER: sends wait for a slave's copy.
        sync: bool,
    },
    HaSlave(Arc<HaSlave>),
    Ledger(Arc<LedgerMode>),
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a put waits for besides the store itself.
#[derive(Debug, Clone, Copy)]
pub struct PutWait {
    /// The producer asked to wait (`WAIT` property, true by default).
    pub wait_store_msg_ok: bool,
    /// How long a SYNC_MASTER waits for a slave.
    pub sync_timeout: Duration,
    /// Append the `__CRC32#` trailer (ledger records are encoded here).
    pub append_crc: bool,
}

impl Replication {
    /// The mode's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Replication::Standalone => "standalone",
            Replication::HaMaster { sync: true, .. } => "SYNC_MASTER",
            Replication::HaMaster { sync: false, .. } => "ASYNC_MASTER",
            Replication::HaSlave(_) => "SLAVE",
            Replication::Ledger(_) => "ledger",
        }
    }

    /// Whether this broker takes sends now: any master, or the ledger
    /// leader once its term is ready; never a slave.
    pub fn is_writable(&self) -> bool {
        match self {
            Replication::Standalone | Replication::HaMaster { .. } => true,
            Replication::HaSlave(_) => false,
            Replication::Ledger(l) => l.is_writable(),
        }
    }

    /// The broker id registered with the NameServers: the configured one,
    /// or in ledger mode 0 for the leader and a fixed id > 0 for the others.
    pub fn registered_id(&self, configured: i64) -> i64 {
        match self {
            Replication::Ledger(l) if l.is_writable() => 0,
            Replication::Ledger(l) => l.follower_id,
            _ => configured,
        }
    }

    /// The role to report (`brokerRole` of the runtime info).
    pub fn role(&self, configured: BrokerRole) -> BrokerRole {
        match self {
            Replication::Ledger(l) if l.is_writable() => BrokerRole::SyncMaster,
            Replication::Ledger(_) => BrokerRole::Slave,
            _ => configured,
        }
    }

    /// The HA address slaves connect to, on a classic master.
    pub fn ha_master(&self) -> Option<&Arc<HaMaster>> {
        match self {
            Replication::HaMaster { ha, .. } => Some(ha),
            _ => None,
        }
    }

    /// The replication of a classic slave.
    pub fn ha_slave(&self) -> Option<&Arc<HaSlave>> {
        match self {
            Replication::HaSlave(s) => Some(s),
            _ => None,
        }
    }

    /// The ledger, in ledger mode.
    pub fn ledger(&self) -> Option<&Arc<LedgerMode>> {
        match self {
            Replication::Ledger(l) => Some(l),
            _ => None,
        }
    }

    /// Stores messages (all for one topic queue) as the mode requires and
    /// waits for what the producer asked: the local fsync (SYNC_FLUSH) and a
    /// slave's copy (SYNC_MASTER), or a ledger quorum.
    pub async fn put(
        &self,
        store: &MessageStore,
        drafts: &[RecordDraft<'_>],
        wait: PutWait,
    ) -> PutMessageResult {
        match self {
            Replication::Ledger(l) => {
                // The ledger shares the store's disk: refused as "disk full" alike.
                if let Some(refused) = store.disk_refusal() {
                    return refused;
                }
                l.put(drafts, wait.append_crc).await
            }
            Replication::HaSlave(_) => PutMessageResult::failed(
                PutMessageStatus::ServiceNotAvailable,
                "a slave does not take messages",
            ),
            Replication::Standalone | Replication::HaMaster { .. } => {
                let mut r = if drafts.len() == 1 {
                    store.put_message(&drafts[0])
                } else {
                    store.put_messages(drafts)
                };
                store.wait_durable(&mut r, wait.wait_store_msg_ok).await;
                self.wait_replicated(&mut r, wait).await;
                r
            }
        }
    }

    /// SYNC_MASTER: waits until a slave has what a put wrote.
    async fn wait_replicated(&self, r: &mut PutMessageResult, wait: PutWait) {
        let Replication::HaMaster { ha, sync: true } = self else {
            return;
        };
        if !wait.wait_store_msg_ok || r.status != PutMessageStatus::PutOk {
            return;
        }
        if let Some(a) = r.append.as_ref() {
            r.status = ha.wait_replicated(a.end_offset(), wait.sync_timeout).await;
        }
    }

    /// Tells whenever the broker starts or stops taking sends; None in
    /// the modes where that never changes.
    pub fn writable_changes(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.ledger().map(|l| l.writable_changes())
    }

    /// The log offset every record written so far ends at or below.
    pub fn written_end(&self, store: &MessageStore) -> i64 {
        match self {
            Replication::Ledger(l) => l.committed_end(),
            _ => store.commit_log().max_wrote_offset(),
        }
    }

    /// The log offset below which records survive a crash of this broker:
    /// the CommitLog's flushed offset; in ledger mode everything committed
    /// (a majority has it on disk).
    pub fn durable_end(&self, store: &MessageStore) -> i64 {
        match self {
            Replication::Ledger(_) => i64::MAX,
            _ => store.commit_log().flushed_offset(),
        }
    }

    /// On a broker taking sends: a log offset below which no write is still
    /// in flight and everything is dispatched (queues and index complete).
    /// None when the broker does not take sends or that takes longer than
    /// `timeout`.
    pub async fn settled_end(&self, store: &Arc<MessageStore>, timeout: Duration) -> Option<i64> {
        if !self.is_writable() {
            return None;
        }
        match self {
            Replication::Ledger(l) => l.settled_end(timeout).await,
            Replication::HaSlave(_) => None,
            Replication::Standalone | Replication::HaMaster { .. } => {
                let end = store.commit_log().max_wrote_offset();
                let s = Arc::clone(store);
                let done = tokio::task::spawn_blocking(move || s.wait_dispatched(end, timeout))
                    .await
                    .unwrap_or(false);
                done.then_some(end)
            }
        }
    }

    /// Entries the mode adds to GET_BROKER_RUNTIME_INFO.
    pub fn runtime_info(&self, store: &MessageStore) -> Vec<(String, String)> {
        let mut v = Vec::new();
        let max = store.commit_log().max_offset();
        match self {
            Replication::Standalone => {}
            Replication::Ledger(l) => v.extend(l.runtime_info()),
            Replication::HaMaster { ha, .. } => {
                let conns = ha.connections();
                v.push(("haConnections".to_string(), conns.len().to_string()));
                let acked = ha.acked_offset();
                v.push(("haSlaveAckOffset".to_string(), acked.to_string()));
                if !conns.is_empty() {
                    let lag = if acked >= 0 { max - acked } else { max };
                    v.push(("slaveFallBehindBytes".to_string(), lag.to_string()));
                }
            }
            Replication::HaSlave(s) => {
                v.push(("haMasterAddr".to_string(), s.master().unwrap_or_default()));
                v.push(("haConnected".to_string(), s.is_connected().to_string()));
                let master = s.master_offset.load(Ordering::Acquire);
                v.push(("haMasterOffset".to_string(), master.to_string()));
                v.push((
                    "slaveFallBehindBytes".to_string(),
                    (master - max).max(0).to_string(),
                ));
                if let Some(d) = s.diverged() {
                    v.push(("haDiverged".to_string(), d));
                }
            }
        }
        v
    }

    /// Stops replicating (before the store shuts down).
    pub async fn shutdown(&self, store: &Arc<MessageStore>) {
        match self {
            Replication::Standalone => {}
            Replication::HaMaster { ha, .. } => ha.shutdown(),
            Replication::HaSlave(s) => s.shutdown(),
            Replication::Ledger(l) => l.shutdown(store).await,
        }
    }
}
