//! The messages DLedger peers exchange, as typed Rust values.
//!
//! These are what the I/O-free core consumes and produces. The TCP transport maps
//! them to DLedger's remoting codes and JSON bodies ([`crate::wire`],
//! docs/ledger-protocol.md#rpcs);
//! the simulator passes them around as they are.
//!
//! Requests and responses are matched by a [`RequestId`]: the sender's core picks it
//! for each request it sends, and the receiver's core copies the id of the request
//! into its response. A transport must deliver a response with the id of the
//! request it answers (the TCP transport maps ids to remoting `opaque`s).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::entry::Entry;

/// A member id (`n0`, `n1`, … in DLedger). Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(Arc<str>);

impl NodeId {
    pub fn new(id: &str) -> NodeId {
        NodeId(Arc::from(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for NodeId {
    fn from(s: &str) -> NodeId {
        NodeId::new(s)
    }
}

impl From<String> for NodeId {
    fn from(s: String) -> NodeId {
        NodeId(Arc::from(s))
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Correlates a response with its request (see the module docs).
pub type RequestId = u64;

/// DLedger response codes (`DLedgerResponseCode`). Unknown numbers are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResponseCode {
    Success,
    Timeout,
    NetworkError,
    UnknownGroup,
    UnknownMember,
    UnexpectedMember,
    ExpiredTerm,
    NotLeader,
    NotFollower,
    InconsistentState,
    InconsistentTerm,
    InconsistentIndex,
    InconsistentLeader,
    UnexpectedArgument,
    RepeatedPush,
    DiskError,
    TermNotReady,
    FallBehindTooMuch,
    TakeLeadershipFailed,
    PushRequestIsFull,
    InternalError,
    TermChanged,
    WaitQuorumAckTimeout,
    LeaderPendingFull,
    LeaderTransferring,
    Other(i32),
}

impl ResponseCode {
    pub fn code(self) -> i32 {
        use ResponseCode::*;
        match self {
            Success => 200,
            Timeout => 300,
            NetworkError => 302,
            UnknownGroup => 400,
            UnknownMember => 401,
            UnexpectedMember => 402,
            ExpiredTerm => 403,
            NotLeader => 404,
            NotFollower => 405,
            InconsistentState => 406,
            InconsistentTerm => 407,
            InconsistentIndex => 408,
            InconsistentLeader => 409,
            UnexpectedArgument => 411,
            RepeatedPush => 413,
            DiskError => 414,
            TermNotReady => 416,
            FallBehindTooMuch => 417,
            TakeLeadershipFailed => 418,
            PushRequestIsFull => 421,
            InternalError => 500,
            TermChanged => 501,
            WaitQuorumAckTimeout => 502,
            LeaderPendingFull => 503,
            LeaderTransferring => 506,
            Other(c) => c,
        }
    }

    pub fn from_code(code: i32) -> ResponseCode {
        use ResponseCode::*;
        match code {
            200 => Success,
            300 => Timeout,
            302 => NetworkError,
            400 => UnknownGroup,
            401 => UnknownMember,
            402 => UnexpectedMember,
            403 => ExpiredTerm,
            404 => NotLeader,
            405 => NotFollower,
            406 => InconsistentState,
            407 => InconsistentTerm,
            408 => InconsistentIndex,
            409 => InconsistentLeader,
            411 => UnexpectedArgument,
            413 => RepeatedPush,
            414 => DiskError,
            416 => TermNotReady,
            417 => FallBehindTooMuch,
            418 => TakeLeadershipFailed,
            421 => PushRequestIsFull,
            500 => InternalError,
            501 => TermChanged,
            502 => WaitQuorumAckTimeout,
            503 => LeaderPendingFull,
            506 => LeaderTransferring,
            c => Other(c),
        }
    }
}

/// The four push types (`PushEntryRequest.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushType {
    /// Append entries at the follower's end.
    Append,
    /// Only carries the leader's committed index.
    Commit,
    /// "Do you have exactly this entry?"
    Compare,
    /// "Make this entry your last one."
    Truncate,
}

impl PushType {
    pub fn name(self) -> &'static str {
        match self {
            PushType::Append => "APPEND",
            PushType::Commit => "COMMIT",
            PushType::Compare => "COMPARE",
            PushType::Truncate => "TRUNCATE",
        }
    }

    pub fn from_name(name: &str) -> Option<PushType> {
        match name {
            "APPEND" => Some(PushType::Append),
            "COMMIT" => Some(PushType::Commit),
            "COMPARE" => Some(PushType::Compare),
            "TRUNCATE" => Some(PushType::Truncate),
            _ => None,
        }
    }
}

/// Leader → follower push (PUSH 51004).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRequest {
    pub term: i64,
    pub leader_id: NodeId,
    pub push_type: PushType,
    /// The leader's committed index (−1 when none).
    pub commit_index: i64,
    /// One entry for COMPARE/TRUNCATE, one or more (consecutive) for APPEND, none for
    /// COMMIT.
    pub entries: Vec<Entry>,
}

impl PushRequest {
    /// Index of the first entry, −1 for COMMIT.
    pub fn first_index(&self) -> i64 {
        self.entries.first().map(|e| e.index()).unwrap_or(-1)
    }

    /// Index of the last entry, −1 for COMMIT.
    pub fn last_index(&self) -> i64 {
        self.entries.last().map(|e| e.index()).unwrap_or(-1)
    }
}

/// Follower → leader push answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushResponse {
    pub term: i64,
    pub code: ResponseCode,
    /// First entry index of the request (−1 for COMMIT).
    pub index: i64,
    /// Entries in the request.
    pub count: i32,
    /// The follower's ledger begin and end index when it answered.
    pub begin_index: i64,
    pub end_index: i64,
}

/// Candidate → peer (VOTE 51001). `pre_vote` asks "would you vote for me in
/// `term`?" without changing anybody's term (a Basalt extension; Java DLedger has no
/// pre-vote round).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteRequest {
    pub term: i64,
    pub candidate: NodeId,
    pub ledger_end_term: i64,
    pub ledger_end_index: i64,
    pub pre_vote: bool,
}

