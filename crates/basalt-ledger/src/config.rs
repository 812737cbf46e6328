//! [`LedgerConfig`]: everything a ledger member needs to know, with DLedger's
//! defaults (`DLedgerConfig`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::entry::{BLANK_LEN, HEADER_SIZE, INDEX_UNIT_SIZE};
use crate::protocol::NodeId;

/// When an append counts as acknowledged by a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// A member acknowledges an entry only after it is fsynced (the leader counts
    /// itself only after its own fsync). An acknowledged append survives the loss of
    /// any minority of members, power loss included. The default.
    Durable,
    /// A member acknowledges an entry once it is written to its page cache. Faster;
    /// an acknowledged append can be lost if a majority loses power at once. Only for
    /// operators who choose it explicitly.
    Memory,
}

/// Configuration of one ledger member. Field names follow `DLedgerConfig`.
///
/// Invariant checked by [`LedgerConfig::validate`]: `self_id` is one of `peers`, the
/// file sizes leave room for at least one entry, the vote interval range is not
/// empty. All members of a group must use the same `data_file_size` (entry
/// positions are identical on every member).
#[derive(Debug, Clone)]
pub struct LedgerConfig {
    /// DLedger group name (RocketMQ: the broker name).
    pub group: String,
    /// This member's id.
    pub self_id: NodeId,
    /// All members (self included): id → `host:port` of its ledger RPC listener.
    pub peers: BTreeMap<NodeId, String>,
    /// Directory holding `data/`, `index/`, `checkpoint` and `currterm`
    /// (RocketMQ: `{storePathRootDir}/dledger-{selfId}`).
    pub data_dir: PathBuf,
    /// Leader heartbeat interval (`heartBeatTimeIntervalMs`, 2000).
    pub heartbeat_interval_ms: u64,
    /// Missed heartbeats before a follower campaigns and before a leader without a
    /// quorum steps down (`maxHeartBeatLeak`, 3).
    pub max_heartbeat_leak: u64,
    /// Random election delay range (`minVoteIntervalMs` 300, `maxVoteIntervalMs` 1000).
    pub min_vote_interval_ms: u64,
    pub max_vote_interval_ms: u64,
    /// In-flight APPEND requests per follower (`maxPendingSize`, 1000).
    pub max_pending_per_peer: usize,
    /// Entry bytes of the APPEND requests in flight to one follower (Basalt's
    /// pipelining window, 4 MiB; DLedger limits only the count). At least one
    /// request is always allowed.
    pub max_push_window_bytes: u64,
    /// Offer Basalt's binary entry push on each new connection (true); a peer that
    /// does not take it (DLedger) gets JSON. False sends JSON to everyone.
    pub binary_push: bool,
    /// Resend an unacknowledged APPEND after this long (`maxPushTimeOutMs`, 1000).
    pub max_push_timeout_ms: u64,
    /// Resend an unanswered COMPARE/TRUNCATE after this long (DLedger waits 3 s).
    pub compare_timeout_ms: u64,
    /// Minimum gap between stand-alone COMMIT pushes to an idle follower (1000).
    pub commit_push_interval_ms: u64,
    /// How long a follower keeps an APPEND that does not follow its log end before it
    /// answers INCONSISTENT_STATE (DLedger's 1 s `TimeoutFuture`).
    pub follower_push_wait_ms: u64,
    /// Push several entries per APPEND (`isEnableBatchPush`). Basalt's default is
    /// true (DLedger's is false): a batch holds only entries already written, so
    /// it costs no latency and saves a request per entry.
    pub enable_batch_push: bool,
    /// Bytes per batch APPEND (`maxBatchPushSize`; Basalt 64 KiB, DLedger 4 KiB).
    pub max_batch_push_size: usize,
    /// Catch-up bandwidth per follower in bytes/s (`peerPushQuota`, 20 MiB).
    pub peer_push_quota: u64,
    /// The quota applies only to a follower more than this many bytes behind
    /// (`peerPushThrottlePoint`, 300 MiB).
    pub peer_push_throttle_point: u64,
    /// An append not committed within this time fails with `Timeout`
    /// (`maxWaitAckTimeMs`, 2500).
    pub max_wait_ack_ms: u64,
    /// Appends waiting for commit before new ones are refused
    /// (`maxPendingRequestsNum`, 10000).
    pub max_pending_requests: usize,
    /// Durable (default) or in-memory acknowledgement.
    pub ack_mode: AckMode,
    /// Member that should lead whenever it is healthy (`preferredLeaderIds`).
    pub preferred_leader: Option<NodeId>,
    /// A transferee may be at most this many entries behind
    /// (`maxLeadershipTransferWaitIndex`, 1000).
    pub max_leadership_transfer_wait_index: i64,
    /// A leadership transfer that has not completed after this long is abandoned and
    /// the leader accepts appends again.
    pub leadership_transfer_timeout_ms: u64,
    /// Size of each data file (`mappedFileSizeForEntryData`, 1 GiB).
    pub data_file_size: i64,
    /// Size of each index file (`mappedFileSizeForEntryIndex`, 32 × 5 Mi).
    pub index_file_size: i64,
    /// How often the `checkpoint` file is rewritten when something changed.
    pub checkpoint_interval_ms: u64,
    /// Largest entry body accepted (8 MiB): a push carries it base64-encoded in
    /// one remoting frame, which is limited to 16 MiB.
    pub max_entry_body: u64,
    /// What the member's listener does with each connection before its
    /// first frame: TLS and the cluster-secret handshake (docs/tls.md).
    /// None: plain and open, as DLedger.
    pub server_security: Option<std::sync::Arc<basalt_tls::ServerSecurity>>,
    /// The same for the member's connections to its peers.
    pub client_security: Option<std::sync::Arc<basalt_tls::ClientSecurity>>,
}

