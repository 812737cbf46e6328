//! Member state and election (DLedgerLeaderElector semantics, Raft rules), leader
//! heartbeats, leadership transfer and the leader's append entry point.
//!
//! Rules, in the order they are applied:
//!
//! * Any message carrying a higher term makes the member a follower of that term
//!   (vote cleared) before anything else; the change is persisted before any answer
//!   leaves (see `LedgerCore::send`).
//! * A follower that has not heard from a leader for `lease + rand(min_vote,
//!   max_vote)` (or `rand(min_vote, max_vote)` when it knows no leader) starts a
//!   **pre-vote** round: it asks "would you vote for me in `term + 1`?" without
//!   changing any term. A peer says yes only if it knows no live leader (heard one
//!   within the lease), `term + 1` is above its own term, and the asker's log is at
//!   least as up to date. Only with a majority of yeses does the member increment its
//!   term, vote for itself (durably) and ask for real votes. A member coming back
//!   from a partition therefore cannot depose a healthy leader.
//! * A real vote is granted at most once per term, only to an up-to-date log
//!   (`ledgerEndTerm`, then `ledgerEndIndex`), and only once durable.
//! * A leader heartbeats every `heartbeat_interval`; it steps down when fewer than a
//!   quorum of members (itself included) answered within the lease (check quorum).
//! * Leadership transfer: the leader stops accepting appends, waits until the
//!   transferee holds its whole log durably, then tells it to elect itself now; the
//!   transferee skips the pre-vote. The transfer is abandoned after
//!   `leadership_transfer_timeout`.

use crate::entry::{EntryKind, HEADER_SIZE, max_body_len};
use crate::protocol::{
    HeartbeatRequest, HeartbeatResponse, NodeId, Request, RequestId, Response, ResponseCode,
    TransferRequest, TransferResponse, VoteRequest, VoteResponse, VoteResult,
};

use super::{
    AppendReceipt, ClientId, EntryDispatcher, LeaderState, LedgerAppendError, LedgerCommand,
    LedgerCore, LogRead, Placement, Requester, Role, Transfer, TransferError, Waiter,
};

impl LedgerCore {
    // ---- role changes ---------------------------------------------------------------

    /// Becomes a follower in `term` (clearing the vote when the term grows) of
    /// `leader`, if known.
    pub(crate) fn become_follower(&mut self, term: i64, leader: Option<NodeId>) {
        debug_assert!(term >= self.term);
        let term_changed = term > self.term;
        if term_changed {
            self.set_term_vote(term, None);
        }
        if self.role == Role::Leader {
            self.step_down_leader();
        }
        let leader_changed = leader != self.leader || term_changed;
        self.role = Role::Follower;
        self.votes.clear();
        self.round_requests.clear();
        self.set_leader(leader.clone());
        if leader_changed {
            self.handler_reset();
        }
        if leader.is_some() {
            self.touch_leader();
        } else {
            self.last_leader_contact = None;
            self.election_deadline =
                self.now + self.rng.range(self.cfg.min_vote, self.cfg.max_vote);
        }
    }

    /// Notes contact with the current leader and pushes the election deadline back.
    pub(crate) fn touch_leader(&mut self) {
        self.last_leader_contact = Some(self.now);
        self.election_deadline =
            self.now + self.cfg.lease + self.rng.range(self.cfg.min_vote, self.cfg.max_vote);
    }

    /// Whether this member has heard from a live leader (or is one).
    fn knows_live_leader(&self) -> bool {
        match self.role {
            Role::Leader => true,
            _ => {
                self.leader.is_some()
                    && self
                        .last_leader_contact
                        .is_some_and(|t| self.now.saturating_sub(t) < self.cfg.lease)
            }
        }
    }

    fn step_down_leader(&mut self) {
        let Some(mut ls) = self.leader_state.take() else {
            return;
        };
        for (_, w) in std::mem::take(&mut ls.waiters) {
            self.out.push(LedgerCommand::AppendResult {
                client: w.client,
                result: Err(LedgerAppendError::LeadershipLost),
            });
        }
        if let Some(t) = ls.transfer.take() {
            let result = if t.take_sent {
                Ok(())
            } else {
                Err(TransferError::NotLeader)
            };
            self.finish_transfer(t.requester, result);
        }
    }

    pub(crate) fn on_election_timeout(&mut self) {
        match self.role {
            Role::Leader => {}
            Role::Follower | Role::PreCandidate | Role::Candidate => self.start_pre_vote(),
        }
    }

