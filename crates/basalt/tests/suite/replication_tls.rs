//! Replication over TLS, end to end (docs/tls.md): every listener of every
//! process (NameServer, client ports, HA, ledger) in `enforcing` mode with
//! mutual TLS (client certificates required and checked against the test
//! CA), the brokers' own links dialing with their client certificate and
//! checking the server's, and `replicationSecret` on top. A SYNC_MASTER's
//! sends are acknowledged only once its slave holds them, so SEND_OK proves
//! the HA link works over TLS; a ledger group elects, replicates and fails
//! over. Plain and certificate-less dialers are refused on the HA and
//! ledger ports.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use basalt_client::{Admin, ClientConfig, Message, Producer, SendStatus, TopicConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::{
    ClientSecurity, ClientTls, ExtFields, RemotingClient, RemotingClientConfig, RemotingCommand,
    TlsSettings,
};

use crate::procs::ledger_group::{cluster_master, has_topic_config};
use crate::procs::{Proc, eventually, free_port, free_port_pair, write_conf};
use crate::tls_certs::{CertFiles, TestCa};

const SECRET: &str = "tls-cluster-secret";

/// The CA and the certificates every process of a test uses.
struct Pki {
    ca: TestCa,
    server: CertFiles,
    client: CertFiles,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        let ca = TestCa::new(dir, "repl");
        let server = ca.server(dir, "server");
        let client = ca.client(dir, "broker-client");
        Pki { ca, server, client }
    }

    /// Mutual TLS, enforcing, for listeners and the process's own dialers.
    fn settings(&self) -> Vec<(&'static str, String)> {
        self.settings_showing(&self.client)
    }

    /// [`Pki::settings`] with `client` as the certificate the process shows
    /// when it dials.
    fn settings_showing(&self, client: &CertFiles) -> Vec<(&'static str, String)> {
        let ca = self.ca.cert_path.display().to_string();
        vec![
            ("tls.server.mode", "enforcing".into()),
            (
                "tls.server.certPath",
                self.server.cert.display().to_string(),
            ),
            ("tls.server.keyPath", self.server.key.display().to_string()),
            ("tls.server.need.client.auth", "require".into()),
            ("tls.server.authClient", "true".into()),
            ("tls.server.trustCertPath", ca.clone()),
            ("tls.enable", "true".into()),
            ("tls.test.mode.enable", "false".into()),
            ("tls.client.authServer", "true".into()),
            ("tls.client.trustCertPath", ca),
            ("tls.client.certPath", client.cert.display().to_string()),
            ("tls.client.keyPath", client.key.display().to_string()),
        ]
    }

    /// The test's own dialer: the broker client certificate, the CA.
    fn client_tls(&self) -> ClientTls {
        let mut s = TlsSettings::default();
        for (k, v) in self.settings() {
            if k.starts_with("tls.client.") || k == "tls.test.mode.enable" {
                s.set(k, &v).expect("client TLS setting");
            }
        }
        ClientTls::from_settings(&s).expect("client TLS config")
    }

    fn remoting_client(&self) -> RemotingClient {
        RemotingClient::new(RemotingClientConfig {
            security: Some(Arc::new(ClientSecurity {
                tls: Some(self.client_tls()),
                secret: None,
                purpose: "test",
            })),
            ..Default::default()
        })
    }

    fn client_config(&self, ns: &str) -> ClientConfig {
        let mut c = ClientConfig::new(ns);
        c.poll_name_server_interval = Duration::from_millis(300);
        c.heartbeat_interval = Duration::from_millis(500);
        c.tls = Some(self.client_tls());
        c
    }
}

/// A NameServer that accepts only mutual TLS.
fn tls_namesrv(w: &Path, pki: &Pki) -> (Proc, String) {
    let port = free_port();
    let conf = write_conf(w, "namesrv", &pki.settings());
    let p = Proc::spawn(
        "namesrv",
        &[
            "namesrv",
            "--port",
            &port.to_string(),
            "--listen",
            "127.0.0.1",
            "-c",
            conf.to_str().expect("utf-8 path"),
        ],
        "listening on",
        w,
    );
    (p, format!("127.0.0.1:{port}"))
}

