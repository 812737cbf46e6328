//! Timer messages with real processes: sends carrying each of the four
//! timer properties (`TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`, `TIMER_DELAY_MS`,
//! `__STARTDELIVERTIME`) for +2 s, +10 s and +1 min arrive not before their
//! time, within 1.5 s after it, and exactly once — across a kill -9 under
//! SYNC_FLUSH and a clean restart of a standalone broker, and across a
//! ledger fail-over; a SYNC_MASTER delivers while its slave confirms. A
//! delay too far is refused; delay levels still work; `basalt admin timers`
//! shows the backlog.

use crate::procs;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use basalt_client::{Admin, ClientConfig, TopicConfig};
use basalt_common::properties::Properties;
use basalt_common::record::{self, StoredMessage};
use basalt_common::time::now_millis;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeader,
};
use basalt_remoting::{RemotingClient, RemotingClientConfig as WireConfig, RemotingCommand};
use parking_lot::Mutex;
use procs::{Proc, eventually, free_port, free_port_pair, write_conf};

/// The four properties and how each says "`delay_ms` from `t0`".
const PROPS: [&str; 4] = [
    "TIMER_DELIVER_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELAY_MS",
    "__STARTDELIVERTIME",
];

fn prop_value(key: &str, t0: i64, delay_ms: i64) -> String {
    match key {
        "TIMER_DELAY_SEC" => (delay_ms / 1000).to_string(),
        "TIMER_DELAY_MS" => delay_ms.to_string(),
        _ => (t0 + delay_ms).to_string(),
    }
}

/// One timer sent: its body, and when it is due.
#[derive(Debug, Clone)]
struct Sent {
    body: String,
    due: i64,
}

/// Sends `body` to queue 0 of `topic` with one property (none when `key`
/// is empty). `delay_level` > 0 adds RocketMQ's `DELAY`.
async fn send(
    c: &RemotingClient,
    addr: &str,
    topic: &str,
    body: &str,
    key: &str,
    value: &str,
) -> Result<RemotingCommand, String> {
    let mut p = Properties::new();
    p.set("UNIQ_KEY", format!("uniq-{body}"));
    if !key.is_empty() {
        p.set(key, value);
    }
    let h = SendMessageRequestHeader {
        producer_group: "TimerPG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 1,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: now_millis(),
        flag: 0,
        properties: Some(String::from_utf8(p.encode()).unwrap()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        max_reconsume_times: None,
        broker_name: None,
    };
    let cmd = RemotingCommand::request(request::SEND_MESSAGE_V2)
        .with_ext(h.to_ext_v2())
        .with_body(body.as_bytes().to_vec());
    c.invoke(addr, cmd, Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())
}

/// Sends four timers (one per property) for each delay; all must succeed.
async fn send_timers(c: &RemotingClient, addr: &str, topic: &str, delays_ms: &[i64]) -> Vec<Sent> {
    let t0 = now_millis();
    let mut sent = Vec::new();
    for d in delays_ms {
        for key in PROPS {
            let body = format!("{key}+{d}");
            let r = send(c, addr, topic, &body, key, &prop_value(key, t0, *d))
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS, "{body}: {:?}", r.remark);
            sent.push(Sent { body, due: t0 + d });
        }
    }
    sent
}

/// Long-polls queue 0 of `topic` on `addr` from `offset`: None when the
/// broker does not answer (down, or not the leader).
async fn pull(
    c: &RemotingClient,
    addr: &str,
    topic: &str,
    offset: i64,
) -> Option<(Vec<StoredMessage>, i64)> {
    let h = PullMessageRequestHeader {
        consumer_group: "TimerCG".into(),
        topic: topic.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: 0x4 | 0x2,
        commit_offset: 0,
        suspend_timeout_millis: 500,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
    };
    let cmd = RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext());
    let r = c.invoke(addr, cmd, Duration::from_secs(3)).await.ok()?;
    match r.code {
        response::SUCCESS => {
            let next = PullMessageResponseHeader::from_ext(&r.ext_fields)
                .ok()?
                .next_begin_offset;
            Some((record::decode_all(&r.body, true).ok()?, next))
        }
        response::PULL_NOT_FOUND | response::PULL_RETRY_IMMEDIATELY => Some((Vec::new(), offset)),
        _ => None,
    }
}

