//! `EntryHandler`: how a follower takes the leader's pushes (DLedger's
//! `EntryHandler`), plus the follower's commit rule.
//!
//! * APPEND requests wait in `write_requests`, ordered by first index, and are
//!   written strictly in index order (`end + 1` next). A second request with the same
//!   first index is answered REPEATED_PUSH. A request entirely at or below the end is
//!   *stale* (a resend after a lost answer): it is answered at once — SUCCESS if the
//!   entries are identical to the local ones, INCONSISTENT_STATE otherwise.
//! * COMPARE, TRUNCATE and COMMIT go to the `priority` queue and are handled before
//!   any APPEND; COMPARE and TRUNCATE drop the waiting APPENDs (the leader restarts
//!   from them).
//! * `checkAbnormalFuture`: at most once per `follower_push_wait`, stale requests are
//!   answered and, when nothing can follow the end, the lowest request that has
//!   waited longer than `follower_push_wait` is answered INCONSISTENT_STATE so the
//!   leader re-COMPAREs (the follower lost entries in a crash, or a push was lost).
//!
//! Invariants:
//! * `matched` is the highest index this follower knows to agree with the log of
//!   the leader of the current term (set by COMPARE/TRUNCATE, extended by APPEND; −1
//!   after a restart or a term change). A TRUNCATE never cuts at or below it. An APPEND is accepted only when the whole local log is
//!   known to agree (`end == matched`), so entries of an old leader can never sit
//!   under entries of the new one.
//! * SUCCESS for entries is sent only once they are durable (durable ack mode).
//! * A TRUNCATE at `i` (carrying the leader's entries `i` and `i + 1`) removes only
//!   entries that differ from the leader's: if the local entry `i + 1` is the
//!   leader's, nothing is cut and the leader is told to compare again.
//! * A TRUNCATE is executed only when no sync is outstanding, is followed at once
//!   by a sync, and nothing is written before that sync completes (the barrier).
//! * The committed index is at most `min(leader's committed index, matched,
//!   durable end)` and never decreases, except when a follower that holds no
//!   committed entry (reset past a purge) is TRUNCATEd below it: it starts over
//!   there and its committed index goes back to its empty log's end (see
//!   `rewind_below_commit`). A committed entry the follower holds is never cut.

use std::collections::{BTreeMap, VecDeque};

use crate::config::AckMode;
use crate::entry::{Entry, place};
use crate::protocol::{
    NodeId, PushRequest, PushResponse, PushType, RequestId, Response, ResponseCode,
};

use super::{CoreTimings, LedgerCommand, LedgerCore, LogRead, Role};

#[derive(Debug, Clone)]
pub(crate) struct WaitingPush {
    pub(crate) from: NodeId,
    pub(crate) id: RequestId,
    pub(crate) req: PushRequest,
    pub(crate) received_at: u64,
}

/// An answer held until the entries it vouches for are durable.
#[derive(Debug, Clone)]
pub(crate) struct DurableWait {
    pub(crate) needed: i64,
    pub(crate) to: NodeId,
    pub(crate) id: RequestId,
    pub(crate) resp: PushResponse,
}

/// A truncation waiting for its sync; `then` is the entry to write after it.
#[derive(Debug, Clone)]
pub(crate) struct Barrier {
    pub(crate) then: Option<(Entry, NodeId, RequestId, i64)>,
}

/// The follower side of replication. See the module documentation.
#[derive(Debug)]
pub struct EntryHandler {
    pub(crate) write_requests: BTreeMap<i64, WaitingPush>,
    pub(crate) priority: VecDeque<WaitingPush>,
    pub(crate) durable_waits: Vec<DurableWait>,
    pub(crate) last_abnormal_check: u64,
    /// The leader's committed index, as last told (current leader only).
    pub(crate) leader_commit: i64,
    pub(crate) matched: i64,
    /// The term `matched` and `leader_commit` belong to.
    pub(crate) matched_term: i64,
    pub(crate) barrier: Option<Barrier>,
}

impl EntryHandler {
    pub(crate) fn new(now: u64) -> EntryHandler {
        EntryHandler {
            write_requests: BTreeMap::new(),
            priority: VecDeque::new(),
            durable_waits: Vec::new(),
            last_abnormal_check: now,
            leader_commit: -1,
            matched: -1,
            matched_term: -1,
            barrier: None,
        }
    }

