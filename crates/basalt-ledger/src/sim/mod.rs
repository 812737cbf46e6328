//! A deterministic simulator for ledger clusters.
//!
//! It runs several [`LedgerCore`]s over a simulated network and simulated disks,
//! all driven by one seeded random generator, so a seed replays exactly:
//!
//! * network: random delay, spikes that reorder, loss, duplication, partitions;
//! * disks ([`MemLog`]): only synced entries survive a crash, plus a random prefix of
//!   the unsynced tail (torn writes); an unsynced truncation may be undone; syncs
//!   and hard-state persistence take 0.05–2 ms;
//! * nodes crash (losing what was not durable) and restart from their durable state;
//! * clocks jump forward and backward;
//! * clients append through whichever node they think leads; leadership transfers are
//!   requested at random.
//!
//! After every step it checks: at most one leader per term; committed entries never
//! change or disappear (every node agrees on them, nobody overwrites or truncates
//! them); a follower holds the leader's entry at the index the leader believes it
//! has; every acknowledged append is on a majority of durable logs (durable ack
//! mode); a member's committed index never passes its durable end. After the fault
//! phase it heals everything and checks liveness: a leader is elected, every
//! pending append is answered, a fresh append commits, all logs agree up to the
//! committed index.

mod memlog;

pub use memlog::MemLog;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use bytes::Bytes;

use crate::config::{AckMode, LedgerConfig};
use crate::core::{
    ClientId, CoreInit, Event, HardState, LedgerAppendError, LedgerCommand, LedgerCore, LogRead,
    Role, SplitMix64,
};
use crate::entry::{Entry, EntryKind};
use crate::protocol::{Envelope, NodeId};

/// What a simulation run does; [`SimOptions::for_seed`] derives a varied setup from
/// a seed.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub seed: u64,
    pub nodes: usize,
    /// Length of the fault phase (simulated ms).
    pub fault_ms: u64,
    /// Longest the healed cluster may take to settle (simulated ms).
    pub heal_ms: u64,
    pub ack_mode: AckMode,
    pub batch_push: bool,
    pub preferred_leader: bool,
    pub max_pending_per_peer: usize,
    pub data_file_size: i64,
    /// Mean gap between client appends (simulated ms).
    pub client_interval_ms: u64,
    /// Mean gap between fault actions (simulated ms).
    pub fault_interval_ms: u64,
    pub crashes: bool,
    pub partitions: bool,
    pub clock_jumps: bool,
    pub transfers: bool,
    /// Print every step.
    pub trace: bool,
}

impl SimOptions {
    /// A setup varied by the seed: 3 or 5 nodes, ack mode, batch push, preferred
    /// leader, small pending windows and small data files.
    pub fn for_seed(seed: u64) -> SimOptions {
        let mut r = SplitMix64::new(seed ^ 0x005E_ED0F_5EED);
        SimOptions {
            seed,
            nodes: if r.range(0, 3) == 0 { 5 } else { 3 },
            fault_ms: 8_000,
            heal_ms: 30_000,
            ack_mode: if r.range(0, 10) == 0 {
                AckMode::Memory
            } else {
                AckMode::Durable
            },
            batch_push: r.range(0, 2) == 0,
            preferred_leader: r.range(0, 4) == 0,
            max_pending_per_peer: [2, 8, 1000][r.range(0, 3) as usize],
            data_file_size: [512, 1024, 4096][r.range(0, 3) as usize],
            client_interval_ms: 8,
            fault_interval_ms: 150,
            crashes: true,
            partitions: true,
            clock_jumps: true,
            transfers: true,
            trace: false,
        }
    }

