//! The I/O-free ledger core: election, replication and commit as one deterministic
//! state machine.
//!
//! [`LedgerCore::step`] takes one [`Event`] (a message, a tick, a completion of
//! a command, a client request) and returns the [`LedgerCommand`]s the runtime must
//! execute, in order. The core owns no files, sockets, threads or clocks: time comes
//! with each step (milliseconds from any origin), randomness from a seeded
//! generator, and the log is read through [`LogRead`].
//!
//! # Contract with the runtime
//!
//! * The runtime executes every command of a step, in order, before it calls `step`
//!   again. The `LogRead` passed to a step therefore reflects every append and
//!   truncate of earlier steps (but not those of the current one).
//! * After executing `AppendAsLeader`/`AppendAsFollower`/`Truncate`, the runtime
//!   feeds [`Event::Written`] (entries are now readable) — or
//!   [`Event::StorageFailed`].
//! * `Sync { through }` makes entries `..=through` durable; completion is
//!   [`Event::Synced`]. At most one sync is outstanding; it covers everything
//!   written before it started (group commit).
//! * `PersistHardState` writes term/vote/leader atomically and durably; completion
//!   is [`Event::Persisted`].
//! * `Send` never blocks; the network may lose, duplicate, delay or reorder.
//!
//! # Invariants (checked by the simulator after every step)
//!
//! * **Durable votes**: no message leaves the node while a term or vote change is not
//!   yet durable (sends are held until the matching `Persisted`).
//! * **One leader per term**: a member votes at most once per term (the vote is
//!   durable before it is announced), and becomes leader only with a majority of
//!   votes for its current term.
//! * **Leader completeness**: votes go only to candidates whose log is at least as
//!   up to date (last term, then last index) as the voter's.
//! * **Durable acknowledgement** (in [`AckMode::Durable`]): an index counts toward
//!   the quorum on a member only once it is fsynced there; a follower answers
//!   APPEND/COMPARE/TRUNCATE with SUCCESS only once the entries it vouches for are
//!   durable; the leader counts itself by its own durable index.
//! * **Raft commit rule**: the leader advances the committed index only to an index
//!   of its own term held by a majority; followers commit at most to the leader's
//!   committed index, to what they verified matches the leader in this term, and to
//!   their durable end.
//! * **Truncation is a barrier**: a follower fsyncs a truncation before it writes
//!   anything after it, so a crash can never leave new entries followed by stale ones.

mod dispatcher;
mod election;
mod handler;
mod quorum;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{AckMode, LedgerConfig};
use crate::entry::{Entry, EntryKind, place};
use crate::protocol::{Envelope, NodeId, Request, RequestId, Response, Rpc};

pub use dispatcher::{DispatchState, EntryDispatcher};
pub use handler::EntryHandler;

/// Identifies a caller's request (append or transfer) across the runtime boundary.
pub type ClientId = u64;

/// Read access to the local log, as of the end of the previous step.
pub trait LogRead {
    /// First index held, −1 when the log is empty.
    fn begin_index(&self) -> i64;
    /// Last index held, −1 when the log is empty.
    fn end_index(&self) -> i64;
    /// Byte position just after the last entry (where the next one would go before
    /// a file roll).
    fn end_pos(&self) -> i64;
    /// Term of the entry at `index`, `None` when not held.
    fn term_at(&self, index: i64) -> Option<i64>;
    /// The entry at `index` (`Ok(None)` when not held). `Err` means the stored entry
    /// is unreadable (bad CRC, I/O error).
    fn entry(&self, index: i64) -> Result<Option<Entry>, String>;
}

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

/// The role of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Follower,
    /// Running a pre-vote round (reported as `Candidate` by DLedger terms).
    PreCandidate,
    Candidate,
    Leader,
}

/// Where one entry of a leader append goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub index: i64,
    pub pos: i64,
    pub kind: EntryKind,
    pub body_len: u32,
}