/// What a collector saw: each message with the time the test received it.
type Seen = Arc<Mutex<Vec<(i64, StoredMessage)>>>;

/// Pulls queue 0 of `topic` without pause from whichever address `addr`
/// holds, until `stop`; a broker that is down is retried at once.
fn collector(
    addr: Arc<Mutex<String>>,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let (out, topic) = (Arc::clone(&seen), topic.to_string());
    let task = tokio::spawn(async move {
        let c = RemotingClient::new(WireConfig::default());
        let mut offset = 0;
        while !stop.load(Ordering::Acquire) {
            let a = addr.lock().clone();
            match pull(&c, &a, &topic, offset).await {
                Some((msgs, next)) => {
                    let at = now_millis();
                    out.lock().extend(msgs.into_iter().map(|m| (at, m)));
                    offset = next;
                }
                None => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    });
    (seen, task)
}

/// Each timer arrived exactly once, not before its time and within 1.5 s
/// after it, both as the broker stored its copy and as the test saw it.
fn check_on_time(sent: &[Sent], seen: &[(i64, StoredMessage)]) {
    let mut by_body: BTreeMap<String, Vec<(i64, &StoredMessage)>> = BTreeMap::new();
    for (at, m) in seen {
        let body = String::from_utf8_lossy(&m.body).to_string();
        by_body.entry(body).or_default().push((*at, m));
    }
    let mut worst = 0;
    for s in sent {
        let got = by_body.get(&s.body).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(got.len(), 1, "{} must arrive exactly once: {got:?}", s.body);
        let (seen_at, m) = got[0];
        for (what, at) in [("stored", m.store_timestamp), ("seen", seen_at)] {
            assert!(at >= s.due, "{} {what} {} ms early", s.body, s.due - at);
            assert!(
                at <= s.due + 1500,
                "{} {what} {} ms late",
                s.body,
                at - s.due
            );
        }
        worst = worst.max(m.store_timestamp - s.due);
        assert!(m.property("BSLT_TIMER_ORIGIN").is_some(), "{}", s.body);
        assert_eq!(m.property("UNIQ_KEY"), Some(format!("uniq-{}", s.body)));
    }
    eprintln!(
        "{} timers on time; the latest stored {worst} ms after its time",
        sent.len()
    );
}

async fn runtime(c: &RemotingClient, addr: &str, key: &str) -> String {
    let cmd = RemotingCommand::request(request::GET_BROKER_RUNTIME_INFO);
    let r = c.invoke(addr, cmd, Duration::from_secs(5)).await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["table"][key].as_str().unwrap_or_default().to_string()
}

fn broker_settings(ns_addr: &str, port: u16, store: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("brokerClusterName", "TC".into()),
        ("listenAddr", "127.0.0.1".into()),
        ("brokerIP1", "127.0.0.1".into()),
        ("brokerIP2", "127.0.0.1".into()),
        ("listenPort", port.to_string()),
        ("namesrvAddr", ns_addr.to_string()),
        ("storePathRootDir", store.display().to_string()),
        ("mappedFileSizeCommitLog", (4 * 1024 * 1024).to_string()),
        ("mappedFileSizeConsumeQueue", (20 * 10_000).to_string()),
        ("maxMessageSize", (64 * 1024).to_string()),
        ("registerNameServerPeriod", "500".into()),
        ("timerMaxDelaySec", "3600".into()),
        ("mappedFileSizeTimerLog", (48 * 10_000).to_string()),
    ]
}

/// `basalt admin timers` against `ns_addr`: its output.
fn admin_timers(ns_addr: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["admin", "--namesrv", ns_addr, "timers"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A standalone SYNC_FLUSH broker: twelve timers (+2 s, +10 s, +1 min
/// through each property) wait across a kill -9 and a clean restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_arrive_on_time_across_kill9_and_restart() {
    const TOPIC: &str = "TimedProc";
    let work = tempfile::tempdir().unwrap();
    let (_ns, ns_addr) = Proc::namesrv(work.path());
    let port = free_port_pair();
    let mut settings = broker_settings(&ns_addr, port, &work.path().join("store"));
    settings.push(("brokerName", "tb".into()));
    settings.push(("flushDiskType", "SYNC_FLUSH".into()));
    let conf = write_conf(work.path(), "broker", &settings);
    let start = || {
        Proc::spawn(
            "broker",
            &["broker", "-c", conf.to_str().unwrap()],
            "basalt broker",
            work.path(),
        )
    };
    let mut broker = start();
    let addr = format!("127.0.0.1:{port}");
    let c = RemotingClient::new(WireConfig::default());

    let sent = send_timers(&c, &addr, TOPIC, &[2_000, 10_000, 60_000]).await;
    let t0 = sent[0].due - 2_000;
    // Too far: refused with RocketMQ's code, naming the limit.
    let r = send(&c, &addr, TOPIC, "far", "TIMER_DELAY_SEC", "3601")
        .await
        .unwrap();
    assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{:?}", r.remark);
    assert!(r.remark.unwrap_or_default().contains("3600000"));
    // A delay level (2 = 5 s) and a plain message still work as before.
    let r = send(&c, &addr, TOPIC, "level2", "DELAY", "2")
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS);
    let r = send(&c, &addr, TOPIC, "plain", "", "").await.unwrap();
    assert_eq!(r.code, response::SUCCESS);

    let stop = Arc::new(AtomicBool::new(false));
    let (seen, task) = collector(Arc::new(Mutex::new(addr.clone())), TOPIC, Arc::clone(&stop));
    let until = |ms: i64| async move {
        let left = (t0 + ms - now_millis()).max(0) as u64;
        tokio::time::sleep(Duration::from_millis(left)).await;
    };

    // The backlog is visible through `basalt admin timers`.
    eventually(
        "the broker in the admin table",
        Duration::from_secs(10),
        async || admin_timers(&ns_addr).contains(&addr),
    )
    .await;
    let table = admin_timers(&ns_addr);
    assert!(table.contains("pending"), "{table}");
    assert_eq!(runtime(&c, &addr, "timerCongestNum").await, "12");

    // The +2 s ones are out; the others wait across a crash...
    until(3_600).await;
    assert_eq!(runtime(&c, &addr, "timerCongestNum").await, "8");
    broker.kill9();
    broker = start();
    // ... and across a clean restart.
    until(20_000).await;
    assert_eq!(runtime(&c, &addr, "timerCongestNum").await, "4");
    broker.stop();
    broker = start();
    until(62_000).await;
    stop.store(true, Ordering::Release);
    task.await.unwrap();

    let seen = seen.lock().clone();
    check_on_time(&sent, &seen);
    let bodies: Vec<_> = seen.iter().map(|(_, m)| m.body.clone()).collect();
    assert_eq!(
        seen.len(),
        sent.len() + 2,
        "timers, level2, plain: {bodies:?}"
    );
    let (_, level) = seen.iter().find(|(_, m)| &m.body[..] == b"level2").unwrap();
    assert!(level.store_timestamp >= t0 + 5_000, "delay level 2 is 5 s");
    assert_eq!(runtime(&c, &addr, "timerCongestNum").await, "0");
    broker.stop();
}

/// Three ledger-mode broker configurations on free ports.
struct LedgerGroup {
    work: std::path::PathBuf,
    broker_ports: Vec<u16>,
    confs: Vec<std::path::PathBuf>,
}

impl LedgerGroup {
    fn new(work: &Path, ns_addr: &str) -> LedgerGroup {
        let ledger_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let broker_ports: Vec<u16> = (0..3).map(|_| free_port_pair()).collect();
        let peers = (0..3)
            .map(|i| format!("n{i}-127.0.0.1:{}", ledger_ports[i]))
            .collect::<Vec<_>>()
            .join(";");
        let confs = (0..3)
            .map(|i| {
                let store = work.join(format!("store{i}"));
                let mut s = broker_settings(ns_addr, broker_ports[i], &store);
                s.extend([
                    ("brokerName", "tl".into()),
                    ("enableDLegerCommitLog", "true".into()),
                    ("dLegerGroup", "tl".into()),
                    ("dLegerPeers", peers.clone()),
                    ("dLegerSelfId", format!("n{i}")),
                    ("dLegerHeartbeatInterval", "200".into()),
                    ("slaveSyncInterval", "500".into()),
                ]);
                write_conf(work, &format!("b{i}"), &s)
            })
            .collect();
        LedgerGroup {
            work: work.to_path_buf(),
            broker_ports,
            confs,
        }
    }

    fn start(&self, i: usize) -> Proc {
        Proc::spawn(
            &format!("broker{i}"),
            &["broker", "-c", self.confs[i].to_str().unwrap()],
            "basalt broker",
            &self.work,
        )
    }

    fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.broker_ports[i])
    }
}