    pub(crate) fn next_deadline(&self, cfg: &CoreTimings) -> Option<u64> {
        let oldest = self.write_requests.values().map(|w| w.received_at).min()?;
        Some(
            (self.last_abnormal_check + cfg.follower_push_wait)
                .max(oldest + cfg.follower_push_wait),
        )
    }
}

impl LedgerCore {
    fn push_response(
        &self,
        req: &PushRequest,
        code: ResponseCode,
        log: &dyn LogRead,
    ) -> PushResponse {
        // A SUCCESS vouches for `count` entries from `index`: a TRUNCATE only for
        // its first entry (the second one is the leader's next entry, for the
        // conflict check).
        let (index, count) = match req.push_type {
            PushType::Commit => (-1, 0),
            PushType::Compare | PushType::Truncate => (req.first_index(), 1),
            PushType::Append => (req.first_index(), req.entries.len() as i32),
        };
        PushResponse {
            term: self.term,
            code,
            index,
            count,
            begin_index: log.begin_index(),
            end_index: self.end_index,
        }
    }

    fn answer(&mut self, to: NodeId, id: RequestId, resp: PushResponse) {
        self.respond(to, id, Response::Push(resp));
    }

    /// Answers SUCCESS once `needed` is durable (at once in memory ack mode).
    fn answer_when_durable(&mut self, to: NodeId, id: RequestId, resp: PushResponse, needed: i64) {
        let ready = match self.cfg.ack_mode {
            AckMode::Durable => needed <= self.durable_index,
            AckMode::Memory => needed <= self.end_index,
        };
        if ready {
            self.answer(to, id, resp);
        } else {
            self.handler.durable_waits.push(DurableWait {
                needed,
                to,
                id,
                resp,
            });
        }
    }

    /// Forgets the queued pushes (the barrier stays: a started truncation must
    /// complete before anything else is written). What was verified against the
    /// leader of a term stays valid for that term: there is one leader per term and
    /// its log only grows.
    pub(crate) fn handler_reset(&mut self) {
        let term = self.term;
        let h = &mut self.handler;
        h.write_requests.clear();
        h.priority.clear();
        if h.matched_term != term {
            h.leader_commit = -1;
            h.matched = -1;
            h.matched_term = term;
        }
        if let Some(b) = &mut h.barrier {
            b.then = None;
        }
    }

    pub(crate) fn on_push(
        &mut self,
        from: NodeId,
        id: RequestId,
        req: PushRequest,
        log: &dyn LogRead,
    ) {
        if self.poisoned {
            let resp = self.push_response(&req, ResponseCode::DiskError, log);
            return self.answer(from, id, resp);
        }
        let code = self.accept_leader(req.term, &req.leader_id);
        if code != ResponseCode::Success {
            let resp = self.push_response(&req, code, log);
            return self.answer(from, id, resp);
        }
        let waiting = WaitingPush {
            from,
            id,
            req,
            received_at: self.now,
        };
        match waiting.req.push_type {
            PushType::Append => {
                if !entries_well_formed(&waiting.req.entries) {
                    let resp =
                        self.push_response(&waiting.req, ResponseCode::UnexpectedArgument, log);
                    return self.answer(waiting.from, waiting.id, resp);
                }
                let first = waiting.req.first_index();
                if waiting.req.last_index() <= self.end_index {
                    self.answer_stale(waiting, log);
                } else {
                    use std::collections::btree_map::Entry as Slot;
                    match self.handler.write_requests.entry(first) {
                        Slot::Vacant(slot) => {
                            slot.insert(waiting);
                        }
                        Slot::Occupied(_) => {
                            let resp =
                                self.push_response(&waiting.req, ResponseCode::RepeatedPush, log);
                            self.answer(waiting.from, waiting.id, resp);
                        }
                    }
                }
            }
            PushType::Commit => self.handler.priority.push_back(waiting),
            PushType::Compare | PushType::Truncate => {
                let max_entries = if waiting.req.push_type == PushType::Truncate {
                    2
                } else {
                    1
                };
                if waiting.req.entries.len() > max_entries
                    || !entries_well_formed(&waiting.req.entries)
                {
                    let resp =
                        self.push_response(&waiting.req, ResponseCode::UnexpectedArgument, log);
                    return self.answer(waiting.from, waiting.id, resp);
                }
                self.handler.write_requests.clear();
                self.handler.priority.push_back(waiting);
            }
        }
    }

