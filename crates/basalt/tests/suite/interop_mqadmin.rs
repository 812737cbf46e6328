//! Apache RocketMQ's `mqadmin` (rocketmq-tools 5.5.0) against `basalt
//! standalone`: the verbs operators use daily, each checked on what it
//! prints (parsed), not only on its exit status. Topics, groups and
//! messages are seeded with `basalt produce` / `basalt consume` (or
//! mqadmin's own sendMessage), so every figure mqadmin shows is known in
//! advance. What mqadmin cannot do against Basalt, and why, is in
//! docs/mqadmin.md.
//!
//! Two tests, one broker each:
//! 1. topics, routes, permissions and broker settings;
//! 2. consumer groups, offsets, lag, connections and message lookups.

pub(crate) mod harness;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::interop::family_dir;
use crate::standalone::Standalone;
use harness::{LiveConsumer, LiveProducer, Mq, basalt, field, num, rows};

/// Settings for a quiet broker: no dashboard or metrics listener.
const SETS: [&str; 2] = ["dashboardEnable=false", "metricsExporterType=DISABLE"];

/// Starts a broker and mqadmin pointed at it, or `None` when the harness
/// is not built (skips; CI requires it).
fn setup(dir: &tempfile::TempDir) -> Option<(Standalone, Mq)> {
    let family = family_dir("mqadmin")?;
    let data = dir.path().join("data");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("mqadmin home");
    let broker = Standalone::start(&data, &SETS);
    let mq = Mq::new(family, &home, broker.namesrv_addr());
    Some((broker, mq))
}

/// The number after `"key":` in mqadmin's route JSON.
fn json_int(out: &str, key: &str) -> i64 {
    let pat = format!("\"{key}\":");
    let at = out
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"));
    let rest = &out[at + pat.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit() && c != '-')
        .unwrap_or(rest.len());
    rest[..end].parse().expect("a number")
}

/// `SEND_OK msgId=ID queue=BROKER:Q offset=O` lines of `basalt produce`.
fn sent(out: &str) -> Vec<(String, i32, i64)> {
    out.lines()
        .filter(|l| l.starts_with("SEND_OK"))
        .map(|l| {
            let get = |k: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(k))
                    .unwrap_or_else(|| panic!("{k} in {l}"))
                    .to_string()
            };
            let queue = get("queue=");
            let qid = queue.rsplit(':').next().and_then(|q| q.parse().ok());
            (
                get("msgId="),
                qid.expect("queue id"),
                get("offset=").parse().expect("offset"),
            )
        })
        .collect()
}

/// Waits (bounded) until `basalt admin ARGS` succeeds (`want`) or fails:
/// until the broker sees a client come or go.
fn until_admin(namesrv: &str, args: &[&str], want: bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["admin", "--namesrv", namesrv])
            .args(args)
            .output()
            .expect("run basalt admin");
        if out.status.success() == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "basalt admin {args:?} never came to success={want}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The route's perm for the topic, per mqadmin topicRoute.
fn route_perm(mq: &Mq, topic: &str) -> i64 {
    json_int(&mq.ok(&["topicRoute", "-t", topic]), "perm")
}

