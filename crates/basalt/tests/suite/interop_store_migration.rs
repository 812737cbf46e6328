//! Moving a store between Apache RocketMQ 5.5.0's broker and Basalt, both
//! ways, with real processes (docs/storage-format.md#migrating-to-and-from-rocketmq).
//!
//! * `java_store_opens_in_basalt`: the Java broker (ASYNC_FLUSH) writes
//!   topics with several queues and non-default settings, messages with
//!   keys, tags and properties, a group's committed offsets and delay-level
//!   messages still pending, and is killed with -9; `basalt store check`
//!   passes on its directory and `basalt standalone` opens it unchanged:
//!   every message is served at its queue offset exactly as Java served
//!   it, the group resumes at its committed offsets, the settings are
//!   kept, and the pending delays are delivered after their time. Timer
//!   messages (`setDeliverTimeMs`, RocketMQ 5's timer wheel) too: the two
//!   Java delivered before the kill are not delivered again, and the three
//!   still waiting at the kill are delivered by Basalt, not before their
//!   time.
//! * `basalt_store_exports_to_java`: the same content written through
//!   Basalt, which is stopped; `basalt store export-rocketmq` makes a copy
//!   the Java broker opens and serves the same way (without Basalt's CRC
//!   trailer property), so an operator can roll back.
//!
//! The content is written and read by the Java client (the loader in
//! `interop/java-broker`), the same program against either broker.

mod java;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use java::{JavaBroker, Msg, loader, messages, rows};

use crate::interop::family_dir;
use crate::standalone::{Standalone, store_check};

const FAMILY: &str = "java-broker";
/// The topics the loader writes.
const TOPICS: [&str; 4] = ["MigA", "MigB", "MigRO", "MigDelay"];
/// Messages the loader sends per topic (delayed ones not counted).
const SENT_PER_TOPIC: [(&str, usize); 4] =
    [("MigA", 24), ("MigB", 24), ("MigRO", 6), ("MigDelay", 2)];
/// Delay level 4 is 30 s.
const DELAY_MS: i64 = 30_000;
/// The topic of the timer messages (not one of [`TOPICS`]: created by the
/// first send, and only the Java-to-Basalt test writes it).
const TIMER_TOPIC: &str = "TimerMig";
/// When the loader's timers are due after their send: two early (Java
/// delivers them before the kill), three late (still waiting at the kill).
const TIMER_EARLY_MS: i64 = 3_000;
const TIMER_LATE_MS: i64 = 45_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// What the loader wrote, and what the first broker served of it.
struct Written {
    sent: Vec<Vec<String>>,
    delayed: Vec<Vec<String>>,
    served: BTreeMap<(String, i32, i64), Msg>,
    queues: Vec<Vec<String>>,
    offsets: Vec<Vec<String>>,
    meta: Vec<Vec<String>>,
}

/// Writes the content through the broker at `ns`/`broker` and reads it
/// back. The delayed messages are sent first so they are due as early as
/// possible.
fn write_content(family: &Path, home: &Path, ns: &str, broker: &str) -> Written {
    loader(family, home, &["setup", ns, broker], 60);
    let delayed = loader(family, home, &["delay", ns], 60);
    let sent = loader(family, home, &["produce", ns], 90);
    loader(family, home, &["lock-ro", ns, broker], 60);
    loader(family, home, &["commit", ns, "MigGroup", "MigA", "2"], 60);
    loader(family, home, &["commit", ns, "MigGroup", "MigB", "1"], 60);
    let sent_rows: Vec<Vec<String>> = rows(&sent, "SENT").into_iter().cloned().collect();
    for (topic, n) in SENT_PER_TOPIC {
        let got = sent_rows.iter().filter(|r| r[1] == topic).count();
        assert_eq!(got, n, "sent to {topic}");
    }
    let delayed: Vec<Vec<String>> = rows(&delayed, "DELAYED").into_iter().cloned().collect();
    assert_eq!(delayed.len(), 3, "delayed sends");
    let read = read_all(family, home, ns);
    let served = messages(&read);
    check_sent(&sent_rows, &served);
    Written {
        sent: sent_rows,
        delayed,
        served,
        queues: rows(&read, "QUEUE").into_iter().cloned().collect(),
        offsets: group_offsets(family, home, ns),
        meta: mig_meta(family, home, ns, broker),
    }
}

