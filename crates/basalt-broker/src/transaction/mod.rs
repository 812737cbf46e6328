//! Transactional messages, RocketMQ's two-phase send
//! (docs/protocol.md#transactions):
//!
//! 1. the producer sends a half message (`TRAN_MSG=true`); the send path
//!    stores it in `RMQ_SYS_TRANS_HALF_TOPIC` ([`messages::half_properties`]),
//!    where no consumer of the real topic sees it;
//! 2. the producer ends the transaction (END_TRANSACTION, [`end`]): a commit
//!    stores the message in its real topic, a rollback stores nothing; either
//!    way an op message in `RMQ_SYS_TRANS_OP_HALF_TOPIC` records that the
//!    half is resolved;
//! 3. the check service ([`check`]) reads the half queue from its progress,
//!    passes over halves an op resolved, and asks a producer of the group
//!    (CHECK_TRANSACTION_STATE) about each half still open after
//!    `transactionTimeOut`, putting a copy of it at the end of the half queue
//!    first; after `transactionCheckMax` checks the half goes to
//!    `TRANS_CHECK_MAX_TIME_TOPIC`.
//!
//! Everything that must survive a restart or a fail-over is in the log: the
//! halves, the committed messages, the ops. The check's progress is the
//! offset of group `CID_RMQ_SYS_TRANS` on the half and op queues, so a lost
//! progress only means some halves are looked at again. [`decisions`] keeps
//! the lately decided transactions so that a second END_TRANSACTION for one
//! does not store the message twice; after a restart, the index says whether
//! a commit is already stored.

pub(crate) mod check;
pub(crate) mod decisions;
pub(crate) mod end;
pub(crate) mod list;
pub(crate) mod messages;
mod ops;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use basalt_common::constants::{group, topic as reserved};
use basalt_common::msgid::UniqKeyGenerator;
use basalt_common::record::RecordDraft;
use basalt_common::time::now_millis;
use basalt_store::{MessageStore, PutMessageResult};
use bytes::Bytes;

use self::decisions::Decisions;
use self::messages::{StoredAt, op_body, op_properties};
use crate::clients::registry::ClientManager;
use crate::config::BrokerConfig;
use crate::metadata::offsets::ConsumerOffsetManager;
use crate::metadata::topics::TopicConfigManager;
use crate::registration::Registrar;
use crate::writer::MessageWriter;

/// Transaction counters for the runtime info.
#[derive(Debug, Default)]
pub struct TransactionStats {
    pub commits: AtomicU64,
    pub rollbacks: AtomicU64,
    pub checks: AtomicU64,
    pub discards: AtomicU64,
}

/// What a half queue holds at an offset.
#[derive(Debug)]
pub(crate) enum HalfAt {
    Record(Bytes),
    /// The unit or its record is gone (expired) or unusable.
    Gone,
    /// Past the last half message.
    End,
}

/// The transaction service: ends transactions, checks open ones back with
/// their producers, lists them. Owns the recent decisions; everything else
/// it works on is shared with the rest of the broker.
#[derive(Debug)]
pub struct Transactions {
    pub(crate) config: Arc<BrokerConfig>,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) writer: MessageWriter,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) registrar: Arc<Registrar>,
    pub(crate) clients: Arc<ClientManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
    pub(crate) uniq: Arc<UniqKeyGenerator>,
    pub(crate) decisions: Decisions,
    pub(crate) stats: TransactionStats,
    pub(crate) shutting_down: Arc<AtomicBool>,
}

impl Transactions {
    /// Remembers decisions for two check rounds plus the timeout, and never
    /// less than a minute: a copy put back before a decision is met by the
    /// check within that time.
    pub(crate) fn decision_retention(config: &BrokerConfig) -> Duration {
        (config.transaction_check_interval * 2 + config.transaction_timeout)
            .max(Duration::from_secs(60))
    }

    fn store_host(&self) -> SocketAddr {
        self.config.broker_addr()
    }