fn broker_conf(
    w: &Path,
    tls: Vec<(&'static str, String)>,
    name: &str,
    ns: &str,
    port: u16,
    extra: &[(&'static str, String)],
) -> std::path::PathBuf {
    let mut pairs: Vec<(&str, String)> = vec![
        ("brokerClusterName", "RT".into()),
        ("brokerName", "rtb".into()),
        ("listenAddr", "127.0.0.1".into()),
        ("brokerIP1", "127.0.0.1".into()),
        ("brokerIP2", "127.0.0.1".into()),
        ("listenPort", port.to_string()),
        ("namesrvAddr", ns.to_string()),
        ("storePathRootDir", w.join(name).display().to_string()),
        ("mappedFileSizeCommitLog", (4 * 1024 * 1024).to_string()),
        ("registerNameServerPeriod", "500".into()),
        ("slaveSyncInterval", "500".into()),
        ("syncFlushTimeout", "3000".into()),
        ("replicationSecret", SECRET.into()),
    ];
    pairs.extend(tls);
    pairs.extend(extra.iter().cloned());
    write_conf(w, name, &pairs)
}

fn broker(name: &str, conf: &Path, w: &Path) -> Proc {
    Proc::spawn(
        name,
        &["broker", "-c", conf.to_str().expect("utf-8 path")],
        "basalt broker",
        w,
    )
}

async fn send_n(p: &Producer, topic: &str, from: usize, n: usize) -> Vec<SendStatus> {
    let mut out = Vec::with_capacity(n);
    for i in from..from + n {
        let m = Message::new(topic, format!("tls-{i}").into_bytes());
        out.push(p.send(&m).await.expect("send reaches the master").status);
    }
    out
}

/// GET_MAX_OFFSET of queue 0 of `topic` on `addr`, over mutual TLS.
async fn max_offset(client: &RemotingClient, addr: &str, topic: &str) -> Option<i64> {
    let mut ext = ExtFields::new();
    ext.insert("topic", topic);
    ext.insert("queueId", "0");
    let cmd = RemotingCommand::request(request::GET_MAX_OFFSET).with_ext(ext);
    let r = client
        .invoke(addr, cmd, Duration::from_secs(3))
        .await
        .ok()?;
    if r.code != response::SUCCESS {
        return None;
    }
    r.ext_fields.get("offset")?.parse().ok()
}

/// A plain-text dialer on `port`: sends a remoting-looking frame and reads.
/// Returns how many bytes came back before the listener closed the
/// connection (None: still open after 5 s).
fn plain_dialer(port: u16) -> Option<usize> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let _ = s.write_all(&[0, 0, 0, 16, 0, 0, 0, 12, b'{', b'}', 0, 0, 0, 0, 0, 0, 0, 0]);
    let mut got = 0usize;
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(got),
            Err(_) => return None,
        }
    }
}

/// A TLS dialer that shows no client certificate: the handshake must fail.
async fn certless_tls_refused(addr: &str) -> bool {
    let client = RemotingClient::new(RemotingClientConfig {
        security: Some(Arc::new(ClientSecurity {
            tls: Some(ClientTls::insecure()),
            secret: None,
            purpose: "test",
        })),
        ..Default::default()
    });
    let cmd = RemotingCommand::request(request::GET_BROKER_RUNTIME_INFO);
    client
        .invoke(addr, cmd, Duration::from_secs(5))
        .await
        .is_err()
}

fn assert_refused_plain(what: &str, port: u16) {
    let back = plain_dialer(port);
    println!("plain dialer on the {what} port {port}: {back:?} bytes back, then closed");
    assert_eq!(
        back,
        Some(0),
        "the {what} port answered or kept a plain dialer open"
    );
}

