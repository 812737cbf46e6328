//! Driving one member: feeding its core an event, executing the commands it
//! returns against the simulated disk and network, and checking it after each step.

use std::collections::VecDeque;

use bytes::Bytes;

use super::Sim;
use super::event_queue::Ev;
use crate::core::{ClientId, Event, HardState, LedgerCommand, LogRead, Placement};
use crate::entry::Entry;

impl Sim {
    pub(super) fn step_node(&mut self, i: usize, first: Event) -> Result<(), String> {
        let mut queue = VecDeque::from([first]);
        while let Some(ev) = queue.pop_front() {
            let now = self.node_now(i);
            let trace = self.opts.trace.then(|| format!("{ev:?}"));
            let node = &mut self.nodes[i];
            let Some(core) = node.core.as_mut() else {
                return Ok(());
            };
            node.committed_before_step = core.committed_index();
            let view: &dyn crate::core::LogRead = match &node.disk {
                Some(d) => &d.store,
                None => &node.log,
            };
            let cmds = core.step(now, ev, view);
            self.report.steps += 1;
            if let Some(t) = trace {
                self.trace_step(i, &t, &cmds);
            }
            let mut wrote = false;
            for cmd in cmds {
                wrote |= self.execute(i, cmd)?;
            }
            if let Some(reason) = self.nodes[i].failed.take() {
                self.poison(i);
                queue.push_back(Event::StorageFailed { reason });
            }
            if wrote {
                // Usually at once; sometimes after other events, as a runtime that
                // batches steps does.
                if self.rng.range(0, 4) == 0 {
                    let epoch = self.nodes[i].epoch;
                    let at = self.now_us + self.rng.range(0, 500);
                    self.schedule(at, Ev::Written { node: i, epoch });
                } else {
                    queue.push_back(Event::Written);
                }
            }
            self.check_node(i)?;
        }
        self.schedule_tick(i);
        Ok(())
    }

    /// Prints one step (with `SimOptions::trace`): the event, the commands, and the
    /// leader's dispatchers.
    fn trace_step(&self, i: usize, event: &str, cmds: &[LedgerCommand]) {
        let c = self.nodes[i]
            .core
            .as_ref()
            .map(|c| (c.role(), c.term(), c.end_index(), c.committed_index()));
        println!(
            "{:>8}us {} {:?} <- {}",
            self.now_us,
            self.nodes[i].id,
            c,
            short(event)
        );
        for cmd in cmds {
            println!("            -> {}", short(&format!("{cmd:?}")));
        }
        if let Some(c) = &self.nodes[i].core {
            for d in c.dispatcher_summary() {
                println!("            :: {d}");
            }
        }
    }

    /// Executes one command; true when it wrote to the log (a `Written` follows).
    fn execute(&mut self, i: usize, cmd: LedgerCommand) -> Result<bool, String> {
        match cmd {
            LedgerCommand::Send(env) => {
                self.check_poisoned_send(i, &env)?;
                self.send(env);
                Ok(false)
            }
            LedgerCommand::AppendAsLeader {
                client,
                term,
                entries,
            } => self.append_as_leader(i, client, term, &entries),
            LedgerCommand::AppendAsFollower { entries } => {
                self.check_write(i, &entries)?;
                self.nodes[i]
                    .log
                    .append(&entries)
                    .map_err(|e| format!("{}: follower append: {e}", self.nodes[i].id))?;
                self.disk_append(i, &entries)?;
                Ok(true)
            }
            LedgerCommand::Truncate {
                next_index,
                next_pos,
            } => self.truncate_log(i, next_index, next_pos, false),
            LedgerCommand::Reset {
                next_index,
                next_pos,
            } => self.truncate_log(i, next_index, next_pos, true),
            LedgerCommand::Sync { through } => {
                self.start_sync(i, through);
                Ok(false)
            }
            LedgerCommand::PersistHardState { version, state } => {
                self.start_persist(i, version, state);
                Ok(false)
            }
            LedgerCommand::CommitAdvanced { committed_index } => {
                self.on_commit(i, committed_index)?;
                if self.rng.range(0, 4) == 0 {
                    if self.nodes[i].disk.is_some() {
                        self.disk_checkpoint(i, committed_index);
                    } else {
                        self.nodes[i].checkpoint_committed = committed_index;
                    }
                }
                if let Some(d) = &mut self.nodes[i].disk {
                    d.store.set_committed(committed_index);
                }
                Ok(false)
            }
            LedgerCommand::AppendResult { client, result } => {
                self.on_append_result(i, client, result)?;
                Ok(false)
            }
            LedgerCommand::TransferResult { client, result } => {
                self.on_transfer_result(client, result);
                Ok(false)
            }
        }
    }