    /// Stores one record through the replication mode, waiting for the
    /// durability the mode gives (the fsync under SYNC_FLUSH, a slave under
    /// SYNC_MASTER, the quorum in ledger mode).
    async fn put(&self, draft: RecordDraft<'_>) -> PutMessageResult {
        self.writer.put(&[draft], true).await
    }

    /// Records that the half at `half_offset` of half queue `queue_id` is
    /// resolved: an op message in the op queue of the same id.
    pub(crate) async fn write_op(&self, queue_id: i32, half_offset: i64) -> Result<(), String> {
        let body = op_body(&[half_offset]);
        let props = op_properties(&self.uniq.next_key());
        let host = self.store_host();
        let draft = RecordDraft {
            topic: reserved::TRANS_OP_HALF_TOPIC,
            queue_id,
            flag: 0,
            sys_flag: 0,
            born_timestamp: now_millis(),
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &body,
            properties: &props,
        };
        let r = self.put(draft).await;
        if r.status.is_stored() {
            Ok(())
        } else {
            Err(format!("{}: {}", r.status, r.detail.unwrap_or_default()))
        }
    }

    /// Where the check has read queue `queue_id` of `topic` up to (its first
    /// offset when it never has).
    fn progress(&self, topic: &str, queue_id: i32) -> i64 {
        let min = self.store.min_offset_in_queue(topic, queue_id);
        self.offsets
            .query(group::TRANSACTION_CHECK, topic, queue_id)
            .unwrap_or(min)
            .max(min)
    }

    fn set_progress(&self, topic: &str, queue_id: i32, offset: i64) {
        self.offsets
            .commit(group::TRANSACTION_CHECK, topic, queue_id, offset);
    }

    /// The half message at `offset` of half queue `queue_id`.
    pub(crate) fn half_at(&self, queue_id: i32, offset: i64) -> HalfAt {
        let Some(cq) = self
            .store
            .get_consume_queue(reserved::TRANS_HALF_TOPIC, queue_id)
        else {
            return HalfAt::End;
        };
        if offset >= cq.max_offset() {
            return HalfAt::End;
        }
        let record = cq
            .unit_at(offset)
            .filter(|u| u.is_valid() && !u.is_filler())
            .and_then(|u| {
                self.store
                    .log()
                    .read_bytes(u.physical_offset, u.size as usize)
            });
        match record {
            Some(b) => HalfAt::Record(b),
            None => HalfAt::Gone,
        }
    }

    /// Queues of the half topic.
    fn half_queues(&self) -> i32 {
        self.topics
            .get(reserved::TRANS_HALF_TOPIC)
            .map(|t| t.read_queue_nums.max(t.write_queue_nums))
            .unwrap_or(1)
            .max(1)
    }

    /// Entries for GET_BROKER_RUNTIME_INFO.
    pub(crate) fn runtime_info(&self) -> Vec<(String, String)> {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed).to_string();
        let mut behind = 0;
        for q in 0..self.half_queues() {
            let max = self
                .store
                .max_offset_in_queue(reserved::TRANS_HALF_TOPIC, q);
            behind += (max - self.progress(reserved::TRANS_HALF_TOPIC, q)).max(0);
        }
        vec![
            ("transactionCommitTotal".into(), load(&self.stats.commits)),
            (
                "transactionRollbackTotal".into(),
                load(&self.stats.rollbacks),
            ),
            ("transactionCheckTotal".into(), load(&self.stats.checks)),
            ("transactionDiscardTotal".into(), load(&self.stats.discards)),
            ("transactionHalfUnchecked".into(), behind.to_string()),
        ]
    }
}

impl StoredAt {
    /// Where a stored put went (its first record).
    pub(crate) fn of(r: &PutMessageResult) -> Option<StoredAt> {
        let a = r.append.as_ref().filter(|_| r.status.is_stored())?;
        Some(StoredAt {
            queue_offset: a.queue_offset,
            commit_log_offset: a.wrote_offset,
            store_timestamp: a.store_timestamp,
        })
    }
}