/// `VoteResponse.RESULT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VoteResult {
    Unknown,
    Accept,
    RejectUnknownLeader,
    RejectUnexpectedLeader,
    RejectExpiredVoteTerm,
    RejectAlreadyVoted,
    RejectAlreadyHasLeader,
    RejectTermNotReady,
    RejectTermSmallThanLedger,
    RejectExpiredLedgerTerm,
    RejectSmallLedgerEndIndex,
    RejectTakingLeadership,
}

impl VoteResult {
    pub fn name(self) -> &'static str {
        use VoteResult::*;
        match self {
            Unknown => "UNKNOWN",
            Accept => "ACCEPT",
            RejectUnknownLeader => "REJECT_UNKNOWN_LEADER",
            RejectUnexpectedLeader => "REJECT_UNEXPECTED_LEADER",
            RejectExpiredVoteTerm => "REJECT_EXPIRED_VOTE_TERM",
            RejectAlreadyVoted => "REJECT_ALREADY_VOTED",
            RejectAlreadyHasLeader => "REJECT_ALREADY_HAS_LEADER",
            RejectTermNotReady => "REJECT_TERM_NOT_READY",
            RejectTermSmallThanLedger => "REJECT_TERM_SMALL_THAN_LEDGER",
            RejectExpiredLedgerTerm => "REJECT_EXPIRED_LEDGER_TERM",
            RejectSmallLedgerEndIndex => "REJECT_SMALL_LEDGER_END_INDEX",
            RejectTakingLeadership => "REJECT_TAKING_LEADERSHIP",
        }
    }

    pub fn from_name(name: &str) -> VoteResult {
        use VoteResult::*;
        match name {
            "ACCEPT" => Accept,
            "REJECT_UNKNOWN_LEADER" => RejectUnknownLeader,
            "REJECT_UNEXPECTED_LEADER" => RejectUnexpectedLeader,
            "REJECT_EXPIRED_VOTE_TERM" => RejectExpiredVoteTerm,
            "REJECT_ALREADY_VOTED" => RejectAlreadyVoted,
            "REJECT_ALREADY_HAS_LEADER" => RejectAlreadyHasLeader,
            "REJECT_TERM_NOT_READY" => RejectTermNotReady,
            "REJECT_TERM_SMALL_THAN_LEDGER" => RejectTermSmallThanLedger,
            "REJECT_EXPIRED_LEDGER_TERM" => RejectExpiredLedgerTerm,
            "REJECT_SMALL_LEDGER_END_INDEX" => RejectSmallLedgerEndIndex,
            "REJECT_TAKING_LEADERSHIP" => RejectTakingLeadership,
            _ => Unknown,
        }
    }
}

