//! Ledger mode with real processes: three ledger-mode brokers and a
//! NameServer on 127.0.0.1; a producer sends continuously; the leader is
//! killed with SIGKILL; a new leader takes sends; the old one restarts and
//! catches up; the new leader is frozen (SIGSTOP) past its lease and thawed;
//! every acknowledged message is consumed exactly once in queue order; the
//! three ledgers end identical, `basalt store check` passes on every member,
//! and no member logged an ERROR.

use crate::procs;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, Producer, ProducerOptions, PushConsumeFrom,
    PushConsumer, PushOptions, SendStatus, TopicConfig,
};
use parking_lot::Mutex;
use procs::ledger_group::{check_ledgers_identical, check_queue_order};
use procs::{Proc, eventually, free_port, free_port_pair, write_conf};

const TOPIC: &str = "LedgerFailover";

fn client_config(ns: &str) -> ClientConfig {
    let mut c = ClientConfig::new(ns);
    c.poll_name_server_interval = Duration::from_millis(300);
    c.heartbeat_interval = Duration::from_millis(500);
    c.request_timeout = Duration::from_secs(3);
    c
}

/// A sent message: its id, and where the broker said it went.
#[derive(Debug, Clone)]
struct Acked {
    queue_id: i32,
    queue_offset: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_group_fails_over_after_kill9_and_loses_nothing() {
    let work = tempfile::tempdir().unwrap();
    let (_ns, ns_addr) = Proc::namesrv(work.path());
    let ledger_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let broker_ports: Vec<u16> = (0..3).map(|_| free_port_pair()).collect();
    let peers = (0..3)
        .map(|i| format!("n{i}-127.0.0.1:{}", ledger_ports[i]))
        .collect::<Vec<_>>()
        .join(";");
    let confs: Vec<_> = (0..3)
        .map(|i| {
            write_conf(
                work.path(),
                &format!("b{i}"),
                &[
                    ("brokerClusterName", "LC".into()),
                    ("brokerName", "lb".into()),
                    ("listenAddr", "127.0.0.1".into()),
                    ("brokerIP1", "127.0.0.1".into()),
                    ("brokerIP2", "127.0.0.1".into()),
                    ("listenPort", broker_ports[i].to_string()),
                    ("namesrvAddr", ns_addr.clone()),
                    (
                        "storePathRootDir",
                        work.path().join(format!("store{i}")).display().to_string(),
                    ),
                    ("enableDLegerCommitLog", "true".into()),
                    ("dLegerGroup", "lb".into()),
                    ("dLegerPeers", peers.clone()),
                    ("dLegerSelfId", format!("n{i}")),
                    ("dLegerHeartbeatInterval", "200".into()),
                    ("mappedFileSizeCommitLog", (4 * 1024 * 1024).to_string()),
                    ("mappedFileSizeConsumeQueue", (20 * 10_000).to_string()),
                    ("maxMessageSize", (64 * 1024).to_string()),
                    ("registerNameServerPeriod", "500".into()),
                    ("slaveSyncInterval", "500".into()),
                ],
            )
        })
        .collect();
    let start = |i: usize| {
        Proc::spawn(
            &format!("broker{i}"),
            &["broker", "-c", confs[i].to_str().unwrap()],
            "basalt broker",
            work.path(),
        )
    };
    let mut brokers: Vec<Proc> = (0..3).map(start).collect();

    // Wait for a master and create the topic on it.
    let admin = Admin::new(client_config(&ns_addr));
    let mut master_addr = String::new();
    eventually(
        "a ledger master",
        Duration::from_secs(30),
        async || match admin.cluster_masters("LC").await {
            Ok(m) if !m.is_empty() => {
                master_addr = m[0].1.clone();
                true
            }
            _ => false,
        },
    )
    .await;
    admin
        .create_topic(&master_addr, &TopicConfig::new(TOPIC, 4))
        .await
        .unwrap();

    // One producer, no retries: every id is sent once, so an acknowledged id
    // must exist exactly once.
    let opts = ProducerOptions {
        retry_times_when_send_failed: 0,
        ..Default::default()
    };
    let producer = Producer::with_options("lf-producer", client_config(&ns_addr), opts);
    producer.start().await.unwrap();
    let acked: Arc<Mutex<BTreeMap<u64, Acked>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (producer, acked, stop) = (producer.clone(), Arc::clone(&acked), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut id = 0u64;
            let mut ack_times = Vec::new();
            while !stop.load(Ordering::Acquire) {
                let m = Message::new(TOPIC, format!("id-{id:08}").into_bytes()).with_tags("F");
                if let Ok(r) = producer.send(&m).await {
                    if r.status == SendStatus::SendOk {
                        acked.lock().insert(
                            id,
                            Acked {
                                queue_id: r.queue.queue_id,
                                queue_offset: r.queue_offset,
                            },
                        );
                        ack_times.push(Instant::now());
                    }
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                id += 1;
            }
            ack_times
        })
    };

    eventually(
        "500 acknowledged sends",
        Duration::from_secs(60),
        async || acked.lock().len() >= 500,
    )
    .await;
    // Kill the leader.
    let leader = (0..3)
        .find(|i| master_addr.ends_with(&format!(":{}", broker_ports[*i])))
        .expect("the master is one of ours");
    brokers[leader].kill9();
    // Measured from when the process is gone (kill9 waits for it).
    let killed_at = Instant::now();
    let before = acked.lock().len();

