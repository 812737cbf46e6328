//! A consumer group's subscriptions on the broker follow what its live
//! members hold (docs/protocol.md#subscriptions): a consumer that drops a
//! topic or changes its tag expression leaves no stale entry, and a topic
//! only a departed member held goes with it. Checked with Basalt's own push
//! consumer and `basalt admin consumer` / `progress` / `consumer-status`.

use crate::standalone::Standalone;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use basalt_client::{ClientConfig, ConsumeStatus, PushConsumeFrom, PushConsumer, PushOptions};
use serde_json::Value;

const GROUP: &str = "resub";
/// How long a heartbeat may take to reach the broker's table.
const SETTLE: Duration = Duration::from_secs(30);

fn admin_json(ns: &str, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["admin", "--namesrv", ns, "--json"])
        .args(args)
        .output()
        .expect("run basalt admin");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "basalt admin {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

/// `basalt VERB --namesrv NS ARGS...`.
fn run(ns: &str, verb: &[&str], args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(verb)
        .args(["--namesrv", ns])
        .args(args)
        .output()
        .expect("run basalt");
    assert!(
        out.status.success(),
        "basalt {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The broker's subscription table of the group: topic → expression.
fn broker_subscriptions(ns: &str) -> BTreeMap<String, String> {
    let v = admin_json(ns, &["consumer", "-g", GROUP]);
    v["subscriptions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let topic = s["topic"].as_str().unwrap_or_default().to_string();
            (
                topic,
                s["expression"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Waits until the broker's table is `want`; panics with the last table.
/// The group's retry topic (every clustering member subscribes to it) is
/// part of every table.
fn wait_for_table(ns: &str, want: &[(&str, &str)], what: &str) {
    let mut want: BTreeMap<String, String> = want
        .iter()
        .map(|(t, e)| (t.to_string(), e.to_string()))
        .collect();
    want.insert(format!("%RETRY%{GROUP}"), "*".to_string());
    let deadline = Instant::now() + SETTLE;
    loop {
        let got = broker_subscriptions(ns);
        if got == want {
            println!("{what}: the broker holds {got:?}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the broker holds {got:?}, want {want:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn consumer(ns: &str, subs: &[(&str, &str)], got: &Arc<Mutex<Vec<String>>>) -> PushConsumer {
    let opts = PushOptions {
        consume_from_where: PushConsumeFrom::FirstOffset,
        ..Default::default()
    };
    let c = PushConsumer::with_options(GROUP.to_string(), ClientConfig::new(ns.to_string()), opts);
    for (topic, expr) in subs {
        c.subscribe(topic, expr).expect("subscribe");
    }
    let got = Arc::clone(got);
    c.register_listener(move |msgs, _| {
        let mut g = got.lock().expect("received list");
        g.extend(msgs.iter().map(|m| m.keys.join(" ")));
        ConsumeStatus::Success
    });
    c
}

#[test]
fn resubscribed_consumer_leaves_no_stale_subscription() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let ns = broker.namesrv_addr();
    for topic in ["ResubA", "ResubB", "ResubC"] {
        run(
            &ns,
            &["admin"],
            &["topic", "create", "-t", topic, "--queues", "1"],
        );
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let got = Arc::new(Mutex::new(Vec::new()));
    let first = consumer(&ns, &[("ResubA", "TagA"), ("ResubB", "*")], &got);
    rt.block_on(first.start()).expect("start");
    wait_for_table(&ns, &[("ResubA", "TagA"), ("ResubB", "*")], "subscribed");

    // The consumer drops ResubB and changes its expression on ResubA.
    rt.block_on(async {
        first.unsubscribe("ResubB");
        first.subscribe("ResubA", "TagB")
    })
    .expect("resubscribe");
    wait_for_table(&ns, &[("ResubA", "TagB")], "resubscribed");

    // Progress lists ResubB only for an offset the group committed, never
    // for a subscription no one holds.
    let progress = admin_json(&ns, &["progress", "-g", GROUP]);
    println!("progress: {progress}");
    for q in progress["queues"].as_array().into_iter().flatten() {
        if q["topic"] == "ResubB" {
            assert!(
                q["consumerOffset"].as_i64().unwrap_or(-1) >= 0,
                "ResubB listed without a committed offset: {q}"
            );
        }
    }
    let status = admin_json(&ns, &["consumer-status", "-g", GROUP]);
    println!("consumer-status: {status}");
    let held: Vec<&Value> = status["queues"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|q| q["topic"] == "ResubB")
        .collect();
    assert!(held.is_empty(), "the consumer still holds ResubB: {held:?}");

    // The new expression filters: only the TagB message arrives.
    run(
        &ns,
        &["produce"],
        &[
            "-t", "ResubA", "-n", "1", "--tags", "TagA", "--keys", "a-{i}",
        ],
    );
    run(
        &ns,
        &["produce"],
        &[
            "-t", "ResubA", "-n", "1", "--tags", "TagB", "--keys", "b-{i}",
        ],
    );
    let deadline = Instant::now() + SETTLE;
    while !got.lock().expect("received").contains(&"b-0".to_string()) {
        assert!(Instant::now() < deadline, "b-0 never arrived: {got:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    println!("received: {:?}", got.lock().expect("received"));
    assert_eq!(*got.lock().expect("received"), ["b-0"], "only TagB");

    // A second member adds ResubC; when it leaves, ResubC goes with it
    // while the first member's ResubA stays.
    let other = Arc::new(Mutex::new(Vec::new()));
    let second = consumer(&ns, &[("ResubA", "TagB"), ("ResubC", "*")], &other);
    rt.block_on(second.start()).expect("start second");
    wait_for_table(
        &ns,
        &[("ResubA", "TagB"), ("ResubC", "*")],
        "second member joined",
    );
    rt.block_on(second.shutdown());
    wait_for_table(&ns, &[("ResubA", "TagB")], "second member left");
    rt.block_on(first.shutdown());
}