/// SYNC_MASTER and SLAVE, everything mutual TLS: sends are SEND_OK (the
/// slave holds them, copied over the TLS HA link), the slave serves the same
/// max offset, and outsiders without TLS or without a certificate are
/// refused on the HA and client ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_replicates_over_mutual_tls() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pki = Pki::new(w);
    let (_ns, ns) = tls_namesrv(w, &pki);
    let (mp, sp) = (free_port_pair(), free_port_pair());
    let mconf = broker_conf(
        w,
        pki.settings(),
        "master",
        &ns,
        mp,
        &[("brokerRole", "SYNC_MASTER".into())],
    );
    let _master = broker("master", &mconf, w);
    let (maddr, saddr) = (format!("127.0.0.1:{mp}"), format!("127.0.0.1:{sp}"));
    let admin = Admin::new(pki.client_config(&ns));
    admin
        .create_topic(&maddr, &TopicConfig::new("RtHa", 1))
        .await
        .unwrap();
    let producer = Producer::new("rt-ha", pki.client_config(&ns));
    producer.start().await.unwrap();

    untrusted_slave_is_refused(w, &pki, &ns, mp, sp, &producer).await;

    let sconf = broker_conf(w, pki.settings(), "slave", &ns, sp, &slave_role());
    let _slave = broker("slave", &sconf, w);
    eventually(
        "the TLS slave to acknowledge sends",
        Duration::from_secs(30),
        async || send_n(&producer, "RtHa", 1, 1).await == [SendStatus::SendOk],
    )
    .await;
    let statuses = send_n(&producer, "RtHa", 2, 50).await;
    let ok = statuses
        .iter()
        .filter(|s| **s == SendStatus::SendOk)
        .count();
    let others: Vec<_> = statuses
        .iter()
        .filter(|s| **s != SendStatus::SendOk)
        .collect();
    println!("50 sends through the SYNC_MASTER: {ok} SEND_OK, others {others:?}");
    assert_eq!(ok, 50, "every send acknowledged by the slave over TLS");

    let client = pki.remoting_client();
    let on_master = max_offset(&client, &maddr, "RtHa").await;
    let mut on_slave = None;
    eventually(
        "the slave's queue to reach the master's",
        Duration::from_secs(15),
        async || {
            on_slave = max_offset(&client, &saddr, "RtHa").await;
            on_slave.is_some() && on_slave == on_master
        },
    )
    .await;
    println!("max offset: master {on_master:?}, slave {on_slave:?}");
    assert!(on_master.is_some_and(|o| o >= 52), "{on_master:?}");

    assert_refused_plain("HA", mp + 1);
    assert_refused_plain("client", mp);
    assert!(
        certless_tls_refused(&maddr).await,
        "a TLS dialer without a client certificate was served"
    );
    let slave_log = std::fs::read_to_string(w.join("slave.log")).unwrap_or_default();
    assert!(
        !slave_log.contains("cluster secret"),
        "the slave proved the secret:\n{slave_log}"
    );
    producer.shutdown().await;
    admin.shutdown();
}

/// A ledger group of three, everything mutual TLS: a leader is elected over
/// TLS, takes sends, and after its SIGKILL the new leader holds every
/// acknowledged message and takes more. Plain dialers are refused on every
/// ledger port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_elects_replicates_and_fails_over_over_mutual_tls() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pki = Pki::new(w);
    let (_ns, ns) = tls_namesrv(w, &pki);
    let (mut members, broker_ports, ledger_ports) = start_ledger_members(w, &pki, &ns);
    let admin = Admin::new(pki.client_config(&ns));
    let leader = cluster_master(&admin, "RT", None, Duration::from_secs(40)).await;
    admin
        .create_topic(&leader, &TopicConfig::new("RtLedger", 1))
        .await
        .unwrap();
    let client = pki.remoting_client();
    // Every member must have the topic's config before the leader dies:
    // a new leader without it would auto-create the topic with 4 queues
    // (as Java's would), and the sends below would spread over them.
    for port in &broker_ports {
        let addr = format!("127.0.0.1:{port}");
        eventually(
            &format!("RtLedger's config on {addr}"),
            Duration::from_secs(15),
            async || has_topic_config(&client, &addr, "RtLedger").await,
        )
        .await;
    }
    let producer = Producer::new("rt-ledger", pki.client_config(&ns));
    producer.start().await.unwrap();
    eventually(
        "ledger sends over TLS",
        Duration::from_secs(30),
        async || send_n(&producer, "RtLedger", 0, 1).await == [SendStatus::SendOk],
    )
    .await;
    let first = send_n(&producer, "RtLedger", 1, 30).await;
    assert!(first.iter().all(|s| *s == SendStatus::SendOk), "{first:?}");
    // A send is acknowledged once a quorum holds it, which may come before
    // the leader's own commit index (what it dispatches to the queue)
    // moves: wait for the queue to show all 31.
    let acked = leader_queue_reaches(&client, &leader, 31).await;
    println!("leader {leader}: 31 sends acknowledged, max offset {acked}");

    for port in &ledger_ports {
        assert_refused_plain("ledger", *port);
    }
    let i = (0..3)
        .find(|i| leader.ends_with(&format!(":{}", broker_ports[*i])))
        .expect("the leader is one of ours");
    members[i].kill9();
    let next = cluster_master(&admin, "RT", Some(&leader), Duration::from_secs(40)).await;
    let mut held = None;
    eventually(
        "the new leader to serve the queue",
        Duration::from_secs(30),
        async || {
            held = max_offset(&client, &next, "RtLedger").await;
            held.is_some_and(|h| h >= acked)
        },
    )
    .await;
    println!("new leader {next}: max offset {held:?} (acknowledged before: {acked})");
    eventually(
        "sends through the new leader",
        Duration::from_secs(30),
        async || send_n(&producer, "RtLedger", 100, 1).await == [SendStatus::SendOk],
    )
    .await;
    let second = send_n(&producer, "RtLedger", 101, 20).await;
    assert!(
        second.iter().all(|s| *s == SendStatus::SendOk),
        "{second:?}"
    );
    let end = leader_queue_reaches(&client, &next, acked + 21).await;
    println!("after 21 more sends: max offset {end}");
    producer.shutdown().await;
    admin.shutdown();
}

