//! POP consumption over raw remoting frames against `basalt standalone`
//! (docs/pop.md): pop and ack, long polling, invisible-time expiry and
//! redelivery through the POP retry topic, the DLQ after the group's
//! maximum, changing the invisible time, acks surviving a restart, and POP
//! and pull groups on one topic, and batch acks.

use std::collections::{BTreeSet, HashMap};
use std::process::Command;
use std::time::{Duration, Instant};

use basalt_common::record::{StoredMessage, decode_all};
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, CommandHeader,
    PopMessageRequestHeader, PullMessageRequestHeader,
};

use crate::raw::{Raw, send_request};
use crate::standalone::{self, Standalone};

/// One popped message as a Java client sees it: the record and its
/// `POP_CK`, derived from the response header as MQClientAPIImpl does.
pub(crate) struct Popped {
    pub(crate) msg: StoredMessage,
    pub(crate) extra_info: String,
}

pub(crate) fn body(p: &Popped) -> String {
    String::from_utf8_lossy(&p.msg.body).into_owned()
}

fn pop_request(group: &str, topic: &str, invisible_ms: i64, poll_ms: i64) -> RemotingCommand {
    let h = PopMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: -1,
        max_msg_nums: 32,
        invisible_time: invisible_ms,
        poll_time: poll_ms,
        born_time: basalt_common::time::now_millis(),
        init_mode: 0,
        exp_type: Some("TAG".into()),
        exp: Some("*".into()),
        order: Some(false),
        attempt_id: None,
    };
    RemotingCommand::request(request::POP_MESSAGE).with_ext(h.to_ext())
}

/// Pops once; an empty vector when the broker found nothing.
pub(crate) fn pop(
    c: &mut Raw,
    group: &str,
    topic: &str,
    invisible_ms: i64,
    poll_ms: i64,
) -> Vec<Popped> {
    try_pop(c, group, topic, invisible_ms, poll_ms)
        .unwrap_or_else(|(code, remark)| panic!("pop: {code} {remark:?}"))
}

/// Pops once; the response code and remark when it is neither a hit nor
/// a miss (a broker not taking POP answers SERVICE_NOT_AVAILABLE).
pub(crate) fn try_pop(
    c: &mut Raw,
    group: &str,
    topic: &str,
    invisible_ms: i64,
    poll_ms: i64,
) -> Result<Vec<Popped>, (i32, Option<String>)> {
    let r = c.call(pop_request(group, topic, invisible_ms, poll_ms));
    if r.code == response::POLLING_TIMEOUT || r.code == response::PULL_NOT_FOUND {
        assert!(r.ext_fields.get("restNum").is_some(), "restNum on a miss");
        return Ok(Vec::new());
    }
    if r.code != response::SUCCESS {
        return Err((r.code, r.remark));
    }
    let field = |k: &str| r.ext_fields.get(k).map(str::to_string).unwrap_or_default();
    let pop_time = field("popTime");
    let invisible = field("invisibleTime");
    let revive_qid = field("reviveQid");
    let mut start: HashMap<String, String> = HashMap::new();
    for one in field("startOffsetInfo").split(';') {
        let p: Vec<&str> = one.split(' ').collect();
        assert_eq!(p.len(), 3, "startOffsetInfo entry {one:?}");
        start.insert(format!("{}@{}", p[0], p[1]), p[2].to_string());
    }
    let mut listed = 0;
    for one in field("msgOffsetInfo").split(';') {
        let p: Vec<&str> = one.split(' ').collect();
        assert_eq!(p.len(), 3, "msgOffsetInfo entry {one:?}");
        listed += p[2].split(',').count();
    }
    let msgs = decode_all(&r.body, true).expect("pop body decodes");
    assert_eq!(listed, msgs.len(), "msgOffsetInfo lists every message");
    Ok(msgs
        .into_iter()
        .map(|msg| {
            let flag = if msg.topic.starts_with("%RETRY%") {
                "1"
            } else {
                "0"
            };
            let so = &start[&format!("{flag}@{}", msg.queue_id)];
            let extra_info = format!(
                "{so} {pop_time} {invisible} {revive_qid} {flag} broker-a {} {}",
                msg.queue_id, msg.queue_offset
            );
            Popped { msg, extra_info }
        })
        .collect())
}

