//! What operators see of and do to a ledger-mode broker: the group status
//! LEDGER_STATUS answers, leadership transfer (LEDGER_TRANSFER) and the
//! runtime-info entries `basalt admin cluster` shows.

use std::collections::BTreeMap;
use std::time::Duration;

use basalt_ledger::{LedgerError, LedgerStatus, NodeId, Role};
use basalt_remoting::protocol::{LedgerGroupStatus, LedgerPeerStatus};

use super::LedgerMode;

/// Longest a transfer request waits for the leader to step down.
const TRANSFER_WAIT: Duration = Duration::from_secs(10);

/// The upper-case role name operators see.
pub(crate) fn role_name(role: Role) -> &'static str {
    match role {
        Role::Leader => "LEADER",
        Role::Candidate => "CANDIDATE",
        Role::PreCandidate => "PRECANDIDATE",
        Role::Follower => "FOLLOWER",
    }
}

/// Match index and lag of every member, by id; on a member that does not
/// lead only its own entry is known (the others are -1).
fn peer_progress(
    s: &LedgerStatus,
    self_id: &NodeId,
    peers: &BTreeMap<NodeId, String>,
) -> Vec<LedgerPeerStatus> {
    let leads = s.role == Role::Leader;
    peers
        .iter()
        .map(|(id, addr)| {
            let m = if id == self_id {
                if leads { s.ledger_end_index } else { -1 }
            } else {
                s.follower_match.get(id).copied().unwrap_or(-1)
            };
            let lag = if leads {
                (s.ledger_end_index - m).max(0)
            } else {
                -1
            };
            LedgerPeerStatus {
                id: id.to_string(),
                addr: addr.clone(),
                match_index: if leads { m } else { -1 },
                lag,
            }
        })
        .collect()
}

impl LedgerMode {
    /// This member's state and what it knows of its group.
    pub fn group_status(&self) -> LedgerGroupStatus {
        let s = self.status();
        let cfg = self.handle.config();
        LedgerGroupStatus {
            group: cfg.group.clone(),
            self_id: self.self_id.to_string(),
            role: role_name(s.role).to_string(),
            term: s.term,
            leader_id: s
                .leader_id
                .as_ref()
                .map(|l| l.to_string())
                .unwrap_or_default(),
            transferee_id: s
                .transferee
                .as_ref()
                .map(|t| t.to_string())
                .unwrap_or_default(),
            preferred_leader_id: cfg
                .preferred_leader
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            begin_index: s.ledger_begin_index,
            end_index: s.ledger_end_index,
            committed_index: s.committed_index,
            dispatched_index: self.dispatched_index(),
            writable: self.is_writable(),
            poisoned: s.poisoned,
            peers: peer_progress(&s, &self.self_id, &cfg.peers),
        }
    }

    /// Hands leadership to `to` (this member must lead). Resolves once this
    /// member has stepped down, or with why the transfer failed.
    pub async fn transfer_leadership(&self, to: &str) -> Result<(), String> {
        let cfg = self.handle.config();
        let to = NodeId::new(to);
        if !cfg.peers.contains_key(&to) {
            return Err(format!(
                "{to} is not a member of ledger group {}",
                cfg.group
            ));
        }
        let s = self.status();
        if s.role != Role::Leader {
            return Err(format!(
                "{} does not lead ledger group {} (leader: {})",
                self.self_id,
                cfg.group,
                s.leader_id
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| "none".into())
            ));
        }
        tracing::info!(member = %self.self_id, term = s.term, to = %to, "leadership transfer requested by an operator");
        match tokio::time::timeout(TRANSFER_WAIT, self.handle.transfer_leadership(to.clone())).await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(LedgerError::Transfer(e))) => Err(format!("transfer to {to} failed: {e}")),
            Ok(Err(e)) => Err(format!("transfer to {to} failed: {e}")),
            Err(_) => Err(format!(
                "transfer to {to} did not finish within {TRANSFER_WAIT:?}"
            )),
        }
    }

    /// `id:match/lag` of every follower, on a leader (empty otherwise).
    pub(crate) fn follower_lags(&self) -> String {
        let s = self.status();
        if s.role != Role::Leader {
            return String::new();
        }
        s.follower_match
            .iter()
            .map(|(id, m)| format!("{id}:{}", (s.ledger_end_index - m).max(0)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(role: Role, end: i64, matches: &[(&str, i64)]) -> LedgerStatus {
        LedgerStatus {
            role,
            term: 2,
            leader_id: Some(NodeId::new("n0")),
            leader_addr: None,
            ledger_begin_index: 0,
            ledger_end_index: end,
            committed_index: end,
            committed_pos: 0,
            leader_ready: true,
            poisoned: false,
            follower_match: matches.iter().map(|(p, m)| (NodeId::new(p), *m)).collect(),
            transferee: None,
        }
    }

    fn peers() -> BTreeMap<NodeId, String> {
        ["n0", "n1", "n2"]
            .iter()
            .map(|p| (NodeId::new(p), format!("{p}:1")))
            .collect()
    }

    #[test]
    fn a_leader_reports_every_members_match_and_lag() {
        let s = status(Role::Leader, 10, &[("n1", 10), ("n2", 4)]);
        let p = peer_progress(&s, &NodeId::new("n0"), &peers());
        let got: Vec<_> = p
            .iter()
            .map(|p| (p.id.as_str(), p.match_index, p.lag))
            .collect();
        assert_eq!(got, vec![("n0", 10, 0), ("n1", 10, 0), ("n2", 4, 6)]);
    }

    #[test]
    fn a_follower_knows_no_match_indexes() {
        let s = status(Role::Follower, 10, &[]);
        let p = peer_progress(&s, &NodeId::new("n1"), &peers());
        assert!(p.iter().all(|p| p.match_index == -1 && p.lag == -1));
        assert_eq!(p.len(), 3);
    }
}