/// Why a ledger append was not (or may not have been) committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerAppendError {
    /// Not written: this member is not the leader. Safe to retry at `leader_id`.
    #[error("not leader (leader: {leader_id:?})")]
    NotLeader { leader_id: Option<NodeId> },
    /// Not written: the leader is handing over leadership.
    #[error("leadership transfer in progress")]
    Transferring,
    /// Not written: too many appends are waiting for commit.
    #[error("too many pending appends")]
    Busy,
    /// Not written: an entry does not fit a data file.
    #[error("entry of {body_len} bytes exceeds the maximum {max}")]
    TooLarge { body_len: u64, max: u64 },
    /// Not written: the local store failed and refuses writes.
    #[error("store poisoned by an earlier I/O failure")]
    Poisoned,
    /// Written, but leadership was lost before it committed. It may still commit
    /// under the new leader: the outcome is unknown.
    #[error("leadership lost before commit (outcome unknown)")]
    LeadershipLost,
    /// Written, but not committed in time. It may still commit: the outcome is unknown.
    #[error("not committed within the wait time (outcome unknown)")]
    Timeout,
}

/// A committed append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendReceipt {
    pub term: i64,
    pub first_index: i64,
    pub last_index: i64,
}

/// Why a leadership transfer failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("not leader")]
    NotLeader,
    #[error("{0} is not a member of the group")]
    UnknownMember(NodeId),
    #[error("a transfer is already in progress")]
    InProgress,
    #[error("transferee is {0} entries behind")]
    FallBehind(i64),
    #[error("transfer did not complete in time")]
    Timeout,
    #[error("transferee refused: {0}")]
    Refused(String),
}

/// Inputs of the core.
#[derive(Debug, Clone)]
pub enum Event {
    /// Time passed (the runtime calls this at [`LedgerCore::next_deadline`]).
    Tick,
    /// A message from a peer.
    Message(Envelope),
    /// A caller wants to append entries with these body lengths.
    ClientAppend {
        client: ClientId,
        body_lens: Vec<u32>,
    },
    /// A caller asks the leader to hand leadership to `to`.
    TransferLeadership { client: ClientId, to: NodeId },
    /// The append/truncate commands of the previous step were executed.
    Written,
    /// The `Sync` command finished: entries up to `through` are durable.
    Synced { through: i64 },
    /// The `PersistHardState` command with this version finished.
    Persisted { version: u64 },
    /// Writing, syncing or persisting failed: the store refuses writes from now on.
    StorageFailed { reason: String },
}

/// Outputs of the ledger core; the runtime executes them in the order given.
#[derive(Debug, Clone)]
pub enum LedgerCommand {
    /// Send a message.
    Send(Envelope),
    /// Append entries as leader at these exact positions; the runtime supplies the
    /// bodies of `client` (or an empty no-op body) and may let the caller rewrite
    /// each body with its index and position first.
    AppendAsLeader {
        client: Option<ClientId>,
        term: i64,
        entries: Vec<Placement>,
    },
    /// Append entries received from the leader (positions already checked).
    AppendAsFollower { entries: Vec<Entry> },
    /// Remove every entry from `next_index` on; the next entry goes to `next_pos`.
    /// When `next_index - 1` is not held or does not end at `next_pos`, the whole log
    /// is dropped and restarts at `next_index`/`next_pos`.
    Truncate { next_index: i64, next_pos: i64 },
    /// Make entries `..=through` durable (group commit).
    Sync { through: i64 },
    /// Persist term/vote/leader atomically and durably.
    PersistHardState { version: u64, state: HardState },
    /// The committed index advanced (apply / dispatch up to here).
    CommitAdvanced { committed_index: i64 },
    /// Answer to `ClientAppend`.
    AppendResult {
        client: ClientId,
        result: Result<AppendReceipt, LedgerAppendError>,
    },
    /// Answer to `TransferLeadership`.
    TransferResult {
        client: ClientId,
        result: Result<(), TransferError>,
    },
}

/// Deterministic SplitMix64: the injected source of election jitter.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo)
        }
    }
}

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