    fn start_pre_vote(&mut self) {
        if self.handler.barrier.is_some() {
            // A truncation is not durable yet: a leader would write after it. Its
            // sync completes in milliseconds; campaign then.
            self.election_deadline = self.now + (self.cfg.min_vote / 10).max(1);
            return;
        }
        self.role = Role::PreCandidate;
        if self.leader.is_some() {
            self.set_leader(None);
            self.handler_reset();
        }
        self.last_leader_contact = None;
        self.votes.clear();
        self.votes.insert(self.self_id.clone());
        self.round_requests.clear();
        self.election_deadline = self.now + self.rng.range(self.cfg.min_vote, self.cfg.max_vote);
        if self.votes.len() >= self.cfg.quorum {
            self.become_candidate();
            return;
        }
        let req = VoteRequest {
            term: self.term + 1,
            candidate: self.self_id.clone(),
            ledger_end_term: self.end_term,
            ledger_end_index: self.end_index,
            pre_vote: true,
        };
        for p in self.peers.clone() {
            let id = self.request(p, Request::Vote(req.clone()));
            self.round_requests.insert(id);
        }
    }

    /// Increments the term, votes for itself and asks for votes (the requests leave
    /// once the new term and vote are durable).
    pub(crate) fn become_candidate(&mut self) {
        let term = self.term + 1;
        self.set_term_vote(term, Some(self.self_id.clone()));
        self.role = Role::Candidate;
        self.set_leader(None);
        self.handler_reset();
        self.last_leader_contact = None;
        self.votes.clear();
        self.votes.insert(self.self_id.clone());
        self.round_requests.clear();
        self.election_deadline = self.now + self.rng.range(self.cfg.min_vote, self.cfg.max_vote);
        let req = VoteRequest {
            term,
            candidate: self.self_id.clone(),
            ledger_end_term: self.end_term,
            ledger_end_index: self.end_index,
            pre_vote: false,
        };
        for p in self.peers.clone() {
            let id = self.request(p, Request::Vote(req.clone()));
            self.round_requests.insert(id);
        }
        self.check_election_won();
    }

    /// A candidate wins with a quorum of votes, counting its own only once durable.
    pub(crate) fn check_election_won(&mut self) {
        if self.role != Role::Candidate
            || self.votes.len() < self.cfg.quorum
            || self.persisted_version < self.blocking_version
        {
            return;
        }
        self.become_leader();
    }

    fn become_leader(&mut self) {
        debug_assert_eq!(self.voted_for.as_ref(), Some(&self.self_id));
        self.role = Role::Leader;
        self.set_leader(Some(self.self_id.clone()));
        self.handler_reset();
        self.votes.clear();
        self.round_requests.clear();
        let now = self.now;
        let dispatchers = self
            .peers
            .iter()
            .map(|p| (p.clone(), EntryDispatcher::new(p.clone(), now)))
            .collect();
        let last_ack = self.peers.iter().map(|p| (p.clone(), now)).collect();
        // The no-op: the first entry of the term. Once it commits, everything earlier
        // terms left in this log is committed too (Raft's commit rule).
        let size = HEADER_SIZE as i64;
        let noop_index = self.end_index + 1;
        // Terms along the log never decrease: the no-op's term is the newest.
        assert!(
            self.term >= self.end_term,
            "member {}: leader of term {} over a log ending in term {}",
            self.self_id,
            self.term,
            self.end_term
        );
        match self.place_next(size) {
            Ok(pos) => {
                self.end_index = noop_index;
                self.end_term = self.term;
                self.end_pos = pos + size;
                self.wrote_this_step = true;
                self.out.push(LedgerCommand::AppendAsLeader {
                    client: None,
                    term: self.term,
                    entries: vec![Placement {
                        index: noop_index,
                        pos,
                        kind: EntryKind::Noop,
                        body_len: 0,
                    }],
                });
            }
            Err(e) => unreachable!("a header-only entry always fits a valid data file: {e}"),
        }
        self.leader_state = Some(LeaderState {
            dispatchers,
            last_ack,
            waiters: Default::default(),
            next_heartbeat: now,
            transfer: None,
            auto_transfer_after: now + self.cfg.lease,
            term_start_index: noop_index,
        });
        tracing::info!(member = %self.self_id, term = self.term, "became leader");
        self.send_heartbeats();
    }

    // ---- votes ----------------------------------------------------------------------