/// Waits (15 s at most) until `leader`'s RtLedger queue shows at least
/// `want` messages, and returns its max offset then.
async fn leader_queue_reaches(client: &RemotingClient, leader: &str, want: i64) -> i64 {
    let mut seen = None;
    eventually(
        &format!("{leader}'s queue to show {want} acknowledged messages"),
        Duration::from_secs(15),
        async || {
            seen = max_offset(client, leader, "RtLedger").await;
            seen.is_some_and(|s| s >= want)
        },
    )
    .await;
    seen.unwrap_or_default()
}

fn slave_role() -> [(&'static str, String); 2] {
    [("brokerRole", "SLAVE".into()), ("brokerId", "1".into())]
}

/// A slave that knows the secret but shows a certificate of another CA
/// (slave port `sp`) never gets past the TLS handshake of the master on
/// `mp`: its SYNC_MASTER wait is not released, and the master says why.
async fn untrusted_slave_is_refused(
    w: &Path,
    pki: &Pki,
    ns: &str,
    mp: u16,
    sp: u16,
    producer: &Producer,
) {
    let stranger = TestCa::new(w, "stranger").client(w, "stranger-client");
    // It is told the master's HA address: the NameServer would refuse its
    // certificate too, and this is about the HA port.
    let mut intruder_role = slave_role().to_vec();
    intruder_role.push(("haMasterAddress", format!("127.0.0.1:{}", mp + 1)));
    let iconf = broker_conf(
        w,
        pki.settings_showing(&stranger),
        "intruder",
        ns,
        sp,
        &intruder_role,
    );
    let mut intruder = broker("intruder", &iconf, w);
    let master_log = || std::fs::read_to_string(w.join("master.log")).unwrap_or_default();
    eventually(
        "the master to refuse the intruder's certificate",
        Duration::from_secs(15),
        async || master_log().contains("UnknownIssuer"),
    )
    .await;
    let st = send_n(producer, "RtHa", 0, 1).await;
    println!("send with only the intruder as slave: {st:?}");
    assert_ne!(
        st,
        [SendStatus::SendOk],
        "an untrusted slave released the wait"
    );
    intruder.stop();
    assert!(
        master_log().contains("TLS handshake failed"),
        "the master says why:\n{}",
        master_log()
    );
}

/// Three ledger members (group `rtb`) with mutual TLS and the secret; their
/// processes, client ports and ledger ports.
fn start_ledger_members(w: &Path, pki: &Pki, ns: &str) -> (Vec<Proc>, Vec<u16>, Vec<u16>) {
    let ledger_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let broker_ports: Vec<u16> = (0..3).map(|_| free_port_pair()).collect();
    let peers = (0..3)
        .map(|i| format!("n{i}-127.0.0.1:{}", ledger_ports[i]))
        .collect::<Vec<_>>()
        .join(";");
    let members: Vec<Proc> = (0..3)
        .map(|i| {
            let extra = [
                ("enableDLegerCommitLog", "true".to_string()),
                ("dLegerGroup", "rtb".into()),
                ("dLegerPeers", peers.clone()),
                ("dLegerSelfId", format!("n{i}")),
                ("dLegerHeartbeatInterval", "300".into()),
                // Followers copy the leader's topic table this often.
                ("slaveSyncInterval", "500".into()),
            ];
            let conf = broker_conf(
                w,
                pki.settings(),
                &format!("m{i}"),
                ns,
                broker_ports[i],
                &extra,
            );
            broker(&format!("m{i}"), &conf, w)
        })
        .collect();
    (members, broker_ports, ledger_ports)
}