/// The ledger state machine of one member. See the module documentation.
pub struct LedgerCore {
    pub(crate) self_id: NodeId,
    /// The other members.
    pub(crate) peers: Vec<NodeId>,
    pub(crate) addrs: BTreeMap<NodeId, String>,
    pub(crate) cfg: CoreTimings,
    pub(crate) rng: SplitMix64,
    pub(crate) now: u64,

    // Hard state (what is persisted).
    pub(crate) term: i64,
    pub(crate) voted_for: Option<NodeId>,
    pub(crate) leader: Option<NodeId>,
    pub(crate) role: Role,

    // Persistence of the hard state.
    /// Bumped on every term or vote change: those block outgoing messages.
    pub(crate) blocking_version: u64,
    /// Bumped on every hard-state change (leader included).
    pub(crate) state_version: u64,
    pub(crate) persisted_version: u64,
    pub(crate) persist_in_flight: Option<u64>,
    pub(crate) held: Vec<(u64, Envelope)>,

    // Mirror of the log as it will be after this step's commands.
    pub(crate) end_index: i64,
    pub(crate) end_term: i64,
    pub(crate) end_pos: i64,
    /// Entries `..=durable_index` are fsynced.
    pub(crate) durable_index: i64,
    pub(crate) sync_in_flight: Option<i64>,
    pub(crate) committed_index: i64,
    pub(crate) poisoned: bool,

    // Election.
    pub(crate) election_deadline: u64,
    pub(crate) last_leader_contact: Option<u64>,
    pub(crate) votes: BTreeSet<NodeId>,
    pub(crate) round_requests: BTreeSet<RequestId>,

    pub(crate) leader_state: Option<LeaderState>,
    pub(crate) handler: EntryHandler,
    pub(crate) next_request_id: RequestId,

    pub(crate) out: Vec<LedgerCommand>,
    /// This step appended or truncated: `LogRead` is behind the mirror until the
    /// next step, so nothing may read the log tail before then.
    pub(crate) wrote_this_step: bool,
}