pub(crate) fn ack(c: &mut Raw, group: &str, topic: &str, p: &Popped) -> RemotingCommand {
    let h = AckMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: p.msg.queue_id,
        extra_info: p.extra_info.clone(),
        offset: p.msg.queue_offset,
    };
    c.call(RemotingCommand::request(request::ACK_MESSAGE).with_ext(h.to_ext()))
}

fn send(c: &mut Raw, topic: &str, bodies: &[&str]) {
    for (i, b) in bodies.iter().enumerate() {
        let r = c.call(send_request(topic, (i % 4) as i32, b.as_bytes()));
        assert_eq!(r.code, response::SUCCESS, "send {b}: {:?}", r.remark);
    }
}

/// Pops until `n` messages came or `within` passed.
pub(crate) fn pop_until(
    c: &mut Raw,
    group: &str,
    topic: &str,
    invisible: i64,
    n: usize,
    within: Duration,
) -> Vec<Popped> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as i64;
        got.extend(pop(c, group, topic, invisible, left.clamp(1, 5000)));
    }
    got
}

fn start() -> (tempfile::TempDir, Standalone, Raw) {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Standalone::start(dir.path(), &standalone::NO_DISK_LIMITS);
    let c = Raw::connect(&s.broker_addr());
    (dir, s, c)
}

#[test]
fn pop_ack_round_trip_and_long_polling() {
    let (_d, s, mut c) = start();
    send(&mut c, "PopT", &["m0", "m1", "m2", "m3", "m4"]);
    let got = pop_until(&mut c, "G1", "PopT", 60_000, 5, Duration::from_secs(10));
    let bodies: BTreeSet<String> = got.iter().map(body).collect();
    assert_eq!(bodies.len(), 5, "every message popped once: {bodies:?}");
    for p in &got {
        assert_eq!(p.msg.reconsume_times, 0, "first delivery");
        let r = ack(&mut c, "G1", "PopT", p);
        assert_eq!(r.code, response::SUCCESS, "ack: {:?}", r.remark);
    }
    assert!(
        pop(&mut c, "G1", "PopT", 60_000, 0).is_empty(),
        "nothing left"
    );

    // Long polling: a held pop is answered as soon as a message arrives.
    let addr = s.broker_addr();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        let mut p = Raw::connect(&addr);
        send(&mut p, "PopT", &["late"]);
    });
    let t0 = Instant::now();
    let got = pop(&mut c, "G1", "PopT", 60_000, 8_000);
    let waited = t0.elapsed();
    sender.join().expect("sender");
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), vec!["late"]);
    assert!(
        waited < Duration::from_secs(5),
        "woken by the arrival, not the timeout: {waited:?}"
    );

    // A malformed handle gets a clear error; the broker serves on.
    let bad = Popped {
        msg: got[0].msg.clone(),
        extra_info: "not a handle".into(),
    };
    let r = ack(&mut c, "G1", "PopT", &bad);
    assert_eq!(r.code, response::INVALID_PARAMETER, "{:?}", r.remark);
    assert_eq!(ack(&mut c, "G1", "PopT", &got[0]).code, response::SUCCESS);
}

