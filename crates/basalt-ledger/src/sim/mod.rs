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
//!   with [`SimOptions::disk`] each member runs over a real `LedgerStore` on its own
//!   `basalt_disk::SimDisk` instead, a crash is a power loss (or a process kill) with
//!   real recovery, checked against the `MemLog` model (`disk_member`, `disk_steps`);
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
//! committed index. Then leadership must move as asked: a preferred leader
//! leads the settled cluster; without one, a transfer to a random member must
//! succeed and the cluster settle again under it.

//!
//! Layout: this file holds the run's state and its main loop; `event_queue`
//! orders simulated time; `network` models the wire; `node_driver` steps a
//! member's core and executes its commands; `clients` submits appends and checks
//! their answers; `fault_injection` crashes, restarts, partitions and skews;
//! `invariants` holds the safety checks and `liveness` the settling checks;
//! `disk_member` and `disk_steps` run members over real stores on simulated disks,
//! `purges` runs retention purges on them.

mod clients;
mod disk_member;
mod disk_steps;
mod event_queue;
mod fault_injection;
mod final_transfer;
mod invariants;
mod liveness;
mod memlog;
mod network;
mod node_driver;
mod purges;
#[cfg(test)]
mod scripted;

pub use disk_member::DiskOptions;
pub use memlog::MemLog;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use bytes::Bytes;

use crate::config::{AckMode, LedgerConfig};
use crate::core::{ClientId, CoreInit, HardState, LedgerCore, SplitMix64};
use crate::entry::Entry;
use crate::protocol::NodeId;

use event_queue::{Ev, Scheduled};

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
    /// The pipelining window in entry bytes (small ones hold two or three
    /// entries, so acknowledgements arriving out of order matter).
    pub max_push_window_bytes: u64,
    pub data_file_size: i64,
    /// Mean gap between client appends (simulated ms).
    pub client_interval_ms: u64,
    /// Mean gap between fault actions (simulated ms).
    pub fault_interval_ms: u64,
    pub crashes: bool,
    pub partitions: bool,
    pub clock_jumps: bool,
    pub transfers: bool,
    /// Run every member over a real `LedgerStore` on a simulated disk that
    /// loses power (see `disk_member`), with these disk faults.
    pub disk: Option<DiskOptions>,
    /// Print every step.
    pub trace: bool,
}

impl SimOptions {
    /// A setup varied by the seed: 3 or 5 nodes, ack mode, batch push, preferred
    /// leader, small pending windows (by count and by bytes) and small data files.
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
            // Drawn last so the earlier choices of every seed stay as they were.
            max_push_window_bytes: [150, 400, 4 << 20][r.range(0, 3) as usize],
            client_interval_ms: 8,
            fault_interval_ms: 150,
            crashes: true,
            partitions: true,
            clock_jumps: true,
            transfers: true,
            disk: None,
            trace: false,
        }
    }

    /// A setup for a three-member group over real `LedgerStore`s on simulated
    /// disks: as [`SimOptions::for_seed`] with three members and a shorter fault
    /// phase, plus disk faults drawn from the seed (failing fsyncs in some
    /// runs, flipped bits at some crashes).
    pub fn for_disk_seed(seed: u64) -> SimOptions {
        let mut o = SimOptions::for_seed(seed);
        let mut r = SplitMix64::new(seed ^ 0xD15C_0000_D15C);
        o.nodes = 3;
        o.fault_ms = 2_000;
        o.heal_ms = 20_000;
        o.fault_interval_ms = 100;
        o.disk = Some(DiskOptions {
            fsync_fail_one_in: [0, 0, 60, 300][r.range(0, 4) as usize],
            flip_one_in: 3,
            process_kill_one_in: 5,
            skip_syncs_of: None,
            skip_reset_checkpoint: false,
            index_file_size: [32 * 8, 32 * 64][r.range(0, 2) as usize],
        });
        o
    }

    fn config(&self, self_id: &NodeId, peers: &BTreeMap<NodeId, String>) -> LedgerConfig {
        let mut c = LedgerConfig::new("sim", self_id.clone(), peers.clone(), "/nonexistent");
        c.heartbeat_interval_ms = 50;
        c.max_heartbeat_leak = 3;
        c.min_vote_interval_ms = 100;
        c.max_vote_interval_ms = 250;
        c.max_pending_per_peer = self.max_pending_per_peer;
        c.max_push_window_bytes = self.max_push_window_bytes;
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

/// Figures from a successful run (counts only; the run checked everything).
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    pub steps: u64,
    pub committed: i64,
    pub acked_appends: u64,
    /// Appends answered before the leader's own committed index reached them
    /// (two followers' syncs ahead of the leader's).
    pub acked_before_leader_commit: u64,
    pub failed_appends: u64,
    pub crashes: u64,
    /// Retention purges that deleted files, and those a power loss cut short.
    pub purges: u64,
    pub purges_interrupted: u64,
    /// Truncations that kept nothing (a follower starting over at the
    /// leader's next entry).
    pub resets: u64,
    /// Resets of a follower that fell behind a purge, to the leader's first
    /// kept entry.
    pub resets_past_purge: u64,
    /// Resets of a follower holding no committed entry (reset past a purge
    /// earlier) below its committed index, by a leader that kept the purged
    /// entries: the follower takes the committed entries again.
    pub resets_below_commit: u64,
    /// Resets whose sync a power loss cut short.
    pub resets_cut_short: u64,
    pub terms: i64,
    pub sim_ms: u64,
    /// The run ended after a leadership transfer it asked for once settled.
    pub transferred_after_heal: bool,
    /// The run ended led by its preferred leader.
    pub led_by_preferred: bool,
}

