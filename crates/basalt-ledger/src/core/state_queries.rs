//! Read-only queries on a [`LedgerCore`]: role, term, indexes, what the leader
//! knows of its followers, and when the core next needs a tick.

use std::collections::BTreeMap;

use crate::protocol::NodeId;

use super::{LedgerCore, Role};

impl LedgerCore {
    pub fn role(&self) -> Role {
        self.role
    }

    pub fn term(&self) -> i64 {
        self.term
    }

    pub fn voted_for(&self) -> Option<&NodeId> {
        self.voted_for.as_ref()
    }

    pub fn leader_id(&self) -> Option<&NodeId> {
        self.leader.as_ref()
    }

    pub fn self_id(&self) -> &NodeId {
        &self.self_id
    }

    pub fn committed_index(&self) -> i64 {
        self.committed_index
    }

    pub fn durable_index(&self) -> i64 {
        self.durable_index
    }

    pub fn end_index(&self) -> i64 {
        self.end_index
    }

    pub fn end_term(&self) -> i64 {
        self.end_term
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// True on a leader whose term has committed at least one entry (its no-op):
    /// everything earlier terms left in its log is committed too.
    pub fn leader_ready(&self) -> bool {
        self.role == Role::Leader
            && self
                .leader_state
                .as_ref()
                .is_some_and(|ls| self.committed_index >= ls.term_start_index)
    }

    /// Highest index each peer is known to hold durably in this term (leader only).
    pub fn peer_watermarks(&self) -> Option<BTreeMap<NodeId, i64>> {
        self.leader_state.as_ref().map(|ls| {
            ls.dispatchers
                .iter()
                .map(|(p, d)| (p.clone(), d.watermark))
                .collect()
        })
    }

    /// One line per follower describing its dispatcher (leader only), for logs and
    /// debugging.
    pub fn dispatcher_summary(&self) -> Vec<String> {
        self.leader_state
            .as_ref()
            .map(|ls| {
                ls.dispatchers
                    .values()
                    .map(|d| {
                        format!(
                            "{}:{:?} cmp={} write={} mark={} pending={:?} inflight={:?}",
                            d.peer,
                            d.state,
                            d.compare_index,
                            d.write_index,
                            d.watermark,
                            d.pending.iter().take(4).collect::<Vec<_>>(),
                            d.inflight
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The leadership transfer target while one is in progress.
    pub fn transferee(&self) -> Option<&NodeId> {
        self.leader_state
            .as_ref()
            .and_then(|ls| ls.transfer.as_ref())
            .map(|t| &t.target)
    }

    /// The earliest time at which the core needs a [`Event::Tick`](super::Event::Tick).
    pub fn next_deadline(&self) -> u64 {
        let mut d = u64::MAX;
        match self.role {
            Role::Leader => {
                if let Some(ls) = &self.leader_state {
                    d = d.min(ls.next_heartbeat);
                    for disp in ls.dispatchers.values() {
                        d = d.min(disp.next_deadline(&self.cfg));
                    }
                    if let Some((_, w)) = ls.waiters.iter().next() {
                        d = d.min(w.deadline);
                    }
                    if let Some(t) = &ls.transfer {
                        d = d.min(t.deadline);
                    }
                }
            }
            _ => {
                if !self.poisoned {
                    d = d.min(self.election_deadline);
                }
                if let Some(h) = self.handler.next_deadline(&self.cfg) {
                    d = d.min(h);
                }
            }
        }
        d
    }
}