#[test]
fn unacked_message_reappears_with_raised_attempt() {
    let (_d, _s, mut c) = start();
    send(&mut c, "PopR", &["again"]);
    let first = pop_until(&mut c, "G2", "PopR", 1_000, 1, Duration::from_secs(10));
    assert_eq!(first.len(), 1);
    let t0 = Instant::now();
    let second = pop_until(&mut c, "G2", "PopR", 60_000, 1, Duration::from_secs(15));
    assert_eq!(second.len(), 1, "the unacked message came back");
    let m = &second[0].msg;
    assert!(
        t0.elapsed() >= Duration::from_millis(500),
        "not before its invisible time"
    );
    assert_eq!(body(&second[0]), "again");
    assert_eq!(m.reconsume_times, 1, "delivery attempt raised");
    assert_eq!(
        m.topic, "%RETRY%G2_PopR",
        "redelivered from the POP retry topic"
    );
    assert_eq!(m.property("RETRY_TOPIC").as_deref(), Some("PopR"));
    assert_eq!(
        ack(&mut c, "G2", "PopR", &second[0]).code,
        response::SUCCESS
    );
    assert!(
        pop(&mut c, "G2", "PopR", 60_000, 2_500).is_empty(),
        "an acked redelivery does not come back"
    );
}

#[test]
fn message_goes_to_dlq_after_max_attempts() {
    let (_d, s, mut c) = start();
    let out = Command::new(standalone::broker_binary())
        .args([
            "admin",
            "--namesrv",
            &s.namesrv_addr(),
            "group",
            "create",
            "-g",
            "G3",
        ])
        .args(["--retry-max-times", "1"])
        .output()
        .expect("basalt admin");
    assert!(
        out.status.success(),
        "group create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    send(&mut c, "PopD", &["doomed"]);
    // Attempt 1 (reconsume 0) and attempt 2 (reconsume 1), never acked.
    for attempt in 0..2 {
        let got = pop_until(&mut c, "G3", "PopD", 1_000, 1, Duration::from_secs(15));
        assert_eq!(got.len(), 1, "delivery {attempt}");
        assert_eq!(got[0].msg.reconsume_times, attempt);
    }
    // Past retryMaxTimes=1 the message goes to %DLQ%G3, not back to G3.
    let deadline = Instant::now() + Duration::from_secs(15);
    let dlq = loop {
        let h = PullMessageRequestHeader {
            consumer_group: "dlq-reader".into(),
            topic: "%DLQ%G3".into(),
            queue_id: 0,
            queue_offset: 0,
            max_msg_nums: 32,
            sys_flag: 0x4,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            max_msg_bytes: None,
        };
        let r = c.call(RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()));
        if r.code == response::SUCCESS {
            break decode_all(&r.body, true).expect("dlq records");
        }
        assert!(
            Instant::now() < deadline,
            "nothing reached the DLQ: {} {:?}",
            r.code,
            r.remark
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(dlq.len(), 1);
    assert_eq!(&dlq[0].body[..], b"doomed");
    assert_eq!(dlq[0].reconsume_times, 2);
    assert!(
        pop(&mut c, "G3", "PopD", 60_000, 2_000).is_empty(),
        "not redelivered after the DLQ"
    );
}

#[test]
fn change_invisible_time_extends_it() {
    let (_d, _s, mut c) = start();
    send(&mut c, "PopC", &["held"]);
    let got = pop_until(&mut c, "G4", "PopC", 1_500, 1, Duration::from_secs(10));
    assert_eq!(got.len(), 1);
    let p = &got[0];
    let h = ChangeInvisibleTimeRequestHeader {
        consumer_group: "G4".into(),
        topic: "PopC".into(),
        queue_id: p.msg.queue_id,
        extra_info: p.extra_info.clone(),
        offset: p.msg.queue_offset,
        invisible_time: 6_000,
    };
    let r = c
        .call(RemotingCommand::request(request::CHANGE_MESSAGE_INVISIBLETIME).with_ext(h.to_ext()));
    assert_eq!(r.code, response::SUCCESS, "change: {:?}", r.remark);
    let new_pop_time = r.ext_fields.get("popTime").expect("popTime").to_string();
    assert_eq!(r.ext_fields.get("invisibleTime"), Some("6000"));
    // Well past the first invisible time (1.5 s), the message stays hidden.
    assert!(
        pop(&mut c, "G4", "PopC", 60_000, 3_000).is_empty(),
        "still invisible"
    );
    // The old handle is spent; the new one acks.
    let r = c
        .call(RemotingCommand::request(request::CHANGE_MESSAGE_INVISIBLETIME).with_ext(h.to_ext()));
    assert_eq!(r.code, response::NO_MESSAGE, "old handle: {:?}", r.remark);
    let parts: Vec<&str> = p.extra_info.split(' ').collect();
    let renewed = Popped {
        msg: p.msg.clone(),
        extra_info: format!(
            "{} {new_pop_time} 6000 {} {} {} {} {}",
            p.msg.queue_offset, parts[3], parts[4], parts[5], parts[6], parts[7]
        ),
    };
    assert_eq!(ack(&mut c, "G4", "PopC", &renewed).code, response::SUCCESS);
    assert!(
        pop(&mut c, "G4", "PopC", 60_000, 5_000).is_empty(),
        "acked: never back"
    );
}

#[test]
fn acks_survive_a_restart() {
    let (_d, mut s, mut c) = start();
    let bodies = ["r0", "r1", "r2", "r3", "r4", "r5"];
    send(&mut c, "PopS", &bodies);
    let got = pop_until(&mut c, "G5", "PopS", 4_000, 6, Duration::from_secs(10));
    assert_eq!(got.len(), 6);
    let mut acked = BTreeSet::new();
    for p in got.iter().take(3) {
        assert_eq!(ack(&mut c, "G5", "PopS", p).code, response::SUCCESS);
        acked.insert(body(p));
    }
    drop(c);
    s.stop();
    s.restart();
    let mut c = Raw::connect(&s.broker_addr());
    let back = pop_until(&mut c, "G5", "PopS", 60_000, 3, Duration::from_secs(20));
    let back_bodies: BTreeSet<String> = back.iter().map(body).collect();
    let expected: BTreeSet<String> = bodies
        .iter()
        .map(|b| b.to_string())
        .filter(|b| !acked.contains(b))
        .collect();
    assert_eq!(back_bodies, expected, "exactly the unacked came back");
    assert!(back.iter().all(|p| p.msg.reconsume_times == 1));
    let more = pop(&mut c, "G5", "PopS", 60_000, 3_000);
    assert!(
        more.is_empty(),
        "acked messages not delivered again: {:?}",
        more.iter().map(body).collect::<Vec<_>>()
    );
}

#[test]
fn pop_and_pull_groups_share_a_topic() {
    let (_d, _s, mut c) = start();
    let bodies: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    send(&mut c, "PopP", &refs);
    let popped = pop_until(
        &mut c,
        "PopGroup",
        "PopP",
        60_000,
        8,
        Duration::from_secs(10),
    );
    assert_eq!(popped.len(), 8);
    let mut pulled = Vec::new();
    for q in 0..4 {
        let h = PullMessageRequestHeader {
            consumer_group: "PullGroup".into(),
            topic: "PopP".into(),
            queue_id: q,
            queue_offset: 0,
            max_msg_nums: 32,
            sys_flag: 0x4,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            max_msg_bytes: None,
        };
        let r = c.call(RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()));
        assert_eq!(r.code, response::SUCCESS, "pull q{q}: {:?}", r.remark);
        pulled.extend(decode_all(&r.body, true).expect("pull body"));
    }
    let pulled: BTreeSet<String> = pulled
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    let popped: BTreeSet<String> = popped.iter().map(body).collect();
    assert_eq!(pulled, popped, "both groups see every message");
    assert_eq!(pulled.len(), 8);
}

fn scrape(port: u16) -> crate::prom::Exposition {
    let (status, text) = crate::prom::http_get(port, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200, "{text}");
    crate::prom::parse(&text).unwrap_or_else(|e| panic!("/metrics does not parse: {e}\n{text}"))
}

#[test]
fn in_flight_messages_show_in_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let prom = format!("metricsPromExporterPort={port}");
    let s = Standalone::start(dir.path(), &[prom.as_str(), "dashboardEnable=false"]);
    let mut c = Raw::connect(&s.broker_addr());
    send(&mut c, "PopM", &["a", "b", "c"]);
    let got = pop_until(&mut c, "G6", "PopM", 60_000, 3, Duration::from_secs(10));
    assert_eq!(got.len(), 3);
    let labels = [("consumer_group", "G6"), ("topic", "PopM")];
    let e = scrape(port);
    assert_eq!(e.get("basalt_pop_inflight_messages", &labels), Some(3.0));
    assert_eq!(e.get("basalt_pop_inflight_total", &[]), Some(3.0));
    assert_eq!(e.get("basalt_pop_revive_lag_ms", &[]), Some(0.0));
    for p in &got {
        assert_eq!(ack(&mut c, "G6", "PopM", p).code, response::SUCCESS);
    }
    let e = scrape(port);
    assert_eq!(
        e.get("basalt_pop_inflight_messages", &labels),
        None,
        "acked: gone"
    );
    assert_eq!(e.get("basalt_pop_inflight_total", &[]), Some(0.0));
}