    fn config(&self, self_id: &NodeId, peers: &BTreeMap<NodeId, String>) -> LedgerConfig {
        let mut c = LedgerConfig::new("sim", self_id.clone(), peers.clone(), "/nonexistent");
        c.heartbeat_interval_ms = 50;
        c.max_heartbeat_leak = 3;
        c.min_vote_interval_ms = 100;
        c.max_vote_interval_ms = 250;
        c.max_pending_per_peer = self.max_pending_per_peer;
        c.max_push_timeout_ms = 60;
        c.compare_timeout_ms = 150;
        c.commit_push_interval_ms = 50;
        c.follower_push_wait_ms = 60;
        c.enable_batch_push = self.batch_push;
        c.max_batch_push_size = 200;
        c.max_wait_ack_ms = 800;
        c.max_pending_requests = 200;
        c.ack_mode = self.ack_mode;
        c.leadership_transfer_timeout_ms = 400;
        c.data_file_size = self.data_file_size;
        if self.preferred_leader {
            c.preferred_leader = Some(NodeId::new("n0"));
        }
        c
    }
}

/// Figures from a successful run.
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    pub steps: u64,
    pub committed: i64,
    pub acked_appends: u64,
    pub failed_appends: u64,
    pub crashes: u64,
    pub terms: i64,
    pub sim_ms: u64,
}

#[derive(Debug)]
enum Ev {
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
    /// A deferred `Written` (a runtime may batch several steps before it).
    Written {
        node: usize,
        epoch: u64,
    },
}

