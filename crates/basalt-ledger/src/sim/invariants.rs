//! Safety invariants, checked after every step: one leader per term, committed
//! entries never change, followers hold what the leader believes, acknowledged
//! appends are durable on a majority, commit never passes the durable end.

use super::Sim;
use crate::config::AckMode;
use crate::core::{LogRead, Role};
use crate::entry::Entry;

impl Sim {
    /// A member never writes at or below its own committed index. (A stale leader
    /// may write entries that differ from what the cluster committed at those
    /// indexes: they never commit, which `on_commit` checks.)
    pub(super) fn check_write(&self, i: usize, entries: &[Entry]) -> Result<(), String> {
        if self.nodes[i].log.truncation_pending() {
            return Err(format!(
                "{} writes before its truncation is durable (the barrier)",
                self.nodes[i].id
            ));
        }
        let committed = self.nodes[i].committed_before_step;
        for e in entries {
            if e.index() <= committed {
                return Err(format!(
                    "{} writes index {} at or below its committed index {committed}",
                    self.nodes[i].id,
                    e.index()
                ));
            }
        }
        Ok(())
    }

    /// A member's committed index never goes back between two commits: the
    /// one way back is a reset of a member that holds no committed entry
    /// below its committed index (`truncate_log` then lowers
    /// `checked_committed` to the reset's empty log), and every entry it
    /// then commits again is checked here like a new one.
    pub(super) fn on_commit(&mut self, i: usize, c: i64) -> Result<(), String> {
        let prev = self.nodes[i].checked_committed;
        if c < prev {
            return Err(format!(
                "{} committed index went back {prev} -> {c}",
                self.nodes[i].id
            ));
        }
        let start = ((prev + 1) as usize).min(self.committed.len());
        for idx in start..=(c as usize) {
            let held = self.nodes[i].log.entry(idx as i64).ok().flatten();
            // A purged entry need not be held; one that is (a committed entry
            // taken again after a reset below the commit) must be the
            // cluster's.
            if held.is_none() && self.purged_at(i, idx as i64) && idx < self.committed.len() {
                continue;
            }
            let e = held
                .ok_or_else(|| format!("{} committed {idx} it does not hold", self.nodes[i].id))?;
            if idx < self.committed.len() {
                if self.committed[idx] != e {
                    return Err(format!(
                        "{} committed index {idx} with term {} but the cluster committed term {}",
                        self.nodes[i].id,
                        e.term(),
                        self.committed[idx].term()
                    ));
                }
            } else {
                if self.acked.get(&(idx as i64)).is_some_and(|a| *a != e) {
                    return Err(format!(
                        "{} committed index {idx} with term {} over an acknowledged entry",
                        self.nodes[i].id,
                        e.term()
                    ));
                }
                self.committed.push(e);
            }
        }
        self.nodes[i].checked_committed = c;
        self.report.committed = self.report.committed.max(c);
        Ok(())
    }

    /// Every committed entry from `from` on — acknowledged appends included — is on
    /// a majority of durable logs (durable ack mode).
    pub(super) fn check_acked_from(&self, from: i64) -> Result<(), String> {
        if self.opts.ack_mode != AckMode::Durable {
            return Ok(());
        }
        let from = from.max(0) as usize;
        let acked_past_commit = self.acked.range(self.committed.len() as i64..);
        let entries = self.committed[from.min(self.committed.len())..]
            .iter()
            .enumerate()
            .map(|(k, e)| (from + k, e))
            .chain(acked_past_commit.map(|(i, e)| (*i as usize, e)));
        for (idx, e) in entries {
            let holders = self.durable_holders(idx as i64, e);
            if holders < self.nodes.len() / 2 + 1 {
                let what = if self.acked.contains_key(&(idx as i64)) {
                    "acknowledged"
                } else {
                    "committed"
                };
                return Err(format!(
                    "{what} entry {idx} is durable on only {holders} members"
                ));
            }
        }
        Ok(())
    }