/// An order pop of queue 0: the messages with the handles a Java client
/// builds, and the earlier deliveries from `orderCountInfo` by offset.
fn pop_ordered(c: &mut Raw, max: i32, invisible_ms: i64) -> (Vec<Popped>, HashMap<i64, i32>) {
    let h = PopMessageRequestHeader {
        consumer_group: "G7".into(),
        topic: "PopF".into(),
        queue_id: 0,
        max_msg_nums: max,
        invisible_time: invisible_ms,
        poll_time: 0,
        born_time: basalt_common::time::now_millis(),
        init_mode: 0,
        exp_type: None,
        exp: None,
        order: Some(true),
        attempt_id: None,
    };
    let r = c.call(RemotingCommand::request(request::POP_MESSAGE).with_ext(h.to_ext()));
    if r.code != response::SUCCESS {
        assert_eq!(r.code, response::PULL_NOT_FOUND, "{:?}", r.remark);
        return (Vec::new(), HashMap::new());
    }
    let f = |k: &str| r.ext_fields.get(k).map(str::to_string).unwrap_or_default();
    assert_eq!(
        f("reviveQid"),
        "999",
        "order pops carry POP_ORDER_REVIVE_QUEUE"
    );
    let mut counts = HashMap::new();
    for one in f("orderCountInfo").split(';') {
        let p: Vec<&str> = one.split(' ').collect();
        let offset = p[1].rsplit('%').next().and_then(|o| o.parse().ok());
        counts.insert(offset.expect("qo offset"), p[2].parse().expect("count"));
    }
    let start = f("startOffsetInfo");
    let start = start.split(' ').nth(2).expect("start offset").to_string();
    let popped = decode_all(&r.body, true)
        .expect("records")
        .into_iter()
        .map(|msg| Popped {
            extra_info: format!(
                "{start} {} {} 999 0 broker-a {} {}",
                f("popTime"),
                f("invisibleTime"),
                msg.queue_id,
                msg.queue_offset
            ),
            msg,
        })
        .collect();
    (popped, counts)
}

