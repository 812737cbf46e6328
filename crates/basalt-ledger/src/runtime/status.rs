//! [`LedgerStatus`]: what a member is and has, computed from the core and the
//! store and published on a watch channel after every step that changes it.

use std::collections::BTreeMap;

use super::Runtime;
use crate::config::LedgerConfig;
use crate::core::{LedgerCore, LogRead, Role};
use crate::protocol::NodeId;
use crate::store::{LedgerReader, LedgerStore};

/// What a member is and has, published after every step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerStatus {
    pub role: Role,
    pub term: i64,
    pub leader_id: Option<NodeId>,
    pub leader_addr: Option<String>,
    pub ledger_begin_index: i64,
    pub ledger_end_index: i64,
    pub committed_index: i64,
    /// Byte position just past the last committed entry.
    pub committed_pos: i64,
    /// A leader whose term has committed its first entry: everything in its log
    /// is committed, so it can serve as master (RocketMQ waits for this before
    /// switching a DLedger broker to master).
    pub leader_ready: bool,
    pub poisoned: bool,
    /// On a leader: the highest index each follower holds durably and
    /// identically in this term (its match index; -1 until known). Empty on
    /// every other member.
    pub follower_match: BTreeMap<NodeId, i64>,
    /// On a leader handing over: the member it transfers leadership to.
    pub transferee: Option<NodeId>,
}

pub(super) fn status_of(
    config: &LedgerConfig,
    core: &LedgerCore,
    store: &LedgerStore,
    reader: &LedgerReader,
) -> LedgerStatus {
    let leader_id = core.leader_id().cloned();
    LedgerStatus {
        role: core.role(),
        term: core.term(),
        leader_addr: leader_id
            .as_ref()
            .and_then(|l| config.peers.get(l).cloned()),
        leader_id,
        ledger_begin_index: store.begin_index(),
        ledger_end_index: store.end_index(),
        committed_index: core.committed_index(),
        committed_pos: reader.committed_pos(),
        leader_ready: core.leader_ready(),
        poisoned: core.is_poisoned() || store.is_poisoned(),
        follower_match: core.peer_watermarks().unwrap_or_default(),
        transferee: core.transferee().cloned(),
    }
}

impl Runtime {
    pub(super) fn publish(&mut self) {
        let s = status_of(&self.config, &self.core, &self.store, &self.reader);
        let member = &self.config.self_id;
        self.status_tx.send_if_modified(|old| {
            if old.role != s.role || old.leader_id != s.leader_id || old.term != s.term {
                // Leadership changes are what operators look for first.
                tracing::info!(%member, role = ?s.role, term = s.term,
                    leader = ?s.leader_id, committed = s.committed_index,
                    "ledger role or leader changed");
            }
            if *old != s {
                *old = s;
                true
            } else {
                false
            }
        });
    }
}