    /// A request for entries the follower already has: SUCCESS if they are the same.
    fn answer_stale(&mut self, w: WaitingPush, log: &dyn LogRead) {
        let mut same = true;
        for e in &w.req.entries {
            match log.entry(e.index()) {
                Ok(Some(local)) if local.header == e.header => {}
                _ => {
                    same = false;
                    break;
                }
            }
        }
        if same {
            let resp = self.push_response(&w.req, ResponseCode::Success, log);
            let last = w.req.last_index();
            // Identical entries at the same indexes mean identical prefixes (log
            // matching): everything up to `last` agrees with the leader.
            self.handler.matched = self.handler.matched.max(last);
            self.note_leader_commit(&w.req);
            self.answer_when_durable(w.from, w.id, resp, last);
        } else {
            let resp = self.push_response(&w.req, ResponseCode::InconsistentState, log);
            self.answer(w.from, w.id, resp);
        }
    }

    /// Handles queued pushes in order, as far as possible.
    pub(crate) fn pump_handler(&mut self, log: &dyn LogRead) {
        loop {
            if self.role != Role::Follower || self.poisoned || self.handler.barrier.is_some() {
                return;
            }
            if let Some(front) = self.handler.priority.front() {
                if front.req.push_type == PushType::Truncate && self.sync_in_flight.is_some() {
                    // A truncation waits for the outstanding sync (see invariants).
                    return;
                }
                if front.req.push_type != PushType::Commit && self.wrote_this_step {
                    // COMPARE/TRUNCATE read the log: wait for the `Written` step.
                    return;
                }
                let Some(w) = self.handler.priority.pop_front() else {
                    return;
                };
                match w.req.push_type {
                    PushType::Commit => self.handle_commit(w, log),
                    PushType::Compare => self.handle_compare(w, log),
                    PushType::Truncate => self.handle_truncate(w, log),
                    PushType::Append => {}
                }
                continue;
            }
            let next = self.end_index + 1;
            match self.handler.write_requests.remove(&next) {
                Some(w) => self.handle_append(w, log),
                None => return,
            }
        }
    }

    fn note_leader_commit(&mut self, req: &PushRequest) {
        if req.term == self.term && req.commit_index > self.handler.leader_commit {
            self.handler.leader_commit = req.commit_index;
        }
        self.advance_follower_commit();
    }

    /// `updateCommittedIndex`, with Raft's bound: never past what is known to match
    /// the leader, never past the durable end.
    pub(crate) fn advance_follower_commit(&mut self) {
        if self.role != Role::Follower {
            return;
        }
        let limit = match self.cfg.ack_mode {
            AckMode::Durable => self.durable_index,
            AckMode::Memory => self.end_index,
        };
        let c = self
            .handler
            .leader_commit
            .min(self.handler.matched)
            .min(limit);
        if c > self.committed_index {
            debug_assert!(c <= limit && c <= self.end_index);
            self.committed_index = c;
            self.out
                .push(LedgerCommand::CommitAdvanced { committed_index: c });
        }
    }

    fn handle_commit(&mut self, w: WaitingPush, log: &dyn LogRead) {
        self.note_leader_commit(&w.req);
        let resp = self.push_response(&w.req, ResponseCode::Success, log);
        self.answer(w.from, w.id, resp);
    }

    fn handle_compare(&mut self, w: WaitingPush, log: &dyn LogRead) {
        let e = &w.req.entries[0];
        let index = e.index();
        let local = if index <= log.end_index() {
            log.entry(index)
        } else {
            Ok(None)
        };
        match local {
            Ok(Some(l)) if l.header == e.header => {
                self.handler.matched = index.max(self.handler.matched.min(self.end_index));
                let resp = self.push_response(&w.req, ResponseCode::Success, log);
                self.answer_when_durable(w.from, w.id, resp, index);
                self.note_leader_commit(&w.req);
            }
            Ok(_) => {
                let resp = self.push_response(&w.req, ResponseCode::InconsistentState, log);
                self.answer(w.from, w.id, resp);
            }
            Err(reason) => {
                let resp = self.push_response(&w.req, ResponseCode::DiskError, log);
                self.answer(w.from, w.id, resp);
                self.on_read_failure(&reason);
            }
        }
    }

