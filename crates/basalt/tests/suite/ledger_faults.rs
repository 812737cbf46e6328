//! Ledger mode under mixed faults, with real processes: three ledger-mode
//! brokers whose every member-to-member link runs through a fault-injecting
//! proxy ([`procs::link_proxy`]), a NameServer, a producer and a push
//! consumer that run throughout. Cycle after cycle the test applies one of:
//! `kill -9` of the leader and a restart, a partition isolating the leader,
//! a partition isolating a follower, SIGSTOP of the leader past its lease,
//! a slow link, and a clean restart of a member with its data kept.
//!
//! After each cycle the group must take sends again. At the end:
//! - every acknowledged message is read back exactly once, at the queue and
//!   offset its send reported: a deposed leader that acknowledged a write
//!   the new term overwrote would show here as a lost or moved message;
//! - within a queue, offsets follow the order of sending, without gaps;
//! - whatever the consumer running throughout received (it may see a message
//!   again after a fail-over, RocketMQ is at-least-once) is where the send
//!   said;
//! - the members' ledgers are identical, `basalt store check` passes on each,
//!   and no member logged ERROR;
//! - every entry a member acknowledged, by its own log of acks with their
//!   terms (`ledgerAckLogEnable`), holds an entry of that term in the final
//!   ledger: a deposed leader never acknowledged after the new term took its
//!   place.
//!
//! `BASALT_LEDGER_FAULT_CYCLES` sets the number of cycles (default 6, one of
//! each kind; the long run in docs/ledger-protocol.md uses 24).

use crate::procs;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, Producer, ProducerOptions, PushConsumeFrom,
    PushConsumer, PushOptions, SendStatus, TopicConfig,
};
use parking_lot::Mutex;
use procs::ledger_group::{
    check_acks_hold_their_terms, check_ledgers_identical, check_queue_order,
};
use procs::link_proxy::{LinkMode, LinkProxy};
use procs::{Proc, eventually, free_port, free_port_pair, write_conf};

const TOPIC: &str = "LedgerFaults";
const MEMBERS: usize = 3;

fn client_config(ns: &str) -> ClientConfig {
    let mut c = ClientConfig::new(ns);
    c.poll_name_server_interval = Duration::from_millis(300);
    c.heartbeat_interval = Duration::from_millis(500);
    c.request_timeout = Duration::from_secs(3);
    c
}

/// Where a send said its message went.
type Placed = (i32, i64);
/// Message id -> every place it was delivered at.
type Deliveries = HashMap<u64, Vec<Placed>>;

/// The three brokers, their proxies and the NameServer.
struct FaultyGroup {
    work: PathBuf,
    _ns: Proc,
    ns_addr: String,
    brokers: Vec<Proc>,
    confs: Vec<PathBuf>,
    broker_ports: Vec<u16>,
    /// `(from, to)` -> the proxy `from` uses to reach `to`.
    links: BTreeMap<(usize, usize), LinkProxy>,
}