    pub(crate) fn on_vote_request(&mut self, from: NodeId, id: RequestId, req: VoteRequest) {
        let reply = |core: &mut LedgerCore, term: i64, result: VoteResult| {
            let resp = VoteResponse {
                term,
                result,
                pre_vote: req.pre_vote,
            };
            core.respond(from.clone(), id, Response::Vote(resp));
        };
        if !self.peers.contains(&req.candidate) {
            let reason = if req.candidate == self.self_id {
                VoteResult::RejectUnexpectedLeader
            } else {
                VoteResult::RejectUnknownLeader
            };
            reply(self, self.term, reason);
            return;
        }
        if self.poisoned {
            // A member whose store failed takes no part in elections: its log
            // may end in entries whose sync failed.
            reply(self, self.term, VoteResult::RejectTermNotReady);
            return;
        }
        let log_ok = req.ledger_end_term > self.end_term
            || (req.ledger_end_term == self.end_term && req.ledger_end_index >= self.end_index);
        let log_reject = if req.ledger_end_term < self.end_term {
            VoteResult::RejectExpiredLedgerTerm
        } else {
            VoteResult::RejectSmallLedgerEndIndex
        };
        if req.pre_vote {
            // No state changes at all for a pre-vote.
            if req.term <= self.term {
                reply(self, self.term, VoteResult::RejectExpiredVoteTerm);
            } else if self.knows_live_leader() {
                reply(self, self.term, VoteResult::RejectAlreadyHasLeader);
            } else if !log_ok {
                reply(self, self.term, log_reject);
            } else {
                reply(self, req.term, VoteResult::Accept);
            }
            return;
        }
        if req.term < self.term {
            reply(self, self.term, VoteResult::RejectExpiredVoteTerm);
            return;
        }
        if req.term > self.term {
            self.become_follower(req.term, None);
        }
        if let Some(v) = &self.voted_for
            && *v != req.candidate
        {
            let reason = if self.leader.is_some() {
                VoteResult::RejectAlreadyHasLeader
            } else {
                VoteResult::RejectAlreadyVoted
            };
            reply(self, self.term, reason);
            return;
        }
        if !log_ok {
            reply(self, self.term, log_reject);
            return;
        }
        self.set_term_vote(self.term, Some(req.candidate.clone()));
        if self.role == Role::PreCandidate {
            self.role = Role::Follower;
        }
        // Granting a vote restarts the election timer (Raft §5.2).
        self.election_deadline =
            self.now + self.cfg.lease + self.rng.range(self.cfg.min_vote, self.cfg.max_vote);
        reply(self, self.term, VoteResult::Accept);
    }

    pub(crate) fn on_vote_response(&mut self, from: NodeId, id: RequestId, resp: VoteResponse) {
        if resp.term > self.term && resp.result != VoteResult::Accept {
            self.become_follower(resp.term, None);
            return;
        }
        if !self.round_requests.contains(&id) || resp.result != VoteResult::Accept {
            return;
        }
        match (self.role, resp.pre_vote) {
            (Role::PreCandidate, true) => {
                self.votes.insert(from);
                if self.votes.len() >= self.cfg.quorum {
                    self.become_candidate();
                }
            }
            (Role::Candidate, false) if resp.term == self.term => {
                self.votes.insert(from);
                self.check_election_won();
            }
            _ => {}
        }
    }

    // ---- heartbeats -----------------------------------------------------------------

    fn send_heartbeats(&mut self) {
        let req = HeartbeatRequest {
            term: self.term,
            leader_id: self.self_id.clone(),
        };
        for p in self.peers.clone() {
            self.request(p, Request::Heartbeat(req.clone()));
        }
        if let Some(ls) = &mut self.leader_state {
            ls.next_heartbeat = self.now + self.cfg.heartbeat_interval;
        }
    }

    /// Accepts `leader` as the leader of `term` if the message allows it. Returns the
    /// code to answer with: `Success` when the sender is (now) this member's leader.
    pub(crate) fn accept_leader(&mut self, term: i64, leader: &NodeId) -> ResponseCode {
        if !self.peers.contains(leader) {
            return ResponseCode::UnknownMember;
        }
        if term < self.term {
            return ResponseCode::ExpiredTerm;
        }
        if term > self.term {
            self.become_follower(term, Some(leader.clone()));
            return ResponseCode::Success;
        }
        match self.role {
            // One leader per term: another leader in my term is a bug somewhere.
            Role::Leader => ResponseCode::InconsistentLeader,
            Role::PreCandidate | Role::Candidate => {
                self.become_follower(term, Some(leader.clone()));
                ResponseCode::Success
            }
            Role::Follower => match &self.leader {
                None => {
                    self.become_follower(term, Some(leader.clone()));
                    ResponseCode::Success
                }
                Some(l) if l == leader => {
                    self.touch_leader();
                    ResponseCode::Success
                }
                Some(_) => ResponseCode::InconsistentLeader,
            },
        }
    }