    fn handle_truncate(&mut self, w: WaitingPush, log: &dyn LogRead) {
        debug_assert!(self.sync_in_flight.is_none());
        let e = w.req.entries[0].clone();
        let i = e.index();
        let identical =
            i <= log.end_index() && matches!(log.entry(i), Ok(Some(ref l)) if l.header == e.header);
        self.note_leader_commit_hint(&w.req);
        if identical {
            self.truncate_after_identical(w, e, log);
        } else {
            self.truncate_and_rewrite(w, e, log);
        }
    }

    /// TRUNCATE whose first entry `e` this follower already holds identically: cut
    /// after it (or after what it verified) only on a conflict.
    fn truncate_after_identical(&mut self, w: WaitingPush, e: Entry, log: &dyn LogRead) {
        let i = e.index();
        // Cut only on a conflict: when the next local entry is the leader's next
        // entry, the TRUNCATE was decided on stale information — refuse, and the
        // leader compares again.
        if i < log.end_index()
            && let Some(next) = w.req.entries.get(1)
            && matches!(log.entry(i + 1), Ok(Some(ref l)) if l.header == next.header)
        {
            self.handler.matched = self.handler.matched.max(i + 1);
            let resp = self.push_response(&w.req, ResponseCode::InconsistentState, log);
            return self.answer(w.from, w.id, resp);
        }
        // Entries this follower already verified against the current leader stay:
        // the leader may have counted them (its APPENDs race with its COMPARE).
        let keep = i.max(self.handler.matched);
        let keep_end_pos = if keep == i {
            Some(e.header.end_pos())
        } else {
            match log.entry(keep) {
                Ok(Some(k)) => Some(k.header.end_pos()),
                _ => None,
            }
        };
        let Some(keep_end_pos) = keep_end_pos else {
            let resp = self.push_response(&w.req, ResponseCode::InconsistentState, log);
            return self.answer(w.from, w.id, resp);
        };
        self.handler.matched = keep;
        if self.end_index > keep {
            // A committed entry is never cut.
            assert!(
                keep >= self.committed_index,
                "member {}: truncation after {keep} below the committed index {}",
                self.self_id,
                self.committed_index
            );
            let keep_term = if keep == i {
                e.term()
            } else {
                log.term_at(keep).unwrap_or(-1)
            };
            self.wrote_this_step = true;
            self.out.push(LedgerCommand::Truncate {
                next_index: keep + 1,
                next_pos: keep_end_pos,
            });
            self.end_index = keep;
            self.end_term = keep_term;
            self.end_pos = keep_end_pos;
            self.durable_index = self.durable_index.min(keep);
            self.start_barrier(None);
        }
        let resp = self.push_response(&w.req, ResponseCode::Success, log);
        self.answer_when_durable(w.from, w.id, resp, i);
        self.advance_follower_commit();
    }

    /// TRUNCATE whose first entry `e` this follower does not hold: rewrite from its
    /// index.
    fn truncate_and_rewrite(&mut self, w: WaitingPush, e: Entry, log: &dyn LogRead) {
        let i = e.index();
        if i <= self.committed_index && !self.rewind_below_commit(&w, i, log) {
            return;
        }
        // Rewrite from `i`: keep the prefix if it ends where the leader's entry
        // starts, otherwise drop the whole log and restart at the leader's position.
        let prev = i - 1;
        // The prefix may stay only if it is known to agree with the leader:
        // committed here, or verified in this term. A TRUNCATE at the leader's
        // first kept entry (the follower fell behind a purge) vouches for
        // nothing before it: an unverified prefix is dropped with the rest.
        let verified = prev <= self.committed_index.max(self.handler.matched);
        let prev_end =
            if verified && prev >= log.begin_index() && prev >= 0 && prev <= log.end_index() {
                match log.entry(prev) {
                    Ok(Some(p)) => Some((p.header.end_pos(), p.term())),
                    _ => None,
                }
            } else {
                None
            };
        let (next_pos, end_term, keep) = match prev_end {
            Some((p, t)) if place(p, e.size(), self.cfg.data_file_size).ok() == Some(e.pos()) => {
                (p, t, true)
            }
            _ => (e.pos(), -1, false),
        };
        debug_assert!(prev >= self.committed_index);
        self.wrote_this_step = true;
        self.out.push(if keep {
            LedgerCommand::Truncate {
                next_index: i,
                next_pos,
            }
        } else {
            LedgerCommand::Reset {
                next_index: i,
                next_pos,
            }
        });
        self.end_index = prev;
        self.end_term = end_term;
        self.end_pos = next_pos;
        self.durable_index = self.durable_index.min(prev);
        self.handler.matched = prev;
        self.start_barrier(Some((e, w.from, w.id, w.req.commit_index)));
    }

