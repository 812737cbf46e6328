//! Retention purges of members over real stores: a random member deletes the
//! data and index files that lie before a random committed entry (never past
//! what it has committed, which the broker has then dispatched), as
//! `Ledger::purge_before` does, and sometimes loses power in the middle of
//! the purge's unlinks and directory syncs.
//!
//! The model: a purge that finished drops the member's entries before its new
//! first index ([`super::MemLog::purge_before`]) and raises the member's
//! `purged_below`, below which the member no longer has to hold committed
//! entries; one that was cut short lets the next crash bring back a log that
//! starts anywhere up to that index ([`super::MemLog::purge_interrupted`]).

use super::Sim;
use super::event_queue::Ev;
use crate::core::LogRead;

impl Sim {
    /// One purge on a random member that is up, over a real store, with no
    /// truncation waiting for its sync.
    pub(super) fn purge_random(&mut self) -> Result<(), String> {
        let i = self.rng.range(0, self.nodes.len() as u64) as usize;
        let n = &self.nodes[i];
        let (Some(core), Some(d)) = (&n.core, &n.disk) else {
            return Ok(());
        };
        if d.poisoned_at.is_some() || n.log.truncation_pending() || n.log.end_index() < 0 {
            return Ok(());
        }
        let committed = core.committed_index().min(n.log.end_index());
        let begin = n.log.begin_index();
        if committed < begin {
            return Ok(());
        }
        let upto = self.rng.range(begin as u64, committed as u64 + 1) as i64;
        let Some(pos) = n.log.entry(upto).ok().flatten().map(|e| e.header.end_pos()) else {
            return Ok(());
        };
        let crash_at = (self.rng.range(0, 4) == 0).then(|| self.rng.next_u64());
        let node = &mut self.nodes[i];
        let Some(d) = &mut node.disk else {
            return Ok(());
        };
        let job = match d.store.prepare_purge(pos) {
            Ok(job) => job,
            Err(e) => return Err(format!("{}: prepare_purge({pos}): {e}", node.id)),
        };
        let new_begin = job.begin_index;
        if self.opts.trace {
            println!(
                "{:>8}us {} purge before {pos} (entry {upto}): begin {begin} -> {new_begin}, {} ops{}",
                self.now_us,
                node.id,
                job.operations(),
                if crash_at.is_some() {
                    ", power loss during it"
                } else {
                    ""
                }
            );
        }
        if new_begin > upto + 1 {
            return Err(format!(
                "{}: a purge before the end of committed entry {upto} moved the begin to {new_begin}",
                node.id
            ));
        }
        if let Some(pick) = crash_at
            && job.operations() > 0
        {
            // Power goes in the middle of the purge.
            let ops = (pick % job.operations() as u64) as usize;
            let _ = job.run_first(ops);
            self.report.purges_interrupted += 1;
            node.log.purge_interrupted(new_begin);
            self.crash(i)?;
            let back = self.rng.range(20_000, 400_000);
            self.schedule(self.now_us + back, Ev::Restart { node: i });
            return Ok(());
        }
        match job.run() {
            Ok(b) => {
                if b > begin {
                    self.report.purges += 1;
                }
                node.log.purge_before(b);
                node.purged_below = node.purged_below.max(b);
                d.check_matches(&node.log)
                    .map_err(|e| format!("{} after a purge: {e}", node.id))?;
                if d.store.begin_index() != node.log.begin_index() {
                    return Err(format!(
                        "{}: the store begins at {} after the purge, the model at {}",
                        node.id,
                        d.store.begin_index(),
                        node.log.begin_index()
                    ));
                }
                Ok(())
            }
            Err(e) => {
                node.log.purge_interrupted(new_begin);
                self.storage_failed(i, format!("purge: {e}"))
            }
        }
    }

    /// Whether member `i` may lack committed entry `idx`: it purged it, or a
    /// reset brought it back from a leader's first kept entry past it.
    pub(super) fn purged_at(&self, i: usize, idx: i64) -> bool {
        idx < self.nodes[i].purged_below
    }

    /// A reset of member `i` to `next_index` (a truncation that keeps
    /// nothing): the entries before it that some member purged are no longer
    /// owed by `i` either.
    pub(super) fn note_reset(&mut self, i: usize, next_index: i64) {
        let purged = self.nodes.iter().map(|n| n.purged_below).max().unwrap_or(0);
        let n = &mut self.nodes[i];
        if next_index.min(purged) > n.purged_below {
            n.purged_below = next_index.min(purged);
            self.report.resets_past_purge += 1;
        }
    }
}