    pub(crate) fn on_heartbeat(&mut self, from: NodeId, id: RequestId, req: HeartbeatRequest) {
        let code = self.accept_leader(req.term, &req.leader_id);
        let resp = HeartbeatResponse {
            term: self.term,
            code,
        };
        self.respond(from, id, Response::Heartbeat(resp));
    }

    pub(crate) fn on_heartbeat_response(&mut self, from: NodeId, resp: HeartbeatResponse) {
        if resp.term > self.term {
            self.become_follower(resp.term, None);
            return;
        }
        if self.role == Role::Leader
            && resp.term == self.term
            && resp.code == ResponseCode::Success
            && let Some(ls) = &mut self.leader_state
        {
            ls.last_ack.insert(from, self.now);
        }
    }

    pub(crate) fn note_ack(&mut self, from: &NodeId) {
        if let Some(ls) = &mut self.leader_state {
            ls.last_ack.insert(from.clone(), self.now);
        }
    }

    pub(crate) fn leader_tick(&mut self, log: &dyn LogRead) {
        let now = self.now;
        let Some(ls) = &self.leader_state else {
            return;
        };
        // Check quorum: a leader cut off from the majority stops leading.
        let alive = 1 + ls
            .last_ack
            .values()
            .filter(|t| now.saturating_sub(**t) < self.cfg.lease)
            .count();
        if alive < self.cfg.quorum {
            tracing::warn!(member = %self.self_id, term = self.term, "lost contact with the quorum; stepping down");
            let term = self.term;
            self.become_follower(term, None);
            return;
        }
        if now >= ls.next_heartbeat {
            self.send_heartbeats();
        }
        self.expire_waiters();
        self.check_transfer_deadline();
        self.maybe_auto_transfer(log);
    }

    // ---- appends ----------------------------------------------------------------------

    pub(crate) fn on_client_append(&mut self, client: ClientId, body_lens: Vec<u32>) {
        if let Some(e) = self.append_refusal(&body_lens) {
            self.out.push(LedgerCommand::AppendResult {
                client,
                result: Err(e),
            });
            return;
        }
        if body_lens.is_empty() {
            let receipt = AppendReceipt {
                term: self.term,
                first_index: self.end_index + 1,
                last_index: self.end_index,
            };
            self.out.push(LedgerCommand::AppendResult {
                client,
                result: Ok(receipt),
            });
            return;
        }
        let first_index = self.end_index + 1;
        let entries = self.place_leader_entries(body_lens);
        debug_assert!(
            self.term >= self.end_term,
            "entry terms along the log must not decrease"
        );
        self.end_term = self.term;
        self.wrote_this_step = true;
        let last_index = self.end_index;
        self.out.push(LedgerCommand::AppendAsLeader {
            client: Some(client),
            term: self.term,
            entries,
        });
        let deadline = self.now + self.cfg.max_wait_ack;
        if let Some(ls) = &mut self.leader_state {
            ls.waiters.insert(
                last_index,
                Waiter {
                    client,
                    first_index,
                    deadline,
                },
            );
        }
    }

    /// Why an append of entries with these body lengths is refused before anything
    /// is written; `None` when it may go ahead.
    fn append_refusal(&self, body_lens: &[u32]) -> Option<LedgerAppendError> {
        if self.poisoned {
            return Some(LedgerAppendError::Poisoned);
        }
        if self.role != Role::Leader {
            let leader_id = self.leader.clone();
            return Some(LedgerAppendError::NotLeader { leader_id });
        }
        let Some(ls) = &self.leader_state else {
            return Some(LedgerAppendError::NotLeader { leader_id: None });
        };
        if ls.transfer.is_some() {
            return Some(LedgerAppendError::Transferring);
        }
        if ls.waiters.len() >= self.cfg.max_pending_requests {
            return Some(LedgerAppendError::Busy);
        }
        let max =
            (max_body_len(self.cfg.data_file_size).max(0) as u64).min(self.cfg.max_entry_body);
        if let Some(&big) = body_lens.iter().find(|l| **l as u64 > max) {
            return Some(LedgerAppendError::TooLarge {
                body_len: big as u64,
                max,
            });
        }
        None
    }