    /// A TRUNCATE at `i`, at or below the committed index, of an entry this
    /// follower does not hold identically. Committed entries are identical on
    /// every member that holds them, so:
    /// * the follower holds a different entry at `i`: the cluster broke its
    ///   one rule (a committed entry is never overwritten), and it stops;
    /// * it still holds committed entries (after `i`: it purged `i`): a leader
    ///   comparing from its end would have found them, so the push is stale or
    ///   duplicated; nothing is cut, and INCONSISTENT_STATE sends the leader
    ///   back to COMPARE (returns false);
    /// * it holds no committed entry (it was reset past a purge: its log starts
    ///   after its committed index, and a leader that kept the purged entries
    ///   found no match): it starts over at `i` and takes the committed
    ///   entries again. Its committed index goes back to `i - 1`, so it never
    ///   passes the log end; what was already dispatched the broker tracks by
    ///   its own index, so nothing is dispatched twice (returns true).
    fn rewind_below_commit(&mut self, w: &WaitingPush, i: i64, log: &dyn LogRead) -> bool {
        let begin = log.begin_index();
        let end = log.end_index();
        if end >= 0 && begin <= i && i <= end {
            match log.entry(i) {
                Ok(Some(local)) => panic!(
                    "member {}: TRUNCATE at {i} would overwrite committed entry {i} \
                     (term {}, the leader's has term {}; committed index {})",
                    self.self_id,
                    local.term(),
                    w.req.entries[0].term(),
                    self.committed_index
                ),
                Ok(None) => {}
                Err(reason) => {
                    let resp = self.push_response(&w.req, ResponseCode::DiskError, log);
                    self.answer(w.from.clone(), w.id, resp);
                    self.on_read_failure(&reason);
                    return false;
                }
            }
        }
        if end >= 0 && begin <= self.committed_index {
            let resp = self.push_response(&w.req, ResponseCode::InconsistentState, log);
            self.answer(w.from.clone(), w.id, resp);
            return false;
        }
        tracing::warn!(
            member = %self.self_id,
            committed = self.committed_index,
            begin,
            truncate_at = i,
            "log starts after the committed index (reset past a purge); \
             starting over at the leader's entry and taking committed entries again"
        );
        self.committed_index = i - 1;
        true
    }

    fn note_leader_commit_hint(&mut self, req: &PushRequest) {
        if req.term == self.term && req.commit_index > self.handler.leader_commit {
            self.handler.leader_commit = req.commit_index;
        }
    }

    fn start_barrier(&mut self, then: Option<(Entry, NodeId, RequestId, i64)>) {
        self.handler.barrier = Some(super::handler::Barrier { then });
        self.sync_in_flight = Some(self.end_index);
        self.out.push(LedgerCommand::Sync {
            through: self.end_index,
        });
    }

    /// Called after every completed sync: finishes a truncation barrier and releases
    /// answers whose entries are now durable.
    pub(crate) fn handler_on_synced(&mut self, log: &dyn LogRead) {
        if let Some(b) = self.handler.barrier.take()
            && let Some((e, to, id, _commit)) = b.then
        {
            let index = e.index();
            if index == self.end_index + 1 && self.role == Role::Follower {
                debug_assert!(e.term() >= self.end_term && e.term() <= self.term);
                self.end_index = index;
                self.end_term = e.term();
                self.end_pos = e.header.end_pos();
                self.handler.matched = index;
                self.wrote_this_step = true;
                self.out
                    .push(LedgerCommand::AppendAsFollower { entries: vec![e] });
                let resp = PushResponse {
                    term: self.term,
                    code: ResponseCode::Success,
                    index,
                    count: 1,
                    begin_index: if log.begin_index() < 0 {
                        index
                    } else {
                        log.begin_index().min(index)
                    },
                    end_index: self.end_index,
                };
                self.answer_when_durable(to, id, resp, index);
            }
        }
        let durable = match self.cfg.ack_mode {
            AckMode::Durable => self.durable_index,
            AckMode::Memory => self.end_index,
        };
        if self
            .handler
            .durable_waits
            .iter()
            .any(|w| w.needed <= durable)
        {
            let waits = std::mem::take(&mut self.handler.durable_waits);
            for w in waits {
                if w.needed <= durable {
                    self.answer(w.to, w.id, w.resp);
                } else {
                    self.handler.durable_waits.push(w);
                }
            }
        }
        self.advance_follower_commit();
    }

