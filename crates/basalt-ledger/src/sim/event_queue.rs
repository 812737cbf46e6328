//! Simulated time: the ordered queue of future events and the dispatch of each
//! event to the part of the simulator that handles it.

use std::cmp::Reverse;

use super::Sim;
use crate::core::{Event, HardState};
use crate::protocol::Envelope;

/// Something due at a simulated time.
#[derive(Debug)]
pub(super) enum Ev {
    Deliver(Envelope),
    Tick {
        node: usize,
        generation: u64,
    },
    SyncDone {
        node: usize,
        epoch: u64,
        through: i64,
    },
    PersistDone {
        node: usize,
        epoch: u64,
        version: u64,
        state: HardState,
    },
    Client,
    Fault,
    Restart {
        node: usize,
    },
    Heal,
    /// An operator restarts a member whose store was poisoned (it crashes
    /// and comes back later).
    PowerCycle {
        node: usize,
        epoch: u64,
    },
    /// A deferred `Written` (a runtime may batch several steps before it).
    Written {
        node: usize,
        epoch: u64,
    },
}

/// An event in the queue; ordered by time, then by scheduling order, so equal
/// times replay in the order they were scheduled.
pub(super) struct Scheduled {
    pub(super) at: u64,
    seq: u64,
    pub(super) ev: Ev,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

impl Sim {
    pub(super) fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            ev,
        }));
    }

    pub(super) fn handle(&mut self, ev: Ev) -> Result<(), String> {
        match ev {
            Ev::Deliver(env) => self.deliver(env),
            Ev::Tick { node, generation } => self.on_tick_due(node, generation),
            Ev::SyncDone {
                node,
                epoch,
                through,
            } => self.on_sync_done(node, epoch, through),
            Ev::PersistDone {
                node,
                epoch,
                version,
                state,
            } => self.on_persist_done(node, epoch, version, state),
            Ev::Client => {
                self.on_client_due();
                Ok(())
            }
            Ev::Fault => self.on_fault_due(),
            Ev::Restart { node } => self.restart(node),
            Ev::Written { node, epoch } => {
                if self.nodes[node].epoch != epoch {
                    return Ok(());
                }
                self.step_node(node, Event::Written)
            }
            Ev::Heal => self.heal(),
            Ev::PowerCycle { node, epoch } => {
                if self.nodes[node].epoch != epoch || self.nodes[node].core.is_none() {
                    return Ok(());
                }
                self.crash(node)?;
                let back = self.rng.range(20_000, 300_000);
                self.schedule(self.now_us + back, Ev::Restart { node });
                Ok(())
            }
        }
    }

    fn on_tick_due(&mut self, node: usize, generation: u64) -> Result<(), String> {
        if self.nodes[node].tick_gen != generation {
            return Ok(());
        }
        self.nodes[node].tick_at = None;
        let n = &mut self.nodes[node];
        if n.last_tick_us == self.now_us {
            n.ticks_at_same_time += 1;
            if n.ticks_at_same_time > 1000 {
                return Err(format!("{}: tick storm (deadline never advances)", n.id));
            }
        } else {
            n.last_tick_us = self.now_us;
            n.ticks_at_same_time = 0;
        }
        self.step_node(node, Event::Tick)
    }

    fn on_sync_done(&mut self, node: usize, epoch: u64, through: i64) -> Result<(), String> {
        if self.nodes[node].epoch != epoch {
            return Ok(());
        }
        self.nodes[node].sync_outstanding = false;
        match self.disk_run_sync(node)? {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(reason) => return self.storage_failed(node, reason),
        }
        self.nodes[node].log.synced(through);
        self.step_node(node, Event::Synced { through })
    }

    fn on_persist_done(
        &mut self,
        node: usize,
        epoch: u64,
        version: u64,
        state: HardState,
    ) -> Result<(), String> {
        if self.nodes[node].epoch != epoch {
            return Ok(());
        }
        self.nodes[node].pending_persist = None;
        if let Some(d) = &self.nodes[node].disk
            && let Err(e) = d.persist(&state)
        {
            self.nodes[node].hard_uncertain = Some(state);
            return self.storage_failed(node, format!("term file: {e}"));
        }
        self.nodes[node].hard = state;
        self.step_node(node, Event::Persisted { version })
    }

    fn on_client_due(&mut self) {
        self.client_append();
        // Clients keep going for a while after the faults stop; the probe
        // append of `settled` is the last one.
        if self.now_us < self.opts.fault_ms * 1000 + 1_000_000 {
            let gap = self.rng.range(1, self.opts.client_interval_ms * 2) * 1000;
            self.schedule(self.now_us + gap, Ev::Client);
        }
    }

    fn on_fault_due(&mut self) -> Result<(), String> {
        if self.faults_on {
            self.fault()?;
            let gap = self.rng.range(1, self.opts.fault_interval_ms * 2) * 1000;
            self.schedule(self.now_us + gap, Ev::Fault);
        }
        Ok(())
    }

    pub(super) fn schedule_tick(&mut self, i: usize) {
        let Some(core) = &self.nodes[i].core else {
            return;
        };
        let d = core.next_deadline();
        if d == u64::MAX {
            return;
        }
        let at_ms = (d as i64 - self.nodes[i].clock_offset_ms).max(0) as u64;
        let at = (at_ms * 1000).max(self.now_us);
        if self.nodes[i].tick_at.is_some_and(|t| t <= at) {
            return;
        }
        self.nodes[i].tick_gen += 1;
        self.nodes[i].tick_at = Some(at);
        let generation = self.nodes[i].tick_gen;
        self.schedule(
            at,
            Ev::Tick {
                node: i,
                generation,
            },
        );
    }
}