    /// Places one entry per body after the log end and advances the mirrored end.
    fn place_leader_entries(&mut self, body_lens: Vec<u32>) -> Vec<Placement> {
        let mut entries = Vec::with_capacity(body_lens.len());
        for len in body_lens {
            let size = HEADER_SIZE as i64 + len as i64;
            let pos = match self.place_next(size) {
                Ok(p) => p,
                Err(_) => unreachable!("sizes were checked against the file size"),
            };
            self.end_index += 1;
            self.end_pos = pos + size;
            entries.push(Placement {
                index: self.end_index,
                pos,
                kind: EntryKind::Normal,
                body_len: len,
            });
        }
        entries
    }

    fn expire_waiters(&mut self) {
        let now = self.now;
        let Some(ls) = &mut self.leader_state else {
            return;
        };
        let expired: Vec<i64> = ls
            .waiters
            .iter()
            .filter(|(_, w)| w.deadline <= now)
            .map(|(k, _)| *k)
            .collect();
        for k in expired {
            if let Some(w) = ls.waiters.remove(&k) {
                self.out.push(LedgerCommand::AppendResult {
                    client: w.client,
                    result: Err(LedgerAppendError::Timeout),
                });
            }
        }
    }

    // ---- leadership transfer ------------------------------------------------------------

    pub(crate) fn start_transfer(&mut self, to: NodeId, requester: Requester, _log: &dyn LogRead) {
        if self.role != Role::Leader || self.leader_state.is_none() {
            return self.finish_transfer(requester, Err(TransferError::NotLeader));
        }
        if to == self.self_id {
            return self.finish_transfer(requester, Ok(()));
        }
        if !self.peers.contains(&to) {
            return self.finish_transfer(requester, Err(TransferError::UnknownMember(to)));
        }
        let end = self.end_index;
        let deadline = self.now + self.cfg.transfer_timeout;
        let max_behind = self.cfg.max_transfer_wait_index;
        let Some(ls) = &mut self.leader_state else {
            return;
        };
        if ls.transfer.is_some() {
            return self.finish_transfer(requester, Err(TransferError::InProgress));
        }
        let behind = end - ls.dispatchers.get(&to).map(|d| d.watermark).unwrap_or(-1);
        if behind >= max_behind {
            return self.finish_transfer(requester, Err(TransferError::FallBehind(behind)));
        }
        tracing::info!(member = %self.self_id, term = self.term, to = %to, "leadership transfer started");
        ls.transfer = Some(Transfer {
            target: to,
            deadline,
            requester,
            take_sent: false,
        });
    }

    /// Sends "elect yourself now" once the transferee holds the whole log durably.
    pub(crate) fn progress_transfer(&mut self, _log: &dyn LogRead) {
        let term = self.term;
        let end = self.end_index;
        let self_id = self.self_id.clone();
        let Some(ls) = &mut self.leader_state else {
            return;
        };
        let Some(t) = &mut ls.transfer else {
            return;
        };
        if t.take_sent {
            return;
        }
        let caught_up = ls
            .dispatchers
            .get(&t.target)
            .is_some_and(|d| d.watermark >= end);
        if !caught_up {
            return;
        }
        t.take_sent = true;
        let target = t.target.clone();
        let req = TransferRequest {
            term,
            transfer_id: self_id,
            transferee_id: target.clone(),
            take_leadership_ledger_index: end,
        };
        self.request(target, Request::Transfer(req));
    }

    fn check_transfer_deadline(&mut self) {
        let now = self.now;
        let backoff = self.cfg.lease * 2;
        let Some(ls) = &mut self.leader_state else {
            return;
        };
        if ls.transfer.as_ref().is_some_and(|t| now >= t.deadline) {
            let t = ls.transfer.take().map(|t| t.requester);
            ls.auto_transfer_after = now + backoff;
            tracing::warn!(member = %self.self_id, "leadership transfer timed out; accepting appends again");
            if let Some(r) = t {
                self.finish_transfer(r, Err(TransferError::Timeout));
            }
        }
    }