/// The address of the master of cluster `TC` other than `not`, once there is one.
async fn find_master(admin: &Admin, not: &str) -> String {
    let mut found = String::new();
    eventually(
        "a ledger master",
        Duration::from_secs(30),
        async || match admin.cluster_masters("TC").await {
            Ok(m) if !m.is_empty() && m[0].1 != not => {
                found = m[0].1.clone();
                true
            }
            _ => false,
        },
    )
    .await;
    found
}

/// Every message in queue 0 of `topic` on `addr` except `skip`, each with
/// its store time as the time seen.
async fn read_queue(
    c: &RemotingClient,
    addr: &str,
    topic: &str,
    skip: &[u8],
) -> Vec<(i64, StoredMessage)> {
    let mut all = Vec::new();
    let mut offset = 0;
    while let Some((msgs, n)) = pull(c, addr, topic, offset).await {
        if msgs.is_empty() {
            break;
        }
        all.extend(
            msgs.into_iter()
                .filter(|m| &m.body[..] != skip)
                .map(|m| (m.store_timestamp, m)),
        );
        offset = n;
    }
    all
}

/// Three ledger-mode brokers: timers wait while the leader is killed; the
/// new leader delivers what is due, each once, on time, and does not
/// deliver again what the old leader already did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_survive_a_ledger_failover_once_each() {
    const TOPIC: &str = "TimedLedger";
    let work = tempfile::tempdir().unwrap();
    let (_ns, ns_addr) = Proc::namesrv(work.path());
    let group = LedgerGroup::new(work.path(), &ns_addr);
    let mut brokers: Vec<Proc> = (0..3).map(|i| group.start(i)).collect();

    let mut cc = ClientConfig::new(&ns_addr);
    cc.poll_name_server_interval = Duration::from_millis(300);
    cc.request_timeout = Duration::from_secs(3);
    let admin = Admin::new(cc);
    let master = Arc::new(Mutex::new(String::new()));
    let first = find_master(&admin, "").await;
    *master.lock() = first.clone();
    admin
        .create_topic(&first, &TopicConfig::new(TOPIC, 1))
        .await
        .unwrap();
    // Followers copy the topic table from the leader (slaveSyncInterval):
    // every member must have it before the leader dies.
    let c = RemotingClient::new(WireConfig::default());
    for i in 0..3 {
        let addr = group.addr(i);
        eventually(
            &format!("{TOPIC}'s config on {addr}"),
            Duration::from_secs(10),
            async || procs::ledger_group::has_topic_config(&c, &addr, TOPIC).await,
        )
        .await;
    }
    let sent = send_timers(&c, &first, TOPIC, &[2_000, 10_000, 14_000]).await;
    let t0 = sent[0].due - 2_000;
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, task) = collector(Arc::clone(&master), TOPIC, Arc::clone(&stop));

    // The +2 s timers are delivered by the first leader, then it dies.
    eventually("the +2 s timers", Duration::from_secs(8), async || {
        seen.lock().len() >= 4
    })
    .await;
    let leader = (0..3)
        .find(|i| group.addr(*i) == first)
        .expect("the master is one of ours");
    tokio::time::sleep(Duration::from_millis(500)).await;
    brokers[leader].kill9();
    let next = find_master(&admin, &first).await;
    eprintln!("new leader {next} found {} ms after t0", now_millis() - t0);
    *master.lock() = next.clone();

    let left = (t0 + 16_000 - now_millis()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(left)).await;
    stop.store(true, Ordering::Release);
    task.await.unwrap();
    // Count the copies in the new leader's whole queue.
    let all = read_queue(&c, &next, TOPIC, b"").await;
    let bodies: Vec<_> = all.iter().map(|(_, m)| m.body.clone()).collect();
    assert_eq!(
        all.len(),
        sent.len(),
        "each timer once in the log: {bodies:?}"
    );
    // Lateness as stored; the test's own view is bounded by the fail-over.
    check_on_time(&sent, &all);
    assert_eq!(runtime(&c, &next, "timerCongestNum").await, "0");
    let delivered: u64 = runtime(&c, &next, "timerDelivered").await.parse().unwrap();
    assert!(delivered >= 8, "the new leader delivered the later timers");

    // The old leader comes back as a follower and confirms every copy.
    brokers[leader] = group.start(leader);
    let old = group.addr(leader);
    eventually(
        "the old leader to confirm",
        Duration::from_secs(20),
        async || runtime(&c, &old, "timerCongestNum").await == "0",
    )
    .await;
    assert_eq!(runtime(&c, &old, "timerMode").await, "confirm");
    for b in &mut brokers {
        b.stop();
    }
}