impl LedgerConfig {
    /// A configuration with DLedger's defaults.
    pub fn new(
        group: impl Into<String>,
        self_id: impl Into<NodeId>,
        peers: BTreeMap<NodeId, String>,
        data_dir: impl Into<PathBuf>,
    ) -> LedgerConfig {
        LedgerConfig {
            group: group.into(),
            self_id: self_id.into(),
            peers,
            data_dir: data_dir.into(),
            heartbeat_interval_ms: 2000,
            max_heartbeat_leak: 3,
            min_vote_interval_ms: 300,
            max_vote_interval_ms: 1000,
            max_pending_per_peer: 1000,
            max_push_window_bytes: 4 * 1024 * 1024,
            binary_push: true,
            max_push_timeout_ms: 1000,
            compare_timeout_ms: 3000,
            commit_push_interval_ms: 1000,
            follower_push_wait_ms: 1000,
            enable_batch_push: true,
            max_batch_push_size: 64 * 1024,
            peer_push_quota: 20 * 1024 * 1024,
            peer_push_throttle_point: 300 * 1024 * 1024,
            max_wait_ack_ms: 2500,
            max_pending_requests: 10_000,
            ack_mode: AckMode::Durable,
            preferred_leader: None,
            max_leadership_transfer_wait_index: 1000,
            leadership_transfer_timeout_ms: 6000,
            data_file_size: 1024 * 1024 * 1024,
            index_file_size: INDEX_UNIT_SIZE as i64 * 5 * 1024 * 1024,
            checkpoint_interval_ms: 1000,
            max_entry_body: 8 * 1024 * 1024,
            server_security: None,
            client_security: None,
        }
    }

    /// Parses DLedger's `peers` string: `n0-host:port;n1-host:port;…`.
    pub fn parse_peers(peers: &str) -> Result<BTreeMap<NodeId, String>, String> {
        let mut map = BTreeMap::new();
        for part in peers.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((id, addr)) = part.split_once('-') else {
                return Err(format!("peer {part:?} is not id-host:port"));
            };
            if id.is_empty() || addr.is_empty() {
                return Err(format!("peer {part:?} is not id-host:port"));
            }
            if map.insert(NodeId::new(id), addr.to_string()).is_some() {
                return Err(format!("peer id {id:?} appears twice"));
            }
        }
        Ok(map)
    }

    /// Checks the invariants listed on the type.
    pub fn validate(&self) -> Result<(), String> {
        if !self.peers.contains_key(&self.self_id) {
            return Err(format!("self id {} is not among the peers", self.self_id));
        }
        if self.data_file_size < (HEADER_SIZE as i64 + BLANK_LEN) * 2 {
            return Err(format!(
                "data file size {} is too small",
                self.data_file_size
            ));
        }
        if self.index_file_size < INDEX_UNIT_SIZE as i64
            || self.index_file_size % INDEX_UNIT_SIZE as i64 != 0
        {
            return Err(format!(
                "index file size {} must be a positive multiple of {INDEX_UNIT_SIZE}",
                self.index_file_size
            ));
        }
        if self.min_vote_interval_ms >= self.max_vote_interval_ms {
            return Err("min_vote_interval_ms must be below max_vote_interval_ms".into());
        }
        if self.heartbeat_interval_ms == 0 || self.max_heartbeat_leak == 0 {
            return Err("heartbeat interval and leak must be positive".into());
        }
        if self.max_pending_per_peer == 0 || self.max_pending_requests == 0 {
            return Err("pending limits must be positive".into());
        }
        if let Some(p) = &self.preferred_leader
            && !self.peers.contains_key(p)
        {
            return Err(format!("preferred leader {p} is not among the peers"));
        }
        Ok(())
    }

    /// Votes needed for a majority of the group.
    pub fn quorum(&self) -> usize {
        self.peers.len() / 2 + 1
    }

    /// How long a member trusts a leader it has not heard from.
    pub fn leader_lease_ms(&self) -> u64 {
        self.heartbeat_interval_ms * self.max_heartbeat_leak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dledger_peer_strings() {
        let p = LedgerConfig::parse_peers("n0-127.0.0.1:20911;n1-127.0.0.1:20912").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[&NodeId::new("n1")], "127.0.0.1:20912");
        assert!(LedgerConfig::parse_peers("n0").is_err());
        assert!(LedgerConfig::parse_peers("n0-a:1;n0-b:2").is_err());
    }

    #[test]
    fn validate_checks_membership_and_sizes() {
        let peers = LedgerConfig::parse_peers("n0-a:1;n1-b:2;n2-c:3").unwrap();
        let mut c = LedgerConfig::new("g", "n0", peers, "/tmp/x");
        c.validate().unwrap();
        assert_eq!(c.quorum(), 2);
        c.self_id = NodeId::new("n9");
        assert!(c.validate().is_err());
        c.self_id = NodeId::new("n0");
        c.index_file_size = 33;
        assert!(c.validate().is_err());
    }
}
