//! The operators' requests against `basalt standalone`, through
//! basalt-client and the `basalt admin` verbs:
//!
//! 1. `write-perm --off` takes the broker's write permission away in every
//!    route (producers find no queue to send to), `--on` gives it back;
//! 2. `reset-offset` moves a running push consumer back to a point in time
//!    and it consumes again from there.

use crate::standalone;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, Producer, PushConsumeFrom, PushConsumer,
    PushOptions, TopicConfig,
};
use basalt_common::constants::perm;

use standalone::Standalone;

/// Whole-test bound for each async part.
const DEADLINE: Duration = Duration::from_secs(60);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Runs `basalt admin --namesrv NS ARGS...`; panics unless it succeeds.
fn basalt_admin(namesrv: &str, args: &[&str]) -> String {
    let out = Command::new(standalone::broker_binary())
        .args(["admin", "--namesrv", namesrv])
        .args(args)
        .output()
        .expect("run basalt admin");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "basalt admin {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The perm of `broker`'s queue data in `topic`'s route.
async fn route_perm(admin: &Admin, topic: &str, broker: &str) -> i32 {
    let route = admin.topic_route(topic).await.expect("route");
    route
        .queue_datas
        .iter()
        .find(|q| q.broker_name == broker)
        .map(|q| q.perm)
        .expect("queue data of the broker")
}

/// A new producer's first send (so it reads the route now).
async fn fresh_send(ns: &str, topic: &str) -> basalt_client::Result<()> {
    let p = Producer::new("admin-ops-producer", ClientConfig::new(ns));
    p.start().await?;
    let r = p.send(&Message::new(topic, b"x".to_vec())).await;
    p.shutdown().await;
    r.map(|_| ())
}

#[test]
fn write_perm_off_drains_the_broker_and_on_restores_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let b = Standalone::start(&dir.path().join("data"), &[]);
    let ns = b.ports.namesrv_addr();
    runtime()
        .block_on(async {
            tokio::time::timeout(DEADLINE * 2, async {
                let admin = Admin::new(ClientConfig::new(ns.clone()));
                let t = TopicConfig::new("Drain", 4);
                admin
                    .create_topic(&b.ports.broker_addr(), &t)
                    .await
                    .expect("create");
                let name = "broker-a";
                eventually("the route", async || {
                    admin.topic_route("Drain").await.is_ok()
                })
                .await;
                fresh_send(&ns, "Drain")
                    .await
                    .expect("send before the wipe");

                let out = basalt_admin(&ns, &["write-perm", "--broker-name", name, "--off"]);
                assert!(out.contains(&ns), "one row per NameServer: {out}");
                let p = route_perm(&admin, "Drain", name).await;
                assert!(!perm::is_writeable(p), "perm {p} still has the write bit");
                assert!(perm::is_readable(p));
                assert!(
                    fresh_send(&ns, "Drain").await.is_err(),
                    "a producer still chose the drained broker"
                );

                basalt_admin(&ns, &["write-perm", "--broker-name", name, "--on"]);
                assert_eq!(route_perm(&admin, "Drain", name).await, 6);
                fresh_send(&ns, "Drain").await.expect("send after --on");
                admin.shutdown();
            })
            .await
        })
        .expect("within the deadline");
}

/// Bodies a push consumer has been given, in order.
type Seen = Arc<Mutex<Vec<String>>>;

fn count(seen: &Seen, prefix: &str) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|b| b.starts_with(prefix))
        .count()
}

async fn send_all(p: &Producer, topic: &str, prefix: &str, n: usize) {
    for i in 0..n {
        let body = format!("{prefix}{i}").into_bytes();
        p.send(&Message::new(topic, body)).await.expect("send");
    }
}

#[test]
fn reset_offset_rewinds_a_running_push_consumer_to_a_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let b = Standalone::start(&dir.path().join("data"), &[]);
    let ns = b.ports.namesrv_addr();
    runtime()
        .block_on(async {
            tokio::time::timeout(DEADLINE * 2, async {
                let admin = Admin::new(ClientConfig::new(ns.clone()));
                admin
                    .create_topic(&b.ports.broker_addr(), &TopicConfig::new("Rewind", 2))
                    .await
                    .expect("create");
                eventually("the route", async || {
                    admin.topic_route("Rewind").await.is_ok()
                })
                .await;
                let producer = Producer::new("rewind-producer", ClientConfig::new(ns.clone()));
                producer.start().await.expect("producer");

                let seen: Seen = Arc::default();
                let opts = PushOptions {
                    consume_from_where: PushConsumeFrom::FirstOffset,
                    ..Default::default()
                };
                let consumer =
                    PushConsumer::with_options("rewind-group", ClientConfig::new(ns.clone()), opts);
                consumer.subscribe("Rewind", "*").expect("subscribe");
                let sink = Arc::clone(&seen);
                consumer.register_listener(move |msgs, _| {
                    let mut s = sink.lock().unwrap();
                    s.extend(
                        msgs.iter()
                            .map(|m| String::from_utf8_lossy(&m.body).into_owned()),
                    );
                    ConsumeStatus::Success
                });
                consumer.start().await.expect("consumer");

                send_all(&producer, "Rewind", "a-", 10).await;
                eventually("batch a consumed", async || count(&seen, "a-") >= 10).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                let mid = basalt_common::time::now_millis();
                tokio::time::sleep(Duration::from_millis(20)).await;
                send_all(&producer, "Rewind", "b-", 10).await;
                eventually("batch b consumed", async || count(&seen, "b-") >= 10).await;

                let out = basalt_admin(
                    &ns,
                    &[
                        "reset-offset",
                        "-g",
                        "rewind-group",
                        "-t",
                        "Rewind",
                        "--time",
                        &mid.to_string(),
                    ],
                );
                assert!(out.contains("2 queue(s) reset"), "{out}");
                eventually("batch b consumed again", async || count(&seen, "b-") >= 20).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                assert_eq!(
                    count(&seen, "a-"),
                    10,
                    "the reset went back before its time"
                );
                assert_eq!(count(&seen, "b-"), 20, "batch b once more, and only once");

                // Skipping what accumulated: the stored offsets go to the end.
                basalt_admin(
                    &ns,
                    &["skip-accumulated", "-g", "rewind-group", "-t", "Rewind"],
                );
                let p = admin
                    .consume_stats("rewind-group", Some("Rewind"))
                    .await
                    .expect("stats");
                assert_eq!(p.total_lag(), 0, "{p:?}");

                consumer.shutdown().await;
                producer.shutdown().await;
                admin.shutdown();
            })
            .await
        })
        .expect("within the deadline");
}