/// A SYNC_MASTER and its slave: the master delivers, each timer once; the
/// slave keeps its wheel from its own copy of the timer queue and confirms
/// the copies that reach it by replication.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_delivers_and_slave_confirms() {
    const TOPIC: &str = "TimedHa";
    let work = tempfile::tempdir().unwrap();
    let (_ns, ns_addr) = Proc::namesrv(work.path());
    let (mp, sp) = (free_port_pair(), free_port_pair());
    let conf = |name: &str, port: u16, extra: &[(&'static str, &str)]| {
        let mut s = broker_settings(&ns_addr, port, &work.path().join(name));
        s.push(("brokerName", "th".into()));
        s.push(("slaveSyncInterval", "500".into()));
        s.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        write_conf(work.path(), name, &s)
    };
    let mconf = conf("master", mp, &[("brokerRole", "SYNC_MASTER")]);
    let sconf = conf("slave", sp, &[("brokerRole", "SLAVE"), ("brokerId", "1")]);
    let spawn = |name: &str, c: &Path| {
        Proc::spawn(
            name,
            &["broker", "-c", c.to_str().unwrap()],
            "basalt broker",
            work.path(),
        )
    };
    let mut master = spawn("master", &mconf);
    let mut slave = spawn("slave", &sconf);
    let (maddr, saddr) = (format!("127.0.0.1:{mp}"), format!("127.0.0.1:{sp}"));
    let c = RemotingClient::new(WireConfig::default());
    // SYNC_MASTER answers sends once the slave has them.
    eventually(
        "the slave to connect",
        Duration::from_secs(20),
        async || {
            send(&c, &maddr, TOPIC, "warm-up", "", "")
                .await
                .is_ok_and(|r| r.code == response::SUCCESS)
        },
    )
    .await;

    let sent = send_timers(&c, &maddr, TOPIC, &[2_000, 4_000]).await;
    eventually("the slave to enqueue", Duration::from_secs(5), async || {
        runtime(&c, &saddr, "timerCongestNum").await == "8"
    })
    .await;
    assert_eq!(runtime(&c, &saddr, "timerMode").await, "confirm");
    assert_eq!(runtime(&c, &maddr, "timerMode").await, "deliver");
    let t0 = sent[0].due - 2_000;
    let left = (t0 + 6_000 - now_millis()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(left)).await;

    // Both logs hold each copy once (the slave's by replication).
    for addr in [&maddr, &saddr] {
        let all = read_queue(&c, addr, TOPIC, b"warm-up").await;
        check_on_time(&sent, &all);
        assert_eq!(all.len(), sent.len(), "{addr}");
    }
    assert_eq!(runtime(&c, &maddr, "timerDelivered").await, "8");
    eventually("the slave to confirm", Duration::from_secs(5), async || {
        runtime(&c, &saddr, "timerCongestNum").await == "0"
    })
    .await;
    assert_eq!(runtime(&c, &saddr, "timerDelivered").await, "0");
    master.stop();
    slave.stop();
}
