//! The configuration values the core reads on every step, copied out of
//! [`LedgerConfig`] once.

use crate::config::{AckMode, LedgerConfig};
use crate::protocol::NodeId;

/// The configuration values the core uses, copied out of [`LedgerConfig`].
#[derive(Debug, Clone)]
pub(crate) struct CoreTimings {
    pub(crate) heartbeat_interval: u64,
    pub(crate) lease: u64,
    pub(crate) min_vote: u64,
    pub(crate) max_vote: u64,
    pub(crate) max_pending_per_peer: usize,
    pub(crate) max_push_window_bytes: u64,
    pub(crate) max_push_timeout: u64,
    pub(crate) compare_timeout: u64,
    pub(crate) commit_push_interval: u64,
    pub(crate) follower_push_wait: u64,
    pub(crate) batch_push: bool,
    pub(crate) max_batch_push_size: usize,
    pub(crate) peer_push_quota: u64,
    pub(crate) peer_push_throttle_point: u64,
    pub(crate) max_wait_ack: u64,
    pub(crate) max_pending_requests: usize,
    pub(crate) ack_mode: AckMode,
    pub(crate) preferred_leader: Option<NodeId>,
    pub(crate) max_transfer_wait_index: i64,
    pub(crate) transfer_timeout: u64,
    pub(crate) data_file_size: i64,
    pub(crate) max_entry_body: u64,
    pub(crate) quorum: usize,
}

impl CoreTimings {
    pub(super) fn from_config(c: &LedgerConfig) -> CoreTimings {
        CoreTimings {
            heartbeat_interval: c.heartbeat_interval_ms,
            lease: c.leader_lease_ms(),
            min_vote: c.min_vote_interval_ms,
            max_vote: c.max_vote_interval_ms,
            max_pending_per_peer: c.max_pending_per_peer,
            max_push_window_bytes: c.max_push_window_bytes,
            max_push_timeout: c.max_push_timeout_ms,
            compare_timeout: c.compare_timeout_ms,
            commit_push_interval: c.commit_push_interval_ms,
            follower_push_wait: c.follower_push_wait_ms,
            batch_push: c.enable_batch_push,
            max_batch_push_size: c.max_batch_push_size,
            peer_push_quota: c.peer_push_quota,
            peer_push_throttle_point: c.peer_push_throttle_point,
            max_wait_ack: c.max_wait_ack_ms,
            max_pending_requests: c.max_pending_requests,
            ack_mode: c.ack_mode,
            preferred_leader: c.preferred_leader.clone(),
            max_transfer_wait_index: c.max_leadership_transfer_wait_index,
            transfer_timeout: c.leadership_transfer_timeout_ms,
            data_file_size: c.data_file_size,
            max_entry_body: c.max_entry_body,
            quorum: c.quorum(),
        }
    }
}
