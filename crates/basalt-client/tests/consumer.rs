//! Push consumer against scripted fake brokers registered with a real
//! basalt-namesrv: rebalance, offsets, retries, orderly and broadcasting.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use basalt_client::{
    AsyncMessageListener, ClientConfig, ConsumeContext, ConsumeStatus, Message, MessageExt,
    Producer, PushConsumeFrom, PushConsumer, PushMessageModel, PushOptions, TopicQueue,
};
use basalt_remoting::code::request;
use basalt_remoting::transport::BoxFuture;
use common::*;
use parking_lot::Mutex;
use tokio::sync::Notify;

fn config(ns: &str) -> ClientConfig {
    ClientConfig {
        request_timeout: Duration::from_secs(5),
        // Rebalances here come from start and NOTIFY_CONSUMER_IDS_CHANGED only.
        rebalance_interval: Duration::from_secs(3600),
        persist_consumer_offset_interval: Duration::from_secs(3600),
        poll_name_server_interval: Duration::from_millis(200),
        ..ClientConfig::new(ns)
    }
}

/// What a listener saw: (topic, queue id, queue offset, reconsume times).
type Seen = Arc<Mutex<Vec<(String, i32, i64, i32)>>>;

fn collecting(consumer: &PushConsumer) -> Seen {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    consumer.register_listener(move |msgs, _ctx| {
        let mut s = s.lock();
        for m in msgs {
            s.push((
                m.topic.clone(),
                m.queue_id,
                m.queue_offset,
                m.reconsume_times,
            ));
        }
        ConsumeStatus::Success
    });
    seen
}

/// Appends `n` TagA messages; the UNIQ_KEY is `<topic><queue>X<offset>`.
fn fill(b: &FakeBroker, topic: &str, queue: i32, n: usize) {
    let start = b.max_offset(topic, queue) as usize;
    for i in start..start + n {
        b.put(
            topic,
            queue,
            format!("{topic}-{queue}-{i}").as_bytes(),
            &format!("UNIQ_KEY\u{1}{topic}{queue}X{i}\u{2}TAGS\u{1}TagA\u{2}"),
        );
    }
}