fn read_all(family: &Path, home: &Path, ns: &str) -> Vec<Vec<String>> {
    let mut args = vec!["read", ns];
    args.extend(TOPICS);
    loader(family, home, &args, 90)
}

fn group_offsets(family: &Path, home: &Path, ns: &str) -> Vec<Vec<String>> {
    let out = loader(
        family,
        home,
        &["offsets", ns, "MigGroup", "MigA", "MigB"],
        60,
    );
    let offsets: Vec<Vec<String>> = rows(&out, "OFFSET").into_iter().cloned().collect();
    for o in &offsets {
        let committed: i64 = o[3].parse().expect("offset");
        let expected = match (o[1].as_str(), o[2].as_str()) {
            ("MigA", _) => 2,
            // MigB: 24 messages over its 6 write queues, 1 committed in
            // each; its 2 read-only queues hold nothing.
            ("MigB", q) if q.parse::<i32>().expect("queue") < 6 => 1,
            _ => continue,
        };
        assert_eq!(committed, expected, "committed offset {o:?}");
    }
    offsets
}

/// The TOPIC and GROUP lines of the migration's own topics and group.
fn mig_meta(family: &Path, home: &Path, ns: &str, broker: &str) -> Vec<Vec<String>> {
    let out = loader(family, home, &["meta", ns, broker], 60);
    let meta: Vec<Vec<String>> = out
        .into_iter()
        .filter(|l| {
            (l[0] == "TOPIC" && l[1].starts_with("Mig")) || (l[0] == "GROUP" && l[1] == "MigGroup")
        })
        .collect();
    println!("settings: {meta:?}");
    assert_eq!(meta.len(), 5, "4 topics and the group: {meta:?}");
    meta
}

/// Every sent message is served at the queue offset its send returned,
/// with its id, tags, keys, properties and body.
fn check_sent(sent: &[Vec<String>], served: &BTreeMap<(String, i32, i64), Msg>) {
    for s in sent {
        let at = (
            s[1].clone(),
            s[2].parse().expect("queue"),
            s[3].parse().expect("offset"),
        );
        let m = served
            .get(&at)
            .unwrap_or_else(|| panic!("sent {s:?} is not served at {at:?}"));
        assert_eq!(m.uniq_key, s[4], "id at {at:?}");
        assert_eq!(m.tags, s[5], "tags at {at:?}");
        assert_eq!(m.keys, s[6], "keys at {at:?}");
        for (k, v) in java::parse_props(&s[7]) {
            assert_eq!(m.props.get(&k), Some(&v), "property {k} at {at:?}");
        }
        assert_eq!(m.body, s[8], "body at {at:?}");
    }
    println!("all {} sent messages served at their offsets", sent.len());
}

/// The messages the first broker served are served by the second exactly
/// the same (every field and property, but `ignore`d properties); the only
/// new ones may be delayed deliveries to MigDelay.
fn check_same(before: &Written, after: &BTreeMap<(String, i32, i64), Msg>, ignore: &[&str]) {
    let strip = |m: &Msg| {
        let mut m = m.clone();
        m.props.retain(|k, _| !ignore.contains(&k.as_str()));
        m
    };
    for (at, m) in &before.served {
        let a = after
            .get(at)
            .unwrap_or_else(|| panic!("{at:?} is no longer served"));
        assert_eq!(strip(a), strip(m), "message at {at:?}");
    }
    for at in after.keys() {
        assert!(
            before.served.contains_key(at) || at.0 == "MigDelay",
            "{at:?} is served only after the migration"
        );
    }
    println!(
        "all {} messages served the same after the migration",
        before.served.len()
    );
}

/// Each queue's min and max offsets are as before (MigDelay may have grown
/// by delayed deliveries).
fn check_queues(before: &Written, after: &[Vec<String>]) {
    let after: Vec<&Vec<String>> = rows(after, "QUEUE");
    assert_eq!(after.len(), before.queues.len(), "queues: {after:?}");
    for (b, a) in before.queues.iter().zip(after) {
        if b[1] == "MigDelay" {
            assert_eq!(&a[..4], &b[..4], "queue");
        } else {
            assert_eq!(a, b, "queue");
        }
    }
}