/// The configuration values the core uses, copied out of [`LedgerConfig`].
#[derive(Debug, Clone)]
pub(crate) struct CoreTimings {
    pub(crate) heartbeat_interval: u64,
    pub(crate) lease: u64,
    pub(crate) min_vote: u64,
    pub(crate) max_vote: u64,
    pub(crate) max_pending_per_peer: usize,
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
    fn from_config(c: &LedgerConfig) -> CoreTimings {
        CoreTimings {
            heartbeat_interval: c.heartbeat_interval_ms,
            lease: c.leader_lease_ms(),
            min_vote: c.min_vote_interval_ms,
            max_vote: c.max_vote_interval_ms,
            max_pending_per_peer: c.max_pending_per_peer,
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

impl LedgerCore {
    /// A member restarting with `init` over the recovered log `log` (which must be
    /// durable: the store syncs everything it recovered before the core starts).
    pub fn new(config: &LedgerConfig, init: CoreInit, log: &dyn LogRead, now: u64) -> LedgerCore {
        assert!(
            config.validate().is_ok(),
            "invalid ledger config: {:?}",
            config.validate()
        );
        let end_index = log.end_index();
        let end_term = if end_index >= 0 {
            log.term_at(end_index).unwrap_or(-1)
        } else {
            -1
        };
        let peers: Vec<NodeId> = config
            .peers
            .keys()
            .filter(|p| **p != config.self_id)
            .cloned()
            .collect();
        let cfg = CoreTimings::from_config(config);
        let mut rng = SplitMix64::new(init.seed);
        let first_deadline = now + rng.range(cfg.min_vote, cfg.max_vote);
        LedgerCore {
            self_id: config.self_id.clone(),
            peers,
            addrs: config.peers.clone(),
            handler: EntryHandler::new(now),
            cfg,
            rng,
            now,
            term: init.hard_state.term,
            voted_for: init.hard_state.voted_for,
            // The persisted leader is a hint only: a restarted member waits to hear
            // from the leader again.
            leader: None,
            role: Role::Follower,
            blocking_version: 0,
            state_version: 0,
            persisted_version: 0,
            persist_in_flight: None,
            held: Vec::new(),
            end_index,
            end_term,
            end_pos: log.end_pos(),
            durable_index: end_index,
            sync_in_flight: None,
            committed_index: init.committed_index.min(end_index).max(-1),
            poisoned: false,
            election_deadline: first_deadline,
            last_leader_contact: None,
            votes: BTreeSet::new(),
            round_requests: BTreeSet::new(),
            leader_state: None,
            next_request_id: 1,
            out: Vec::new(),
            wrote_this_step: false,
        }
    }

    // ---- observers ------------------------------------------------------------

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

    /// The earliest time at which the core needs a [`Event::Tick`].
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

    // ---- the step ---------------------------------------------------------------

    /// Handles one event at time `now` and returns the commands to execute.
    pub fn step(&mut self, now: u64, event: Event, log: &dyn LogRead) -> Vec<LedgerCommand> {
        // Time never runs backwards inside the core, whatever the clock does.
        self.now = self.now.max(now);
        self.wrote_this_step = false;
        debug_assert!(self.out.is_empty());
        match event {
            Event::Tick => self.on_tick(log),
            Event::Message(env) => self.on_message(env, log),
            Event::ClientAppend { client, body_lens } => self.on_client_append(client, body_lens),
            Event::TransferLeadership { client, to } => {
                self.start_transfer(to, Requester::Local(client), log)
            }
            Event::Written => {}
            Event::Synced { through } => self.on_synced(through, log),
            Event::Persisted { version } => self.on_persisted(version),
            Event::StorageFailed { reason } => self.on_storage_failed(&reason),
        }
        self.after_event(log);
        std::mem::take(&mut self.out)
    }

    /// Work every step ends with: replication progress, commit, group commit,
    /// hard-state persistence and release of held messages.
    fn after_event(&mut self, log: &dyn LogRead) {
        if self.role == Role::Leader {
            // Entries appended in this step are not readable yet: the dispatchers run
            // again on the `Written` step that follows.
            if !self.wrote_this_step {
                self.pump_dispatchers(log);
            }
            self.check_commit(log);
            self.progress_transfer(log);
        } else if self.role == Role::Follower {
            self.pump_handler(log);
        }
        self.maybe_sync();
        self.maybe_persist();
        self.release_held();
    }

    fn on_tick(&mut self, log: &dyn LogRead) {
        match self.role {
            Role::Leader => self.leader_tick(log),
            _ => {
                self.handler_tick(log);
                if !self.poisoned && self.now >= self.election_deadline {
                    self.on_election_timeout();
                }
            }
        }
    }

    fn on_message(&mut self, env: Envelope, log: &dyn LogRead) {
        if env.to != self.self_id {
            return;
        }
        let from = env.from;
        match env.rpc {
            Rpc::Request { id, body } => match body {
                Request::Vote(req) => self.on_vote_request(from, id, req),
                Request::Heartbeat(req) => self.on_heartbeat(from, id, req),
                Request::Push(req) => self.on_push(from, id, req, log),
                Request::Transfer(req) => self.on_transfer_request(from, id, req, log),
                Request::Metadata => self.on_metadata(from, id),
            },
            Rpc::Response { id, body } => match body {
                Response::Vote(resp) => self.on_vote_response(from, id, resp),
                Response::Heartbeat(resp) => self.on_heartbeat_response(from, resp),
                Response::Push(resp) => self.on_push_response(from, id, resp, log),
                Response::Transfer(resp) => self.on_transfer_response(from, resp),
                Response::Metadata(_) => {}
            },
        }
    }

    fn on_metadata(&mut self, from: NodeId, id: RequestId) {
        let resp = crate::protocol::MetadataResponse {
            term: self.term,
            leader_id: self.leader.clone(),
            peers: self.addrs.clone(),
        };
        self.respond(from, id, Response::Metadata(resp));
    }

    // ---- messages out -------------------------------------------------------------

    pub(crate) fn next_id(&mut self) -> RequestId {
        let id = self.next_request_id;
        self.next_request_id += 1;
        id
    }

    /// Sends a request and returns its id.
    pub(crate) fn request(&mut self, to: NodeId, body: Request) -> RequestId {
        let id = self.next_id();
        self.send(Envelope {
            from: self.self_id.clone(),
            to,
            rpc: Rpc::Request { id, body },
        });
        id
    }

    pub(crate) fn respond(&mut self, to: NodeId, id: RequestId, body: Response) {
        self.send(Envelope {
            from: self.self_id.clone(),
            to,
            rpc: Rpc::Response { id, body },
        });
    }

    /// Queues a message, holding it while a term/vote change is not durable.
    pub(crate) fn send(&mut self, env: Envelope) {
        if self.persisted_version < self.blocking_version || !self.held.is_empty() {
            self.held.push((self.blocking_version, env));
        } else {
            self.out.push(LedgerCommand::Send(env));
        }
    }

    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let persisted = self.persisted_version;
        let mut keep = Vec::new();
        let mut releasing = true;
        for (v, env) in std::mem::take(&mut self.held) {
            // Keep order: once one message must wait, all later ones wait too.
            if releasing && v <= persisted {
                self.out.push(LedgerCommand::Send(env));
            } else {
                releasing = false;
                keep.push((v, env));
            }
        }
        self.held = keep;
    }

    // ---- hard state -----------------------------------------------------------------

    /// Records a term/vote change; messages sent from now on wait until it is durable.
    pub(crate) fn set_term_vote(&mut self, term: i64, voted_for: Option<NodeId>) {
        debug_assert!(term >= self.term, "term must never decrease");
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

    fn maybe_persist(&mut self) {
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

    fn on_persisted(&mut self, version: u64) {
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

    // ---- log bookkeeping ------------------------------------------------------------

    /// Group commit: one sync at a time, covering everything written so far.
    pub(crate) fn maybe_sync(&mut self) {
        if self.poisoned || self.sync_in_flight.is_some() || self.end_index <= self.durable_index {
            return;
        }
        self.sync_in_flight = Some(self.end_index);
        self.out.push(LedgerCommand::Sync {
            through: self.end_index,
        });
    }

    fn on_synced(&mut self, through: i64, log: &dyn LogRead) {
        if self.sync_in_flight.is_some_and(|s| s == through) {
            self.sync_in_flight = None;
        }
        // A sync never covers more than what is in the log now: a truncation cannot
        // happen while a sync is outstanding (see `EntryHandler`).
        let through = through.min(self.end_index);
        if through > self.durable_index {
            self.durable_index = through;
        }
        self.handler_on_synced(log);
    }

    pub(crate) fn on_storage_failed(&mut self, reason: &str) {
        tracing::error!(member = %self.self_id, reason, "ledger store failed; refusing writes");
        self.poisoned = true;
        self.sync_in_flight = None;
        if self.role == Role::Leader {
            let term = self.term;
            self.become_follower(term, None);
        } else if self.role != Role::Follower {
            self.role = Role::Follower;
        }
    }

    /// Position for the next entry of `size` bytes after the current end.
    pub(crate) fn place_next(&self, size: i64) -> Result<i64, crate::entry::EntryError> {
        place(self.end_pos, size, self.cfg.data_file_size)
    }

    /// The term a log index has, looking at this step's appends too.
    pub(crate) fn term_of(&self, log: &dyn LogRead, index: i64) -> Option<i64> {
        if index == self.end_index {
            Some(self.end_term)
        } else if index > self.end_index || index < 0 {
            None
        } else {
            log.term_at(index)
        }
    }

    pub(crate) fn own_watermark(&self) -> i64 {
        match self.cfg.ack_mode {
            AckMode::Durable => self.durable_index,
            AckMode::Memory => self.end_index,
        }
    }

    /// Highest index each member is known to hold, self included (leader only).
    pub(crate) fn all_watermarks(&self) -> Vec<i64> {
        let mut v = vec![self.own_watermark()];
        if let Some(ls) = &self.leader_state {
            v.extend(ls.dispatchers.values().map(|d| d.watermark));
        }
        v
    }
}
