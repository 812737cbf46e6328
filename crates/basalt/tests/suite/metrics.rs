//! `GET /metrics` of a real `basalt standalone`: after known sends and
//! consumption the exposition parses strictly and shows exactly those
//! counts per topic and group (RocketMQ 5's names and labels), and a
//! group's lag rises with new messages and returns to zero once its
//! consumer catches up.

use crate::prom;
use crate::standalone;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, Producer, PushConsumeFrom, PushConsumer,
    PushOptions, TopicConfig,
};

use prom::Exposition;
use standalone::Standalone;

const DEADLINE: Duration = Duration::from_secs(20);
const GROUP: &str = "metrics-group";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn scrape(port: u16) -> Exposition {
    let (status, body) = prom::http_get(port, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200, "{body}");
    prom::parse(&body).unwrap_or_else(|e| panic!("/metrics does not parse: {e}\n{body}"))
}

/// Scrapes until `ok` holds (bounded by [`DEADLINE`]); the last scrape.
async fn scrape_until(port: u16, what: &str, ok: impl Fn(&Exposition) -> bool) -> Exposition {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let e = tokio::task::spawn_blocking(move || scrape(port))
            .await
            .expect("scrape task");
        if ok(&e) {
            return e;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn lag(e: &Exposition, topic: &str) -> Option<f64> {
    e.get(
        "rocketmq_consumer_lag_messages",
        &[("topic", topic), ("consumer_group", GROUP)],
    )
}

fn out(e: &Exposition, topic: &str) -> Option<f64> {
    e.get(
        "rocketmq_messages_out_total",
        &[("topic", topic), ("consumer_group", GROUP)],
    )
}

async fn send_n(p: &Producer, topic: &str, n: usize, size: usize) {
    for i in 0..n {
        let mut body = format!("{topic}-{i}-").into_bytes();
        body.resize(size, b'x');
        p.send(&Message::new(topic, body)).await.expect("send");
    }
}

async fn consumer(ns: &str, seen: Arc<AtomicUsize>) -> PushConsumer {
    let opts = PushOptions {
        consume_from_where: PushConsumeFrom::FirstOffset,
        ..Default::default()
    };
    let c = PushConsumer::with_options(GROUP, ClientConfig::new(ns), opts);
    c.subscribe("MetricsA", "*").expect("subscribe");
    c.register_listener(move |msgs, _| {
        seen.fetch_add(msgs.len(), Ordering::SeqCst);
        ConsumeStatus::Success
    });
    c.start().await.expect("consumer");
    c
}

fn check_sends(e: &Exposition) {
    let a = [("topic", "MetricsA")];
    assert_eq!(e.value("rocketmq_messages_in_total", &a), 30.0);
    assert_eq!(
        e.value("rocketmq_messages_in_total", &[("topic", "MetricsB")]),
        7.0
    );
    assert_eq!(e.value("rocketmq_message_size_count", &a), 30.0);
    let bytes = e.value("rocketmq_throughput_in_total", &a);
    assert_eq!(bytes, e.value("rocketmq_message_size_sum", &a));
    // Each stored record is its 300-byte body plus the topic, properties
    // and the fixed header: more than the bodies, less than twice them.
    assert!(bytes > 30.0 * 300.0 && bytes < 30.0 * 600.0, "{bytes}");
    for s in e.find("rocketmq_messages_in_total", &[]) {
        assert_eq!(
            s.labels.get("cluster").map(String::as_str),
            Some("DefaultCluster")
        );
        assert_eq!(
            s.labels.get("node_type").map(String::as_str),
            Some("broker")
        );
    }
    assert!(e.value("rocketmq_topic_number", &[]) >= 2.0);
    assert_eq!(e.value("basalt_store_poisoned", &[]), 0.0);
    let sends = e.find("rocketmq_rpc_latency_count", &[("request_code", "310")]);
    let n: f64 = sends.iter().map(|s| s.value).sum();
    assert!(n >= 37.0, "SEND_MESSAGE_V2 timed {n} times");
}

#[test]
fn metrics_show_exact_counts_and_lag_returns_to_zero() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let b = Standalone::start(
        &dir.path().join("data"),
        &[
            &format!("metricsPromExporterPort={port}"),
            "dashboardEnable=false",
        ],
    );
    let ns = b.ports.namesrv_addr();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let admin = Admin::new(ClientConfig::new(ns.clone()));
        for t in ["MetricsA", "MetricsB"] {
            admin
                .create_topic(&b.ports.broker_addr(), &TopicConfig::new(t, 4))
                .await
                .expect("create topic");
        }
        let p = Producer::new("metrics-producer", ClientConfig::new(ns.clone()));
        p.start().await.expect("producer");
        send_n(&p, "MetricsA", 30, 300).await;
        send_n(&p, "MetricsB", 7, 300).await;
        check_sends(&scrape(port));

        let seen = Arc::new(AtomicUsize::new(0));
        let c = consumer(&ns, Arc::clone(&seen)).await;
        let e = scrape_until(port, "30 consumed with no lag", |e| {
            out(e, "MetricsA") == Some(30.0) && lag(e, "MetricsA") == Some(0.0)
        })
        .await;
        assert_eq!(seen.load(Ordering::SeqCst), 30);
        assert_eq!(
            e.value(
                "rocketmq_consumer_connections",
                &[("consumer_group", GROUP)]
            ),
            1.0
        );
        assert_eq!(
            e.value(
                "rocketmq_consumer_inflight_messages",
                &[("topic", "MetricsA"), ("consumer_group", GROUP)]
            ),
            0.0
        );
        assert!(
            e.get("rocketmq_messages_out_total", &[("topic", "MetricsB")])
                .is_none()
        );
        c.shutdown().await;

        // Sent while the group is away: lag, then none once it is back.
        send_n(&p, "MetricsA", 5, 300).await;
        let e = scrape_until(port, "a lag of 5", |e| lag(e, "MetricsA") == Some(5.0)).await;
        // A pull the stopped consumer left held at the broker may have been
        // answered with some of the 5 (counted out, never delivered, not
        // committed); the new consumer pulls those again.
        let unseen = out(&e, "MetricsA").expect("out") - 30.0;
        assert!((0.0..=5.0).contains(&unseen), "{unseen}");
        assert!(
            e.value(
                "rocketmq_consumer_lag_latency",
                &[("topic", "MetricsA"), ("consumer_group", GROUP)]
            ) >= 0.0
        );
        let c = consumer(&ns, Arc::clone(&seen)).await;
        scrape_until(port, "the group caught up", |e| {
            lag(e, "MetricsA") == Some(0.0) && out(e, "MetricsA") == Some(35.0 + unseen)
        })
        .await;
        assert_eq!(seen.load(Ordering::SeqCst), 35);
        c.shutdown().await;
        p.shutdown().await;
        admin.shutdown();
    });
}