fn offsets_committed(b: &FakeBroker, topic: &str, queue: i32) -> Vec<i64> {
    b.requests_with(request::UPDATE_CONSUMER_OFFSET)
        .iter()
        .filter(|r| {
            r.ext_fields.get("topic") == Some(topic)
                && r.ext_fields.get("queueId") == Some(queue.to_string().as_str())
        })
        .map(|r| r.ext_fields.get("commitOffset").unwrap().parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumes_from_first_offset_and_heartbeats_its_subscriptions() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TC", 2)]).await;
    fill(&b, "TC", 0, 5);
    fill(&b, "TC", 1, 3);
    b.put("TC", 0, b"other", "TAGS\u{1}TagB\u{2}");
    let c = PushConsumer::with_options(
        "CG",
        config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            ..Default::default()
        },
    );
    c.subscribe("TC", "TagA").unwrap();
    assert!(c.start().await.is_err(), "no listener yet");
    let seen = collecting(&c);
    c.start().await.unwrap();
    wait_until("8 TagA messages", || seen.lock().len() == 8).await;
    let got: BTreeSet<(i32, i64)> = seen.lock().iter().map(|s| (s.1, s.2)).collect();
    let want: BTreeSet<(i32, i64)> = (0..5)
        .map(|o| (0, o))
        .chain((0..3).map(|o| (1, o)))
        .collect();
    assert_eq!(got, want);
    let held: BTreeSet<TopicQueue> = c
        .assigned_queues()
        .into_iter()
        .filter(|m| m.topic == "TC")
        .collect();
    assert_eq!(
        held,
        BTreeSet::from([
            TopicQueue::new("TC", "broker-a", 0),
            TopicQueue::new("TC", "broker-a", 1)
        ])
    );

    // The heartbeat registered the subscription and the retry topic.
    let hb = b.requests_with(request::HEART_BEAT).pop().unwrap();
    let data: basalt_remoting::protocol::HeartbeatData =
        basalt_remoting::fastjson::from_slice(&hb.body).unwrap();
    assert_eq!(data.client_id, c.instance().client_id());
    let cd = &data.consumer_data_set[0];
    assert_eq!(cd.group_name, "CG");
    assert_eq!(cd.consume_type.name(), "CONSUME_PASSIVELY");
    assert_eq!(cd.consume_from_where.name(), "CONSUME_FROM_FIRST_OFFSET");
    let subs: BTreeMap<String, Vec<String>> = cd
        .subscription_data_set
        .iter()
        .map(|s| (s.topic.clone(), s.tags_set.clone()))
        .collect();
    assert_eq!(subs["TC"], ["TagA"]);
    assert!(subs["%RETRY%CG"].is_empty());
    assert!(
        data.producer_data_set
            .iter()
            .any(|p| p.group_name == "CLIENT_INNER_PRODUCER")
    );

    // Pulls are long polls that commit the consumed offset once there is
    // one: a new message answers the held pull, and the next one commits.
    fill(&b, "TC", 1, 1);
    wait_until("9 TagA messages", || seen.lock().len() == 9).await;
    wait_until("a pull with COMMIT_OFFSET", || {
        b.requests_with(request::PULL_MESSAGE)
            .iter()
            .any(|r| r.ext_fields.get("sysFlag") == Some("3"))
    })
    .await;
    let pull = b.requests_with(request::PULL_MESSAGE).pop().unwrap();
    assert_eq!(pull.ext_fields.get("suspendTimeoutMillis"), Some("15000"));
    assert_eq!(pull.ext_fields.get("maxMsgNums"), Some("32"));

    // The broker asks for running info (once the retry queue is held too:
    // its route appears when the broker has registered the retry topic).
    wait_until("the retry queue", || c.assigned_queues().len() == 3).await;
    let ch = b.consumer_channel("CG").unwrap();
    let mut req = basalt_remoting::RemotingCommand::request(request::GET_CONSUMER_RUNNING_INFO);
    req.ext_fields.insert("consumerGroup", "CG");
    req.ext_fields.insert("clientId", c.instance().client_id());
    let resp = ch.request(req, Duration::from_secs(5)).await.unwrap();
    assert_eq!(resp.code, 0);
    let text = std::str::from_utf8(&resp.body).unwrap();
    let info: serde_json::Value =
        serde_json::from_str(&basalt_remoting::fastjson::normalize(text).unwrap()).unwrap();
    assert_eq!(info["properties"]["PROP_CONSUME_TYPE"], "CONSUME_PASSIVELY");
    // TC's two queues and the retry topic's one.
    assert_eq!(info["mqTable"].as_object().unwrap().len(), 3);
    let mut unknown = basalt_remoting::RemotingCommand::request(request::GET_CONSUMER_RUNNING_INFO);
    unknown.ext_fields.insert("consumerGroup", "nope");
    unknown.ext_fields.insert("clientId", "x");
    assert_eq!(
        ch.request(unknown, Duration::from_secs(5))
            .await
            .unwrap()
            .code,
        1
    );

    c.shutdown().await;
    // Queue 0's TagB message at offset 5 was filtered out by the broker; the
    // offset passes it only after a pull finds nothing newer (Java's
    // correctTagsOffset), and the pull after it is still held.
    assert_eq!(offsets_committed(&b, "TC", 0).last(), Some(&5));
    assert_eq!(offsets_committed(&b, "TC", 1).last(), Some(&4));
    assert!(b.consumer_ids("CG").is_empty(), "unregistered at shutdown");
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_offset_start_and_stored_offsets() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TL", 2)]).await;
    fill(&b, "TL", 0, 4);
    fill(&b, "TL", 1, 4);
    // Queue 1 has a stored offset; queue 0 starts at its end.
    b.set_consumer_offset("CG", "TL", 1, 2);
    let c = PushConsumer::new("CG", config(&ns_addr));
    c.subscribe("TL", "*").unwrap();
    let seen = collecting(&c);
    c.start().await.unwrap();
    wait_until("the stored offset's messages", || seen.lock().len() == 2).await;
    fill(&b, "TL", 0, 1);
    wait_until("a new message at queue 0's end", || seen.lock().len() == 3).await;
    let got: Vec<(i32, i64)> = seen.lock().iter().map(|s| (s.1, s.2)).collect();
    assert!(got.contains(&(1, 2)) && got.contains(&(1, 3)) && got.contains(&(0, 4)));
    c.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_follows_notify_consumer_ids_changed() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TR", 4)]).await;
    for q in 0..4 {
        fill(&b, "TR", q, 4);
    }
    let first = PushOptions {
        consume_from_where: PushConsumeFrom::FirstOffset,
        ..Default::default()
    };
    let c1 = PushConsumer::with_options("CG", config(&ns_addr), first.clone());
    c1.subscribe("TR", "*").unwrap();
    let seen1 = collecting(&c1);
    c1.start().await.unwrap();
    wait_until("c1 holds all 4 queues", || c1.assigned_queues().len() == 4).await;
    wait_until("c1 consumed all 16", || seen1.lock().len() == 16).await;

    let c2 = PushConsumer::with_options("CG", config(&ns_addr), first);
    c2.subscribe("TR", "*").unwrap();
    collecting(&c2);
    c2.start().await.unwrap();
    // c1 rebalances only because the broker told it the ids changed.
    wait_until("2 + 2 queues", || {
        c1.assigned_queues().len() == 2 && c2.assigned_queues().len() == 2
    })
    .await;
    let q1 = c1.assigned_queues();
    let q2 = c2.assigned_queues();
    assert!(q1.is_disjoint(&q2));
    // AllocateMessageQueueAveragely: the smaller client id takes queues 0 and 1.
    let mut ids = [
        c1.instance().client_id().to_string(),
        c2.instance().client_id().to_string(),
    ];
    ids.sort();
    let first = if ids[0] == c1.instance().client_id() {
        &q1
    } else {
        &q2
    };
    assert_eq!(first.iter().map(|m| m.queue_id).collect::<Vec<_>>(), [0, 1]);
    // The queues c1 gave up had their offsets committed on the way out.
    let given_up: Vec<i32> = b
        .requests_with(request::UPDATE_CONSUMER_OFFSET)
        .iter()
        .filter(|r| r.ext_fields.get("topic") == Some("TR"))
        .map(|r| {
            assert_eq!(r.ext_fields.get("commitOffset"), Some("4"));
            r.ext_fields.get("queueId").unwrap().parse().unwrap()
        })
        .collect();
    let expected: BTreeSet<i32> = q2.iter().map(|m| m.queue_id).collect();
    assert_eq!(given_up.into_iter().collect::<BTreeSet<_>>(), expected);

    c2.shutdown().await;
    wait_until("c1 takes everything back", || {
        c1.assigned_queues().len() == 4
    })
    .await;
    c1.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_committed_on_the_timer_and_at_shutdown() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TO", 1)]).await;
    fill(&b, "TO", 0, 5);
    // Timer: commits repeat every persist interval.
    let c = PushConsumer::with_options(
        "CG1",
        ClientConfig {
            persist_consumer_offset_interval: Duration::from_millis(100),
            ..config(&ns_addr)
        },
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            ..Default::default()
        },
    );
    c.subscribe("TO", "*").unwrap();
    let seen = collecting(&c);
    c.start().await.unwrap();
    wait_until("5 consumed", || seen.lock().len() == 5).await;
    wait_until("three periodic commits of offset 5", || {
        offsets_committed(&b, "TO", 0)
            .iter()
            .filter(|o| **o == 5)
            .count()
            >= 3
    })
    .await;
    c.shutdown().await;

    // Shutdown: with no timer commit, the offset is committed on the way out.
    let c = PushConsumer::with_options(
        "CG2",
        config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            ..Default::default()
        },
    );
    c.subscribe("TO", "*").unwrap();
    let seen = collecting(&c);
    c.start().await.unwrap();
    wait_until("5 consumed", || seen.lock().len() == 5).await;
    let before = b
        .requests_with(request::UPDATE_CONSUMER_OFFSET)
        .iter()
        .filter(|r| r.ext_fields.get("consumerGroup") == Some("CG2"))
        .count();
    assert_eq!(before, 0);
    c.shutdown().await;
    let after: Vec<i64> = b
        .requests_with(request::UPDATE_CONSUMER_OFFSET)
        .iter()
        .filter(|r| r.ext_fields.get("consumerGroup") == Some("CG2"))
        .map(|r| r.ext_fields.get("commitOffset").unwrap().parse().unwrap())
        .collect();
    assert_eq!(after, [5]);
    assert_eq!(b.consumer_offset("CG2", "TO", 0), Some(5));
    b.shutdown().await;
    ns.shutdown().await;
}

