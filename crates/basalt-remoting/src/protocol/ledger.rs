//! The body of Basalt's LEDGER_STATUS answer: one ledger-mode broker's view
//! of its DLedger group (docs/ledger-protocol.md#operations).

use serde::{Deserialize, Serialize};

/// One member of the group as the answering broker sees it. `match_index`
/// and `lag` are known only when the answering broker leads (-1 otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct LedgerPeerStatus {
    pub id: String,
    /// The member's ledger RPC address (`dLegerPeers`).
    pub addr: String,
    /// The highest index the leader knows the member holds durably and
    /// identically in this term (the leader's own: its end index).
    pub match_index: i64,
    /// Entries the member is behind the leader's end (`end - match`).
    pub lag: i64,
}

/// A ledger-mode broker's state and what it knows of its group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct LedgerGroupStatus {
    pub group: String,
    pub self_id: String,
    /// `LEADER`, `CANDIDATE`, `PRECANDIDATE` or `FOLLOWER`.
    pub role: String,
    pub term: i64,
    /// The leader this member knows in its term; empty when none.
    pub leader_id: String,
    /// Member the leader is handing leadership to; empty when none.
    pub transferee_id: String,
    pub preferred_leader_id: String,
    pub begin_index: i64,
    pub end_index: i64,
    pub committed_index: i64,
    /// Next index this member dispatches into its ConsumeQueues.
    pub dispatched_index: i64,
    /// This member takes sends (it is the ready leader).
    pub writable: bool,
    pub poisoned: bool,
    /// Every member, this one included, by id.
    pub peers: Vec<LedgerPeerStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_camel_case_keys() {
        let s = LedgerGroupStatus {
            group: "lb".into(),
            self_id: "n0".into(),
            role: "LEADER".into(),
            term: 3,
            leader_id: "n0".into(),
            committed_index: 9,
            peers: vec![LedgerPeerStatus {
                id: "n1".into(),
                addr: "127.0.0.1:40911".into(),
                match_index: 7,
                lag: 2,
            }],
            ..Default::default()
        };
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"committedIndex\":9"), "{json}");
        assert!(json.contains("\"matchIndex\":7"), "{json}");
        let back: LedgerGroupStatus = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        // Missing keys take their defaults (older or newer brokers).
        let partial: LedgerGroupStatus = serde_json::from_str("{\"term\":1}").unwrap();
        assert_eq!(partial.term, 1);
    }
}