#[test]
fn fifo_pop_locks_the_queue_until_acked() {
    let (_d, _s, mut c) = start();
    for b in ["f0", "f1", "f2"] {
        let r = c.call(send_request("PopF", 0, b.as_bytes()));
        assert_eq!(r.code, response::SUCCESS);
    }
    // Let dispatch write the three ConsumeQueue units.
    std::thread::sleep(Duration::from_millis(500));
    let (first, _) = pop_ordered(&mut c, 1, 60_000);
    assert_eq!(first.iter().map(body).collect::<Vec<_>>(), vec!["f0"]);
    assert!(
        pop_ordered(&mut c, 1, 60_000).0.is_empty(),
        "locked until f0 is acked"
    );
    assert_eq!(ack(&mut c, "G7", "PopF", &first[0]).code, response::SUCCESS);
    let (second, _) = pop_ordered(&mut c, 1, 1_000);
    assert_eq!(second.iter().map(body).collect::<Vec<_>>(), vec!["f1"]);
    // f1 is not acked: after its invisible time it comes again, before f2,
    // with one earlier delivery.
    std::thread::sleep(Duration::from_millis(1_300));
    let (again, counts) = pop_ordered(&mut c, 2, 60_000);
    assert_eq!(again.iter().map(body).collect::<Vec<_>>(), vec!["f1", "f2"]);
    assert_eq!(counts.get(&again[0].msg.queue_offset), Some(&1));
    assert_eq!(counts.get(&again[1].msg.queue_offset), Some(&0));
    for p in &again {
        assert_eq!(ack(&mut c, "G7", "PopF", p).code, response::SUCCESS);
    }
    assert!(pop_ordered(&mut c, 4, 60_000).0.is_empty(), "all acked");
}