/// A voter's answer to a (pre-)vote request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteResponse {
    /// The voter's term after handling the request.
    pub term: i64,
    pub result: VoteResult,
    pub pre_vote: bool,
}

/// Leader → follower (HEART_BEAT 51002).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub term: i64,
    pub leader_id: NodeId,
}

/// A follower's answer to a heartbeat, with its term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResponse {
    pub term: i64,
    pub code: ResponseCode,
}

/// LEADERSHIP_TRANSFER 51005. Sent by an operator to the leader
/// (`transfer_id == leader`), and by the leader to the transferee
/// (`transferee_id == receiver`) once it is up to date: "elect yourself now".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRequest {
    pub term: i64,
    pub transfer_id: NodeId,
    pub transferee_id: NodeId,
    pub take_leadership_ledger_index: i64,
}

/// The answer to a leadership-transfer request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferResponse {
    pub term: i64,
    pub code: ResponseCode,
}

/// METADATA 50000 answer: the group's members and the known leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponse {
    pub term: i64,
    pub leader_id: Option<NodeId>,
    pub peers: BTreeMap<NodeId, String>,
}

/// Every request one member sends another; one variant per remoting code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Vote(VoteRequest),
    Heartbeat(HeartbeatRequest),
    Push(PushRequest),
    Transfer(TransferRequest),
    Metadata,
}

/// Every answer, one variant per request kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Vote(VoteResponse),
    Heartbeat(HeartbeatResponse),
    Push(PushResponse),
    Transfer(TransferResponse),
    Metadata(MetadataResponse),
}

/// A request or a response, with the id that pairs the two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rpc {
    Request { id: RequestId, body: Request },
    Response { id: RequestId, body: Response },
}

/// One message between two members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub from: NodeId,
    pub to: NodeId,
    pub rpc: Rpc,
}

impl Envelope {
    /// Approximate size in bytes, for logging and simulated bandwidth.
    pub fn approx_size(&self) -> usize {
        match &self.rpc {
            Rpc::Request {
                body: Request::Push(p),
                ..
            } => 64 + p.entries.iter().map(|e| e.size() as usize).sum::<usize>(),
            _ => 64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for c in [
            200, 300, 302, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 411, 413, 414, 416,
            417, 418, 421, 500, 501, 502, 503, 506, 999,
        ] {
            assert_eq!(ResponseCode::from_code(c).code(), c);
        }
        assert_eq!(
            ResponseCode::from_code(406),
            ResponseCode::InconsistentState
        );
    }

    #[test]
    fn names_round_trip() {
        for t in [
            PushType::Append,
            PushType::Commit,
            PushType::Compare,
            PushType::Truncate,
        ] {
            assert_eq!(PushType::from_name(t.name()), Some(t));
        }
        for r in [
            VoteResult::Accept,
            VoteResult::RejectAlreadyVoted,
            VoteResult::RejectTakingLeadership,
            VoteResult::RejectSmallLedgerEndIndex,
        ] {
            assert_eq!(VoteResult::from_name(r.name()), r);
        }
    }
}