struct Scheduled {
    at: u64,
    seq: u64,
    ev: Ev,
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

struct Node {
    id: NodeId,
    cfg: LedgerConfig,
    core: Option<LedgerCore>,
    log: MemLog,
    /// Durable hard state.
    hard: HardState,
    /// Emitted but not yet durable.
    pending_persist: Option<HardState>,
    epoch: u64,
    clock_offset_ms: i64,
    tick_gen: u64,
    tick_at: Option<u64>,
    checkpoint_committed: i64,
    /// Committed index as of the last check (this life).
    checked_committed: i64,
    sync_outstanding: bool,
    bodies: BTreeMap<ClientId, Vec<Bytes>>,
    group: u8,
    last_tick_us: u64,
    ticks_at_same_time: u32,
    committed_before_step: i64,
}

/// One simulation run. Use [`run`].
pub struct Sim {
    opts: SimOptions,
    rng: SplitMix64,
    now_us: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    nodes: Vec<Node>,
    loss: u64,
    dup: u64,
    faults_on: bool,
    next_client: ClientId,
    /// Outstanding client appends: id → (node, bodies).
    outstanding: BTreeMap<ClientId, (usize, Vec<Bytes>)>,
    leaders: BTreeMap<i64, NodeId>,
    committed: Vec<Entry>,
    acked: BTreeMap<i64, Entry>,
    probe: Option<(ClientId, bool)>,
    pending_error: Option<String>,
    report: SimReport,
}

/// Runs a simulation; `Err` describes the first invariant violation.
pub fn run(opts: SimOptions) -> Result<SimReport, String> {
    let mut sim = Sim::new(opts);
    sim.run_all().map_err(|e| {
        format!(
            "seed {} failed at t={}ms step {}: {e}",
            sim.opts.seed,
            sim.now_us / 1000,
            sim.report.steps
        )
    })?;
    Ok(sim.report)
}

impl Sim {
    fn new(opts: SimOptions) -> Sim {
        let mut rng = SplitMix64::new(opts.seed);
        let peers: BTreeMap<NodeId, String> = (0..opts.nodes)
            .map(|i| (NodeId::new(&format!("n{i}")), format!("sim:{i}")))
            .collect();
        let mut nodes = Vec::new();
        for i in 0..opts.nodes {
            let id = NodeId::new(&format!("n{i}"));
            let cfg = opts.config(&id, &peers);
            let log = MemLog::new(opts.data_file_size);
            let core = LedgerCore::new(
                &cfg,
                CoreInit {
                    hard_state: HardState::default(),
                    committed_index: -1,
                    seed: rng.next_u64(),
                },
                &log,
                0,
            );
            nodes.push(Node {
                id,
                cfg,
                core: Some(core),
                log,
                hard: HardState::default(),
                pending_persist: None,
                epoch: 0,
                clock_offset_ms: 0,
                tick_gen: 0,
                tick_at: None,
                checkpoint_committed: -1,
                checked_committed: -1,
                sync_outstanding: false,
                bodies: BTreeMap::new(),
                group: 0,
                last_tick_us: u64::MAX,
                ticks_at_same_time: 0,
                committed_before_step: -1,
            });
        }
        Sim {
            opts,
            rng,
            now_us: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            loss: 0,
            dup: 0,
            faults_on: true,
            next_client: 1,
            outstanding: BTreeMap::new(),
            leaders: BTreeMap::new(),
            committed: Vec::new(),
            acked: BTreeMap::new(),
            probe: None,
            pending_error: None,
            report: SimReport::default(),
        }
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            ev,
        }));
    }

    fn node_now(&self, i: usize) -> u64 {
        (self.now_us as i64 / 1000 + self.nodes[i].clock_offset_ms).max(0) as u64
    }

    fn run_all(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            self.schedule_tick(i);
        }
        self.schedule(1000, Ev::Client);
        let fault_us = self.opts.fault_ms * 1000;
        let first_fault = self.rng.range(50_000, 200_000);
        self.schedule(first_fault, Ev::Fault);
        self.schedule(fault_us, Ev::Heal);
        let end_us = fault_us + self.opts.heal_ms * 1000;
        while let Some(Reverse(s)) = self.queue.pop() {
            if s.at > end_us {
                return Err(format!(
                    "liveness: cluster did not settle within {} ms after healing; {}",
                    self.opts.heal_ms,
                    self.describe()
                ));
            }
            self.now_us = self.now_us.max(s.at);
            self.handle(s.ev)?;
            if !self.faults_on && self.settled()? {
                self.final_checks()?;
                self.report.sim_ms = self.now_us / 1000;
                return Ok(());
            }
        }
        Err("event queue ran dry".into())
    }

    fn describe(&self) -> String {
        let mut s = String::new();
        for n in &self.nodes {
            match &n.core {
                Some(c) => s.push_str(&format!(
                    "[{} {:?} t{} leader={:?} end={} durable={} committed={}] ",
                    n.id,
                    c.role(),
                    c.term(),
                    c.leader_id(),
                    c.end_index(),
                    c.durable_index(),
                    c.committed_index()
                )),
                None => s.push_str(&format!("[{} down] ", n.id)),
            }
        }
        for n in &self.nodes {
            if let Some(c) = &n.core {
                for d in c.dispatcher_summary() {
                    s.push_str(&format!("\n  {} -> {d}", n.id));
                }
            }
        }
        s.push_str(&format!("\noutstanding={}", self.outstanding.len()));
        s
    }

    fn handle(&mut self, ev: Ev) -> Result<(), String> {
        match ev {
            Ev::Deliver(env) => {
                let Some(i) = self.index_of(&env.to) else {
                    return Ok(());
                };
                let from = self.index_of(&env.from).unwrap_or(i);
                if self.nodes[from].group != self.nodes[i].group {
                    return Ok(());
                }
                self.step_node(i, Event::Message(env))
            }
            Ev::Tick { node, generation } => {
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
            Ev::SyncDone {
                node,
                epoch,
                through,
            } => {
                if self.nodes[node].epoch != epoch {
                    return Ok(());
                }
                self.nodes[node].log.synced(through);
                self.nodes[node].sync_outstanding = false;
                self.step_node(node, Event::Synced { through })
            }
            Ev::PersistDone {
                node,
                epoch,
                version,
                state,
            } => {
                if self.nodes[node].epoch != epoch {
                    return Ok(());
                }
                self.nodes[node].hard = state;
                self.nodes[node].pending_persist = None;
                self.step_node(node, Event::Persisted { version })
            }
            Ev::Client => {
                self.client_append();
                // Clients keep going for a while after the faults stop; the probe
                // append of `settled` is the last one.
                if self.now_us < self.opts.fault_ms * 1000 + 1_000_000 {
                    let gap = self.rng.range(1, self.opts.client_interval_ms * 2) * 1000;
                    self.schedule(self.now_us + gap, Ev::Client);
                }
                Ok(())
            }
            Ev::Fault => {
                if self.faults_on {
                    self.fault()?;
                    let gap = self.rng.range(1, self.opts.fault_interval_ms * 2) * 1000;
                    self.schedule(self.now_us + gap, Ev::Fault);
                }
                Ok(())
            }
            Ev::Restart { node } => self.restart(node),
            Ev::Written { node, epoch } => {
                if self.nodes[node].epoch != epoch {
                    return Ok(());
                }
                self.step_node(node, Event::Written)
            }
            Ev::Heal => {
                self.faults_on = false;
                self.loss = 0;
                self.dup = 0;
                for n in &mut self.nodes {
                    n.group = 0;
                }
                for i in 0..self.nodes.len() {
                    if self.nodes[i].core.is_none() {
                        self.restart(i)?;
                    }
                }
                Ok(())
            }
        }
    }

    fn index_of(&self, id: &NodeId) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == *id)
    }

    fn schedule_tick(&mut self, i: usize) {
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

    // ---- stepping a node ---------------------------------------------------------

    fn step_node(&mut self, i: usize, first: Event) -> Result<(), String> {
        let mut queue = VecDeque::from([first]);
        while let Some(ev) = queue.pop_front() {
            let now = self.node_now(i);
            let trace = self.opts.trace.then(|| format!("{ev:?}"));
            let node = &mut self.nodes[i];
            let Some(core) = node.core.as_mut() else {
                return Ok(());
            };
            node.committed_before_step = core.committed_index();
            let cmds = core.step(now, ev, &node.log);
            self.report.steps += 1;
            if let Some(t) = trace {
                let c = self.nodes[i]
                    .core
                    .as_ref()
                    .map(|c| (c.role(), c.term(), c.end_index(), c.committed_index()));
                println!(
                    "{:>8}us {} {:?} <- {}",
                    self.now_us,
                    self.nodes[i].id,
                    c,
                    short(&t)
                );
                for cmd in &cmds {
                    println!("            -> {}", short(&format!("{cmd:?}")));
                }
                if let Some(c) = &self.nodes[i].core {
                    for d in c.dispatcher_summary() {
                        println!("            :: {d}");
                    }
                }
            }
            let mut wrote = false;
            for cmd in cmds {
                wrote |= self.execute(i, cmd)?;
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

    fn execute(&mut self, i: usize, cmd: LedgerCommand) -> Result<bool, String> {
        let now_us = self.now_us;
        match cmd {
            LedgerCommand::Send(env) => {
                self.send(env);
                Ok(false)
            }
            LedgerCommand::AppendAsLeader {
                client,
                term,
                entries,
            } => {
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
                Ok(true)
            }
            LedgerCommand::AppendAsFollower { entries } => {
                self.check_write(i, &entries)?;
                self.nodes[i]
                    .log
                    .append(&entries)
                    .map_err(|e| format!("{}: follower append: {e}", self.nodes[i].id))?;
                Ok(true)
            }
            LedgerCommand::Truncate {
                next_index,
                next_pos,
            } => {
                let n = &self.nodes[i];
                if n.sync_outstanding {
                    return Err(format!("{}: truncate while a sync is outstanding", n.id));
                }
                let committed = n.committed_before_step;
                if next_index <= committed {
                    return Err(format!(
                        "{}: truncates from {next_index} but has committed {committed}",
                        n.id
                    ));
                }
                self.nodes[i].log.truncate(next_index, next_pos);
                self.check_acked_from(next_index)?;
                Ok(true)
            }
            LedgerCommand::Sync { through } => {
                self.nodes[i].sync_outstanding = true;
                let delay = self.rng.range(50, 2_000);
                let epoch = self.nodes[i].epoch;
                self.schedule(
                    now_us + delay,
                    Ev::SyncDone {
                        node: i,
                        epoch,
                        through,
                    },
                );
                Ok(false)
            }
            LedgerCommand::PersistHardState { version, state } => {
                self.nodes[i].pending_persist = Some(state.clone());
                let delay = self.rng.range(50, 2_000);
                let epoch = self.nodes[i].epoch;
                self.schedule(
                    now_us + delay,
                    Ev::PersistDone {
                        node: i,
                        epoch,
                        version,
                        state,
                    },
                );
                Ok(false)
            }
            LedgerCommand::CommitAdvanced { committed_index } => {
                self.on_commit(i, committed_index)?;
                if self.rng.range(0, 4) == 0 {
                    self.nodes[i].checkpoint_committed = committed_index;
                }
                Ok(false)
            }
            LedgerCommand::AppendResult { client, result } => {
                self.on_append_result(i, client, result)?;
                Ok(false)
            }
            LedgerCommand::TransferResult { .. } => Ok(false),
        }
    }

    fn send(&mut self, env: Envelope) {
        if self.faults_on && self.rng.range(0, 1000) < self.loss {
            return;
        }
        let copies = if self.faults_on && self.rng.range(0, 1000) < self.dup {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if self.faults_on && self.rng.range(0, 100) < 3 {
                self.rng.range(5_000, 150_000)
            } else {
                self.rng.range(100, 2_000)
            };
            self.schedule(self.now_us + delay, Ev::Deliver(env.clone()));
        }
    }

    // ---- clients -------------------------------------------------------------------

    fn client_append(&mut self) {
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].core.is_some())
            .collect();
        if up.is_empty() {
            return;
        }
        let leader = up.iter().copied().find(|i| {
            self.nodes[*i]
                .core
                .as_ref()
                .is_some_and(|c| c.role() == Role::Leader)
        });
        let target = match leader {
            Some(l) if self.rng.range(0, 10) < 9 => l,
            _ => up[self.rng.range(0, up.len() as u64) as usize],
        };
        let client = self.next_client;
        self.next_client += 1;
        let count = self.rng.range(1, 4) as usize;
        let bodies: Vec<Bytes> = (0..count)
            .map(|k| {
                let len = self.rng.range(1, 80) as usize;
                let mut b = format!("c{client}.{k}:").into_bytes();
                b.resize(len.max(b.len()), b'x');
                Bytes::from(b)
            })
            .collect();
        self.submit(target, client, bodies);
    }

    fn submit(&mut self, target: usize, client: ClientId, bodies: Vec<Bytes>) {
        let lens = bodies.iter().map(|b| b.len() as u32).collect();
        self.nodes[target].bodies.insert(client, bodies.clone());
        self.outstanding.insert(client, (target, bodies));
        // Errors surface as invariant failures in later checks; stepping cannot fail
        // here without one.
        if let Err(e) = self.step_node(
            target,
            Event::ClientAppend {
                client,
                body_lens: lens,
            },
        ) {
            self.pending_error = Some(e);
        }
    }

    fn on_append_result(
        &mut self,
        i: usize,
        client: ClientId,
        result: Result<crate::core::AppendReceipt, LedgerAppendError>,
    ) -> Result<(), String> {
        self.nodes[i].bodies.remove(&client);
        let Some((_, bodies)) = self.outstanding.remove(&client) else {
            return Err(format!("result for unknown client {client}"));
        };
        if let Some((probe, _)) = self.probe
            && probe == client
        {
            self.probe = Some((probe, result.is_ok()));
        }
        match result {
            Ok(r) => {
                self.report.acked_appends += 1;
                if r.last_index - r.first_index + 1 != bodies.len() as i64 {
                    return Err(format!("receipt {r:?} for {} bodies", bodies.len()));
                }
                for (k, body) in bodies.iter().enumerate() {
                    let idx = r.first_index + k as i64;
                    let e = self.nodes[i]
                        .log
                        .entry(idx)
                        .ok()
                        .flatten()
                        .ok_or_else(|| format!("acked index {idx} not in the leader's log"))?;
                    if e.body != *body || e.header.kind() != EntryKind::Normal || e.term() != r.term
                    {
                        return Err(format!("acked index {idx} holds another entry"));
                    }
                    if (idx as usize) >= self.committed.len() || self.committed[idx as usize] != e {
                        return Err(format!("acked index {idx} is not committed"));
                    }
                    self.acked.insert(idx, e);
                }
                self.check_acked_from(r.first_index)?;
            }
            Err(_) => self.report.failed_appends += 1,
        }
        Ok(())
    }

    // ---- faults ----------------------------------------------------------------------

    fn fault(&mut self) -> Result<(), String> {
        let n = self.nodes.len();
        match self.rng.range(0, 10) {
            0 | 1 if self.opts.crashes => {
                let i = self.rng.range(0, n as u64) as usize;
                if self.nodes[i].core.is_some() {
                    self.crash(i)?;
                    let back = self.rng.range(20_000, 800_000);
                    self.schedule(self.now_us + back, Ev::Restart { node: i });
                }
            }
            2 | 3 if self.opts.partitions => {
                for node in &mut self.nodes {
                    node.group = 0;
                }
                let k = self.rng.range(1, n as u64) as usize;
                for _ in 0..k {
                    let i = self.rng.range(0, n as u64) as usize;
                    self.nodes[i].group = 1;
                }
            }
            4 => {
                for node in &mut self.nodes {
                    node.group = 0;
                }
            }
            5 if self.opts.clock_jumps => {
                let i = self.rng.range(0, n as u64) as usize;
                let jump = self.rng.range(0, 2_000) as i64 - 500;
                self.nodes[i].clock_offset_ms += jump;
                self.nodes[i].tick_at = None;
                self.nodes[i].tick_gen += 1;
                self.schedule_tick(i);
            }
            6 => {
                self.loss = self.rng.range(0, 60);
                self.dup = self.rng.range(0, 60);
            }
            7 if self.opts.transfers => {
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
            }
            _ => {}
        }
        Ok(())
    }

    fn crash(&mut self, i: usize) -> Result<(), String> {
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
            node.hard = p;
        }
        // Outstanding appends at the crashed node get no answer (like a dropped
        // connection).
        self.outstanding.retain(|_, (n, _)| *n != i);
        if let Some((p, _)) = self.probe
            && !self.outstanding.contains_key(&p)
        {
            self.probe = None;
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

    fn restart(&mut self, i: usize) -> Result<(), String> {
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
        let core = LedgerCore::new(&node.cfg, init, &node.log, now);
        node.checked_committed = core.committed_index();
        node.core = Some(core);
        // What the restarted member believes committed must still be what everyone
        // committed.
        let c = self.nodes[i].checked_committed;
        for idx in 0..=c {
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

    // ---- invariants ----------------------------------------------------------------

    /// A member never writes at or below its own committed index. (A stale leader
    /// may write entries that differ from what the cluster committed at those
    /// indexes: they never commit, which `on_commit` checks.)
    fn check_write(&self, i: usize, entries: &[Entry]) -> Result<(), String> {
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

    fn on_commit(&mut self, i: usize, c: i64) -> Result<(), String> {
        let prev = self.nodes[i].checked_committed;
        if c < prev {
            return Err(format!(
                "{} committed index went back {prev} -> {c}",
                self.nodes[i].id
            ));
        }
        let start = ((prev + 1) as usize).min(self.committed.len());
        for idx in start..=(c as usize) {
            let e = self.nodes[i]
                .log
                .entry(idx as i64)
                .ok()
                .flatten()
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
                self.committed.push(e);
            }
        }
        self.nodes[i].checked_committed = c;
        self.report.committed = self.report.committed.max(c);
        Ok(())
    }

    /// Every committed entry from `from` on — acknowledged appends included — is on
    /// a majority of durable logs (durable ack mode).
    fn check_acked_from(&self, from: i64) -> Result<(), String> {
        if self.opts.ack_mode != AckMode::Durable {
            return Ok(());
        }
        let quorum = self.nodes.len() / 2 + 1;
        let from = from.max(0) as usize;
        for idx in from..self.committed.len() {
            let e = &self.committed[idx];
            let holders = self
                .nodes
                .iter()
                .filter(|n| {
                    let d = n.log.durable_entries();
                    let first = n.log.first_index();
                    idx as i64 >= first && d.get(idx - first as usize) == Some(e)
                })
                .count();
            if holders < quorum {
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

    fn check_node(&mut self, i: usize) -> Result<(), String> {
        if let Some(e) = self.pending_error.take() {
            return Err(e);
        }
        let node = &self.nodes[i];
        let Some(core) = &node.core else {
            return Ok(());
        };
        if core.role() == Role::Leader {
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
            // A follower holds the leader's entry at its water mark.
            if let Some(marks) = core.peer_watermarks() {
                for (peer, w) in marks {
                    if w < 0 {
                        continue;
                    }
                    let Some(j) = self.index_of(&peer) else {
                        continue;
                    };
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
            }
        }
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

    // ---- settling ------------------------------------------------------------------

    /// True once the healed cluster has a ready leader followed by everyone, every
    /// append has an answer, and a probe append committed.
    fn settled(&mut self) -> Result<bool, String> {
        let leader = (0..self.nodes.len()).find(|i| {
            self.nodes[*i]
                .core
                .as_ref()
                .is_some_and(|c| c.role() == Role::Leader && c.leader_ready())
        });
        let Some(l) = leader else {
            return Ok(false);
        };
        let (term, committed, end) = {
            let c = self.nodes[l]
                .core
                .as_ref()
                .map(|c| (c.term(), c.committed_index(), c.end_index()));
            match c {
                Some(x) => x,
                None => return Ok(false),
            }
        };
        let all_follow = self.nodes.iter().enumerate().all(|(j, n)| {
            j == l
                || n.core.as_ref().is_some_and(|c| {
                    c.role() == Role::Follower
                        && c.term() == term
                        && c.committed_index() == committed
                        && c.end_index() == end
                })
        });
        let outstanding_other = self
            .outstanding
            .keys()
            .any(|k| self.probe.is_none_or(|(p, _)| p != *k));
        if !all_follow || committed != end || outstanding_other {
            return Ok(false);
        }
        match self.probe {
            None => {
                let client = self.next_client;
                self.next_client += 1;
                self.probe = Some((client, false));
                self.submit(l, client, vec![Bytes::from_static(b"probe")]);
                Ok(false)
            }
            Some((_, true)) => Ok(true),
            Some((p, false)) => {
                if !self.outstanding.contains_key(&p) {
                    // The probe failed (leadership moved): try again.
                    self.probe = None;
                }
                Ok(false)
            }
        }
    }

    fn final_checks(&self) -> Result<(), String> {
        let reference = &self.committed;
        for n in &self.nodes {
            let Some(c) = &n.core else {
                return Err(format!("{} is down at the end", n.id));
            };
            for idx in 0..=c.committed_index() {
                let e = n.log.entry(idx).ok().flatten();
                if e.as_ref() != reference.get(idx as usize) {
                    return Err(format!("{} differs from the committed log at {idx}", n.id));
                }
            }
        }
        for (idx, e) in &self.acked {
            if reference.get(*idx as usize) != Some(e) {
                return Err(format!(
                    "acknowledged entry {idx} missing from the final log"
                ));
            }
        }
        Ok(())
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
