//! Classic master/slave replication (RocketMQ HA, docs/protocol.md#ha-replication).
//!
//! Raw TCP on `haListenPort`, no remoting frames:
//! * slave → master: `[max CommitLog offset i64]`, after every chunk it
//!   stores and every `haSendHeartbeatInterval`;
//! * master → slave: `[physical offset i64][size i32][bytes]`, whole records
//!   of one CommitLog file (a final end-of-file filler included); size 0 is a
//!   heartbeat.
//!
//! The slave appends the bytes at the same offsets, checking every record,
//! and its own dispatch builds its ConsumeQueues and index. SYNC_MASTER sends
//! wait until a slave has confirmed their end ([`master::HaMaster::wait_replicated`]).

pub mod master;
pub mod slave;
pub mod sync;

/// Bytes of a transfer header.
pub const HEADER_LEN: usize = 12;

/// Encodes a transfer header.
pub fn encode_header(offset: i64, size: i32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&offset.to_be_bytes());
    h[8..].copy_from_slice(&size.to_be_bytes());
    h
}

/// Decodes a transfer header.
pub fn decode_header(h: &[u8; HEADER_LEN]) -> (i64, i32) {
    let mut o = [0u8; 8];
    o.copy_from_slice(&h[..8]);
    let mut s = [0u8; 4];
    s.copy_from_slice(&h[8..]);
    (i64::from_be_bytes(o), i32::from_be_bytes(s))
}