/// Blocks on one queue offset until released.
struct Gate {
    block_offset: i64,
    release: Arc<Notify>,
    seen: Seen,
}

impl AsyncMessageListener for Gate {
    fn consume<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut ConsumeContext,
    ) -> BoxFuture<'a, ConsumeStatus> {
        Box::pin(async move {
            for m in msgs {
                if m.queue_offset == self.block_offset {
                    self.release.notified().await;
                }
                self.seen.lock().push((
                    m.topic.clone(),
                    m.queue_id,
                    m.queue_offset,
                    m.reconsume_times,
                ));
            }
            ConsumeStatus::Success
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offset_is_the_smallest_in_flight() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TM", 1)]).await;
    fill(&b, "TM", 0, 6);
    let c = PushConsumer::with_options(
        "CG",
        config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            consume_thread_max: 4,
            ..Default::default()
        },
    );
    c.subscribe("TM", "*").unwrap();
    let release = Arc::new(Notify::new());
    let seen: Seen = Arc::default();
    c.register_async_listener(Gate {
        block_offset: 1,
        release: release.clone(),
        seen: seen.clone(),
    });
    c.start().await.unwrap();
    wait_until("all but offset 1 consumed", || seen.lock().len() == 5).await;
    let mq = TopicQueue::new("TM", "broker-a", 0);
    // 0 and 2..5 are done, 1 is still in flight: committing must not pass it.
    assert_eq!(c.committed_offset(&mq), Some(1));
    c.persist_offsets().await;
    assert_eq!(offsets_committed(&b, "TM", 0).last(), Some(&1));
    assert_eq!(b.consumer_offset("CG", "TM", 0), Some(1));

    release.notify_one();
    wait_until("offset 1 consumed", || seen.lock().len() == 6).await;
    wait_until("the offset moves past everything", || {
        c.committed_offset(&mq) == Some(6)
    })
    .await;
    c.persist_offsets().await;
    assert_eq!(b.consumer_offset("CG", "TM", 0), Some(6));
    c.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_moved_jumps_persists_and_resumes() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TX", 1)]).await;
    fill(&b, "TX", 0, 10);
    b.state
        .script
        .lock()
        .offset_moved
        .insert(("TX".into(), 0), 6);
    let c = PushConsumer::with_options(
        "CG",
        config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            ..Default::default()
        },
    );
    c.subscribe("TX", "*").unwrap();
    let seen = collecting(&c);
    c.start().await.unwrap();
    wait_until("messages 6..10", || seen.lock().len() == 4).await;
    let mut offsets: Vec<i64> = seen.lock().iter().map(|s| s.2).collect();
    offsets.sort();
    assert_eq!(offsets, [6, 7, 8, 9]);
    // The jump was committed before the queue was taken up again.
    assert_eq!(offsets_committed(&b, "TX", 0).first(), Some(&6));
    let queries = b.count(request::QUERY_CONSUMER_OFFSET);
    assert!(
        queries >= 2,
        "the queue was re-added and its offset read again"
    );
    c.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_messages_come_back_through_the_retry_topic() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TF", 1)]).await;
    fill(&b, "TF", 0, 2);
    let c = PushConsumer::with_options(
        "CG",
        config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            ..Default::default()
        },
    );
    c.subscribe("TF", "*").unwrap();
    let seen: Seen = Arc::default();
    let s = seen.clone();
    c.register_listener(move |msgs, _ctx| {
        let m = &msgs[0];
        s.lock().push((
            m.topic.clone(),
            m.queue_id,
            m.queue_offset,
            m.reconsume_times,
        ));
        if m.reconsume_times == 0 && m.queue_offset == 1 {
            ConsumeStatus::ReconsumeLater
        } else {
            ConsumeStatus::Success
        }
    });
    c.start().await.unwrap();
    wait_until("the retried message", || seen.lock().len() == 3).await;
    let back = b.requests_with(request::CONSUMER_SEND_MSG_BACK);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].ext_fields.get("group"), Some("CG"));
    assert_eq!(back[0].ext_fields.get("delayLevel"), Some("0"));
    assert_eq!(back[0].ext_fields.get("maxReconsumeTimes"), Some("16"));
    assert_eq!(back[0].ext_fields.get("originTopic"), Some("TF"));
    assert_eq!(back[0].ext_fields.get("originMsgId"), Some("TF0X1"));
    // The retry is shown under its original topic.
    let retried = seen.lock()[2].clone();
    assert_eq!((retried.0.as_str(), retried.3), ("TF", 1));
    // The failed message left the original queue: its offset moved on.
    wait_until("offset 2 on TF", || {
        c.committed_offset(&TopicQueue::new("TF", "broker-a", 0)) == Some(2)
    })
    .await;

    // When CONSUMER_SEND_MSG_BACK fails, the client resends to the retry topic itself.
    // The listener is swapped before the messages exist: a long-polling
    // pull would otherwise hand them to the old one, which never fails.
    b.state.script.lock().fail_send_back = true;
    let s = seen.clone();
    c.register_listener(move |msgs, _ctx| {
        let m = &msgs[0];
        s.lock().push((
            m.topic.clone(),
            m.queue_id,
            m.queue_offset,
            m.reconsume_times,
        ));
        if m.reconsume_times == 0 && m.queue_offset == 3 && m.topic == "TF" {
            ConsumeStatus::ReconsumeLater
        } else {
            ConsumeStatus::Success
        }
    });
    fill(&b, "TF", 0, 2); // offsets 2 and 3; 3 fails once
    wait_until("the resent message", || seen.lock().len() == 6).await;
    let resend = b
        .requests_with(request::SEND_MESSAGE_V2)
        .into_iter()
        .find(|r| r.ext_fields.get("b") == Some("%RETRY%CG"))
        .expect("a send to the retry topic");
    assert_eq!(resend.ext_fields.get("a"), Some("CLIENT_INNER_PRODUCER"));
    assert_eq!(resend.ext_fields.get("j"), Some("1"));
    assert_eq!(resend.ext_fields.get("l"), Some("16"));
    let props = resend.ext_fields.get("i").unwrap().to_string();
    assert_eq!(prop(&props, "RETRY_TOPIC").as_deref(), Some("TF"));
    assert_eq!(prop(&props, "ORIGIN_MESSAGE_ID").as_deref(), Some("TF0X3"));
    assert_eq!(prop(&props, "DELAY").as_deref(), Some("3"));
    assert_eq!(prop(&props, "UNIQ_KEY").as_deref(), Some("TF0X3"));
    let last = seen.lock().last().cloned().unwrap();
    assert_eq!((last.0.as_str(), last.3), ("TF", 1));
    c.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_consumption_keeps_queue_order_and_retries_in_place() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TQ", 2)]).await;
    fill(&b, "TQ", 0, 8);
    fill(&b, "TQ", 1, 8);
    let c = PushConsumer::with_options(
        "CG",
        config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            consume_orderly: true,
            consume_thread_max: 4,
            suspend_current_queue_time: Duration::from_millis(20),
            ..Default::default()
        },
    );
    c.subscribe("TQ", "*").unwrap();
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let failed_once = Arc::new(Mutex::new(false));
    c.register_listener(move |msgs, ctx| {
        assert_eq!(msgs.len(), 1);
        let m = &msgs[0];
        s.lock().push((
            m.topic.clone(),
            m.queue_id,
            m.queue_offset,
            m.reconsume_times,
        ));
        let mut f = failed_once.lock();
        if m.queue_id == 0 && m.queue_offset == 3 && !*f {
            *f = true;
            ctx.suspend_time = Duration::from_millis(10);
            return ConsumeStatus::ReconsumeLater;
        }
        ConsumeStatus::Success
    });
    c.start().await.unwrap();
    wait_until("17 deliveries", || seen.lock().len() == 17).await;
    let per_queue = |q: i32| -> Vec<(i64, i32)> {
        seen.lock()
            .iter()
            .filter(|s| s.1 == q)
            .map(|s| (s.2, s.3))
            .collect()
    };
    assert_eq!(
        per_queue(0),
        [
            (0, 0),
            (1, 0),
            (2, 0),
            (3, 0),
            (3, 1),
            (4, 0),
            (5, 0),
            (6, 0),
            (7, 0)
        ]
    );
    assert_eq!(per_queue(1), (0..8).map(|o| (o, 0)).collect::<Vec<_>>());
    assert!(b.count(request::LOCK_BATCH_MQ) >= 2);
    assert_eq!(b.count(request::CONSUMER_SEND_MSG_BACK), 0);
    wait_until("offset 8 on queue 0", || {
        c.committed_offset(&TopicQueue::new("TQ", "broker-a", 0)) == Some(8)
    })
    .await;
    c.shutdown().await;
    assert!(b.count(request::UNLOCK_BATCH_MQ) >= 1);
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_delivers_everything_to_everyone_and_keeps_offsets_locally() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TBC", 2)]).await;
    fill(&b, "TBC", 0, 3);
    fill(&b, "TBC", 1, 2);
    let dir = tempfile::tempdir().unwrap();
    let options = PushOptions {
        message_model: PushMessageModel::Broadcasting,
        consume_from_where: PushConsumeFrom::FirstOffset,
        local_offset_store_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let c1 = PushConsumer::with_options("CGB", config(&ns_addr), options.clone());
    let c2 = PushConsumer::with_options("CGB", config(&ns_addr), options);
    for c in [&c1, &c2] {
        c.subscribe("TBC", "*").unwrap();
    }
    let s1 = collecting(&c1);
    let s2 = collecting(&c2);
    c1.start().await.unwrap();
    c2.start().await.unwrap();
    wait_until("both see all 5", || {
        s1.lock().len() == 5 && s2.lock().len() == 5
    })
    .await;
    let id1 = c1.instance().client_id().to_string();
    c1.shutdown().await;
    c2.shutdown().await;
    assert_eq!(b.count(request::UPDATE_CONSUMER_OFFSET), 0);
    let file = dir.path().join(&id1).join("CGB").join("offsets.json");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(r#"{"brokerName":"broker-a","queueId":0,"topic":"TBC"}:3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"brokerName":"broker-a","queueId":1,"topic":"TBC"}:2"#),
        "{text}"
    );
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_then_consume_round_trip() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TRT", 4)]).await;
    let p = Producer::new("PG", config(&ns_addr));
    p.start().await.unwrap();
    let mut ids = BTreeSet::new();
    for i in 0..40 {
        let r = p
            .send(
                &Message::new("TRT", format!("m{i}")).with_tags(if i % 2 == 0 {
                    "even"
                } else {
                    "odd"
                }),
            )
            .await
            .unwrap();
        if i % 2 == 0 {
            ids.insert(r.msg_id);
        }
    }
    let c = PushConsumer::with_options(
        "CG",
        config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            consume_message_batch_max_size: 4,
            pull_batch_size: 8,
            ..Default::default()
        },
    );
    c.subscribe("TRT", "even").unwrap();
    let got: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let g = got.clone();
    c.register_listener(move |msgs, _| {
        assert!(msgs.len() <= 4);
        for m in msgs {
            assert_eq!(m.tags.as_deref(), Some("even"));
            g.lock().insert(m.msg_id.clone());
        }
        ConsumeStatus::Success
    });
    c.start().await.unwrap();
    wait_until("20 even messages", || got.lock().len() == 20).await;
    assert_eq!(*got.lock(), ids);
    c.shutdown().await;
    p.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_initiated_offset_reset_rewinds_held_queues() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TRS", 1)]).await;
    fill(&b, "TRS", 0, 5);
    let c = PushConsumer::with_options(
        "CGR",
        config(&ns_addr),
        PushOptions {
            consume_from_where: PushConsumeFrom::FirstOffset,
            ..Default::default()
        },
    );
    c.subscribe("TRS", "*").unwrap();
    let seen = collecting(&c);
    c.start().await.unwrap();
    wait_until("5 consumed", || seen.lock().len() == 5).await;
    let mq = TopicQueue::new("TRS", "broker-a", 0);
    wait_until("offset 5", || c.committed_offset(&mq) == Some(5)).await;

    // An admin resets the group to offset 2: the broker tells the consumer.
    let mut cmd = basalt_remoting::RemotingCommand::request(request::RESET_CONSUMER_CLIENT_OFFSET);
    cmd.ext_fields.insert("topic", "TRS");
    cmd.ext_fields.insert("group", "CGR");
    cmd.ext_fields.insert("timestamp", "0");
    cmd.ext_fields.insert("isForce", "true");
    cmd.body = bytes::Bytes::from_static(
        br#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TRS"}:2}}"#,
    );
    b.consumer_channel("CGR")
        .unwrap()
        .send_oneway(cmd)
        .await
        .unwrap();
    wait_until("2..5 consumed again", || seen.lock().len() == 8).await;
    let again: Vec<i64> = seen.lock()[5..]
        .iter()
        .map(|s| s.2)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(again, [2, 3, 4]);
    assert!(offsets_committed(&b, "TRS", 0).contains(&2));
    c.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}