/// One simulated member: its core (`None` while crashed), its simulated disk and
/// durable hard state, and the bookkeeping the checks need across steps.
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
    /// The real store on a simulated disk (with [`SimOptions::disk`]).
    disk: Option<disk_member::DiskMember>,
    /// A store write failed during this step: the runtime poisons the store
    /// and steps the core with `StorageFailed`.
    failed: Option<String>,
    /// A hard state whose write failed: it may or may not be on the disk.
    hard_uncertain: Option<HardState>,
    /// Committed entries below this index were purged here (or a reset
    /// started the log past them): the member no longer holds them.
    purged_below: i64,
}

/// One simulation run: the seeded generator, the event queue, every member and
/// what the cluster committed and acknowledged so far. Use [`run`].
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
    /// The leadership transfer asked for after the heal (`final_transfer`).
    final_transfer: Option<final_transfer::FinalTransfer>,
    pending_error: Option<String>,
    report: SimReport,
}

/// Runs a simulation; `Err` describes the first invariant violation.
pub fn run(opts: SimOptions) -> Result<SimReport, String> {
    let mut sim = Sim::new(opts).map_err(|e| format!("setup: {e}"))?;
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
    fn new(opts: SimOptions) -> Result<Sim, String> {
        let mut rng = SplitMix64::new(opts.seed);
        let peers: BTreeMap<NodeId, String> = (0..opts.nodes)
            .map(|i| (NodeId::new(&format!("n{i}")), format!("sim:{i}")))
            .collect();
        let mut nodes = Vec::new();
        for i in 0..opts.nodes {
            let id = NodeId::new(&format!("n{i}"));
            let cfg = opts.config(&id, &peers);
            let log = MemLog::new(opts.data_file_size);
            let disk = match &opts.disk {
                Some(d) => Some(disk_member::DiskMember::create(
                    rng.next_u64(),
                    id.as_str(),
                    opts.data_file_size,
                    d,
                )?),
                None => None,
            };
            let view: &dyn crate::core::LogRead = match &disk {
                Some(d) => &d.store,
                None => &log,
            };
            let core = LedgerCore::new(
                &cfg,
                CoreInit {
                    hard_state: HardState::default(),
                    committed_index: -1,
                    seed: rng.next_u64(),
                },
                view,
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
                disk,
                failed: None,
                hard_uncertain: None,
                purged_below: 0,
            });
        }
        Ok(Sim {
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
            final_transfer: None,
            pending_error: None,
            report: SimReport::default(),
        })
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
                if self.start_final_transfer()? {
                    continue;
                }
                self.final_checks()?;
                self.report.transferred_after_heal = self
                    .final_transfer
                    .as_ref()
                    .is_some_and(|t| t.result.is_some());
                self.report.led_by_preferred = self.opts.preferred_leader;
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

    fn index_of(&self, id: &NodeId) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == *id)
    }
}
