//! Fault injection: crashes and restarts, partitions, message loss and
//! duplication, clock jumps and leadership transfers, and the final heal.

use super::Sim;
use super::event_queue::Ev;
use crate::config::AckMode;
use crate::core::{CoreInit, Event, LedgerCore, LogRead, Role};
use crate::protocol::NodeId;

impl Sim {
    /// One random fault action (what the options allow).
    pub(super) fn fault(&mut self) -> Result<(), String> {
        match self.rng.range(0, 10) {
            0 | 1 if self.opts.crashes => self.crash_random()?,
            2 | 3 if self.opts.partitions => self.partition_random(),
            4 => {
                for node in &mut self.nodes {
                    node.group = 0;
                }
            }
            5 if self.opts.clock_jumps => self.jump_clock_random(),
            6 => {
                self.loss = self.rng.range(0, 60);
                self.dup = self.rng.range(0, 60);
            }
            7 if self.opts.transfers => self.transfer_random()?,
            8 if self.opts.disk.is_some() => self.purge_random()?,
            _ => {}
        }
        Ok(())
    }

    /// Crashes a random member (if up) and schedules its restart.
    fn crash_random(&mut self) -> Result<(), String> {
        let i = self.rng.range(0, self.nodes.len() as u64) as usize;
        if self.nodes[i].core.is_some() {
            self.crash(i)?;
            let back = self.rng.range(20_000, 800_000);
            self.schedule(self.now_us + back, Ev::Restart { node: i });
        }
        Ok(())
    }

    /// Splits the members into two groups at random.
    fn partition_random(&mut self) {
        let n = self.nodes.len();
        for node in &mut self.nodes {
            node.group = 0;
        }
        let k = self.rng.range(1, n as u64) as usize;
        for _ in 0..k {
            let i = self.rng.range(0, n as u64) as usize;
            self.nodes[i].group = 1;
        }
    }

    /// Moves a random member's clock by −500..1500 ms.
    fn jump_clock_random(&mut self) {
        let i = self.rng.range(0, self.nodes.len() as u64) as usize;
        let jump = self.rng.range(0, 2_000) as i64 - 500;
        self.nodes[i].clock_offset_ms += jump;
        self.nodes[i].tick_at = None;
        self.nodes[i].tick_gen += 1;
        self.schedule_tick(i);
    }

    /// Asks the current leader (if any) to hand over to a random member.
    fn transfer_random(&mut self) -> Result<(), String> {
        let n = self.nodes.len();
        let leader = (0..n).find(|i| {
            self.nodes[*i]
                .core
                .as_ref()
                .is_some_and(|c| c.role() == Role::Leader)
        });
        if let Some(l) = leader {
            let to = NodeId::new(&format!("n{}", self.rng.range(0, n as u64)));
            let client = self.next_client;
            self.next_client += 1;
            self.step_node(l, Event::TransferLeadership { client, to })?;
        }
        Ok(())
    }

    pub(super) fn crash(&mut self, i: usize) -> Result<(), String> {
        self.report.crashes += 1;
        let memory = self.opts.ack_mode == AckMode::Memory;
        let node = &mut self.nodes[i];
        node.core = None;
        node.epoch += 1;
        node.tick_at = None;
        node.tick_gen += 1;
        node.sync_outstanding = false;
        node.bodies.clear();
        if let Some(p) = node.pending_persist.take()
            && self.rng.range(0, 2) == 0
        {
            // The write may have reached the disk before the crash.
            match &node.disk {
                Some(d) => {
                    if d.persist(&p).is_ok() {
                        node.hard = p;
                    } else {
                        node.hard_uncertain = Some(p);
                    }
                }
                None => node.hard = p,
            }
        }
        // Outstanding appends at the crashed node get no answer (like a dropped
        // connection).
        self.outstanding.retain(|_, (n, _)| *n != i);
        if let Some((p, _)) = self.probe
            && !self.outstanding.contains_key(&p)
        {
            self.probe = None;
        }
        if self.nodes[i].disk.is_some() {
            let from = self.disk_crash(i)?;
            return self.check_acked_from(from);
        }
        let rng = &mut self.rng;
        let from = self.nodes[i].log.crash(|lo, hi| {
            if memory {
                // A process crash keeps the page cache: nothing written is lost.
                hi
            } else {
                rng.range(lo as u64, hi as u64 + 1) as usize
            }
        });
        self.check_acked_from(from)
    }

    pub(super) fn restart(&mut self, i: usize) -> Result<(), String> {
        if self.nodes[i].core.is_some() {
            return Ok(());
        }
        let now = self.node_now(i);
        let seed = self.rng.next_u64();
        let node = &mut self.nodes[i];
        let init = CoreInit {
            hard_state: node.hard.clone(),
            committed_index: node.checkpoint_committed,
            seed,
        };
        let view: &dyn LogRead = match &node.disk {
            Some(d) => &d.store,
            None => &node.log,
        };
        let core = LedgerCore::new(&node.cfg, init, view, now);
        node.checked_committed = core.committed_index();
        node.core = Some(core);
        // What the restarted member believes committed must still be what everyone
        // committed.
        let c = self.nodes[i].checked_committed;
        for idx in 0..=c {
            if self.purged_at(i, idx) {
                continue;
            }
            let e = self.nodes[i].log.entry(idx).ok().flatten();
            if e.as_ref() != self.committed.get(idx as usize) {
                return Err(format!(
                    "{} restarted with a different committed entry {idx}",
                    self.nodes[i].id
                ));
            }
        }
        self.schedule_tick(i);
        Ok(())
    }

    /// Ends the fault phase: no more loss, duplication or partitions, and every
    /// crashed member restarts.
    pub(super) fn heal(&mut self) -> Result<(), String> {
        self.faults_on = false;
        self.loss = 0;
        self.dup = 0;
        for n in &mut self.nodes {
            n.group = 0;
            if let Some(d) = &n.disk {
                d.stop_faults();
            }
        }
        for i in 0..self.nodes.len() {
            // A member with a poisoned store is restarted by its operator.
            if self.nodes[i]
                .disk
                .as_ref()
                .is_some_and(|d| d.poisoned_at.is_some())
                && self.nodes[i].core.is_some()
            {
                self.crash(i)?;
            }
            if self.nodes[i].core.is_none() {
                self.restart(i)?;
            }
        }
        Ok(())
    }
}
