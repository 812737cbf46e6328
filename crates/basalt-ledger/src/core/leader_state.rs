//! What a member keeps only while it leads: its dispatchers, the appends waiting
//! for commit, and a leadership transfer in progress.

use std::collections::BTreeMap;

use crate::protocol::{NodeId, RequestId};

use super::{ClientId, EntryDispatcher};

/// Who asked for a leadership transfer.
#[derive(Debug, Clone)]
pub(crate) enum Requester {
    Local(ClientId),
    Rpc {
        to: NodeId,
        id: RequestId,
    },
    /// Started by the leader itself (preferred leader).
    Auto,
}

/// A leadership transfer in progress on the leader.
#[derive(Debug, Clone)]
pub(crate) struct Transfer {
    pub(crate) target: NodeId,
    pub(crate) deadline: u64,
    pub(crate) requester: Requester,
    /// The "elect yourself now" request was sent.
    pub(crate) take_sent: bool,
}

/// An append waiting for commit.
#[derive(Debug, Clone)]
pub(crate) struct Waiter {
    pub(crate) client: ClientId,
    pub(crate) first_index: i64,
    pub(crate) deadline: u64,
}

/// State a member keeps only while it leads.
#[derive(Debug)]
pub(crate) struct LeaderState {
    pub(crate) dispatchers: BTreeMap<NodeId, EntryDispatcher>,
    /// Last time each peer answered anything in this term.
    pub(crate) last_ack: BTreeMap<NodeId, u64>,
    /// Appends waiting for commit, by last index.
    pub(crate) waiters: BTreeMap<i64, Waiter>,
    pub(crate) next_heartbeat: u64,
    pub(crate) transfer: Option<Transfer>,
    /// No automatic (preferred-leader) transfer before this time.
    pub(crate) auto_transfer_after: u64,
    /// Index of this term's no-op, the first entry of the term.
    pub(crate) term_start_index: i64,
}