impl FaultyGroup {
    async fn start(work: PathBuf) -> FaultyGroup {
        let (ns, ns_addr) = Proc::namesrv(&work);
        let ledger_ports: Vec<u16> = (0..MEMBERS).map(|_| free_port()).collect();
        let broker_ports: Vec<u16> = (0..MEMBERS).map(|_| free_port_pair()).collect();
        let mut links = BTreeMap::new();
        for from in 0..MEMBERS {
            for (to, port) in ledger_ports.iter().enumerate() {
                if from != to {
                    let target: SocketAddr = ([127, 0, 0, 1], *port).into();
                    links.insert((from, to), LinkProxy::start(target).await);
                }
            }
        }
        let confs: Vec<PathBuf> = (0..MEMBERS)
            .map(|i| {
                // Member i listens on its own port and reaches the others
                // through its proxies to them.
                let peers = (0..MEMBERS)
                    .map(|j| match i == j {
                        true => format!("n{j}-127.0.0.1:{}", ledger_ports[j]),
                        false => format!("n{j}-{}", links[&(i, j)].addr()),
                    })
                    .collect::<Vec<_>>()
                    .join(";");
                let store = work.join(format!("store{i}")).display().to_string();
                write_conf(
                    &work,
                    &format!("b{i}"),
                    &[
                        ("brokerClusterName", "FC".into()),
                        ("brokerName", "fb".into()),
                        ("listenAddr", "127.0.0.1".into()),
                        ("brokerIP1", "127.0.0.1".into()),
                        ("brokerIP2", "127.0.0.1".into()),
                        ("listenPort", broker_ports[i].to_string()),
                        ("namesrvAddr", ns_addr.clone()),
                        ("storePathRootDir", store),
                        ("enableDLegerCommitLog", "true".into()),
                        ("dLegerGroup", "fb".into()),
                        ("dLegerPeers", peers),
                        ("dLegerSelfId", format!("n{i}")),
                        ("dLegerHeartbeatInterval", "200".into()),
                        ("mappedFileSizeCommitLog", (4 * 1024 * 1024).to_string()),
                        ("mappedFileSizeConsumeQueue", (20 * 10_000).to_string()),
                        ("registerNameServerPeriod", "500".into()),
                        ("slaveSyncInterval", "500".into()),
                        ("ledgerAckLogEnable", "true".into()),
                    ],
                )
            })
            .collect();
        let mut g = FaultyGroup {
            work,
            _ns: ns,
            ns_addr,
            brokers: Vec::new(),
            confs,
            broker_ports,
            links,
        };
        g.brokers = (0..MEMBERS).map(|i| g.spawn(i)).collect();
        g
    }

    fn spawn(&self, i: usize) -> Proc {
        Proc::spawn(
            &format!("broker{i}"),
            &["broker", "-c", self.confs[i].to_str().expect("utf-8 path")],
            "basalt broker",
            &self.work,
        )
    }

    fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.broker_ports[i])
    }

    /// The member that takes sends now (the writable one with the highest
    /// term), other than `not`, waiting for one.
    async fn leader(&self, admin: &Admin, not: Option<usize>) -> usize {
        let mut found = None;
        eventually(
            "a writable ledger leader",
            Duration::from_secs(40),
            async || {
                let mut best: Option<(i64, usize)> = None;
                for i in (0..MEMBERS).filter(|i| Some(*i) != not) {
                    let Ok(rt) = admin.broker_runtime_info(&self.addr(i)).await else {
                        continue;
                    };
                    let term = rt.get("ledgerTerm").and_then(|t| t.parse().ok());
                    if let (Some("true"), Some(term)) =
                        (rt.get("ledgerWritable").map(|s| s.as_str()), term)
                        && best.is_none_or(|(t, _)| term > t)
                    {
                        best = Some((term, i));
                    }
                }
                found = best.map(|(_, i)| i);
                found.is_some()
            },
        )
        .await;
        found.expect("a leader")
    }

    /// Sets every link into and out of `member`.
    fn isolate(&self, member: usize, mode: LinkMode) {
        for ((from, to), p) in &self.links {
            if *from == member || *to == member {
                p.set(mode);
            }
        }
    }

    fn heal(&self) {
        for p in self.links.values() {
            p.set(LinkMode::Pass);
        }
    }
}

/// One kind of fault, applied and undone by [`apply`].
#[derive(Debug, Clone, Copy)]
enum Fault {
    KillLeader,
    IsolateLeader,
    IsolateFollower,
    PauseLeader,
    SlowLinks,
    RestartMember,
}

const FAULTS: [Fault; 6] = [
    Fault::KillLeader,
    Fault::IsolateLeader,
    Fault::IsolateFollower,
    Fault::PauseLeader,
    Fault::SlowLinks,
    Fault::RestartMember,
];

/// Waits until `n` more sends were acknowledged than now.
async fn more_acks(what: &str, acked: &Mutex<BTreeMap<u64, Placed>>, n: usize) {
    let base = acked.lock().len();
    eventually(what, Duration::from_secs(40), async || {
        acked.lock().len() >= base + n
    })
    .await;
}