    fn append_as_leader(
        &mut self,
        i: usize,
        client: Option<ClientId>,
        term: i64,
        entries: &[Placement],
    ) -> Result<bool, String> {
        let bodies = match client {
            Some(c) => self.nodes[i]
                .bodies
                .remove(&c)
                .ok_or_else(|| format!("append for unknown client {c}"))?,
            None => vec![Bytes::new(); entries.len()],
        };
        if bodies.len() != entries.len() {
            return Err("leader append with a wrong number of bodies".into());
        }
        let built: Vec<Entry> = entries
            .iter()
            .zip(bodies)
            .map(|(p, b)| {
                debug_assert_eq!(p.body_len as usize, b.len());
                Entry::new(p.kind, p.index, term, p.pos, b)
            })
            .collect();
        self.check_write(i, &built)?;
        self.nodes[i]
            .log
            .append(&built)
            .map_err(|e| format!("{}: leader append: {e}", self.nodes[i].id))?;
        self.disk_append(i, &built)?;
        Ok(true)
    }

    fn truncate_log(
        &mut self,
        i: usize,
        next_index: i64,
        next_pos: i64,
        reset: bool,
    ) -> Result<bool, String> {
        let n = &self.nodes[i];
        if n.sync_outstanding {
            return Err(format!("{}: truncate while a sync is outstanding", n.id));
        }
        let committed = n.committed_before_step;
        // The one exception: a reset of a member whose log holds no committed
        // entry (it was reset past a purge, so its log starts after its
        // committed index) may start over below that index. It removes nothing
        // committed, and its commit goes back to the reset's empty log: the
        // entries up to the old one come again, and `on_commit` checks each
        // against what the cluster committed when it commits them again.
        let holds_committed = n.log.end_index() >= 0 && n.log.first_index() <= committed;
        if next_index <= committed {
            if !reset || holds_committed {
                return Err(format!(
                    "{}: truncates from {next_index} but has committed {committed} (log {}..={})",
                    n.id,
                    n.log.first_index(),
                    n.log.end_index()
                ));
            }
            self.nodes[i].checked_committed = next_index - 1;
            self.report.resets_below_commit += 1;
        }
        if reset {
            self.nodes[i].log.reset(next_index, next_pos);
        } else {
            self.nodes[i].log.truncate(next_index, next_pos);
        }
        if self.nodes[i].log.end_index() < 0 {
            self.report.resets += 1;
            self.note_reset(i, next_index);
        }
        self.disk_truncate(i, next_index, next_pos, reset)?;
        self.check_acked_from(next_index)?;
        Ok(true)
    }

    /// Starts a sync that completes after a simulated fsync delay.
    fn start_sync(&mut self, i: usize, through: i64) {
        self.nodes[i].sync_outstanding = true;
        if let Some(d) = &mut self.nodes[i].disk {
            d.pending_sync = Some(d.store.prepare_sync());
        }
        let delay = self.rng.range(50, 2_000);
        let epoch = self.nodes[i].epoch;
        self.schedule(
            self.now_us + delay,
            Ev::SyncDone {
                node: i,
                epoch,
                through,
            },
        );
    }

    /// Starts a hard-state write that completes after a simulated fsync delay.
    fn start_persist(&mut self, i: usize, version: u64, state: HardState) {
        self.nodes[i].pending_persist = Some(state.clone());
        let delay = self.rng.range(50, 2_000);
        let epoch = self.nodes[i].epoch;
        self.schedule(
            self.now_us + delay,
            Ev::PersistDone {
                node: i,
                epoch,
                version,
                state,
            },
        );
    }
}

fn short(s: &str) -> String {
    if s.len() > 220 {
        let mut cut = 220;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &s[..cut])
    } else {
        s.to_string()
    }
}