#[test]
fn topics_routes_and_broker_settings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((broker, mq)) = setup(&dir) else {
        return;
    };
    let addr = broker.broker_addr();
    let ns = broker.namesrv_addr();
    let topic = "MqTopic";

    let out = mq.ok_all(&[
        &["clusterList"],
        &[
            "updateTopic",
            "-c",
            "DefaultCluster",
            "-t",
            topic,
            "-r",
            "4",
            "-w",
            "4",
        ],
        &["brokerStatus", "-b", &addr],
        &["getBrokerConfig", "-b", &addr],
    ]);
    let cluster = rows(&out[0], "#Cluster Name");
    assert_eq!(cluster.len(), 1, "one broker: {cluster:?}");
    assert_eq!(
        cluster[0][..4],
        ["DefaultCluster", "broker-a", "0", addr.as_str()]
    );
    assert_eq!(
        cluster[0].last().map(String::as_str),
        Some("true"),
        "activated"
    );
    // In and out TPS with their (empty) request queues; #PCWait (the
    // CommitLog lock hold time) is not measured by Basalt and shows null.
    assert!(cluster[0][5].ends_with("(0,0ms)"), "{:?}", cluster[0]);
    assert!(cluster[0][6].ends_with("(0,0ms|0,0ms)"), "{:?}", cluster[0]);
    assert!(out[1].contains(&format!("create topic to {addr} success.")));
    assert!(out[1].contains("readQueueNums=4, writeQueueNums=4, perm=RW-"));
    assert_eq!(
        field(&out[2], "brokerRole", ':').as_deref(),
        Some("ASYNC_MASTER")
    );
    assert_eq!(field(&out[2], "brokerId", ':').as_deref(), Some("0"));
    assert_eq!(
        field(&out[3], "maxMessageSize", '=').as_deref(),
        Some("4194304")
    );
    let store_dir = field(&out[3], "storePathRootDir", '=').expect("storePathRootDir");
    assert_eq!(Some(store_dir.as_str()), broker.data.to_str());

    // 20 messages, round robin over the 4 queues: 5 each.
    let produced = sent(&basalt(&[
        "produce",
        "--namesrv",
        &ns,
        "-t",
        topic,
        "-n",
        "20",
        "--keys",
        "k-{i}",
    ]));
    assert_eq!(produced.len(), 20);

    let out = mq.ok_all(&[
        &["topicList"],
        &["topicRoute", "-t", topic],
        &["topicStatus", "-t", topic],
        &[
            "sendMessage",
            "-t",
            topic,
            "-p",
            "from-mqadmin",
            "-k",
            "mq-key",
            "-c",
            "mqtag",
        ],
        &["allocateMQ", "-t", topic, "-i", "10.0.0.1@a,10.0.0.2@b"],
        &[
            "updateBrokerConfig",
            "-b",
            &addr,
            "-k",
            "maxMessageSize",
            "-v",
            "1048576",
        ],
        &["cleanExpiredCQ", "-b", &addr],
    ]);
    let topics: BTreeSet<&str> = out[0].lines().map(str::trim).collect();
    assert!(
        topics.contains(topic) && topics.contains("TBW102"),
        "{topics:?}"
    );
    assert_eq!(json_int(&out[1], "readQueueNums"), 4);
    assert_eq!(json_int(&out[1], "writeQueueNums"), 4);
    assert_eq!(json_int(&out[1], "perm"), 6);
    assert!(out[1].contains(&format!("\"{addr}\"")) && out[1].contains("\"broker-a\""));
    let status = rows(&out[2], "#Broker Name");
    assert_eq!(status.len(), 4, "{status:?}");
    let qids: BTreeSet<i64> = status.iter().map(|r| num(r, 1)).collect();
    assert_eq!(qids, BTreeSet::from([0, 1, 2, 3]), "{status:?}");
    for r in &status {
        assert_eq!(r[0], "broker-a");
        assert_eq!(
            (num(r, 2), num(r, 3)),
            (0, 5),
            "min and max offset of {r:?}"
        );
    }
    let send = rows(&out[3], "#Broker Name");
    assert_eq!(send.len(), 1, "{send:?}");
    assert_eq!(
        (send[0][0].as_str(), send[0][2].as_str()),
        ("broker-a", "SEND_OK")
    );
    let (send_qid, send_id) = (num(&send[0], 1), send[0][3].clone());
    let alloc: serde_json::Value = serde_json::from_str(out[4].trim()).expect("allocateMQ JSON");
    let mut allocated = Vec::new();
    for client in ["10.0.0.1@a", "10.0.0.2@b"] {
        let queues = alloc["result"][client]
            .as_array()
            .expect("queues of a client");
        assert_eq!(queues.len(), 2, "4 queues over 2 clients: {alloc}");
        allocated.extend(
            queues
                .iter()
                .map(|q| q["queueId"].as_i64().expect("queueId")),
        );
    }
    allocated.sort();
    assert_eq!(allocated, [0, 1, 2, 3], "every queue exactly once: {alloc}");
    assert!(out[5].contains(&format!("update broker config success, {addr}")));
    assert_eq!(out[6].trim(), "success");

    // clusterRT sends to the broker's own topic every second until killed;
    // it runs beside the next verbs.
    let (out, cluster_rt) = std::thread::scope(|s| {
        let rt = s.spawn(|| {
            mq.run_for(
                &["clusterRT", "-a", "3", "-i", "1"],
                Duration::from_secs(12),
            )
        });
        let out = mq.ok_all(&[
            &["queryMsgById", "-t", topic, "-i", &send_id],
            &["getBrokerConfig", "-b", &addr],
            &["checkMsgSendRT", "-t", topic, "-a", "3", "-s", "64"],
        ]);
        (out, rt.join().expect("clusterRT thread"))
    });
    assert_eq!(field(&out[0], "Topic", ':').as_deref(), Some(topic));
    assert_eq!(field(&out[0], "Tags", ':').as_deref(), Some("[mqtag]"));
    assert_eq!(field(&out[0], "Keys", ':').as_deref(), Some("[mq-key]"));
    assert_eq!(field(&out[0], "Queue ID", ':'), Some(send_qid.to_string()));
    assert_eq!(field(&out[0], "Queue Offset", ':').as_deref(), Some("5"));
    let body_path = field(&out[0], "Message Body Path", ':').expect("body path");
    let body = std::fs::read(&body_path).expect("the body mqadmin wrote");
    assert_eq!(body, b"from-mqadmin");
    assert_eq!(
        field(&out[1], "maxMessageSize", '=').as_deref(),
        Some("1048576")
    );
    let rt: Vec<_> = rows(&out[2], "#Broker Name")
        .into_iter()
        .filter(|r| r[0] != "Avg")
        .collect();
    assert_eq!(rt.len(), 3, "{rt:?}");
    assert!(
        rt.iter().all(|r| r[0] == "broker-a" && r[2] == "true"),
        "{rt:?}"
    );
    assert!(out[2].contains("Avg RT:"));

    let f = cluster_rt;
    println!("{}", f.report("mqadmin clusterRT"));
    assert!(!f.stdout.contains("Exception") && !f.stderr.contains("Exception"));
    let rt = rows(&f.stdout, "#Cluster Name");
    assert!(!rt.is_empty(), "no clusterRT round in 12 s");
    for r in &rt {
        assert_eq!(r[..2], ["DefaultCluster", "broker-a"]);
        assert_eq!((num(r, 3), num(r, 4)), (3, 0), "3 sent, none failed: {r:?}");
    }

    // 20 + 1 (sendMessage) + 3 (checkMsgSendRT) messages.
    let out = mq.ok_all(&[
        &["topicStatus", "-t", topic],
        &["wipeWritePerm", "-b", "broker-a"],
    ]);
    let status = rows(&out[0], "#Broker Name");
    let total: i64 = status.iter().map(|r| num(r, 3)).sum();
    assert_eq!(total, 24, "{status:?}");
    let out = &out[1];
    assert!(out.contains(&format!(
        "wipe write perm of broker[broker-a] in name server[{ns}] OK"
    )));
    assert_eq!(route_perm(&mq, topic), 4, "read only after wipeWritePerm");
    let out = mq.ok(&["addWritePerm", "-b", "broker-a"]);
    assert!(out.contains(&format!(
        "add write perm of broker[broker-a] in name server[{ns}] OK"
    )));
    assert_eq!(route_perm(&mq, topic), 6, "read-write after addWritePerm");

    let out = mq.ok(&["deleteTopic", "-t", topic, "-c", "DefaultCluster"]);
    assert!(out.contains(&format!(
        "delete topic [{topic}] from cluster [DefaultCluster] success."
    )));
    assert!(out.contains(&format!("delete topic [{topic}] from NameServer success.")));
    let (out, f) = std::thread::scope(|s| {
        let list = s.spawn(|| mq.ok(&["topicList"]));
        let route = mq.run(&["topicRoute", "-t", topic]);
        (list.join().expect("topicList thread"), route)
    });
    assert!(
        !out.lines().any(|l| l.trim() == topic),
        "still listed:\n{out}"
    );
    println!("{}", f.report("mqadmin topicRoute of the deleted topic"));
    assert!(f.stdout.contains("No topic route info") || f.stderr.contains("No topic route info"));
    assert!(
        !broker.data.join("consumequeue").join(topic).exists(),
        "the broker still has the topic's queues"
    );
}