    fn handle_append(&mut self, w: WaitingPush, log: &dyn LogRead) {
        // The whole local log must be known to agree with this leader.
        if self.end_index != self.handler.matched {
            let resp = self.push_response(&w.req, ResponseCode::InconsistentState, log);
            return self.answer(w.from, w.id, resp);
        }
        let mut end_pos = self.end_pos;
        let mut prev_term = self.end_term;
        let mut ok = true;
        for (k, e) in w.req.entries.iter().enumerate() {
            let expected = place(end_pos, e.size(), self.cfg.data_file_size).ok();
            if e.index() != self.end_index + 1 + k as i64
                || expected != Some(e.pos())
                || e.term() < prev_term
                || e.term() > w.req.term
            {
                ok = false;
                break;
            }
            end_pos = e.header.end_pos();
            prev_term = e.term();
        }
        if !ok {
            let resp = self.push_response(&w.req, ResponseCode::InconsistentState, log);
            return self.answer(w.from, w.id, resp);
        }
        let last = w.req.last_index();
        debug_assert!(prev_term >= self.end_term && prev_term <= self.term);
        self.end_index = last;
        self.end_term = prev_term;
        self.end_pos = end_pos;
        self.handler.matched = last;
        self.wrote_this_step = true;
        self.out.push(LedgerCommand::AppendAsFollower {
            entries: w.req.entries.clone(),
        });
        let resp = self.push_response(&w.req, ResponseCode::Success, log);
        self.answer_when_durable(w.from.clone(), w.id, resp, last);
        self.note_leader_commit(&w.req);
    }

    /// `checkAbnormalFuture`, run on ticks.
    pub(crate) fn handler_tick(&mut self, log: &dyn LogRead) {
        if self.role != Role::Follower || self.handler.write_requests.is_empty() {
            return;
        }
        let now = self.now;
        if now < self.handler.last_abnormal_check + self.cfg.follower_push_wait {
            return;
        }
        self.handler.last_abnormal_check = now;
        let end = self.end_index;
        let stale: Vec<i64> = self
            .handler
            .write_requests
            .iter()
            .filter(|(_, w)| w.req.last_index() <= end)
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            if let Some(w) = self.handler.write_requests.remove(&k) {
                self.answer_stale(w, log);
            }
        }
        if self.handler.write_requests.contains_key(&(end + 1)) {
            return;
        }
        let wait = self.cfg.follower_push_wait;
        let oldest_gap = self
            .handler
            .write_requests
            .iter()
            .find(|(_, w)| now >= w.received_at + wait)
            .map(|(k, _)| *k);
        if let Some(k) = oldest_gap
            && let Some(w) = self.handler.write_requests.remove(&k)
        {
            let resp = self.push_response(&w.req, ResponseCode::InconsistentState, log);
            self.answer(w.from, w.id, resp);
        }
    }

    pub(crate) fn on_read_failure(&mut self, reason: &str) {
        self.on_storage_failed(reason);
    }

    /// The leader side: a push answer from a follower.
    pub(crate) fn on_push_response(
        &mut self,
        from: NodeId,
        id: RequestId,
        resp: PushResponse,
        log: &dyn LogRead,
    ) {
        if resp.term > self.term {
            self.become_follower(resp.term, None);
            return;
        }
        if self.role != Role::Leader || resp.term != self.term {
            return;
        }
        self.note_ack(&from);
        self.with_dispatcher(&from, log, |d, ctx| d.on_response(ctx, id, &resp));
    }
}

/// Entries of one request: consecutive indexes, each internally consistent.
fn entries_well_formed(entries: &[Entry]) -> bool {
    !entries.is_empty()
        && entries.windows(2).all(|w| w[1].index() == w[0].index() + 1)
        && entries
            .iter()
            .all(|e| e.index() >= 0 && e.validate().is_ok())
}
