//! REGISTER_BROKER split into parts and compressed (`enableSplitRegistration`,
//! `splitRegistrationSize`, `compressedRegister`; docs/protocol.md#broker-registration):
//! after a restart the NameServer of `basalt standalone` starts empty, so
//! every route it then serves came from the broker's split, compressed
//! registration at start. Each of 30 topics (4 parts of 8) has its route
//! with its own queue count.

use crate::standalone::Standalone;

use std::time::{Duration, Instant};

use basalt_client::{Admin, ClientConfig, Producer, TopicConfig};

const TOPICS: usize = 30;

fn client_config(ns: &str) -> ClientConfig {
    let mut c = ClientConfig::new(ns);
    c.poll_name_server_interval = Duration::from_millis(300);
    c.request_timeout = Duration::from_secs(5);
    c
}

/// The publish queue count of every topic, as the NameServer routes it.
async fn routed(ns: &str) -> Vec<usize> {
    let p = Producer::new("split-reg-producer", client_config(ns));
    p.start().await.unwrap();
    let mut out = Vec::new();
    for i in 0..TOPICS {
        let t = format!("SplitReg{i}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let n = loop {
            match p.fetch_publish_queues(&t).await {
                Ok(q) if !q.is_empty() => break q.len(),
                r => assert!(Instant::now() < deadline, "no route for {t}: {r:?}"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        out.push(n);
    }
    p.shutdown().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_compressed_registration_routes_every_topic_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Standalone::start(
        &dir.path().join("data"),
        &[
            "enableSplitRegistration=true",
            "splitRegistrationSize=8",
            "compressedRegister=true",
        ],
    );
    let admin = Admin::new(client_config(&b.namesrv_addr()));
    let want: Vec<usize> = (0..TOPICS).map(|i| 1 + i % 5).collect();
    for (i, q) in want.iter().enumerate() {
        admin
            .create_topic(
                &b.broker_addr(),
                &TopicConfig::new(format!("SplitReg{i}"), *q as i32),
            )
            .await
            .unwrap();
    }
    admin.shutdown();
    let before = routed(&b.namesrv_addr()).await;
    println!("routes before the restart: {before:?}");
    assert_eq!(before, want);
    b.stop();
    b.restart();
    let after = routed(&b.namesrv_addr()).await;
    println!("routes after the restart (from the split registration): {after:?}");
    assert_eq!(after, want);
    b.stop();
}
