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
//! * **Durable acknowledgement** (in [`AckMode::Durable`](crate::config::AckMode::Durable)): an index counts toward
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
mod hard_state;
mod leader_state;
mod log_mirror;
mod outbox;
mod outcomes;
mod quorum;
mod split_mix;
mod state_queries;
mod step_io;
mod timings;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use crate::config::LedgerConfig;
use crate::protocol::{Envelope, NodeId, Request, RequestId, Response, Rpc};

pub use dispatcher::{DispatchState, EntryDispatcher};
pub use handler::EntryHandler;
pub use hard_state::{CoreInit, HardState};
pub(crate) use leader_state::{LeaderState, Requester, Transfer, Waiter};
pub use outcomes::{AppendReceipt, LedgerAppendError, TransferError};
pub use split_mix::SplitMix64;
pub use step_io::{ClientId, Event, LedgerCommand, LogRead, Placement};
pub(crate) use timings::CoreTimings;

/// The role of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Follower,
    /// Running a pre-vote round (reported as `Candidate` by DLedger terms).
    PreCandidate,
    Candidate,
    Leader,
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

    // ---- the step ---------------------------------------------------------------

    /// Handles one event at time `now` and returns the commands to execute.
    pub fn step(&mut self, now: u64, event: Event, log: &dyn LogRead) -> Vec<LedgerCommand> {
        // Time never runs backwards inside the core, whatever the clock does.
        self.now = self.now.max(now);
        self.wrote_this_step = false;
        debug_assert!(self.out.is_empty());
        #[cfg(debug_assertions)]
        let before = (self.term, self.committed_index);
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
        #[cfg(debug_assertions)]
        self.check_invariants(before);
        std::mem::take(&mut self.out)
    }

    /// The state invariants every step keeps (debug builds: the simulator
    /// runs them after every step of every seed). `before` is the term and
    /// committed index the step started with.
    #[cfg(debug_assertions)]
    fn check_invariants(&self, before: (i64, i64)) {
        let me = &self.self_id;
        debug_assert!(self.term >= before.0, "{me}: term went back");
        // The one way back: a follower that holds no committed entry starts
        // over below its committed index (`rewind_below_commit`), which
        // then follows its empty log.
        let rewound = self.out.iter().any(|c| {
            matches!(c, LedgerCommand::Reset { next_index, .. }
                if *next_index - 1 == self.committed_index && self.end_index == self.committed_index)
        });
        debug_assert!(
            self.committed_index >= before.1 || rewound,
            "{me}: committed index went back from {} to {}",
            before.1,
            self.committed_index
        );
        debug_assert!(
            self.committed_index <= self.end_index,
            "{me}: committed {} past the log end {}",
            self.committed_index,
            self.end_index
        );
        debug_assert!(
            self.durable_index <= self.end_index,
            "{me}: durable {} past the log end {}",
            self.durable_index,
            self.end_index
        );
        if self.cfg.ack_mode == crate::config::AckMode::Durable {
            debug_assert!(
                self.committed_index <= self.durable_index,
                "{me}: committed {} past the durable end {}",
                self.committed_index,
                self.durable_index
            );
        }
        debug_assert!(
            self.end_term <= self.term,
            "{me}: log ends in term {} after the current term {}",
            self.end_term,
            self.term
        );
        if self.role == Role::Leader {
            debug_assert_eq!(
                self.voted_for.as_ref(),
                Some(me),
                "{me}: leader without its own vote"
            );
            if let Some(ls) = &self.leader_state {
                for (peer, d) in &ls.dispatchers {
                    debug_assert!(
                        d.watermark <= self.end_index,
                        "{me}: match index {} of {peer} past the log end {}",
                        d.watermark,
                        self.end_index
                    );
                    debug_assert_eq!(
                        d.pending_bytes,
                        d.pending.values().map(|p| p.bytes).sum::<u64>(),
                        "{me}: in-flight bytes to {peer} out of step"
                    );
                }
            }
        }
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
}