    eventually(
        "sends to succeed again after the kill",
        Duration::from_secs(30),
        async || acked.lock().len() >= before + 200,
    )
    .await;

    // The old leader comes back and catches up while sends go on.
    brokers[leader] = start(leader);
    let n = acked.lock().len();
    eventually(
        "more sends after the restart",
        Duration::from_secs(30),
        async || acked.lock().len() >= n + 300,
    )
    .await;

    // The new leader freezes past its lease (heartbeats every 200 ms), as
    // under a stalled VM; another member takes over; it thaws as a follower.
    let paused_master = master_other_than(&admin, &addr_of(leader, &broker_ports)).await;
    let paused = (0..3)
        .find(|i| paused_master == addr_of(*i, &broker_ports))
        .expect("the master is one of ours");
    brokers[paused].pause();
    let n = acked.lock().len();
    eventually(
        "sends to another leader while the old one is frozen",
        Duration::from_secs(30),
        async || acked.lock().len() >= n + 100,
    )
    .await;
    brokers[paused].resume();
    let n = acked.lock().len();
    eventually(
        "more sends after the thaw",
        Duration::from_secs(30),
        async || acked.lock().len() >= n + 200,
    )
    .await;
    stop.store(true, Ordering::Release);
    let ack_times = sender.await.unwrap();
    let failover = ack_times
        .iter()
        .find(|t| **t > killed_at)
        .map(|t| t.duration_since(killed_at))
        .unwrap();
    eprintln!("fail-over: kill -9 of the leader to the next acknowledged send took {failover:?}");
    producer.shutdown().await;

    // Consume everything from the first offset.
    let acked = acked.lock().clone();
    // Message id -> every (queue id, queue offset) it was delivered at.
    type Deliveries = HashMap<u64, Vec<(i32, i64)>>;
    let received: Arc<Mutex<Deliveries>> = Arc::default();
    let consumer = PushConsumer::with_options(
        "lf-consumer",
        client_config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            ..Default::default()
        },
    );
    consumer.subscribe(TOPIC, "*").unwrap();
    {
        let received = Arc::clone(&received);
        consumer.register_listener(move |msgs, _| {
            let mut r = received.lock();
            for m in msgs {
                let id: u64 = std::str::from_utf8(&m.body[3..]).unwrap().parse().unwrap();
                r.entry(id).or_default().push((m.queue_id, m.queue_offset));
            }
            ConsumeStatus::Success
        });
    }
    consumer.start().await.unwrap();
    eventually(
        "every acknowledged message to be consumed",
        Duration::from_secs(60),
        async || {
            let r = received.lock();
            acked.keys().all(|id| r.contains_key(id))
        },
    )
    .await;
    // A little longer, so duplicates would show.
    tokio::time::sleep(Duration::from_secs(1)).await;
    consumer.shutdown().await;
    let received = received.lock().clone();
    for (id, a) in &acked {
        let got = &received[id];
        assert_eq!(
            got.len(),
            1,
            "acknowledged message {id} consumed {} times",
            got.len()
        );
        assert_eq!(
            got[0],
            (a.queue_id, a.queue_offset),
            "message {id} is where the send said"
        );
    }
    for (id, got) in &received {
        assert!(got.len() <= 1, "message {id} consumed {} times", got.len());
    }
    check_queue_order(&received);
    // The restarted member catches up: all three have the same ledger end.
    let addrs: Vec<String> = broker_ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let mut last_seen = Vec::new();
    let caught_up = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let mut ends = Vec::new();
            for a in &addrs {
                let rt = admin.broker_runtime_info(a).await.unwrap_or_default();
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
            last_seen = ends;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    if caught_up.is_err() {
        let log = std::fs::read_to_string(&brokers[leader].log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "members did not converge: (end, committed) = {last_seen:?}; restarted broker log tail:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    admin.shutdown();

    // Stop everything cleanly; the three ledgers are identical.
    for b in brokers.iter_mut() {
        b.stop();
    }
    check_ledgers_identical(work.path(), 3);
    // The operator's check passes on every member (its queues match its
    // ledger), and nothing was logged at ERROR level.
    for i in 0..3 {
        let store = work.path().join(format!("store{i}"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["store", "check", store.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "store check of member {i}:\n{text}");
        assert!(text.contains("store and ledger OK"), "{text}");
    }
    for b in &brokers {
        assert_eq!(
            b.error_lines(),
            Vec::<String>::new(),
            "{} logged ERROR",
            b.name
        );
    }
}

fn addr_of(i: usize, ports: &[u16]) -> String {
    format!("127.0.0.1:{}", ports[i])
}

/// The master's address once the cluster has one other than `not`.
async fn master_other_than(admin: &Admin, not: &str) -> String {
    let mut addr = String::new();
    eventually("a master", Duration::from_secs(30), async || {
        match admin.cluster_masters("LC").await {
            Ok(m) => match m.into_iter().find(|(_, a)| a != not) {
                Some((_, a)) => {
                    addr = a;
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    })
    .await;
    addr
}
