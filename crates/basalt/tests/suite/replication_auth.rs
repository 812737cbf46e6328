//! Authenticated replication (docs/tls.md#replication): with
//! `replicationSecret` set, a stranger on the HA port cannot release a
//! SYNC_MASTER wait and a stranger on the ledger port cannot vote or append;
//! members that know the secret replicate as before. Raw frames from the
//! outsider, real broker processes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use basalt_client::{Admin, ClientConfig, Message, Producer, SendStatus, TopicConfig};
use basalt_ledger::protocol::{NodeId, Request, VoteRequest};
use basalt_ledger::wire::{self, Ids};
use basalt_remoting::RemotingCommand;
use basalt_remoting::codec::encode_frame;

use crate::procs::{Proc, eventually, free_port, free_port_pair, write_conf};

const SECRET: &str = "test-cluster-secret";

fn client_config(ns: &str) -> ClientConfig {
    let mut c = ClientConfig::new(ns);
    c.poll_name_server_interval = Duration::from_millis(300);
    c.heartbeat_interval = Duration::from_millis(500);
    c
}

/// broker.conf pairs of one HA broker.
fn ha_conf(
    work: &Path,
    name: &str,
    ns: &str,
    port: u16,
    extra: &[(&str, String)],
) -> std::path::PathBuf {
    let mut pairs: Vec<(&str, String)> = vec![
        ("brokerClusterName", "RA".into()),
        ("brokerName", "rab".into()),
        ("listenAddr", "127.0.0.1".into()),
        ("brokerIP1", "127.0.0.1".into()),
        ("brokerIP2", "127.0.0.1".into()),
        ("listenPort", port.to_string()),
        ("namesrvAddr", ns.to_string()),
        ("storePathRootDir", work.join(name).display().to_string()),
        ("mappedFileSizeCommitLog", (1024 * 1024).to_string()),
        ("registerNameServerPeriod", "500".into()),
        ("slaveSyncInterval", "500".into()),
        ("syncFlushTimeout", "2000".into()),
        ("haHousekeepingInterval", "3000".into()),
    ];
    pairs.extend(extra.iter().cloned());
    write_conf(work, name, &pairs)
}

fn broker(name: &str, conf: &Path, work: &Path) -> Proc {
    Proc::spawn(
        name,
        &["broker", "-c", conf.to_str().unwrap()],
        "basalt broker",
        work,
    )
}

/// A stranger on the HA port that talks like a RocketMQ slave: reports
/// offset 0, then "everything" (i64::MAX) every 100 ms, reading whatever
/// comes. Returns the first bytes the master sent it and whether the master
/// closed the connection.
fn ha_outsider(addr: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let Ok(mut s) = TcpStream::connect(&addr) else {
            return (Vec::new(), true);
        };
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut first = Vec::new();
        let mut closed = false;
        let _ = s.write_all(&0i64.to_be_bytes());
        let mut buf = [0u8; 64 * 1024];
        while !stop.load(Ordering::Acquire) {
            if s.write_all(&i64::MAX.to_be_bytes()).is_err() {
                closed = true;
                break;
            }
            match s.read(&mut buf) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) if first.len() < 64 => first.extend_from_slice(&buf[..n.min(64)]),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        (first, closed)
    })
}

async fn send_status(p: &Producer, topic: &str) -> SendStatus {
    let m = Message::new(topic, b"payload".to_vec());
    p.send(&m).await.expect("send reaches the master").status
}

