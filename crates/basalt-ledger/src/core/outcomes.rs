//! What callers are told: a committed append's receipt, and why an append or a
//! leadership transfer failed.

use crate::protocol::NodeId;

/// Why a ledger append was not (or may not have been) committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerAppendError {
    /// Not written: this member is not the leader. Safe to retry at `leader_id`.
    #[error("not leader (leader: {leader_id:?})")]
    NotLeader { leader_id: Option<NodeId> },
    /// Not written: the leader is handing over leadership.
    #[error("leadership transfer in progress")]
    Transferring,
    /// Not written: too many appends are waiting for commit.
    #[error("too many pending appends")]
    Busy,
    /// Not written: an entry does not fit a data file.
    #[error("entry of {body_len} bytes exceeds the maximum {max}")]
    TooLarge { body_len: u64, max: u64 },
    /// Not written: the local store failed and refuses writes.
    #[error("store poisoned by an earlier I/O failure")]
    Poisoned,
    /// Written, but leadership was lost before it committed. It may still commit
    /// under the new leader: the outcome is unknown.
    #[error("leadership lost before commit (outcome unknown)")]
    LeadershipLost,
    /// Written, but not committed in time. It may still commit: the outcome is unknown.
    #[error("not committed within the wait time (outcome unknown)")]
    Timeout,
}

/// A committed append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendReceipt {
    pub term: i64,
    pub first_index: i64,
    pub last_index: i64,
}

/// Why a leadership transfer failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("not leader")]
    NotLeader,
    #[error("{0} is not a member of the group")]
    UnknownMember(NodeId),
    #[error("a transfer is already in progress")]
    InProgress,
    #[error("transferee is {0} entries behind")]
    FallBehind(i64),
    #[error("transfer did not complete in time")]
    Timeout,
    #[error("transferee refused: {0}")]
    Refused(String),
}