/// The group resumes at its committed offsets: it gets exactly the
/// messages from there to the end, once each.
fn check_resume(family: &Path, home: &Path, ns: &str, before: &Written) {
    let expected: Vec<(String, i32, i64)> = before
        .served
        .keys()
        .filter(|(t, _, off)| t == "MigA" && *off >= 2)
        .cloned()
        .collect();
    let n = expected.len().to_string();
    let out = loader(
        family,
        home,
        &["resume", ns, "MigGroup", "MigA", &n, "60"],
        120,
    );
    let mut got: Vec<(String, i32, i64)> = rows(&out, "GOT")
        .into_iter()
        .map(|l| Msg::parse(l).at())
        .collect();
    got.sort();
    println!("MigGroup resumed with {} messages: {got:?}", got.len());
    assert_eq!(got, expected, "what MigGroup consumed after the migration");
}

/// The delayed messages are delivered to MigDelay, not before their time,
/// with their keys, properties and bodies.
fn check_delayed(family: &Path, home: &Path, ns: &str, before: &Written) {
    let out = loader(family, home, &["wait", ns, "MigDelay", "5", "90"], 150);
    let served = messages(&out);
    for d in &before.delayed {
        let sent_ms: i64 = d[8].parse().expect("send time");
        let m = served
            .values()
            .find(|m| m.uniq_key == d[3])
            .unwrap_or_else(|| {
                panic!("delayed {d:?} was not delivered; MigDelay holds {served:?}")
            });
        println!(
            "delayed {} delivered at {} (sent at {sent_ms})",
            d[3], m.store_ts
        );
        assert_eq!(m.queue.to_string(), d[2], "queue of {d:?}");
        assert_eq!(
            (&m.tags, &m.keys, &m.body),
            (&d[4], &d[5], &d[7]),
            "delayed {d:?}"
        );
        for (k, v) in java::parse_props(&d[6]) {
            assert_eq!(m.props.get(&k), Some(&v), "property {k} of {d:?}");
        }
        // Due 30 s after the delay queue stored it, itself after the send
        // started (1 s of slack for the clocks of two processes).
        assert!(
            m.store_ts >= sent_ms + DELAY_MS - 1_000,
            "delivered early: {m:?}"
        );
    }
    assert_eq!(served.len(), 5, "MigDelay: 2 plain + 3 delayed messages");
}

/// Sends the timers through the Java broker and waits until it has
/// delivered the two early ones; returns the TIMER rows (topic, id, due ms,
/// body).
fn java_timers(family: &Path, home: &Path, ns: &str) -> Vec<Vec<String>> {
    let out = loader(
        family,
        home,
        &[
            "timer",
            ns,
            TIMER_TOPIC,
            &TIMER_EARLY_MS.to_string(),
            &TIMER_LATE_MS.to_string(),
        ],
        60,
    );
    let timers: Vec<Vec<String>> = rows(&out, "TIMER").into_iter().cloned().collect();
    assert_eq!(timers.len(), 5, "timer sends: {timers:?}");
    let out = loader(family, home, &["wait", ns, TIMER_TOPIC, "2", "60"], 90);
    let served = messages(&out);
    assert_eq!(
        served.len(),
        2,
        "Java delivered the early timers: {served:?}"
    );
    for m in served.values() {
        assert!(
            timers[..2].iter().any(|t| t[2] == m.uniq_key),
            "early timer {m:?}"
        );
    }
    timers
}

/// Every timer is delivered once to its topic (the early ones by Java
/// before the kill, not again; the late ones by Basalt), none before its
/// time (1 s of slack for RocketMQ's slot, which starts at the second the
/// due time falls in).
fn check_timers(family: &Path, home: &Path, ns: &str, timers: &[Vec<String>]) {
    let out = loader(family, home, &["wait", ns, TIMER_TOPIC, "5", "120"], 180);
    // Anything delivered twice would come at Basalt's start, long before
    // the late timers are due; look again a little later all the same.
    std::thread::sleep(Duration::from_secs(3));
    let again = loader(family, home, &["wait", ns, TIMER_TOPIC, "5", "10"], 60);
    let served = messages(&again);
    assert_eq!(
        messages(&out).len(),
        served.len(),
        "{TIMER_TOPIC} grew: {served:?}"
    );
    for t in timers {
        let due: i64 = t[3].parse().expect("due time");
        let got: Vec<&Msg> = served.values().filter(|m| m.uniq_key == t[2]).collect();
        assert_eq!(got.len(), 1, "timer {t:?} delivered once: {served:?}");
        let m = got[0];
        println!("timer {} due {due} delivered at {}", t[2], m.store_ts);
        assert_eq!(m.body, t[4], "body of {t:?}");
        assert!(m.store_ts >= due - 1_000, "delivered early: {m:?}");
    }
    assert_eq!(served.len(), 5, "{TIMER_TOPIC}: {served:?}");
}