/// With the secret set, the outsider is closed at the handshake and a
/// SYNC_MASTER send is not acknowledged on its word; a slave that knows the
/// secret then makes sends SEND_OK. Without the secret (the control) the
/// same outsider does release the wait: that is the hole the secret closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outsider_on_the_ha_port_cannot_release_a_sync_master_wait() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (_ns, ns) = Proc::namesrv(w);
    let (mp, sp) = (free_port_pair(), free_port_pair());
    let secret = ("replicationSecret", SECRET.to_string());
    let master_conf = ha_conf(
        w,
        "master",
        &ns,
        mp,
        &[("brokerRole", "SYNC_MASTER".into()), secret.clone()],
    );
    let _master = broker("master", &master_conf, w);
    let maddr = format!("127.0.0.1:{mp}");
    let admin = Admin::new(client_config(&ns));
    admin
        .create_topic(&maddr, &TopicConfig::new("RaT", 1))
        .await
        .unwrap();
    let producer = Producer::new("ra-producer", client_config(&ns));
    producer.start().await.unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let outsider = ha_outsider(format!("127.0.0.1:{}", mp + 1), Arc::clone(&stop));
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..3 {
        let st = send_status(&producer, "RaT").await;
        assert_ne!(
            st,
            SendStatus::SendOk,
            "an outsider released a SYNC_MASTER wait"
        );
    }
    stop.store(true, Ordering::Release);
    let (first, closed) = tokio::task::spawn_blocking(move || outsider.join().unwrap())
        .await
        .unwrap();
    assert!(
        first.is_empty(),
        "the master sent the outsider data: {first:?}"
    );
    assert!(closed, "the master closed the outsider's connection");

    // A slave with a wrong secret does not count either.
    let wrong_conf = ha_conf(
        w,
        "wrong",
        &ns,
        sp,
        &[
            ("brokerRole", "SLAVE".into()),
            ("brokerId", "1".into()),
            ("replicationSecret", "not-the-secret".into()),
        ],
    );
    let mut wrong = broker("wrong", &wrong_conf, w);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_ne!(
        send_status(&producer, "RaT").await,
        SendStatus::SendOk,
        "a slave with the wrong secret"
    );
    wrong.stop();
    let wrong_log = std::fs::read_to_string(w.join("wrong.log")).unwrap_or_default();
    assert!(
        wrong_log.contains("cluster secret"),
        "the slave says why:\n{wrong_log}"
    );

    // The real slave, with the secret: sends are acknowledged again.
    let slave_conf = ha_conf(
        w,
        "slave",
        &ns,
        sp,
        &[
            ("brokerRole", "SLAVE".into()),
            ("brokerId", "1".into()),
            secret,
        ],
    );
    let _slave = broker("slave", &slave_conf, w);
    eventually(
        "the authenticated slave to ack sends",
        Duration::from_secs(30),
        async || send_status(&producer, "RaT").await == SendStatus::SendOk,
    )
    .await;
    for _ in 0..20 {
        assert_eq!(send_status(&producer, "RaT").await, SendStatus::SendOk);
    }
    producer.shutdown().await;
    admin.shutdown();
}

/// The control: no secret, and the same outsider releases the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_secret_the_ha_port_is_open_as_in_rocketmq() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (_ns, ns) = Proc::namesrv(w);
    let mp = free_port_pair();
    let conf = ha_conf(
        w,
        "master",
        &ns,
        mp,
        &[("brokerRole", "SYNC_MASTER".into())],
    );
    let _master = broker("master", &conf, w);
    let maddr = format!("127.0.0.1:{mp}");
    let admin = Admin::new(client_config(&ns));
    admin
        .create_topic(&maddr, &TopicConfig::new("RaOpen", 1))
        .await
        .unwrap();
    let producer = Producer::new("ra-open", client_config(&ns));
    producer.start().await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let outsider = ha_outsider(format!("127.0.0.1:{}", mp + 1), Arc::clone(&stop));
    eventually(
        "the outsider to count as a slave",
        Duration::from_secs(15),
        async || send_status(&producer, "RaOpen").await == SendStatus::SendOk,
    )
    .await;
    stop.store(true, Ordering::Release);
    let _ = tokio::task::spawn_blocking(move || outsider.join()).await;
    producer.shutdown().await;
    admin.shutdown();
}

