//! Compatibility suite with the Apache RocketMQ C++ client family: the C++
//! client 2.x (`librocketmq`, which the Python, Node.js and older Go clients
//! wrap), run unchanged through the PyPI binding `rocketmq` 0.4.4 as
//! separate processes against `basalt standalone` (drivers and harness in
//! tests/cpp_client/).
//!
//! One broker serves every case at once; each case has its own topic and
//! groups:
//! * sync, async, oneway, orderly and batch sends with tags, keys and
//!   properties, and bodies over 4 KiB (the client compresses them), read by
//!   two clustering push consumers, one on `*` and one on `TagA || TagB`,
//!   each receiving exactly its messages;
//! * an orderly push consumer keeping per-key order;
//! * two broadcasting consumers each receiving every message, and a pull
//!   consumer reading the topic from offset 0;
//! * a delayed message;
//! * a second consumer joining a consumer group and taking over queues.
//!
//! Besides, without the client: the C++ client's SEND_MESSAGE with
//! `batch = "1"`, byte for byte, is stored as a batch.
//!
//! The suite skips (printing why) when the client cannot be installed
//! here; `BASALT_CPP_CLIENT_VENV` names a prepared virtual environment.

use crate::cpp_client;
use crate::raw;
use crate::standalone;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, GetMaxOffsetRequestHeader};
use serde_json::Value;

use cpp_client::{
    ClientEnv, PushConsumer, assert_exactly, keys, missing, produce, pull_all, with_prefix,
};
use raw::{Outcome, Raw, json_frame, pull_request};
use standalone::Standalone;

/// How long a case may wait for messages to arrive.
const ARRIVAL: Duration = Duration::from_secs(60);
/// Quiet time after the last expected message, to catch late duplicates.
const SETTLE: Duration = Duration::from_secs(2);