    /// Hands leadership to the preferred leader when it is healthy and close behind.
    fn maybe_auto_transfer(&mut self, log: &dyn LogRead) {
        let Some(pref) = self.cfg.preferred_leader.clone() else {
            return;
        };
        if pref == self.self_id {
            return;
        }
        let now = self.now;
        let end = self.end_index;
        let Some(ls) = &self.leader_state else {
            return;
        };
        if ls.transfer.is_some() || now < ls.auto_transfer_after {
            return;
        }
        let alive = ls
            .last_ack
            .get(&pref)
            .is_some_and(|t| now.saturating_sub(*t) < self.cfg.heartbeat_interval * 2);
        let behind = end - ls.dispatchers.get(&pref).map(|d| d.watermark).unwrap_or(-1);
        if alive && behind < self.cfg.max_transfer_wait_index {
            self.start_transfer(pref, Requester::Auto, log);
        }
    }

    pub(crate) fn finish_transfer(
        &mut self,
        requester: Requester,
        result: Result<(), TransferError>,
    ) {
        match requester {
            Requester::Local(client) => self
                .out
                .push(LedgerCommand::TransferResult { client, result }),
            Requester::Rpc { to, id } => {
                let code = match &result {
                    Ok(()) => ResponseCode::Success,
                    Err(TransferError::NotLeader) => ResponseCode::NotLeader,
                    Err(TransferError::UnknownMember(_)) => ResponseCode::UnknownMember,
                    Err(TransferError::InProgress) => ResponseCode::LeaderTransferring,
                    Err(TransferError::FallBehind(_)) => ResponseCode::FallBehindTooMuch,
                    Err(TransferError::Timeout) => ResponseCode::Timeout,
                    Err(TransferError::Refused(_)) => ResponseCode::TakeLeadershipFailed,
                };
                let resp = TransferResponse {
                    term: self.term,
                    code,
                };
                self.respond(to, id, Response::Transfer(resp));
            }
            Requester::Auto => {}
        }
    }

    pub(crate) fn on_transfer_request(
        &mut self,
        from: NodeId,
        id: RequestId,
        req: TransferRequest,
        log: &dyn LogRead,
    ) {
        if req.transfer_id == self.self_id {
            // An operator asks me, the leader, to hand over.
            if req.term != self.term {
                let resp = TransferResponse {
                    term: self.term,
                    code: ResponseCode::InconsistentTerm,
                };
                self.respond(from, id, Response::Transfer(resp));
                return;
            }
            self.start_transfer(req.transferee_id, Requester::Rpc { to: from, id }, log);
            return;
        }
        if req.transferee_id != self.self_id {
            let resp = TransferResponse {
                term: self.term,
                code: ResponseCode::UnexpectedArgument,
            };
            self.respond(from, id, Response::Transfer(resp));
            return;
        }
        // The leader tells me to take over.
        let code = if req.term > self.term {
            // I have not even seen that term: accept the leader first, then refuse;
            // the leader will retry or time out.
            self.accept_leader(req.term, &req.transfer_id);
            ResponseCode::TakeLeadershipFailed
        } else if req.term < self.term {
            ResponseCode::ExpiredTerm
        } else if self.role != Role::Follower || self.leader.as_ref() != Some(&req.transfer_id) {
            ResponseCode::InconsistentLeader
        } else if self.end_index < req.take_leadership_ledger_index
            || self.poisoned
            || self.handler.barrier.is_some()
        {
            ResponseCode::TakeLeadershipFailed
        } else {
            ResponseCode::Success
        };
        let resp = TransferResponse {
            term: self.term,
            code,
        };
        self.respond(from, id, Response::Transfer(resp));
        if code == ResponseCode::Success {
            tracing::info!(member = %self.self_id, term = self.term, "taking leadership on request");
            self.become_candidate();
        }
    }

    pub(crate) fn on_transfer_response(&mut self, from: NodeId, resp: TransferResponse) {
        if resp.term > self.term {
            self.become_follower(resp.term, None);
            return;
        }
        if resp.code == ResponseCode::Success {
            return;
        }
        let now = self.now;
        let backoff = self.cfg.lease * 2;
        let Some(ls) = &mut self.leader_state else {
            return;
        };
        if ls
            .transfer
            .as_ref()
            .is_some_and(|t| t.target == from && t.take_sent)
        {
            let r = ls.transfer.take().map(|t| t.requester);
            ls.auto_transfer_after = now + backoff;
            if let Some(r) = r {
                self.finish_transfer(r, Err(TransferError::Refused(format!("{:?}", resp.code))));
            }
        }
    }
}
