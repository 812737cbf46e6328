//! Term, vote and leader: what a member persists, and how the core makes sure no
//! message leaves while a term or vote change is not yet durable.

use crate::protocol::NodeId;

use super::{LedgerCommand, LedgerCore, Role};

/// Term, vote and leader, persisted atomically.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HardState {
    pub term: i64,
    pub voted_for: Option<NodeId>,
    pub leader: Option<NodeId>,
}

/// What a member restarts with.
#[derive(Debug, Clone)]
pub struct CoreInit {
    pub hard_state: HardState,
    /// Committed index from the checkpoint (clamped to the log end by the core).
    pub committed_index: i64,
    /// Seed of the election-timeout jitter.
    pub seed: u64,
}

impl LedgerCore {
    /// Records a term/vote change; messages sent from now on wait until it is durable.
    pub(crate) fn set_term_vote(&mut self, term: i64, voted_for: Option<NodeId>) {
        assert!(
            term >= self.term,
            "member {}: term must never decrease ({} -> {term})",
            self.self_id,
            self.term
        );
        // One vote per term: once cast (or adopted from a leader), a term's
        // vote is never replaced, not even by "no vote".
        assert!(
            term > self.term || self.voted_for.is_none() || voted_for == self.voted_for,
            "member {}: second vote in term {term} ({:?} -> {voted_for:?})",
            self.self_id,
            self.voted_for
        );
        if term != self.term || voted_for != self.voted_for {
            self.term = term;
            self.voted_for = voted_for;
            self.blocking_version = self.state_version + 1;
            self.state_version += 1;
        }
    }

    /// Records a leader change (persisted, but not blocking messages).
    pub(crate) fn set_leader(&mut self, leader: Option<NodeId>) {
        if leader != self.leader {
            self.leader = leader;
            self.state_version += 1;
        }
    }

    pub(super) fn maybe_persist(&mut self) {
        if self.persist_in_flight.is_some() || self.state_version <= self.persisted_version {
            return;
        }
        let version = self.state_version;
        self.persist_in_flight = Some(version);
        self.out.push(LedgerCommand::PersistHardState {
            version,
            state: HardState {
                term: self.term,
                voted_for: self.voted_for.clone(),
                leader: self.leader.clone(),
            },
        });
    }

    pub(super) fn on_persisted(&mut self, version: u64) {
        if self.persist_in_flight == Some(version) {
            self.persist_in_flight = None;
        }
        if version > self.persisted_version {
            self.persisted_version = version;
        }
        // A candidate whose own vote just became durable may already hold a quorum.
        if self.role == Role::Candidate {
            self.check_election_won();
        }
    }
}