/// BATCH_ACK_MESSAGE as RocketMQ's proxy sends it (fastjson BitSet in
/// base64): the acked offsets stay acked, the others come back after their
/// invisible time; a repeated batch ack is answered SUCCESS, a malformed
/// body INVALID_PARAMETER.
#[test]
fn batch_ack_acks_the_offsets_of_its_bitset() {
    let (_d, _s, mut c) = start();
    for i in 0..6 {
        let r = c.call(send_request("PopB", 0, format!("b{i}").as_bytes()));
        assert_eq!(r.code, response::SUCCESS, "send b{i}: {:?}", r.remark);
    }
    let got = pop_until(&mut c, "GB", "PopB", 2_000, 6, Duration::from_secs(10));
    assert_eq!(got.len(), 6, "the six popped");
    // One BatchAck per checkpoint (the six may come in more than one pop),
    // acking the even offsets: bit (offset - startOffset) of its BitSet,
    // as fastjson writes a BitSet (base64 of its little-endian bytes).
    let mut cks: std::collections::BTreeMap<(String, String, String), u64> = Default::default();
    for p in &got {
        let ck: Vec<&str> = p.extra_info.split(' ').collect();
        let key = (ck[0].to_string(), ck[1].to_string(), ck[3].to_string());
        let bits = cks.entry(key).or_default();
        let offset = p.msg.queue_offset;
        if offset % 2 == 0 {
            *bits |= 1 << (offset - ck[0].parse::<i64>().expect("startOffset"));
        }
    }
    use base64::Engine;
    let acks: Vec<String> = cks
        .iter()
        .map(|((so, pt, rq), bits)| {
            let bytes = bits.to_le_bytes();
            let len = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
            let b = base64::engine::general_purpose::STANDARD.encode(&bytes[..len]);
            format!(
                r#"{{"c":"GB","t":"PopB","r":"0","so":{so},"q":0,"rq":{rq},"pt":{pt},"it":2000,"b":"{b}"}}"#
            )
        })
        .collect();
    let json = format!(r#"{{"brokerName":"broker-a","acks":[{}]}}"#, acks.join(","));
    let batch =
        || RemotingCommand::request(request::BATCH_ACK_MESSAGE).with_body(json.as_bytes().to_vec());
    let r = c.call(batch());
    assert_eq!(r.code, response::SUCCESS, "batch ack: {:?}", r.remark);
    assert_eq!(
        c.call(batch()).code,
        response::SUCCESS,
        "a repeated batch ack"
    );
    let bad =
        RemotingCommand::request(request::BATCH_ACK_MESSAGE).with_body(b"{\"acks\":7".to_vec());
    let r = c.call(bad);
    assert_eq!(r.code, response::INVALID_PARAMETER, "{:?}", r.remark);

    let back = pop_until(&mut c, "GB", "PopB", 60_000, 3, Duration::from_secs(15));
    let bodies: BTreeSet<String> = back.iter().map(body).collect();
    assert_eq!(
        bodies,
        ["b1", "b3", "b5"].iter().map(|s| s.to_string()).collect(),
        "exactly the offsets not in the BitSet come back"
    );
    assert!(back.iter().all(|p| p.msg.reconsume_times == 1));
    assert!(
        pop(&mut c, "GB", "PopB", 60_000, 3_000).is_empty(),
        "nothing else comes back"
    );
}
