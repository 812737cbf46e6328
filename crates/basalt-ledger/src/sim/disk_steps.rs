//! The simulator's side of members over real stores (see `disk_member`):
//! mirroring the model's writes into the store, running syncs, checkpoints and
//! term-file writes on the simulated disk, poisoning after a failed one, and
//! the crash that checks real recovery against the model.

use super::Sim;
use super::disk_member::Flip;
use super::event_queue::Ev;
use crate::core::Event;
use crate::entry::Entry;
use crate::protocol::{Envelope, Response, ResponseCode, Rpc, VoteResult};

impl Sim {
    /// Appends to member `i`'s real store what the model just appended.
    pub(super) fn disk_append(&mut self, i: usize, entries: &[Entry]) -> Result<(), String> {
        let n = &mut self.nodes[i];
        let Some(d) = &mut n.disk else {
            return Ok(());
        };
        if let Err(e) = d.store.append_entries(entries) {
            return Err(format!("{}: store append: {e}", n.id));
        }
        d.check_matches(&n.log)
            .map_err(|e| format!("{}: {e}", n.id))
    }

    /// Truncates (or resets) member `i`'s real store as the model was.
    pub(super) fn disk_truncate(
        &mut self,
        i: usize,
        next_index: i64,
        next_pos: i64,
        reset: bool,
    ) -> Result<(), String> {
        let n = &mut self.nodes[i];
        let Some(d) = &mut n.disk else {
            return Ok(());
        };
        let r = if reset {
            d.store.reset(next_index, next_pos)
        } else {
            d.store.truncate(next_index, next_pos)
        };
        if let Err(e) = r {
            return Err(format!("{}: store truncate: {e}", n.id));
        }
        d.check_matches(&n.log)
            .map_err(|e| format!("{}: {e}", n.id))
    }

    /// Runs member `i`'s prepared sync: `Ok(true)` when it completed,
    /// `Ok(false)` when the member lost power in the middle of a reset's part
    /// of it (one in three), `Err` with a failure.
    pub(super) fn disk_run_sync(&mut self, i: usize) -> Result<Result<bool, String>, String> {
        let Some(d) = &mut self.nodes[i].disk else {
            return Ok(Ok(true));
        };
        let Some(job) = d.pending_sync.take() else {
            return Ok(Ok(true));
        };
        let ops = job.reset_operations();
        if ops > 0 && self.rng.range(0, 3) == 0 {
            let k = self.rng.range(0, ops as u64) as usize;
            let _ = job.run_reset_first(k);
            self.report.resets_cut_short += 1;
            self.crash(i)?;
            let back = self.rng.range(20_000, 400_000);
            self.schedule(self.now_us + back, Ev::Restart { node: i });
            return Ok(Ok(false));
        }
        Ok(job.run().map(|_| true).map_err(|e| format!("sync: {e}")))
    }

    /// Writes a checkpoint of member `i` (durable end as its core knows it,
    /// `committed`), as the runtime's checkpoint timer does.
    pub(super) fn disk_checkpoint(&mut self, i: usize, committed: i64) {
        let n = &mut self.nodes[i];
        let (Some(d), Some(core)) = (&mut n.disk, &n.core) else {
            return;
        };
        if d.poisoned_at.is_some() {
            return;
        }
        let job = d.store.prepare_checkpoint(core.durable_index(), committed);
        if let Err(e) = job.run() {
            n.failed = Some(format!("checkpoint: {e}"));
        }
    }

    /// Marks member `i`'s store poisoned (remembering the durable index its
    /// core had) and schedules the operator's restart.
    pub(super) fn poison(&mut self, i: usize) {
        let durable = self.nodes[i].core.as_ref().map(|c| c.durable_index());
        let epoch = self.nodes[i].epoch;
        let Some(d) = &mut self.nodes[i].disk else {
            return;
        };
        d.store.poison();
        if d.poisoned_at.is_none() {
            d.poisoned_at = durable;
            let at = self.now_us + self.rng.range(50_000, 400_000);
            self.schedule(at, Ev::PowerCycle { node: i, epoch });
        }
    }

