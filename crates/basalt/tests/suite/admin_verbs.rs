//! The settings and group verbs of `basalt admin` against a live
//! `basalt standalone`, in table and `--json` form:
//!
//! 1. `broker-config get|set` (live keys change, fixed ones are refused),
//!    `group create|list|delete`, `kv put|get|list|delete` (kept across a
//!    restart);
//! 2. `producer` (204), `consumer-status` (307), `progress` (consumeTps),
//!    `clone-offset` (314) and `consume-queue` (321) with a producer and a
//!    push consumer running.

use crate::standalone;

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, Producer, PushConsumeFrom, PushConsumer,
    PushOptions, TopicConfig,
};
use serde_json::Value;

use standalone::{NO_DISK_LIMITS, Standalone};

const DEADLINE: Duration = Duration::from_secs(60);

fn run_admin(namesrv: &str, args: &[&str]) -> Output {
    Command::new(standalone::broker_binary())
        .args(["admin", "--namesrv", namesrv])
        .args(args)
        .output()
        .expect("run basalt admin")
}

/// `basalt admin ARGS`; panics unless it succeeds. Its stdout.
fn admin_ok(namesrv: &str, args: &[&str]) -> String {
    let out = run_admin(namesrv, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "basalt admin {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `basalt admin --json ARGS`, parsed.
fn admin_json(namesrv: &str, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let text = admin_ok(namesrv, &all);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

/// `basalt admin ARGS`; panics unless it fails. Its stderr.
fn admin_err(namesrv: &str, args: &[&str]) -> String {
    let out = run_admin(namesrv, args);
    assert!(!out.status.success(), "basalt admin {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The value of `key` in `broker-config get --json`.
fn setting(ns: &str, broker: &str, key: &str) -> String {
    let v = admin_json(ns, &["broker-config", "get", "-b", broker]);
    v["settings"]
        .as_array()
        .expect("settings")
        .iter()
        .find(|s| s["key"] == key)
        .and_then(|s| s["value"].as_str())
        .unwrap_or_else(|| panic!("no {key} in {v}"))
        .to_string()
}

fn rows_with(v: &Value, table: &str, column: &str, value: &str) -> usize {
    v[table]
        .as_array()
        .map(|rows| rows.iter().filter(|r| r[column] == value).count())
        .unwrap_or(0)
}

#[test]
fn broker_config_group_and_kv_verbs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut b = Standalone::start(&dir.path().join("data"), &NO_DISK_LIMITS);
    let ns = b.ports.namesrv_addr();
    let broker = b.ports.broker_addr();

    let table = admin_ok(&ns, &["broker-config", "get", "-b", &broker]);
    assert!(table.contains("maxMessageSize"), "{table}");
    assert_eq!(setting(&ns, &broker, "maxMessageSize"), "4194304");
    admin_ok(
        &ns,
        &[
            "broker-config",
            "set",
            "-b",
            &broker,
            "maxMessageSize=1024",
            "rejectTransactionMessage=true",
        ],
    );
    assert_eq!(setting(&ns, &broker, "maxMessageSize"), "1024");
    assert_eq!(setting(&ns, &broker, "rejectTransactionMessage"), "true");
    let e = admin_err(
        &ns,
        &["broker-config", "set", "-b", &broker, "listenPort=1"],
    );
    assert!(e.contains("listenPort") && e.contains("restart"), "{e}");
    let e = admin_err(&ns, &["broker-config", "set", "-b", &broker, "noequals"]);
    assert!(e.contains("KEY=VALUE"), "{e}");
    // Every broker of the cluster.
    admin_ok(
        &ns,
        &[
            "broker-config",
            "set",
            "-c",
            "DefaultCluster",
            "maxMessageSize=2048",
        ],
    );
    assert_eq!(setting(&ns, &broker, "maxMessageSize"), "2048");

    admin_ok(
        &ns,
        &[
            "group",
            "create",
            "-g",
            "ops-group",
            "--retry-max-times",
            "3",
        ],
    );
    let groups = admin_json(&ns, &["group", "list"]);
    assert_eq!(
        rows_with(&groups, "groups", "group", "ops-group"),
        1,
        "{groups}"
    );
    let row = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group"] == "ops-group")
        .unwrap();
    assert_eq!(row["retryMaxTimes"], 3);
    assert!(admin_ok(&ns, &["group", "list"]).contains("ops-group"));
    admin_ok(&ns, &["group", "delete", "-g", "ops-group"]);
    let groups = admin_json(&ns, &["group", "list"]);
    assert_eq!(rows_with(&groups, "groups", "group", "ops-group"), 0);
    admin_err(&ns, &["group", "create", "-g", "bad group"]);

    admin_ok(
        &ns,
        &["kv", "put", "-n", "ops", "-k", "k1", "--value", "v1"],
    );
    admin_ok(
        &ns,
        &["kv", "put", "-n", "ops", "-k", "k2", "--value", "v2"],
    );
    assert_eq!(
        admin_ok(&ns, &["kv", "get", "-n", "ops", "-k", "k1"]),
        "v1\n"
    );
    admin_ok(&ns, &["kv", "delete", "-n", "ops", "-k", "k2"]);
    let listed = admin_json(&ns, &["kv", "list", "-n", "ops"]);
    assert_eq!(
        listed["entries"],
        serde_json::json!([{"key": "k1", "value": "v1"}])
    );
    admin_err(&ns, &["kv", "get", "-n", "ops", "-k", "k2"]);

    // The KV config is on disk; the run-time settings are not.
    b.stop();
    b.restart();
    assert_eq!(
        admin_ok(&ns, &["kv", "get", "-n", "ops", "-k", "k1"]),
        "v1\n"
    );
    assert_eq!(setting(&ns, &broker, "maxMessageSize"), "4194304");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `basalt admin` from async code.
async fn admin_json_async(ns: &str, args: &[&str]) -> Value {
    let ns = ns.to_string();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        admin_json(&ns, &a)
    })
    .await
    .expect("admin task")
}

#[test]
fn client_verbs_with_a_producer_and_a_consumer_running() {
    let dir = tempfile::tempdir().expect("temp dir");
    let b = Standalone::start(&dir.path().join("data"), &NO_DISK_LIMITS);
    let ns = b.ports.namesrv_addr();
    runtime()
        .block_on(async {
            tokio::time::timeout(DEADLINE * 2, async {
                let admin = Admin::new(ClientConfig::new(ns.clone()));
                admin
                    .create_topic(&b.ports.broker_addr(), &TopicConfig::new("OpsT", 1))
                    .await
                    .expect("create");
                eventually("the route", async || {
                    admin.topic_route("OpsT").await.is_ok()
                })
                .await;
                let producer = Producer::new("ops-producer", ClientConfig::new(ns.clone()));
                producer.start().await.expect("producer");
                for i in 0..3 {
                    producer
                        .send(&Message::new("OpsT", format!("m{i}").into_bytes()))
                        .await
                        .expect("send");
                }
                let seen = Arc::new(AtomicUsize::new(0));
                let opts = PushOptions {
                    consume_from_where: PushConsumeFrom::FirstOffset,
                    ..Default::default()
                };
                let consumer =
                    PushConsumer::with_options("ops-consumer", ClientConfig::new(ns.clone()), opts);
                consumer.subscribe("OpsT", "*").expect("subscribe");
                let sink = Arc::clone(&seen);
                consumer.register_listener(move |msgs, _| {
                    sink.fetch_add(msgs.len(), Ordering::Relaxed);
                    ConsumeStatus::Success
                });
                consumer.start().await.expect("consumer");
                eventually("consumed", async || seen.load(Ordering::Relaxed) >= 3).await;

                // 204: the producer's connection, once its heartbeat reached the
                // broker (a producer heartbeats on a timer, not at start).
                let ns2 = ns.clone();
                eventually("the producer's heartbeat", async || {
                    let ns = ns2.clone();
                    tokio::task::spawn_blocking(move || {
                        run_admin(
                            &ns,
                            &["--json", "producer", "-g", "ops-producer", "-t", "OpsT"],
                        )
                    })
                    .await
                    .is_ok_and(|o| o.status.success())
                })
                .await;
                let p =
                    admin_json_async(&ns, &["producer", "-g", "ops-producer", "-t", "OpsT"]).await;
                assert_eq!(p["connections"].as_array().map(Vec::len), Some(1), "{p}");
                // 307: what the consumer reports of its queue.
                let s = admin_json_async(&ns, &["consumer-status", "-g", "ops-consumer"]).await;
                assert_eq!(rows_with(&s, "queues", "topic", "OpsT"), 1, "{s}");
                // The committed offset reaches the broker, with a pull rate.
                eventually("offset 3 committed", async || {
                    let p =
                        admin_json_async(&ns, &["progress", "-g", "ops-consumer", "-t", "OpsT"])
                            .await;
                    p["queues"][0]["consumerOffset"] == 3
                })
                .await;
                let p =
                    admin_json_async(&ns, &["progress", "-g", "ops-consumer", "-t", "OpsT"]).await;
                assert!(p["consumeTps"].as_f64().unwrap_or(0.0) > 0.0, "{p}");
                assert_eq!(p["totalLag"], 0);

                // 314: a new group starts where the old one is.
                admin_json_async(
                    &ns,
                    &[
                        "clone-offset",
                        "--src",
                        "ops-consumer",
                        "--dest",
                        "ops-clone",
                        "-t",
                        "OpsT",
                    ],
                )
                .await;
                let c = admin_json_async(&ns, &["progress", "-g", "ops-clone", "-t", "OpsT"]).await;
                assert_eq!(c["queues"][0]["consumerOffset"], 3, "{c}");

                // 321: the queue's units.
                let q = admin_json_async(
                    &ns,
                    &[
                        "consume-queue",
                        "-t",
                        "OpsT",
                        "-b",
                        "broker-a",
                        "-q",
                        "0",
                        "-i",
                        "0",
                        "-g",
                        "ops-consumer",
                    ],
                )
                .await;
                assert_eq!(q["units"].as_array().map(Vec::len), Some(3), "{q}");
                assert_eq!(q["maxQueueIndex"], 3);
                assert_eq!(q["subscription"]["subString"], "*", "{q}");

                consumer.shutdown().await;
                producer.shutdown().await;
                admin.shutdown();
            })
            .await
        })
        .expect("within the deadline");
}