fn check_store(dir: &Path, what: &str) {
    let (ok, text) = store_check(dir);
    println!("basalt store check ({what}):\n{text}");
    assert!(ok, "basalt store check failed on {what}:\n{text}");
}

/// Waits until the Java broker has written the group's offsets to
/// consumerOffset.json (every 5 s), bounded.
fn wait_offsets_persisted(store: &Path) {
    let path = store.join("config").join("consumerOffset.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let table = text.split("pullOffsetTable").next().unwrap_or("");
        if table.contains("MigA@MigGroup") && table.contains("MigB@MigGroup") {
            println!("consumerOffset.json:\n{text}");
            return;
        }
        assert!(Instant::now() < deadline, "offsets never persisted: {text}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn java_store_opens_in_basalt() {
    let Some(family) = family_dir(FAMILY) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (work, home, store) = (
        tmp.path(),
        tmp.path().join("home"),
        tmp.path().join("store"),
    );
    let mut java = JavaBroker::start(&family, work, &store, "ASYNC_FLUSH");
    let (ns, addr) = (java.namesrv_addr.clone(), java.broker_addr.clone());
    let before = write_content(&family, &home, &ns, &addr);
    let timers = java_timers(&family, &home, &ns);
    wait_offsets_persisted(&store);
    java.kill9();
    let late_due: i64 = timers[2][3].parse().expect("due time");
    assert!(
        now_ms() < late_due,
        "the late timers were due before the kill; the test proves nothing"
    );
    println!("Java broker killed -9; store files: {:?}", list(&store));
    check_store(&store, "the Java broker's store");

    let mut basalt = Standalone::start(&store, &[]);
    let (ns, addr) = (basalt.namesrv_addr(), basalt.broker_addr());
    let read = read_all(&family, &home, &ns);
    check_sent(&before.sent, &messages(&read));
    check_same(&before, &messages(&read), &[]);
    check_queues(&before, &read);
    assert_eq!(
        group_offsets(&family, &home, &ns),
        before.offsets,
        "committed offsets"
    );
    assert_eq!(
        mig_meta(&family, &home, &ns, &addr),
        before.meta,
        "topic and group settings"
    );
    check_resume(&family, &home, &ns, &before);
    check_delayed(&family, &home, &ns, &before);
    check_timers(&family, &home, &ns, &timers);
    basalt.stop();
    check_store(&store, "the store after Basalt ran on it");
}

#[test]
fn basalt_store_exports_to_java() {
    let Some(family) = family_dir(FAMILY) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (work, home) = (tmp.path(), tmp.path().join("home"));
    let (src, dest) = (tmp.path().join("basalt"), tmp.path().join("exported"));
    let mut basalt = Standalone::start(&src, &[]);
    let (ns, addr) = (basalt.namesrv_addr(), basalt.broker_addr());
    let before = write_content(&family, &home, &ns, &addr);
    basalt.stop();
    check_store(&src, "Basalt's store");

    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["store", "export-rocketmq"])
        .arg(&src)
        .arg(&dest)
        .output()
        .expect("run basalt store export-rocketmq");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("basalt store export-rocketmq:\n{text}");
    assert!(out.status.success(), "export failed:\n{text}");
    check_store(&dest, "the exported store");

    let mut java = JavaBroker::start(&family, work, &dest, "ASYNC_FLUSH");
    let (ns, addr) = (java.namesrv_addr.clone(), java.broker_addr.clone());
    let read = read_all(&family, &home, &ns);
    check_sent(&before.sent, &messages(&read));
    for m in messages(&read).values() {
        assert!(
            !m.props.contains_key("__CRC32#"),
            "Java serves a CRC trailer: {m:?}"
        );
    }
    check_same(&before, &messages(&read), &["__CRC32#"]);
    check_queues(&before, &read);
    assert_eq!(
        group_offsets(&family, &home, &ns),
        before.offsets,
        "committed offsets"
    );
    assert_eq!(
        mig_meta(&family, &home, &ns, &addr),
        before.meta,
        "topic and group settings"
    );
    check_resume(&family, &home, &ns, &before);
    check_delayed(&family, &home, &ns, &before);
    java.kill9();
}

/// The store's top-level entries, for the log.
fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