/// Creates `topic` with `queues` queues through `basalt admin`.
fn create_topic(env: &ClientEnv, topic: &str, queues: u32) {
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["admin", "--namesrv", &env.namesrv, "topic", "create"])
        .args(["--topic", topic, "--queues", &queues.to_string()])
        .output()
        .expect("run basalt admin");
    assert!(
        out.status.success(),
        "create topic {topic}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn cpp_client_family_against_standalone() {
    let Some(python) = cpp_client::client_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("client home");
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let env = ClientEnv {
        python,
        home: home.clone(),
        namesrv: broker.namesrv_addr(),
    };
    type Case = fn(&ClientEnv);
    let cases: [(&str, Case); 5] = [
        (
            "send modes and clustering consumers",
            send_modes_and_tag_consumers,
        ),
        ("orderly consumer", orderly_consumer_keeps_key_order),
        ("broadcasting and pull consumers", broadcasting_and_pull),
        ("delayed message", delayed_message),
        ("second consumer joins a group", second_consumer_joins_group),
    ];
    let failures: Vec<String> = std::thread::scope(|s| {
        let running: Vec<_> = cases
            .iter()
            .map(|(name, case)| (*name, s.spawn(|| case(&env))))
            .collect();
        running
            .into_iter()
            .filter_map(|(name, h)| {
                h.join().err().map(|e| {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    format!("{name}: {msg}")
                })
            })
            .collect()
    });
    if !failures.is_empty() {
        print_client_log_errors(&home);
        panic!(
            "{} case(s) failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// The error lines of the C++ client logs, for a failed run.
fn print_client_log_errors(home: &std::path::Path) {
    let logs = home.join("logs").join("rocketmq-cpp");
    for entry in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains("(error)")).take(20) {
            eprintln!("{}: {line}", entry.file_name().to_string_lossy());
        }
    }
}

/// What produce.py gives message `i` of a run with `tags`.
fn tag_of(i: usize, tags: &[&str]) -> String {
    tags[i % tags.len()].to_string()
}

/// Checks one received message against what produce.py sent.
fn assert_intact(m: &Value, topic: &str, mode: &str, tags: &[&str]) {
    let key = m["key"].as_str().unwrap_or_default();
    let i: usize = key
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad key in {m}"));
    assert_eq!(m["topic"], topic, "{m}");
    assert_eq!(m["tag"], tag_of(i, tags), "{m}");
    assert_eq!(m["body_ok"], true, "body of {key} damaged: {m}");
    assert_eq!(m["props"]["idx"], i.to_string(), "{m}");
    assert_eq!(m["props"]["mode"], mode, "{m}");
}

fn send_modes_and_tag_consumers(env: &ClientEnv) {
    let topic = "CppModes";
    create_topic(env, topic, 4);
    let mut all = PushConsumer::start(env, "modes-all", topic, "cpp_modes_all", &[]);
    let mut ab = PushConsumer::start(
        env,
        "modes-ab",
        topic,
        "cpp_modes_ab",
        &["--expression", "TagA || TagB"],
    );
    let tags = ["TagA", "TagB", "TagC"];
    // (key prefix, mode, count, body size)
    let runs = [
        ("sync", "sync", 20, 64),
        ("async", "async", 20, 64),
        ("oneway", "oneway", 20, 64),
        ("orderly", "orderly", 20, 64),
        ("batch", "batch", 30, 64),
        ("large", "sync", 4, 6000),
    ];
    let mut acked_ids = BTreeMap::new();
    let (mut want_all, mut want_ab) = (Vec::new(), Vec::new());
    for (prefix, mode, count, size) in runs {
        let (count_s, size_s) = (count.to_string(), size.to_string());
        let sent = produce(
            env,
            &format!("produce-{prefix}"),
            &[
                "--topic",
                topic,
                "--group",
                "cpp_modes_pg",
                "--mode",
                mode,
                "--count",
                &count_s,
                "--prefix",
                prefix,
                "--tags",
                "TagA,TagB,TagC",
                "--body-size",
                &size_s,
            ],
        );
        let acked: usize = sent
            .iter()
            .map(|s| s["keys"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(acked, count, "{prefix}: acknowledged sends");
        for s in &sent {
            if mode != "oneway" {
                assert_eq!(s["status"], 0, "{prefix}: SEND_OK expected: {s}");
            }
            // The C++ client reports the message's unique key; a batch has
            // none of its own (the broker's reply lists one id per message).
            if mode != "oneway" && mode != "batch" {
                let id = s["msg_id"].as_str().unwrap_or_default().to_string();
                assert!(!id.is_empty(), "{prefix}: no msgId in {s}");
                acked_ids.insert(s["keys"][0].as_str().unwrap_or_default().to_string(), id);
            }
        }
        if mode == "batch" {
            assert_eq!(sent.len(), count / 10, "batches of 10");
        }
        for (i, key) in keys(prefix, count).into_iter().enumerate() {
            if ["TagA", "TagB"].contains(&tags[i % 3]) {
                want_ab.push(key.clone());
            }
            want_all.push(key);
        }
    }
    let deadline = Instant::now() + ARRIVAL;
    all.until(deadline, &want_all);
    ab.until(deadline, &want_ab);
    all.settle(SETTLE);
    ab.settle(SETTLE);
    let (got_all, got_ab) = (all.stop(), ab.stop());
    assert_exactly(
        "consumer on *",
        &got_all.iter().collect::<Vec<_>>(),
        &want_all,
    );
    assert_exactly(
        "consumer on TagA || TagB",
        &got_ab.iter().collect::<Vec<_>>(),
        &want_ab,
    );
    for m in got_all.iter().chain(&got_ab) {
        let prefix = m["key"]
            .as_str()
            .unwrap_or_default()
            .split('-')
            .next()
            .unwrap_or_default();
        let mode = runs
            .iter()
            .find(|r| r.0 == prefix)
            .map(|r| r.1)
            .unwrap_or_default();
        assert_intact(m, topic, mode, &tags);
        if let Some(id) = acked_ids.get(m["key"].as_str().unwrap_or_default()) {
            assert_eq!(
                m["id"],
                id.as_str(),
                "the acknowledged msgId is the message's id"
            );
        }
    }
    let large: Vec<_> = with_prefix(&got_all, "large");
    assert!(
        large.iter().all(|m| m["body_len"] == 6000),
        "large bodies intact"
    );
}

fn orderly_consumer_keeps_key_order(env: &ClientEnv) {
    let topic = "CppOrderly";
    create_topic(env, topic, 4);
    let mut c = PushConsumer::start(env, "orderly", topic, "cpp_orderly", &["--orderly"]);
    produce(
        env,
        "produce-orderly",
        &[
            "--topic",
            topic,
            "--group",
            "cpp_orderly_pg",
            "--mode",
            "orderly",
            "--count",
            "40",
            "--prefix",
            "ord",
            "--order-keys",
            "4",
        ],
    );
    let want = keys("ord", 40);
    c.until(Instant::now() + ARRIVAL, &want);
    c.settle(SETTLE);
    let got = c.stop();
    assert_exactly("orderly consumer", &got.iter().collect::<Vec<_>>(), &want);
    let mut seqs: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for m in &got {
        let key = m["props"]["order_key"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let seq = m["props"]["seq"].as_str().and_then(|s| s.parse().ok());
        seqs.entry(key)
            .or_default()
            .push(seq.expect("seq property"));
    }
    assert_eq!(seqs.len(), 4, "four order keys");
    for (key, s) in &seqs {
        assert_eq!(*s, (0..10).collect::<Vec<u64>>(), "order of key {key}");
    }
}

/// Sends rounds of one probe message per queue (tag `Probe`, keys
/// `probe-R-Q`) until `ready` holds for every consumer; returns the probe
/// keys sent. A broadcasting consumer starts at the queues' ends, and a
/// consumer that joins a group gets its queues some time after it starts:
/// a probe it receives shows that it reads that queue.
fn probe_until(
    env: &ClientEnv,
    topic: &str,
    consumers: &mut [&mut PushConsumer],
    ready: fn(&[Value]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + ARRIVAL;
    let mut sent = Vec::new();
    for round in 0.. {
        assert!(Instant::now() < deadline, "consumers never became ready");
        let prefix = format!("probe{round}");
        produce(
            env,
            &format!("probe-{topic}-{round}"),
            &[
                "--topic",
                topic,
                "--group",
                "cpp_probe_pg",
                "--mode",
                "orderly",
                "--count",
                "4",
                "--order-keys",
                "4",
                "--prefix",
                &prefix,
                "--tags",
                "Probe",
            ],
        );
        sent.extend(keys(&prefix, 4));
        // Each round waits for the probes to arrive, at most a second.
        let round_end = Instant::now() + Duration::from_secs(1);
        for c in consumers.iter_mut() {
            while !ready(&c.msgs) && c.poll(round_end) {}
        }
        if consumers.iter().all(|c| ready(&c.msgs)) {
            return sent;
        }
    }
    unreachable!()
}

/// Queue ids the probes arrived from.
fn probed_queues(msgs: &[Value]) -> BTreeSet<i64> {
    msgs.iter()
        .filter(|m| m["tag"] == "Probe")
        .filter_map(|m| m["queue_id"].as_i64())
        .collect()
}

fn broadcasting_and_pull(env: &ClientEnv) {
    let topic = "CppBroadcast";
    create_topic(env, topic, 4);
    let group = "cpp_broadcast";
    let mut a = PushConsumer::start(env, "broadcast-a", topic, group, &["--broadcasting"]);
    let mut b = PushConsumer::start(env, "broadcast-b", topic, group, &["--broadcasting"]);
    let probes = probe_until(env, topic, &mut [&mut a, &mut b], |m| {
        probed_queues(m).len() == 4
    });
    produce(
        env,
        "produce-broadcast",
        &[
            "--topic",
            topic,
            "--group",
            "cpp_broadcast_pg",
            "--mode",
            "sync",
            "--count",
            "12",
            "--prefix",
            "bc",
            "--tags",
            "TagA,TagB",
        ],
    );
    let want = keys("bc", 12);
    let deadline = Instant::now() + ARRIVAL;
    a.until(deadline, &want);
    b.until(deadline, &want);
    a.settle(SETTLE);
    b.settle(SETTLE);
    for (who, got) in [("broadcast a", a.stop()), ("broadcast b", b.stop())] {
        assert_exactly(who, &with_prefix(&got, "bc"), &want);
        for m in with_prefix(&got, "bc") {
            assert_intact(m, topic, "sync", &["TagA", "TagB"]);
        }
    }
    // A pull consumer reads everything from offset 0: probes and messages.
    let pulled = pull_all(env, "pull", topic, "cpp_pull");
    let mut everything = probes.clone();
    everything.extend(want);
    assert_exactly(
        "pull consumer",
        &pulled.iter().collect::<Vec<_>>(),
        &everything,
    );
    let mut first: BTreeMap<i64, i64> = BTreeMap::new();
    for m in &pulled {
        let (q, o) = (m["queue_id"].as_i64(), m["queue_offset"].as_i64());
        let e = first.entry(q.expect("queue id")).or_insert(i64::MAX);
        *e = (*e).min(o.expect("queue offset"));
    }
    assert_eq!(first.len(), 4, "pulled from every queue");
    assert!(
        first.values().all(|o| *o == 0),
        "pulled from offset 0: {first:?}"
    );
}

fn delayed_message(env: &ClientEnv) {
    let topic = "CppDelay";
    create_topic(env, topic, 2);
    let mut c = PushConsumer::start(env, "delay", topic, "cpp_delay", &[]);
    // Level 2 is 5 s with the default messageDelayLevel.
    produce(
        env,
        "produce-delay",
        &[
            "--topic",
            topic,
            "--group",
            "cpp_delay_pg",
            "--mode",
            "sync",
            "--count",
            "2",
            "--prefix",
            "delay",
            "--delay-level",
            "2",
        ],
    );
    let want = keys("delay", 2);
    c.until(Instant::now() + ARRIVAL, &want);
    c.settle(SETTLE);
    let got = c.stop();
    assert_exactly("delay consumer", &got.iter().collect::<Vec<_>>(), &want);
    for m in &got {
        assert_intact(m, topic, "sync", &["TagA"]);
        let waited = m["recv_ms"].as_i64().unwrap_or(0) - m["born_ms"].as_i64().unwrap_or(0);
        assert!(
            (4_500..30_000).contains(&waited),
            "delivered {waited} ms after it was sent, level 2 is 5 s: {m}"
        );
    }
}

fn second_consumer_joins_group(env: &ClientEnv) {
    let topic = "CppJoin";
    create_topic(env, topic, 4);
    let group = "cpp_join";
    let mut a = PushConsumer::start(env, "join-a", topic, group, &[]);
    let first_args = [
        "--topic",
        topic,
        "--group",
        "cpp_join_pg",
        "--mode",
        "sync",
        "--count",
        "16",
        "--prefix",
        "first",
    ];
    produce(env, "produce-join-first", &first_args);
    let first = keys("first", 16);
    a.until(Instant::now() + ARRIVAL, &first);
    let mut b = PushConsumer::start(env, "join-b", topic, group, &[]);
    // B reads queues once a probe reaches it; A then no longer reads them.
    probe_until(env, topic, &mut [&mut b], |m| !probed_queues(m).is_empty());
    a.settle(SETTLE);
    b.settle(SETTLE);
    let (a_before, b_before) = (a.msgs.len(), b.msgs.len());
    let second_args = [
        "--topic",
        topic,
        "--group",
        "cpp_join_pg",
        "--mode",
        "sync",
        "--count",
        "40",
        "--prefix",
        "second",
    ];
    produce(env, "produce-join-second", &second_args);
    let second = keys("second", 40);
    let deadline = Instant::now() + ARRIVAL;
    loop {
        let mut both: Vec<Value> = a.msgs[a_before..].to_vec();
        both.extend_from_slice(&b.msgs[b_before..]);
        if missing(&both, &second).is_empty() {
            break;
        }
        let step = (Instant::now() + Duration::from_millis(200)).min(deadline);
        let got = a.poll(step) | b.poll(step);
        assert!(
            got || Instant::now() < deadline,
            "second batch incomplete: {:?}",
            missing(&both, &second)
        );
    }
    a.settle(SETTLE);
    b.settle(SETTLE);
    let (got_a, got_b) = (a.stop(), b.stop());
    assert_exactly(
        "first consumer, before the join",
        &with_prefix(&got_a, "first"),
        &first,
    );
    let (sa, sb) = (with_prefix(&got_a, "second"), with_prefix(&got_b, "second"));
    let mut both = sa.clone();
    both.extend(sb.iter().copied());
    assert_exactly("the group, after the join", &both, &second);
    let queues = |ms: &[&Value]| -> BTreeSet<i64> {
        ms.iter().filter_map(|m| m["queue_id"].as_i64()).collect()
    };
    let (qa, qb) = (queues(&sa), queues(&sb));
    assert!(
        !qa.is_empty() && !qb.is_empty(),
        "both read: {qa:?} / {qb:?}"
    );
    assert!(
        qa.is_disjoint(&qb),
        "each queue has one reader: {qa:?} / {qb:?}"
    );
}

/// The frame the C++ client 2.0 sent for a batch of three (TagB, keys
/// b0..b2), captured on the wire: SEND_MESSAGE with `"batch":"1"`, its JSON
/// header ending in a newline, and a batch-encoded body.
const CPP_BATCH_HEADER: &str = "{\"code\":10,\"extFields\":{\"AccessKey\":\"\",\"OnsChannel\":\"ALIYUN\",\"Signature\":\"vdmvECl1L4DA1qucKSbJodTXoNM=\",\"batch\":\"1\",\"bornTimestamp\":\"1796100350255\",\"defaultTopic\":\"TBW102\",\"defaultTopicQueueNums\":4,\"flag\":0,\"producerGroup\":\"PG_exp\",\"properties\":\"WAIT\\u0001true\\u0002\",\"queueId\":3,\"reconsumeTimes\":\"0\",\"sysFlag\":0,\"topic\":\"TExp\",\"unitMode\":\"0\"},\"flag\":0,\"language\":\"CPP\",\"opaque\":8,\"remark\":\"\",\"version\":63}\n";
const CPP_BATCH_BODY_HEX: &str = "00000063000000000000000000000000000000076261746368203000464b4559530162300254414753015461674202554e49515f4b4559013031303030303746303030303544303830303030414646423632303630343030025741495401747275650200000063000000000000000000000000000000076261746368203100464b4559530162310254414753015461674202554e49515f4b4559013031303030303746303030303544303830303030414646423632303630353030025741495401747275650200000063000000000000000000000000000000076261746368203200464b4559530162320254414753015461674202554e49515f4b45590130313030303037463030303035443038303030304146464236323036303630300257414954017472756502";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn max_offset(conn: &mut Raw, topic: &str, queue_id: i32) -> i64 {
    let h = GetMaxOffsetRequestHeader {
        topic: topic.into(),
        queue_id,
        committed: None,
    };
    let r = conn.call(RemotingCommand::request(request::GET_MAX_OFFSET).with_ext(h.to_ext()));
    r.ext_fields
        .get("offset")
        .and_then(|v| v.parse().ok())
        .expect("offset in the GET_MAX_OFFSET response")
}

/// Sends the captured frame with `batch` and `body` swapped in.
fn send_cpp_frame(conn: &mut Raw, batch: &str, body: &[u8]) -> RemotingCommand {
    let header = CPP_BATCH_HEADER.replace("\"batch\":\"1\"", &format!("\"batch\":\"{batch}\""));
    match conn.send_raw(&json_frame(&header, body), raw::IO_DEADLINE) {
        Outcome::Reply(r) => *r,
        other => panic!("no reply to the C++ batch frame: {other:?}"),
    }
}

#[test]
fn cpp_client_batch_flag_is_a_batch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let mut conn = Raw::connect(&broker.broker_addr());
    let body = hex(CPP_BATCH_BODY_HEX);

    let r = send_cpp_frame(&mut conn, "1", &body);
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let ids: Vec<&str> = r
        .ext_fields
        .get("msgId")
        .unwrap_or_default()
        .split(',')
        .collect();
    assert_eq!(ids.len(), 3, "one msgId per message: {ids:?}");
    assert!(ids.iter().all(|id| id.len() == 32), "{ids:?}");
    assert_eq!(r.ext_fields.get("queueOffset"), Some("0"));

    // Three records in queue 3, each with its own keys and tag.
    let deadline = Instant::now() + raw::IO_DEADLINE;
    while max_offset(&mut conn, "TExp", 3) < 3 {
        assert!(Instant::now() < deadline, "batch never dispatched");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pulled = conn.call(pull_request("TExp", 3, 0));
    assert_eq!(pulled.code, response::SUCCESS, "{:?}", pulled.remark);
    for i in 0..3 {
        let needle = format!("KEYS\u{1}b{i}\u{2}TAGS\u{1}TagB\u{2}");
        let body = format!("batch {i}");
        for n in [needle.as_bytes(), body.as_bytes()] {
            assert!(
                pulled.body.windows(n.len()).any(|w| w == n),
                "record {i} holds {:?}",
                String::from_utf8_lossy(n)
            );
        }
    }

    // Later C++ versions print true; the same body is a batch again.
    let r = send_cpp_frame(&mut conn, "true", &body);
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    assert_eq!(
        r.ext_fields
            .get("msgId")
            .unwrap_or_default()
            .split(',')
            .count(),
        3
    );

    // A body that is not a batch is refused, never stored as one message.
    let r = send_cpp_frame(&mut conn, "1", b"not a batch body");
    assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{:?}", r.remark);
    assert!(
        r.remark.as_deref().unwrap_or_default().contains("batch"),
        "{:?}",
        r.remark
    );
    let deadline = Instant::now() + raw::IO_DEADLINE;
    while max_offset(&mut conn, "TExp", 3) < 6 {
        assert!(Instant::now() < deadline, "second batch never dispatched");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(max_offset(&mut conn, "TExp", 3), 6, "nothing more stored");
}

/// The stored records of `topic`'s queues 0..`queues`, pulled raw:
/// (queue id, sys flag, body length, keys) per record.
fn stored_records(conn: &mut Raw, topic: &str, queues: i32) -> Vec<(i32, i32, usize, String)> {
    use basalt_common::record::RecordView;
    let mut out = Vec::new();
    for q in 0..queues {
        let mut offset = 0i64;
        while offset < max_offset(conn, topic, q) {
            let r = conn.call(pull_request(topic, q, offset));
            assert_eq!(
                r.code,
                response::SUCCESS,
                "pull {topic}/{q}: {:?}",
                r.remark
            );
            let mut at = 0usize;
            while at < r.body.len() {
                let v = RecordView::parse(&r.body[at..], false).expect("a stored record");
                let keys = basalt_common::properties::find(v.properties, "KEYS")
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .unwrap_or_default();
                out.push((q, v.sys_flag, v.body.len(), keys));
                at += v.total_size();
                offset += 1;
            }
        }
    }
    out
}

/// The C++ client compresses a whole batch body over 4 KiB (zlib) and sets
/// COMPRESSED on the request; the broker inflates it, stores each message
/// with its own uncompressed body, and a consumer reads every message once,
/// intact (docs/cpp-client.md#compressed-batches).
#[test]
fn cpp_client_compressed_batches() {
    let Some(python) = cpp_client::client_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("client home");
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let env = ClientEnv {
        python,
        home: home.clone(),
        namesrv: broker.namesrv_addr(),
    };
    let topic = "CppZBatch";
    create_topic(&env, topic, 4);
    let mut c = PushConsumer::start(&env, "zbatch", topic, "cpp_zbatch", &[]);
    // (key prefix, messages in the one batch, body size)
    let runs = [("zsmall", 3, 1536), ("zlarge", 10, 20 * 1024)];
    let mut want = Vec::new();
    for (prefix, count, size) in runs {
        let (count_s, size_s) = (count.to_string(), size.to_string());
        let sent = produce(
            &env,
            &format!("produce-{prefix}"),
            &[
                "--topic",
                topic,
                "--group",
                "cpp_zbatch_pg",
                "--mode",
                "batch",
                "--count",
                &count_s,
                "--batch-size",
                &count_s,
                "--prefix",
                prefix,
                "--body-size",
                &size_s,
            ],
        );
        println!("{prefix}: {count} x {size} B in one batch; acknowledged: {sent:?}");
        assert_eq!(sent.len(), 1, "{prefix}: one batch");
        assert_eq!(sent[0]["status"], 0, "{prefix}: SEND_OK expected");
        assert_eq!(
            sent[0]["keys"].as_array().map_or(0, Vec::len),
            count,
            "{prefix}: every message acknowledged"
        );
        want.extend(keys(prefix, count));
    }
    c.until(Instant::now() + ARRIVAL, &want);
    c.settle(SETTLE);
    let got = c.stop();
    println!(
        "received: {:?}",
        got.iter()
            .map(|m| format!("{} ({} B)", m["key"], m["body_len"]))
            .collect::<Vec<_>>()
    );
    assert_exactly(
        "consumer of compressed batches",
        &got.iter().collect::<Vec<_>>(),
        &want,
    );
    for m in &got {
        assert_eq!(m["body_ok"], true, "body damaged: {m}");
        assert_intact(m, topic, "batch", &["TagA"]);
    }

    // Stored: one record per message, its body as sent, not COMPRESSED.
    let mut conn = Raw::connect(&broker.broker_addr());
    let stored = stored_records(&mut conn, topic, 4);
    println!("stored (queue, sysFlag, body bytes, keys): {stored:?}");
    assert_eq!(stored.len(), want.len(), "one record per message");
    for (prefix, _, size) in runs {
        for (_, sys_flag, len, _) in stored.iter().filter(|r| r.3.starts_with(prefix)) {
            assert_eq!(*len, size, "{prefix}: stored body size");
            assert_eq!(
                sys_flag & 0x1,
                0,
                "{prefix}: stored sysFlag claims COMPRESSED"
            );
        }
    }

    // A COMPRESSED batch body that is neither a batch nor zlib is refused.
    let header = CPP_BATCH_HEADER.replace("\"sysFlag\":0", "\"sysFlag\":1");
    let r = match conn.send_raw(&json_frame(&header, b"not a batch body"), raw::IO_DEADLINE) {
        Outcome::Reply(r) => *r,
        other => panic!("no reply: {other:?}"),
    };
    println!("corrupt compressed batch: code {} {:?}", r.code, r.remark);
    assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{:?}", r.remark);
    assert!(
        r.remark.as_deref().unwrap_or_default().contains("zlib"),
        "{:?}",
        r.remark
    );
}
