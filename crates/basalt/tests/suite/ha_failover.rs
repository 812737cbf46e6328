//! Master/slave HA with real processes (seed 003): a SYNC_MASTER and its
//! slave; the master is killed with SIGKILL and consumers go on reading from
//! the slave; slaves catch up from zero and from where they stopped; the
//! CommitLogs end byte-identical.

use crate::procs;

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, Producer, PushConsumeFrom, PushConsumer,
    PushOptions, SendStatus, TopicConfig,
};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use parking_lot::Mutex;
use procs::{Proc, eventually, free_port_pair, write_conf};

fn client_config(ns: &str) -> ClientConfig {
    let mut c = ClientConfig::new(ns);
    c.poll_name_server_interval = Duration::from_millis(300);
    c.heartbeat_interval = Duration::from_millis(500);
    c
}

struct Pair {
    ns_addr: String,
    master_conf: std::path::PathBuf,
    slave_conf: std::path::PathBuf,
    master_port: u16,
    master_store: std::path::PathBuf,
    slave_store: std::path::PathBuf,
}

fn pair(work: &Path, ns_addr: &str, role: &str) -> Pair {
    let (mp, sp) = (free_port_pair(), free_port_pair());
    let common = |port: u16, store: &Path| {
        vec![
            ("brokerClusterName", "HC".to_string()),
            ("brokerName", "hb".to_string()),
            ("listenAddr", "127.0.0.1".to_string()),
            ("brokerIP1", "127.0.0.1".to_string()),
            ("brokerIP2", "127.0.0.1".to_string()),
            ("listenPort", port.to_string()),
            ("namesrvAddr", ns_addr.to_string()),
            ("storePathRootDir", store.display().to_string()),
            ("mappedFileSizeCommitLog", (1024 * 1024).to_string()),
            ("mappedFileSizeConsumeQueue", (20 * 10_000).to_string()),
            ("maxMessageSize", (64 * 1024).to_string()),
            ("registerNameServerPeriod", "500".to_string()),
            ("slaveSyncInterval", "500".to_string()),
            ("syncFlushTimeout", "3000".to_string()),
        ]
    };
    let master_store = work.join("master");
    let slave_store = work.join("slave");
    let mut m = common(mp, &master_store);
    m.push(("brokerRole", role.to_string()));
    let mut s = common(sp, &slave_store);
    s.push(("brokerRole", "SLAVE".to_string()));
    s.push(("brokerId", "1".to_string()));
    Pair {
        ns_addr: ns_addr.to_string(),
        master_conf: write_conf(work, "master", &m),
        slave_conf: write_conf(work, "slave", &s),
        master_port: mp,
        master_store,
        slave_store,
    }
}

fn start(name: &str, conf: &Path, work: &Path) -> Proc {
    Proc::spawn(
        name,
        &["broker", "-c", conf.to_str().unwrap()],
        "basalt broker",
        work,
    )
}

/// The CommitLog of a store up to `upto` bytes.
fn commit_log(store: &Path, upto: i64) -> Vec<u8> {
    let mut files: Vec<_> = std::fs::read_dir(store.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        out.extend(std::fs::read(f).unwrap());
    }
    assert!(
        out.len() as i64 >= upto,
        "{} holds {} bytes, fewer than {upto}",
        store.display(),
        out.len()
    );
    out.truncate(upto as usize);
    out
}

fn log_end(store: &Path) -> i64 {
    let r = basalt_store::check::check_store(store, None).unwrap();
    assert!(r.is_ok(), "{r}");
    r.end_offset
}

/// Whether the master at `maddr` reports its slave with nothing left to send.
async fn slave_in_sync(admin: &Admin, maddr: &str) -> bool {
    let rt = admin.broker_runtime_info(maddr).await.unwrap_or_default();
    rt.get("slaveFallBehindBytes").is_some_and(|v| v == "0")
}

