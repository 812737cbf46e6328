//! End to end: the client against a real in-process Basalt broker and
//! NameServer (temp dirs, port 0).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use basalt_broker::{BrokerConfig, BrokerHandle};
use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, Producer, PullConsumer, PullStatus,
    PushConsumeFrom, PushConsumer, PushOptions, SendStatus, TopicConfig, TopicQueue,
};
use basalt_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use parking_lot::Mutex;

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

struct Cluster {
    _dir: tempfile::TempDir,
    ns: NameServerHandle,
    broker: BrokerHandle,
    ns_addr: String,
    broker_addr: String,
}

impl Cluster {
    async fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ns = NameServer::start(NamesrvConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        })
        .await
        .unwrap();
        let ns_addr = ns.local_addr().to_string();
        let cfg = BrokerConfig {
            store_path_root_dir: dir.path().to_path_buf(),
            listen_addr: "127.0.0.1".parse().unwrap(),
            broker_ip1: "127.0.0.1".parse().unwrap(),
            listen_port: 0,
            namesrv_addr: Some(ns_addr.clone()),
            mapped_file_size_commit_log: 4 * 1024 * 1024,
            mapped_file_size_consume_queue: 1000 * 20,
            // Retries come back after a second instead of ten.
            message_delay_level: "1s 1s 1s 1s 1s".into(),
            // Tests must not depend on how full the machine's disk is.
            disk_space_warning_level_ratio: 100,
            disk_space_clean_forcibly_ratio: 100,
            ..Default::default()
        };
        let broker = basalt_broker::start(cfg).await.unwrap();
        let broker_addr = broker.broker().broker_addr();
        // Registration runs in the background: wait until the NameServer
        // knows the broker (and so the TBW102 route).
        let admin = Admin::new(ClientConfig::new(&ns_addr));
        for _ in 0..500 {
            if admin.topic_route("TBW102").await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        admin.shutdown();
        Cluster {
            _dir: dir,
            ns,
            broker,
            ns_addr,
            broker_addr,
        }
    }

    /// Waits until the ConsumeQueues hold everything acknowledged so far
    /// (a send is answered before its queue unit is written).
    async fn settle(&self) {
        let store = self.broker.broker().store().clone();
        let ok = tokio::task::spawn_blocking(move || {
            store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10))
        })
        .await
        .unwrap();
        assert!(ok, "dispatch did not catch up");
    }

    fn config(&self) -> ClientConfig {
        ClientConfig {
            request_timeout: Duration::from_secs(10),
            poll_name_server_interval: Duration::from_millis(300),
            ..ClientConfig::new(&self.ns_addr)
        }
    }

    async fn stop(self) {
        self.broker.shutdown().await;
        self.ns.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_pull_and_admin_against_the_broker() {
    let cluster = Cluster::start().await;
    let admin = Admin::new(cluster.config());
    admin
        .create_topic(&cluster.broker_addr, &TopicConfig::new("E2E", 4))
        .await
        .unwrap();
    let p = Producer::new("PG", cluster.config());
    p.start().await.unwrap();
    let mut sent = Vec::new();
    // The route appears once the broker has re-registered the new topic.
    let mut first = None;
    for _ in 0..500 {
        match p
            .send(
                &Message::new("E2E", "hello-0")
                    .with_tags("TagA")
                    .with_key("k0"),
            )
            .await
        {
            Ok(r) => {
                first = Some(r);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let first = first.expect("a first send");
    assert_eq!(first.status, SendStatus::SendOk);
    sent.push(first);
    for i in 1..20 {
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        let r = p
            .send(
                &Message::new("E2E", format!("hello-{i}"))
                    .with_tags(tag)
                    .with_key(format!("k{i}")),
            )
            .await
            .unwrap();
        sent.push(r);
    }
    let batch: Vec<Message> = (0..5)
        .map(|i| Message::new("E2E", format!("batch-{i}")).with_tags("TagA"))
        .collect();
    let br = p.send_batch(&batch).await.unwrap();
    assert_eq!(br.msg_id.split(',').count(), 5);
    assert_eq!(br.offset_msg_id.split(',').count(), 5);

    // Pull everything back from every queue.
    cluster.settle().await;
    let c = PullConsumer::new("PULLG", cluster.config());
    c.start().await.unwrap();
    let queues = c.fetch_queues("E2E").await.unwrap();
    assert_eq!(queues.len(), 4);
    let mut got = BTreeSet::new();
    let mut tag_a = 0;
    for mq in &queues {
        let mut offset = 0;
        loop {
            let r = c
                .pull(mq, "*", offset, 32, Duration::from_secs(5))
                .await
                .unwrap();
            if r.status != PullStatus::Found {
                break;
            }
            for m in &r.msgs {
                got.insert(m.msg_id.clone());
                assert_eq!(m.broker_name, mq.broker_name);
                assert_eq!(m.queue_id, mq.queue_id);
            }
            offset = r.next_begin_offset;
        }
        let r = c
            .pull(mq, "TagA", 0, 32, Duration::from_secs(5))
            .await
            .unwrap();
        if r.status == PullStatus::Found {
            assert!(r.msgs.iter().all(|m| m.tags.as_deref() == Some("TagA")));
            tag_a += r.msgs.len();
        }
    }
    let mut want: BTreeSet<String> = sent.iter().map(|r| r.msg_id.clone()).collect();
    want.extend(br.msg_id.split(',').map(str::to_string));
    assert_eq!(got, want);
    assert_eq!(tag_a, 10 + 5);

    // Offsets and lookups.
    let mq = &sent[0].queue;
    c.update_offset(mq, 1).await.unwrap();
    assert_eq!(c.query_offset(mq).await.unwrap(), Some(1));
    assert!(c.max_offset(mq).await.unwrap() >= 1);
    let viewed = admin.view_message(&sent[3].offset_msg_id).await.unwrap();
    assert_eq!(&viewed.body[..], b"hello-3");
    assert_eq!(viewed.msg_id, sent[3].msg_id);
    let by_key = admin
        .query_message_by_key("E2E", "k7", 32, 0, i64::MAX)
        .await
        .unwrap();
    assert_eq!(by_key.len(), 1);
    assert_eq!(&by_key[0].body[..], b"hello-7");
    let stats = admin.topic_stats("E2E").await.unwrap();
    assert_eq!(stats.iter().map(|s| s.max_offset).sum::<i64>(), 25);
    let info = admin.cluster_info().await.unwrap();
    assert!(
        info.broker_addr_table
            .values()
            .any(|b| b.master_addr() == Some(cluster.broker_addr.as_str()))
    );
    let runtime = admin
        .broker_runtime_info(&cluster.broker_addr)
        .await
        .unwrap();
    assert!(!runtime.is_empty());
    assert!(
        admin
            .topic_list()
            .await
            .unwrap()
            .contains(&"E2E".to_string())
    );

    c.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_created_topic_push_consumption_retry_and_resume() {
    let cluster = Cluster::start().await;
    let p = Producer::new("PG", cluster.config());
    p.start().await.unwrap();
    // Not created: the producer falls back to TBW102 and the broker creates it.
    for i in 0..10 {
        p.send(&Message::new("AUTO", format!("m{i}")).with_tags("T"))
            .await
            .unwrap();
    }
    let opts = PushOptions {
        consume_from_where: PushConsumeFrom::FirstOffset,
        ..Default::default()
    };
    let c = PushConsumer::with_options("CG", cluster.config(), opts.clone());
    c.subscribe("AUTO", "T").unwrap();
    let seen: Arc<Mutex<Vec<(String, i32)>>> = Arc::default();
    let s = seen.clone();
    c.register_listener(move |msgs, ctx| {
        let m = &msgs[0];
        s.lock().push((
            String::from_utf8_lossy(&m.body).into_owned(),
            m.reconsume_times,
        ));
        if &m.body[..] == b"m3" && m.reconsume_times == 0 {
            ctx.delay_level_when_next_consume = 1;
            return ConsumeStatus::ReconsumeLater;
        }
        ConsumeStatus::Success
    });
    c.start().await.unwrap();
    // 10 first deliveries plus the retry of m3 through %RETRY%CG.
    wait_until("11 deliveries", || seen.lock().len() >= 11).await;
    let retried: Vec<(String, i32)> = seen
        .lock()
        .iter()
        .filter(|x| x.0 == "m3")
        .cloned()
        .collect();
    assert_eq!(retried, [("m3".to_string(), 0), ("m3".to_string(), 1)]);
    c.shutdown().await;

    // Offsets were committed at shutdown: a new consumer of the group sees
    // only what is sent afterwards.
    p.send(&Message::new("AUTO", "after").with_tags("T"))
        .await
        .unwrap();
    let c2 = PushConsumer::with_options("CG", cluster.config(), opts);
    c2.subscribe("AUTO", "T").unwrap();
    let seen2: Arc<Mutex<Vec<String>>> = Arc::default();
    let s2 = seen2.clone();
    c2.register_listener(move |msgs, _| {
        for m in msgs {
            s2.lock()
                .push(String::from_utf8_lossy(&m.body).into_owned());
        }
        ConsumeStatus::Success
    });
    c2.start().await.unwrap();
    wait_until("the message sent after the restart", || {
        !seen2.lock().is_empty()
    })
    .await;
    assert_eq!(*seen2.lock(), ["after"]);
    c2.shutdown().await;
    p.shutdown().await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_share_the_queues_through_broker_notifications() {
    let cluster = Cluster::start().await;
    let admin = Admin::new(cluster.config());
    admin
        .create_topic(&cluster.broker_addr, &TopicConfig::new("SHARE", 4))
        .await
        .unwrap();
    let config = ClientConfig {
        rebalance_interval: Duration::from_secs(3600),
        ..cluster.config()
    };
    let consumers: Vec<PushConsumer> = (0..2)
        .map(|_| PushConsumer::new("CGS", config.clone()))
        .collect();
    let seen: Arc<Mutex<Vec<i64>>> = Arc::default();
    for c in &consumers {
        c.subscribe("SHARE", "*").unwrap();
        let s = seen.clone();
        c.register_listener(move |msgs, _| {
            s.lock().extend(msgs.iter().map(|m| m.queue_offset));
            ConsumeStatus::Success
        });
        c.start().await.unwrap();
    }
    wait_until("2 + 2 queues", || {
        consumers[0]
            .assigned_queues()
            .iter()
            .filter(|m| m.topic == "SHARE")
            .count()
            == 2
            && consumers[1]
                .assigned_queues()
                .iter()
                .filter(|m| m.topic == "SHARE")
                .count()
                == 2
    })
    .await;
    let q0: BTreeSet<TopicQueue> = consumers[0].assigned_queues();
    let q1: BTreeSet<TopicQueue> = consumers[1].assigned_queues();
    assert!(
        q0.iter()
            .filter(|m| m.topic == "SHARE")
            .all(|m| !q1.contains(m))
    );

    let p = Producer::new("PG", cluster.config());
    p.start().await.unwrap();
    for i in 0..40 {
        p.send(&Message::new("SHARE", format!("m{i}")))
            .await
            .unwrap();
    }
    wait_until("40 messages consumed", || seen.lock().len() >= 40).await;
    assert_eq!(seen.lock().len(), 40);

    consumers[1].shutdown().await;
    wait_until("the survivor takes all 4", || {
        consumers[0]
            .assigned_queues()
            .iter()
            .filter(|m| m.topic == "SHARE")
            .count()
            == 4
    })
    .await;
    consumers[0].shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_consumer_locks_queues_on_the_broker() {
    let cluster = Cluster::start().await;
    let admin = Admin::new(cluster.config());
    admin
        .create_topic(&cluster.broker_addr, &TopicConfig::new("ORD", 2))
        .await
        .unwrap();
    let p = Producer::new("PG", cluster.config());
    p.start().await.unwrap();
    let mut sent = 0;
    while sent < 20 {
        let mq = TopicQueue::new(
            "ORD",
            cluster.broker.broker().config().broker_name.clone(),
            sent % 2,
        );
        match p
            .send_to(&Message::new("ORD", format!("{sent}")), &mq)
            .await
        {
            Ok(_) => sent += 1,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let c = PushConsumer::with_options(
        "CGO",
        cluster.config(),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            consume_orderly: true,
            ..Default::default()
        },
    );
    c.subscribe("ORD", "*").unwrap();
    let seen: Arc<Mutex<Vec<(i32, i64)>>> = Arc::default();
    let s = seen.clone();
    c.register_listener(move |msgs, _| {
        s.lock()
            .extend(msgs.iter().map(|m| (m.queue_id, m.queue_offset)));
        ConsumeStatus::Success
    });
    c.start().await.unwrap();
    wait_until("20 in order", || seen.lock().len() >= 20).await;
    for q in 0..2 {
        let offsets: Vec<i64> = seen
            .lock()
            .iter()
            .filter(|x| x.0 == q)
            .map(|x| x.1)
            .collect();
        assert_eq!(offsets, (0..10).collect::<Vec<i64>>(), "queue {q}");
    }
    c.shutdown().await;
    p.shutdown().await;
    admin.shutdown();
    cluster.stop().await;
}