async fn apply(
    fault: Fault,
    cycle: usize,
    g: &mut FaultyGroup,
    admin: &Admin,
    acked: &Mutex<BTreeMap<u64, Placed>>,
) {
    let leader = g.leader(admin, None).await;
    let t0 = Instant::now();
    match fault {
        Fault::KillLeader => {
            g.brokers[leader].kill9();
            g.leader(admin, Some(leader)).await;
            more_acks("sends after the kill", acked, 100).await;
            g.brokers[leader] = g.spawn(leader);
        }
        Fault::IsolateLeader => {
            // The minority side: no member hears the leader, nor it them.
            // Half of the time the links drop packets, else they reset.
            let mode = match cycle % 2 {
                0 => LinkMode::Blackhole,
                _ => LinkMode::Cut,
            };
            g.isolate(leader, mode);
            g.leader(admin, Some(leader)).await;
            more_acks("sends to the majority side", acked, 100).await;
            g.heal();
        }
        Fault::IsolateFollower => {
            let follower = (leader + 1 + cycle % 2) % MEMBERS;
            g.isolate(follower, LinkMode::Cut);
            more_acks("sends while a follower is cut off", acked, 100).await;
            g.heal();
        }
        Fault::PauseLeader => {
            g.brokers[leader].pause();
            g.leader(admin, Some(leader)).await;
            more_acks("sends while the old leader is frozen", acked, 100).await;
            g.brokers[leader].resume();
        }
        Fault::SlowLinks => {
            // Every link out of the leader is slow in one direction.
            for to in (0..MEMBERS).filter(|t| *t != leader) {
                g.links[&(leader, to)].set(LinkMode::Delay(Duration::from_millis(40)));
            }
            more_acks("sends over slow links", acked, 50).await;
            g.heal();
        }
        Fault::RestartMember => {
            let m = (leader + cycle) % MEMBERS;
            g.brokers[m].stop();
            more_acks("sends while a member is down", acked, 50).await;
            g.brokers[m] = g.spawn(m);
        }
    }
    more_acks("sends after the cycle", acked, 100).await;
    eprintln!(
        "cycle {cycle}: {fault:?} (leader n{leader}) took {:?}",
        t0.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_group_survives_partitions_pauses_and_crashes() {
    let cycles: usize = std::env::var("BASALT_LEDGER_FAULT_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(FAULTS.len());
    let work = tempfile::tempdir().unwrap();
    let mut g = FaultyGroup::start(work.path().to_path_buf()).await;
    let admin = Admin::new(client_config(&g.ns_addr));
    let leader = g.leader(&admin, None).await;
    admin
        .create_topic(&g.addr(leader), &TopicConfig::new(TOPIC, 4))
        .await
        .unwrap();

    // One producer without retries: each id is sent once, so each
    // acknowledged id must be stored exactly once.
    let opts = ProducerOptions {
        retry_times_when_send_failed: 0,
        ..Default::default()
    };
    let producer = Producer::with_options("fault-producer", client_config(&g.ns_addr), opts);
    producer.start().await.unwrap();
    let acked: Arc<Mutex<BTreeMap<u64, Placed>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (producer, acked, stop) = (producer.clone(), Arc::clone(&acked), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut id = 0u64;
            while !stop.load(Ordering::Acquire) {
                let m = Message::new(TOPIC, format!("id-{id:08}").into_bytes());
                match producer.send(&m).await {
                    Ok(r) if r.status == SendStatus::SendOk => {
                        acked.lock().insert(id, (r.queue.queue_id, r.queue_offset));
                    }
                    _ => tokio::time::sleep(Duration::from_millis(20)).await,
                }
                id += 1;
            }
        })
    };
    // A consumer that runs through every fault.
    let live: Arc<Mutex<Deliveries>> = Arc::default();
    let live_consumer = consumer(&g.ns_addr, "fault-live", Arc::clone(&live));
    live_consumer.start().await.unwrap();

    more_acks("first sends", &acked, 300).await;
    for cycle in 0..cycles {
        apply(FAULTS[cycle % FAULTS.len()], cycle, &mut g, &admin, &acked).await;
    }
    stop.store(true, Ordering::Release);
    sender.await.unwrap();
    producer.shutdown().await;
    let acked = acked.lock().clone();
    eprintln!("{} sends acknowledged over {cycles} cycles", acked.len());

    // The live consumer catches up; whatever it saw is where the send said.
    eventually(
        "the live consumer to see every ack",
        Duration::from_secs(60),
        async || {
            let r = live.lock();
            acked.keys().all(|id| r.contains_key(id))
        },
    )
    .await;
    live_consumer.shutdown().await;
    for (id, places) in live.lock().iter() {
        if let Some(want) = acked.get(id) {
            assert!(
                places.iter().all(|p| p == want),
                "message {id} delivered at {places:?}, sent to {want:?}"
            );
        }
    }

    // A fresh consumer from the first offset: every ack exactly once, in place.
    let fresh: Arc<Mutex<Deliveries>> = Arc::default();
    let fresh_consumer = consumer(&g.ns_addr, "fault-fresh", Arc::clone(&fresh));
    fresh_consumer.start().await.unwrap();
    eventually(
        "a fresh read of every ack",
        Duration::from_secs(60),
        async || {
            let r = fresh.lock();
            acked.keys().all(|id| r.contains_key(id))
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    fresh_consumer.shutdown().await;
    let fresh = fresh.lock().clone();
    for (id, want) in &acked {
        assert_eq!(fresh[id], vec![*want], "acknowledged message {id}");
    }
    for (id, got) in &fresh {
        assert_eq!(got.len(), 1, "message {id} stored {} times", got.len());
    }
    check_queue_order(&fresh);

    converge(&g, &admin).await;
    admin.shutdown();
    for b in g.brokers.iter_mut() {
        b.stop();
    }
    check_ledgers_identical(&g.work, MEMBERS);
    // The members' own logs of what they acknowledged, against the final
    // ledger: no deposed leader acknowledged an entry the next term replaced.
    let acked_per_term = check_acks_hold_their_terms(&g.work, MEMBERS);
    let logged: usize = acked_per_term.values().sum();
    assert!(
        logged >= acked.len(),
        "the members logged {logged} acknowledged entries for {} acknowledged sends",
        acked.len()
    );
    assert!(
        acked_per_term.len() >= 2,
        "acknowledgements came from one term only: {acked_per_term:?}"
    );
    for (i, b) in g.brokers.iter().enumerate() {
        let store = g.work.join(format!("store{i}"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["store", "check", store.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "store check of member {i}:\n{text}");
        assert_eq!(
            b.error_lines(),
            Vec::<String>::new(),
            "{} logged ERROR",
            b.name
        );
    }
}

fn consumer(ns: &str, group: &str, into: Arc<Mutex<Deliveries>>) -> PushConsumer {
    let c = PushConsumer::with_options(
        group,
        client_config(ns),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            ..Default::default()
        },
    );
    c.subscribe(TOPIC, "*").unwrap();
    c.register_listener(move |msgs, _| {
        let mut r = into.lock();
        for m in msgs {
            let id: u64 = std::str::from_utf8(&m.body[3..]).unwrap().parse().unwrap();
            r.entry(id).or_default().push((m.queue_id, m.queue_offset));
        }
        ConsumeStatus::Success
    });
    c
}

/// Waits until the three members have the same ledger end, all committed.
async fn converge(g: &FaultyGroup, admin: &Admin) {
    let mut last = Vec::new();
    let done = tokio::time::timeout(Duration::from_secs(40), async {
        loop {
            let mut ends = Vec::new();
            for i in 0..MEMBERS {
                let rt = admin
                    .broker_runtime_info(&g.addr(i))
                    .await
                    .unwrap_or_default();
                ends.push((
                    rt.get("ledgerEndIndex").cloned().unwrap_or_default(),
                    rt.get("ledgerCommittedIndex").cloned().unwrap_or_default(),
                ));
            }
            if ends
                .iter()
                .all(|e| *e == ends[0] && e.0 == e.1 && !e.0.is_empty())
            {
                return;
            }
            last = ends;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        done.is_ok(),
        "members did not converge: (end, committed) = {last:?}"
    );
}