/// Sends `n` messages with up to 64 in flight; returns the ids per status.
async fn produce(p: &Producer, topic: &str, from: u64, n: u64) -> (BTreeSet<u64>, Vec<SendStatus>) {
    let mut ok = BTreeSet::new();
    let mut statuses = Vec::new();
    let mut inflight = FuturesUnordered::new();
    let mut next = from;
    while next < from + n || !inflight.is_empty() {
        while inflight.len() < 64 && next < from + n {
            let id = next;
            next += 1;
            let p = p.clone();
            let m = Message::new(topic, format!("id-{id:08}").into_bytes());
            inflight.push(async move { (id, p.send(&m).await) });
        }
        if let Some((id, r)) = inflight.next().await {
            match r {
                Ok(r) => {
                    if r.status == SendStatus::SendOk {
                        ok.insert(id);
                    }
                    statuses.push(r.status);
                }
                Err(e) => panic!("send {id} failed: {e}"),
            }
        }
    }
    (ok, statuses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_master_killed_consumers_read_from_slave_and_logs_match() {
    if let Ok(f) = std::env::var("BASALT_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(f))
            .with_test_writer()
            .try_init();
    }
    let work = tempfile::tempdir().unwrap();

    let (_ns, ns_addr) = Proc::namesrv(work.path());
    let p = pair(work.path(), &ns_addr, "SYNC_MASTER");
    let mut master = start("master", &p.master_conf, work.path());
    let mut slave = start("slave", &p.slave_conf, work.path());
    let admin = Admin::new(client_config(&p.ns_addr));
    let maddr = format!("127.0.0.1:{}", p.master_port);
    admin
        .create_topic(&maddr, &TopicConfig::new("HaKill", 4))
        .await
        .unwrap();

    let producer = Producer::new("ha-producer", client_config(&p.ns_addr));
    producer.start().await.unwrap();
    // SYNC_MASTER answers SLAVE_NOT_AVAILABLE until the slave is in sync.
    eventually(
        "the slave to be in sync",
        Duration::from_secs(30),
        async || {
            let m = Message::new("HaKill", b"probe".to_vec());
            matches!(producer.send(&m).await, Ok(r) if r.status == SendStatus::SendOk)
        },
    )
    .await;
    let (acked, _) = produce(&producer, "HaKill", 0, 20_000).await;
    assert_eq!(
        acked.len(),
        20_000,
        "every send to a SYNC_MASTER with a live slave is SEND_OK"
    );
    producer.shutdown().await;

    master.kill9();

    // A consumer reads everything from the slave.
    let received: Arc<Mutex<HashSet<u64>>> = Arc::default();
    let consumer = PushConsumer::with_options(
        "ha-consumer",
        client_config(&p.ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            consume_message_batch_max_size: 32,
            ..Default::default()
        },
    );
    consumer.subscribe("HaKill", "*").unwrap();
    {
        let received = Arc::clone(&received);
        consumer.register_listener(move |msgs, _| {
            let mut r = received.lock();
            for m in msgs {
                if let Some(id) = std::str::from_utf8(&m.body)
                    .ok()
                    .and_then(|b| b.strip_prefix("id-"))
                {
                    r.insert(id.parse().unwrap());
                }
            }
            ConsumeStatus::Success
        });
    }
    consumer.start().await.unwrap();
    eventually(
        "every acknowledged message from the slave",
        Duration::from_secs(90),
        async || {
            let r = received.lock();
            acked.iter().all(|id| r.contains(id))
        },
    )
    .await;
    consumer.shutdown().await;

    // The master comes back; the two logs match up to its end.
    let master = start("master", &p.master_conf, work.path());
    let mend_live = {
        let rt = admin.broker_runtime_info(&maddr).await.unwrap();
        rt["commitLogMaxOffset"].parse::<i64>().unwrap()
    };
    eventually(
        "the slave to reach the master's end",
        Duration::from_secs(30),
        async || slave_in_sync(&admin, &maddr).await,
    )
    .await;
    admin.shutdown();
    let mut master = master;
    master.stop();
    slave.stop();
    let mend = log_end(&p.master_store);
    assert_eq!(mend, mend_live);
    assert!(
        commit_log(&p.master_store, mend) == commit_log(&p.slave_store, mend),
        "CommitLogs differ"
    );
    let _ = log_end(&p.slave_store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slaves_catch_up_from_zero_and_from_where_they_stopped() {
    let work = tempfile::tempdir().unwrap();
    let (_ns, ns_addr) = Proc::namesrv(work.path());
    let p = pair(work.path(), &ns_addr, "SYNC_MASTER");
    let mut master = start("master", &p.master_conf, work.path());
    let admin = Admin::new(client_config(&p.ns_addr));
    let maddr = format!("127.0.0.1:{}", p.master_port);
    admin
        .create_topic(&maddr, &TopicConfig::new("HaCatch", 4))
        .await
        .unwrap();
    let producer = Producer::new("ha-producer2", client_config(&p.ns_addr));
    producer.start().await.unwrap();

    // No slave: stored, but SLAVE_NOT_AVAILABLE, never SEND_OK.
    let (ok, statuses) = produce(&producer, "HaCatch", 0, 2000).await;
    assert!(ok.is_empty());
    assert!(
        statuses.iter().all(|s| *s == SendStatus::SlaveNotAvailable),
        "{:?}",
        &statuses[..3]
    );

    // An empty slave catches up from zero, then sends are SEND_OK.
    let mut slave = start("slave", &p.slave_conf, work.path());
    eventually(
        "the slave to catch up from zero",
        Duration::from_secs(30),
        async || {
            let m = Message::new("HaCatch", b"probe".to_vec());
            matches!(producer.send(&m).await, Ok(r) if r.status == SendStatus::SendOk)
        },
    )
    .await;
    let (ok, _) = produce(&producer, "HaCatch", 2000, 2000).await;
    assert_eq!(ok.len(), 2000);

    // The slave stops; the master says so; the slave returns and catches up.
    slave.stop();
    eventually(
        "SLAVE_NOT_AVAILABLE without the slave",
        Duration::from_secs(30),
        async || {
            let m = Message::new("HaCatch", b"probe".to_vec());
            matches!(producer.send(&m).await, Ok(r) if r.status == SendStatus::SlaveNotAvailable)
        },
    )
    .await;
    let _ = produce(&producer, "HaCatch", 4000, 1000).await;
    let slave = start("slave", &p.slave_conf, work.path());
    eventually(
        "the slave to catch up from where it stopped",
        Duration::from_secs(30),
        async || slave_in_sync(&admin, &maddr).await,
    )
    .await;
    producer.shutdown().await;
    admin.shutdown();
    let mut slave = slave;
    master.stop();
    slave.stop();
    let mend = log_end(&p.master_store);
    assert!(
        commit_log(&p.master_store, mend) == commit_log(&p.slave_store, mend),
        "CommitLogs differ"
    );
}
