//! `QuorumAckChecker`: the leader's commit rule and the completion of waiting
//! appends.
//!
//! The committed index advances to the highest index held by a majority — the
//! `(n/2)`-th largest of the members' water marks, the leader's own being its
//! durable end (durable ack mode) — but only when that entry is of the leader's
//! current term (Raft §5.4.2: earlier-term entries commit only underneath one of the
//! current term; the no-op every leader appends first makes that happen at once).
//! The committed index also never passes the leader's own durable end, so on every
//! member the committed prefix is durable locally.
//! Appends waiting for an index at or below the committed index are answered; those
//! waiting past `max_wait_ack` are answered `Timeout` (outcome unknown).

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
        // Never past the leader's own durable end either: on every member the
        // committed prefix is durable locally (the broker dispatches only that).
        let quorum_index = marks[marks.len() / 2].min(self.own_watermark());
        if quorum_index <= self.committed_index {
            return;
        }
        // Only an entry of the current term commits by counting.
        if self.term_of(log, quorum_index) != Some(self.term) {
            return;
        }
        // Raft's commit rule: a majority (the leader counted by its own
        // watermark) holds the entry, which is of the leader's own term and
        // within its durable end (durable ack mode).
        debug_assert!(
            marks.iter().filter(|m| **m >= quorum_index).count() >= self.cfg.quorum,
            "commit of {quorum_index} without a quorum: {marks:?}"
        );
        debug_assert!(quorum_index <= self.end_index && quorum_index <= self.own_watermark());
        self.committed_index = quorum_index;
        self.out.push(LedgerCommand::CommitAdvanced {
            committed_index: quorum_index,
        });
        let term = self.term;
        let Some(ls) = &mut self.leader_state else {
            return;
        };
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