/// Three ledger members with the secret elect a leader and take sends; a
/// stranger's forged VOTE (a far higher term) on every member's ledger port
/// is closed at the handshake unanswered, and no member's term moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outsider_on_the_ledger_port_cannot_vote_or_append() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (_ns, ns) = Proc::namesrv(w);
    let ledger_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let broker_ports: Vec<u16> = (0..3).map(|_| free_port_pair()).collect();
    let peers = (0..3)
        .map(|i| format!("n{i}-127.0.0.1:{}", ledger_ports[i]))
        .collect::<Vec<_>>()
        .join(";");
    let _members: Vec<Proc> = (0..3)
        .map(|i| {
            let conf = ha_conf(
                w,
                &format!("m{i}"),
                &ns,
                broker_ports[i],
                &[
                    ("enableDLegerCommitLog", "true".into()),
                    ("dLegerGroup", "rab".into()),
                    ("dLegerPeers", peers.clone()),
                    ("dLegerSelfId", format!("n{i}")),
                    ("dLegerHeartbeatInterval", "200".into()),
                    ("mappedFileSizeCommitLog", (4 * 1024 * 1024).to_string()),
                    ("replicationSecret", SECRET.into()),
                ],
            );
            broker(&format!("m{i}"), &conf, w)
        })
        .collect();
    let admin = Admin::new(client_config(&ns));
    let mut master = String::new();
    eventually(
        "a ledger leader",
        Duration::from_secs(30),
        async || match admin.cluster_masters("RA").await {
            Ok(m) if !m.is_empty() => {
                master = m[0].1.clone();
                true
            }
            _ => false,
        },
    )
    .await;
    admin
        .create_topic(&master, &TopicConfig::new("RaLedger", 1))
        .await
        .unwrap();
    let producer = Producer::new("ra-ledger", client_config(&ns));
    producer.start().await.unwrap();
    eventually(
        "ledger sends to succeed",
        Duration::from_secs(30),
        async || send_status(&producer, "RaLedger").await == SendStatus::SendOk,
    )
    .await;
    let status = admin.ledger_status(&master).await.unwrap();
    let term = status.term;

    // A real DLedger VOTE frame, as an impostor candidate would send it.
    let vote = Request::Vote(VoteRequest {
        term: term + 1000,
        candidate: NodeId::from("n9".to_string()),
        ledger_end_term: term + 1000,
        ledger_end_index: i64::MAX / 2,
        pre_vote: false,
    });
    for (i, port) in ledger_ports.iter().enumerate() {
        let ids = Ids {
            group: "rab",
            local_id: &NodeId::from("n9".to_string()),
            remote_id: &NodeId::from(format!("n{i}")),
        };
        let (code, body) = wire::encode_request(&ids, &vote);
        let frame = encode_frame(&RemotingCommand::request(code).with_body(body)).unwrap();
        let port = *port;
        for greet in [false, true] {
            let frame = frame.clone();
            let back = tokio::task::spawn_blocking(move || outsider_exchange(port, greet, &frame))
                .await
                .unwrap();
            // Nothing but the listener's half of the handshake (64 bytes)
            // comes back, and then the connection is closed: no answer to
            // the forged frame.
            let expected = if greet { 64 } else { 0 };
            assert_eq!(
                back,
                Some(expected),
                "member n{i} (outsider greeting: {greet}) sent more than the handshake or kept the link open"
            );
        }
    }
    // Nobody moved to the impostor's term; the leader still takes sends.
    for (i, port) in broker_ports.iter().enumerate() {
        let st = admin
            .ledger_status(&format!("127.0.0.1:{port}"))
            .await
            .unwrap();
        assert!(
            st.term < term + 1000,
            "member n{i} took the forged term: {}",
            st.term
        );
    }
    for _ in 0..10 {
        assert_eq!(send_status(&producer, "RaLedger").await, SendStatus::SendOk);
    }
    producer.shutdown().await;
    admin.shutdown();
}

/// Connects to a ledger port as a stranger: with `greet`, opens with the
/// handshake's greeting and follows it with a guessed tag; then sends
/// `frame` twice. Returns how many bytes came back before the listener
/// closed the connection (None if it stayed open for 10 s).
fn outsider_exchange(port: u16, greet: bool, frame: &[u8]) -> Option<usize> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if greet {
        let mut hello = b"BSLT-AUTH1".to_vec();
        hello.extend_from_slice(&[7u8; 32]);
        let _ = s.write_all(&hello);
        let mut answer = [0u8; 64];
        s.read_exact(&mut answer).ok()?;
        let _ = s.write_all(&[9u8; 32]);
    }
    let _ = s.write_all(frame);
    let _ = s.write_all(frame);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = if greet { 64 } else { 0 };
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None;
            }
            Err(_) => return Some(got),
        }
        if Instant::now() > deadline {
            return None;
        }
    }
}