    /// A sync or hard-state write of member `i` failed: poison, and tell the core.
    pub(super) fn storage_failed(&mut self, i: usize, reason: String) -> Result<(), String> {
        self.poison(i);
        self.step_node(i, Event::StorageFailed { reason })
    }

    /// A member whose store failed acknowledges nothing and votes for nobody.
    pub(super) fn check_poisoned_send(&self, i: usize, env: &Envelope) -> Result<(), String> {
        let n = &self.nodes[i];
        let Some(at) = n.disk.as_ref().and_then(|d| d.poisoned_at) else {
            return Ok(());
        };
        let durable = n.core.as_ref().map(|c| c.durable_index()).unwrap_or(-1);
        if durable > at {
            return Err(format!(
                "{}: durable index moved {at} -> {durable} after its store failed",
                n.id
            ));
        }
        match &env.rpc {
            Rpc::Response {
                body: Response::Push(p),
                ..
            } if p.code == ResponseCode::Success && p.count > 0 => Err(format!(
                "{}: acknowledged entries {}.. after its store failed",
                n.id, p.index
            )),
            Rpc::Response {
                body: Response::Vote(v),
                ..
            } if v.result == VoteResult::Accept && !v.pre_vote => Err(format!(
                "{}: granted a vote in term {} after its store failed",
                n.id, v.term
            )),
            _ => Ok(()),
        }
    }

    /// Crash of member `i` over a real store: power loss (or a process kill),
    /// maybe a flipped bit, real recovery, and the checks of what it kept
    /// against the model. Returns the lowest index that may have changed.
    pub(super) fn disk_crash(&mut self, i: usize) -> Result<i64, String> {
        let Some(o) = self.opts.disk.clone() else {
            return Ok(0);
        };
        let memory = self.opts.ack_mode == crate::config::AckMode::Memory;
        let kill = memory
            || (o.process_kill_one_in > 0 && self.rng.range(0, o.process_kill_one_in as u64) == 0);
        // In memory ack mode committed entries need not be durable anywhere:
        // damage to the unsynced tail may take them, which is that mode's
        // documented risk, not a finding. Flips are for durable mode.
        let flip = if !memory && o.flip_one_in > 0 && self.rng.range(0, o.flip_one_in as u64) == 0 {
            let bit = self.rng.range(0, 8) as u8;
            let pick = self.rng.next_u64();
            if self.rng.range(0, 2) == 0 {
                Flip::Durable { bit, pick }
            } else {
                Flip::PastDurable { bit, pick }
            }
        } else {
            Flip::None
        };
        let n = &mut self.nodes[i];
        let id = n.id.clone();
        let Some(d) = &mut n.disk else {
            return Ok(0);
        };
        let out = d
            .crash(!kill, flip, &n.log)
            .map_err(|e| format!("{id} ({}): {e}", d.dir().display()))?;
        let purge_floor = n.log.purge_floor();
        let from = n.log.crash_to(&out.entries, out.end_pos).map_err(|e| {
            format!(
                "{id} after a {}: {e}",
                if kill { "process kill" } else { "power loss" }
            )
        })?;
        // An unfinished purge may have taken the head: what is gone was purged.
        if let (Some(floor), Some(first)) = (purge_floor, out.entries.first()) {
            n.purged_below = n.purged_below.max(first.index().min(floor));
        }
        let uncertain = n.hard_uncertain.take();
        if out.hard_state != n.hard && Some(&out.hard_state) != uncertain.as_ref() {
            return Err(format!(
                "{id}: recovered hard state {:?}, but {:?} was durable",
                out.hard_state, n.hard
            ));
        }
        n.hard = out.hard_state;
        n.checkpoint_committed = out.committed_index;
        Ok(from)
    }

    /// At the end: every member's store holds exactly the model's log.
    pub(super) fn check_disks_final(&self) -> Result<(), String> {
        for n in &self.nodes {
            let Some(d) = &n.disk else {
                continue;
            };
            let entries = d.entries().map_err(|e| format!("{}: {e}", n.id))?;
            if entries != n.log.entries() {
                return Err(format!(
                    "{}: the store's log differs from the model's",
                    n.id
                ));
            }
        }
        Ok(())
    }
}