    /// How many members hold `e` at `idx` durably (or purged it, having held it).
    fn durable_holders(&self, idx: i64, e: &Entry) -> usize {
        self.nodes
            .iter()
            .filter(|n| {
                let d = n.log.durable_entries();
                let first = n.log.first_index();
                idx < n.purged_below || idx >= first && d.get((idx - first) as usize) == Some(e)
            })
            .count()
    }

    /// Whether a majority holds `e` at `idx` durably.
    pub(super) fn durable_on_majority(&self, idx: i64, e: &Entry) -> bool {
        self.durable_holders(idx, e) > self.nodes.len() / 2
    }

    pub(super) fn check_node(&mut self, i: usize) -> Result<(), String> {
        if let Some(e) = self.pending_error.take() {
            return Err(e);
        }
        let is_leader = self.nodes[i]
            .core
            .as_ref()
            .is_some_and(|c| c.role() == Role::Leader);
        if is_leader {
            self.check_one_leader_per_term(i)?;
            self.check_peer_watermarks(i)?;
        }
        self.check_commit_within_durable(i)
    }

    /// A member's committed index never passes its durable end (durable ack mode).
    fn check_commit_within_durable(&self, i: usize) -> Result<(), String> {
        let node = &self.nodes[i];
        let Some(core) = &node.core else {
            return Ok(());
        };
        if self.opts.ack_mode == AckMode::Durable {
            let durable_end = node.log.first_index() + node.log.durable_entries().len() as i64 - 1;
            let c = core.committed_index();
            if c >= 0 && c > durable_end {
                return Err(format!(
                    "{} committed {c} beyond its durable end {durable_end}",
                    node.id
                ));
            }
        }
        Ok(())
    }

    /// Member `i` leads: nobody else led its term.
    fn check_one_leader_per_term(&mut self, i: usize) -> Result<(), String> {
        let node = &self.nodes[i];
        let Some(core) = &node.core else {
            return Ok(());
        };
        match self.leaders.get(&core.term()) {
            Some(l) if *l != node.id => {
                return Err(format!(
                    "two leaders in term {}: {l} and {}",
                    core.term(),
                    node.id
                ));
            }
            Some(_) => {}
            None => {
                self.leaders.insert(core.term(), node.id.clone());
                self.report.terms = self.report.terms.max(core.term());
            }
        }
        Ok(())
    }

    /// Member `i` leads: a follower holds the leader's entry at its water mark
    /// (durably, in durable ack mode).
    fn check_peer_watermarks(&self, i: usize) -> Result<(), String> {
        let node = &self.nodes[i];
        let Some(core) = &node.core else {
            return Ok(());
        };
        let Some(marks) = core.peer_watermarks() else {
            return Ok(());
        };
        for (peer, w) in marks {
            if w < 0 {
                continue;
            }
            let Some(j) = self.index_of(&peer) else {
                continue;
            };
            if self.purged_at(i, w) || self.purged_at(j, w) {
                continue;
            }
            let mine = node.log.entry(w).ok().flatten();
            let peer_node = &self.nodes[j];
            let same_term = peer_node
                .core
                .as_ref()
                .is_some_and(|c| c.term() == core.term());
            if !same_term {
                continue;
            }
            let theirs = peer_node.log.entry(w).ok().flatten();
            if mine.is_none() || mine != theirs {
                return Err(format!(
                    "leader {} believes {peer} holds index {w}, but it holds {:?}",
                    node.id,
                    theirs.map(|e| e.term())
                ));
            }
            if self.opts.ack_mode == AckMode::Durable {
                let first = peer_node.log.first_index();
                let durable = peer_node.log.durable_entries();
                if w < first || durable.get((w - first) as usize) != mine.as_ref() {
                    return Err(format!(
                        "leader {} counts {peer} for {w}, which is not durable there",
                        node.id
                    ));
                }
            }
        }
        Ok(())
    }
}
