//! `QuorumAckChecker`: the leader's commit rule and the completion of waiting
//! appends.
//!
//! The committed index advances to the highest index held by a majority — the
//! `(n/2)`-th largest of the members' water marks, the leader's own being its
//! durable end (durable ack mode) — but only when that entry is of the leader's
//! current term (Raft §5.4.2: earlier-term entries commit only underneath one of the
//! current term; the no-op every leader appends first makes that happen at once).
//! Appends waiting for an index at or below that quorum index are answered (a
//! majority holds them durably, the leader's own sync not necessarily among
//! them); those waiting past `max_wait_ack` are answered `Timeout` (outcome
//! unknown). The member's own committed index (what it dispatches, checkpoints
//! and sends to followers) is the quorum index capped by the leader's durable
//! end, so on every member the committed prefix is durable locally.

use crate::protocol::{Envelope, NodeId, Rpc};

use super::dispatcher::DispatchCtx;
use super::{AppendReceipt, EntryDispatcher, LedgerCommand, LedgerCore, LogRead, Role};

impl LedgerCore {
    /// Runs `f` on the dispatcher of `peer` with a context over the core's state,
    /// then sends what it produced.
    pub(crate) fn with_dispatcher<F>(&mut self, peer: &NodeId, log: &dyn LogRead, f: F)
    where
        F: FnOnce(&mut EntryDispatcher, &mut DispatchCtx<'_>),
    {
        let Some(mut ls) = self.leader_state.take() else {
            return;
        };
        let mut sends = Vec::new();
        let mut failure = None;
        if let Some(d) = ls.dispatchers.get_mut(peer) {
            let mut ctx = DispatchCtx {
                log,
                now: self.now,
                term: self.term,
                leader_id: &self.self_id,
                commit_index: self.committed_index,
                end_index: self.end_index,
                end_pos: self.end_pos,
                cfg: &self.cfg,
                next_id: &mut self.next_request_id,
                sends: &mut sends,
                read_failure: &mut failure,
            };
            f(d, &mut ctx);
        }
        self.leader_state = Some(ls);
        self.send_pushes(sends);
        if let Some(reason) = failure {
            self.on_storage_failed(&reason);
        }
    }

    fn send_pushes(&mut self, sends: Vec<(NodeId, u64, crate::protocol::Request)>) {
        for (to, id, body) in sends {
            let env = Envelope {
                from: self.self_id.clone(),
                to,
                rpc: Rpc::Request { id, body },
            };
            self.send(env);
        }
    }

    /// Lets every dispatcher send what it can.
    pub(crate) fn pump_dispatchers(&mut self, log: &dyn LogRead) {
        let peers = self.peers.clone();
        for p in &peers {
            if self.role != Role::Leader {
                return;
            }
            self.with_dispatcher(p, log, |d, ctx| d.pump(ctx));
        }
    }

    /// Advances the committed index from the water marks and answers waiters.
    pub(crate) fn check_commit(&mut self, log: &dyn LogRead) {
        if self.role != Role::Leader || self.leader_state.is_none() {
            return;
        }
        let mut marks = self.all_watermarks();
        marks.sort_unstable_by(|a, b| b.cmp(a));
        // Raft's commit: the highest index a majority holds durably, the
        // leader counted by its own durable end.
        let quorum_index = marks[marks.len() / 2];
        let waiting = self
            .leader_state
            .as_ref()
            .and_then(|ls| ls.waiters.keys().next().copied());
        if quorum_index <= self.committed_index && waiting.is_none_or(|w| w > quorum_index) {
            return;
        }
        // Only an entry of the current term commits by counting (and the log's
        // terms never go down, so nothing past it is of an earlier term).
        if quorum_index < 0 || self.term_of(log, quorum_index) != Some(self.term) {
            return;
        }
        debug_assert!(
            marks.iter().filter(|m| **m >= quorum_index).count() >= self.cfg.quorum,
            "commit of {quorum_index} without a quorum: {marks:?}"
        );
        debug_assert!(quorum_index <= self.end_index);
        self.advance_local_commit(log, quorum_index);
        self.answer_waiters_up_to(quorum_index);
    }

    /// The member's own committed index (what it dispatches, checkpoints and
    /// sends): the quorum's, but never past its own durable end, so on every
    /// member the committed prefix is durable locally.
    fn advance_local_commit(&mut self, log: &dyn LogRead, quorum_index: i64) {
        let local = quorum_index.min(self.own_watermark());
        if local <= self.committed_index || self.term_of(log, local) != Some(self.term) {
            return;
        }
        debug_assert!(local <= self.own_watermark());
        self.committed_index = local;
        self.out.push(LedgerCommand::CommitAdvanced {
            committed_index: local,
        });
    }

    /// Answers the appends waiting for an index up to `quorum_index`: a
    /// majority holds them durably, which is all an acknowledgement promises
    /// (Raft). The leader's own sync need not be among them: two followers'
    /// syncs commit an entry the leader's slower sync has not reached yet.
    fn answer_waiters_up_to(&mut self, quorum_index: i64) {
        let term = self.term;
        let Some(ls) = &mut self.leader_state else {
            return;
        };
        if ls.waiters.is_empty() {
            return;
        }
        let rest = ls.waiters.split_off(&(quorum_index + 1));
        let done = std::mem::replace(&mut ls.waiters, rest);
        for (last_index, w) in done {
            self.out.push(LedgerCommand::AppendResult {
                client: w.client,
                result: Ok(AppendReceipt {
                    term,
                    first_index: w.first_index,
                    last_index,
                }),
            });
        }
    }
}