#[test]
fn groups_offsets_connections_and_lookups() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((broker, mq)) = setup(&dir) else {
        return;
    };
    let ns = broker.namesrv_addr();
    let topic = "Billing";
    basalt(&[
        "admin",
        "--namesrv",
        &ns,
        "topic",
        "create",
        "-t",
        topic,
        "--queues",
        "4",
    ]);
    basalt(&[
        "admin",
        "--namesrv",
        &ns,
        "topic",
        "create",
        "-t",
        "Side",
        "--queues",
        "1",
    ]);
    // A live producer of another topic (looked at last).
    let _producer = LiveProducer::start(&ns, "Side", "pg-live", "side-0");

    let out = mq.ok(&[
        "updateSubGroup",
        "-c",
        "DefaultCluster",
        "-g",
        "billing",
        "-r",
        "3",
    ]);
    assert!(out.contains("create subscription group to") && out.contains("retryMaxTimes=3"));

    let bodies: String = (0..20).map(|i| format!("body-{i}\n")).collect();
    let first = produce_stdin(&ns, topic, "order-{i}", &bodies);
    assert_eq!(first.len(), 20);
    let consumed = basalt(&[
        "consume",
        "--namesrv",
        &ns,
        "-t",
        topic,
        "-g",
        "billing",
        "-n",
        "20",
        "--timeout",
        "60",
        "--json",
    ]);
    assert!(consumed.contains("\"consumed\":20"), "{consumed}");
    let late: String = (0..7).map(|i| format!("late-{i}\n")).collect();
    let second = produce_stdin(&ns, topic, "late-{i}", &late);
    assert_eq!(second.len(), 7);

    let (key_id, key_qid, key_offset) = first[7].clone();
    let (ofs_id, ofs_qid, ofs_offset) = first[3].clone();
    let q0_messages = first.iter().chain(&second).filter(|m| m.1 == 0).count();
    let out = mq.ok_all(&[
        &["consumerProgress", "-g", "billing"],
        &["queryMsgByKey", "-t", topic, "-k", "order-7"],
        &[
            "queryMsgByOffset",
            "-t",
            topic,
            "-b",
            "broker-a",
            "-i",
            &ofs_qid.to_string(),
            "-o",
            &ofs_offset.to_string(),
        ],
        &["printMsg", "-t", topic],
        &[
            "consumeMessage",
            "-t",
            topic,
            "-b",
            "broker-a",
            "-i",
            "0",
            "-o",
            "0",
            "-c",
            "100",
        ],
        &["statsAll", "-t", topic],
    ]);
    let progress = rows(&out[0], "#Topic");
    let ours: Vec<_> = progress.iter().filter(|r| r[0] == topic).collect();
    assert_eq!(ours.len(), 4, "{progress:?}");
    let sum = |c: usize| ours.iter().map(|r| num(r, c)).sum::<i64>();
    assert_eq!(
        (sum(3), sum(4), sum(5)),
        (27, 20, 7),
        "broker, consumer offsets, diff"
    );
    assert_eq!(
        field(&out[0], "Consume Diff Total", ':').as_deref(),
        Some("7")
    );

    let by_key = rows(&out[1], "#Message ID");
    assert_eq!(by_key.len(), 1, "{by_key:?}");
    assert_eq!(by_key[0][0], key_id);
    assert_eq!(
        (num(&by_key[0], 1), num(&by_key[0], 2)),
        (key_qid as i64, key_offset)
    );

    assert_eq!(field(&out[2], "Keys", ':').as_deref(), Some("[order-3]"));
    assert!(out[2].contains(&format!("UNIQ_KEY={ofs_id}")), "{}", out[2]);
    let body_path = field(&out[2], "Message Body Path", ':').expect("body path");
    assert_eq!(std::fs::read(&body_path).expect("body file"), b"body-3");

    let printed: Vec<&str> = out[3].lines().filter(|l| l.starts_with("MSGID:")).collect();
    assert_eq!(printed.len(), 27, "every message once");
    for (id, _, _) in first.iter().chain(&second) {
        assert_eq!(
            printed.iter().filter(|l| l.contains(id.as_str())).count(),
            1,
            "{id}"
        );
    }
    for i in 0..20 {
        let body = format!("BODY: body-{i}");
        assert_eq!(
            printed.iter().filter(|l| l.ends_with(&body)).count(),
            1,
            "{body}"
        );
    }

    assert!(out[4].contains("Consume ok"), "{}", out[4]);
    let pulled = out[4].lines().filter(|l| l.starts_with("MSGID:")).count();
    assert_eq!(pulled, q0_messages, "queue 0's messages");

    let stats = rows(&out[5], "#Topic");
    let row = stats
        .iter()
        .find(|r| r[0] == topic && r[1] == "billing")
        .unwrap_or_else(|| panic!("no billing row: {stats:?}"));
    assert_eq!(num(row, 2), 7, "accumulation: {row:?}");
    // VIEW_BROKER_STATS_DATA: the topic took 27 messages and billing pulled
    // 20, within the day. Each rate is over at least 10 s (the sampling
    // interval), so at most 27/10 and 20/10 a second, and 0 once the
    // minute has passed.
    assert_eq!(
        (num(row, 5), num(row, 6)),
        (27, 20),
        "24-hour in/out: {row:?}"
    );
    let rate = |c: usize| -> f64 {
        row[c]
            .parse()
            .unwrap_or_else(|_| panic!("column {c} of {row:?}"))
    };
    assert!((0.0..=2.7).contains(&rate(3)), "in TPS: {row:?}");
    assert!((0.0..=2.0).contains(&rate(4)), "out TPS: {row:?}");

    // Back to the first message: every offset is 0 and the lag is all 27.
    let out = mq.ok(&["resetOffsetByTime", "-g", "billing", "-t", topic, "-s", "0"]);
    let reset = rows(&out, "#brokerName");
    assert_eq!(reset.len(), 4, "{reset:?}");
    assert!(
        reset.iter().all(|r| r[0] == "broker-a" && r[2] == "0"),
        "{reset:?}"
    );
    let out = mq.ok(&["consumerProgress", "-g", "billing"]);
    assert_eq!(
        field(&out, "Consume Diff Total", ':').as_deref(),
        Some("27")
    );

    // A live consumer: its connection and subscription.
    {
        let _consumer = LiveConsumer::start(&ns, topic, "billing");
        until_admin(&ns, &["consumer", "-g", "billing"], true);
        let out = mq.ok(&["consumerConnection", "-g", "billing"]);
        let conns = rows(&out, "#ClientId");
        assert_eq!(conns.len(), 1, "{conns:?}");
        assert!(conns[0][1].starts_with("127.0.0.1:"), "{conns:?}");
        let subs = rows(&out, "#Topic");
        assert!(subs.iter().any(|r| r[..] == [topic, "*"]), "{subs:?}");
        assert_eq!(
            field(&out, "ConsumeType", ':').as_deref(),
            Some("CONSUME_PASSIVELY")
        );
        assert_eq!(
            field(&out, "MessageModel", ':').as_deref(),
            Some("CLUSTERING")
        );
    }

    let out = mq.ok(&["producerConnection", "-g", "pg-live", "-t", "Side"]);
    let producers: Vec<&str> = out.lines().filter(|l| l.contains("127.0.0.1:")).collect();
    assert_eq!(producers.len(), 1, "one producer connection:\n{out}");

    // The consumer is gone (killed above): once the broker has seen its
    // connection close, nothing recreates the group after its deletion.
    until_admin(&ns, &["consumer", "-g", "billing"], false);
    let out = mq.ok(&["deleteSubGroup", "-g", "billing", "-c", "DefaultCluster"]);
    assert!(
        out.contains("delete subscription group [billing] from broker"),
        "{out}"
    );
    // The config updateSubGroup made (retryMaxTimes 3) is gone. A pull the
    // killed consumer left suspended may still wake and, with
    // autoCreateSubscriptionGroup, create the group again with defaults
    // (16), as Java's broker does; so only the configured one is looked for.
    let groups = basalt(&["admin", "--namesrv", &ns, "group", "list"]);
    assert!(
        !groups.lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.get(1) == Some(&"billing") && cols.last() == Some(&"3")
        }),
        "billing's configured group still listed:\n{groups}"
    );
}

/// `basalt produce --stdin` with keys; the sends it reports.
fn produce_stdin(ns: &str, topic: &str, keys: &str, bodies: &str) -> Vec<(String, i32, i64)> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args([
            "produce",
            "--namesrv",
            ns,
            "-t",
            topic,
            "--stdin",
            "--keys",
            keys,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn basalt produce");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(bodies.as_bytes())
        .expect("write bodies");
    let out = child.wait_with_output().expect("basalt produce");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "basalt produce: {text}");
    println!("{text}");
    sent(&text)
}
