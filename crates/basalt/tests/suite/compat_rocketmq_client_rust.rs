//! Acceptance test: the unchanged RocketMQ Rust client (`rocketmq-client-rust`
//! 1.0.0 from crates.io) produces and consumes through `basalt standalone`.
//!
//! Every test starts its own `basalt standalone` process on free ports with a
//! fresh data directory and talks to it only through the client's public API
//! (plus raw remoting requests to read committed offsets back). Cases:
//! 1. `DefaultMQProducer` sends 10,000 messages with tags, keys and user
//!    properties to an 8-queue topic, in sync, async, oneway and batch mode;
//! 2. a cluster-mode push consumer receives each of them exactly once, intact,
//!    and commits its offsets;
//! 3. after a clean broker restart a new consumer of the same group resumes at
//!    the committed offsets;
//! 4. two consumers of one group split the queues (and one takes over all
//!    of them when the other leaves);
//! 5. a lite pull consumer reads one queue from a given offset.
//!
//! Beyond those: tag filters and a retry through `%RETRY%`, orderly
//! consumption, the producer's admin lookups, a delayed message, topic
//! auto-creation, and the round trip with binary (ROCKETMQ) headers from a
//! client that reports an old protocol version.
//!
//! COMPAT_CLIENT_LOG=<filter> shows the client's own logs;
//! BASALT_TEST_LOG_DIR=<dir> keeps the brokers' logs.

use crate::rmq_client;
use crate::standalone;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, DefaultLitePullConsumer, DefaultMQProducer, DefaultMQPushConsumer,
    MQPushConsumer,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::result::{SendResult, SendStatus};
use rocketmq_protocol::protocol::SerializeType;
use rocketmq_protocol::protocol::remoting_command_defaults::RemotingCommandDefaults;
use tokio::sync::Notify;

use rmq_client::{
    Probe, client_runtime, client_runtime_with, commit_deadline, create_topic, shutdown_producer,
    shutdown_push_consumer, start_producer, start_producer_with,
};
use standalone::{Standalone, left};

/// What the push consumers of a test received.
type Inbox = rmq_client::Inbox<Received>;

/// What a test message carries, so the receiving side can check it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    tags: String,
    keys: String,
    seq: String,
    mode: String,
}

fn expected(i: usize, mode: &str) -> Expected {
    Expected {
        tags: ["TagA", "TagB", "TagC"][i % 3].to_string(),
        keys: format!("key-{i} order-{}", i % 97),
        seq: i.to_string(),
        mode: mode.to_string(),
    }
}

/// The body of message `i`. Every 100th is 6 KiB, above the client's
/// 4 KiB compression threshold, so compressed bodies (sysFlag bit 0 and
/// the compression type) make the round trip too.
fn body_of(i: usize, mode: &str) -> String {
    let pad = if i % 100 == 42 { 6 * 1024 } else { i % 50 };
    format!("body-{i:06}-{mode}-{}", "x".repeat(pad))
}

fn message(topic: &str, i: usize, mode: &str) -> Message {
    let e = expected(i, mode);
    let mut m = Message::builder()
        .topic(topic)
        .tags(e.tags.as_str())
        .keys(e.keys.split(' ').map(str::to_string).collect())
        .body_slice(body_of(i, mode).as_bytes())
        .build_unchecked();
    m.put_user_property("seq".into(), e.seq.as_str().into())
        .expect("user property seq");
    m.put_user_property("mode".into(), e.mode.as_str().into())
        .expect("user property mode");
    m
}

/// One received message, as the consumer saw it.
#[derive(Debug, Clone)]
struct Received {
    body: String,
    got: Expected,
    queue_id: i32,
    queue_offset: i64,
    uniq_key: String,
    msg_id: String,
    commit_log_offset: i64,
    consumer: usize,
}

fn prop(m: &MessageExt, key: &str) -> String {
    m.property(&key.into())
        .map(|v| v.as_str().to_string())
        .unwrap_or_default()
}

fn received(m: &MessageExt, consumer: usize) -> Received {
    Received {
        body: m
            .body()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default(),
        got: Expected {
            tags: prop(m, "TAGS"),
            keys: prop(m, "KEYS"),
            seq: prop(m, "seq"),
            mode: prop(m, "mode"),
        },
        queue_id: m.queue_id(),
        queue_offset: m.queue_offset(),
        uniq_key: prop(m, "UNIQ_KEY"),
        msg_id: m.msg_id().as_str().to_string(),
        commit_log_offset: m.commit_log_offset(),
        consumer,
    }
}

async fn start_push_consumer(
    broker: &Standalone,
    group: &str,
    topic: &str,
    from: ConsumeFromWhere,
    inbox: Arc<Inbox>,
    consumer_no: usize,
) -> DefaultMQPushConsumer {
    let wire = RemotingCommandDefaults::default();
    start_push_consumer_with(broker, group, topic, from, inbox, consumer_no, wire).await
}

async fn start_push_consumer_with(
    broker: &Standalone,
    group: &str,
    topic: &str,
    from: ConsumeFromWhere,
    inbox: Arc<Inbox>,
    consumer_no: usize,
    wire: RemotingCommandDefaults,
) -> DefaultMQPushConsumer {
    let scope = format!("{group}-{consumer_no}");
    let mut c = DefaultMQPushConsumer::builder(client_runtime_with(&scope, wire))
        .name_server_addr(broker.namesrv_addr())
        .consumer_group(group.to_string())
        .consume_from_where(from)
        .consume_thread_min(2)
        .consume_thread_max(4)
        .pull_batch_size(32)
        .build();
    c.subscribe(topic, "*").await.expect("subscribe");
    c.register_message_listener_concurrently(
        move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
            for m in msgs {
                inbox.push(received(m, consumer_no));
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    tokio::time::timeout(Duration::from_secs(30), c.start())
        .await
        .expect("push consumer start in time")
        .expect("push consumer start");
    c
}

/// What the broker acknowledged for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ack {
    /// The client-generated id (`UNIQ_KEY`), `SendResult::msg_id`.
    uniq_key: String,
    /// The broker's id: store host + CommitLog offset (`offsetMsgId`).
    offset_msg_id: String,
    queue_id: i32,
    queue_offset: i64,
}

/// The acknowledgements in `r`, one per message (a batch result lists the
/// ids of its messages, which got consecutive queue offsets).
fn acks_of(r: &SendResult, count: usize) -> Vec<Ack> {
    assert_eq!(r.send_status, SendStatus::SendOk);
    let uniq: Vec<String> = r
        .msg_id
        .as_ref()
        .map(|s| s.as_str().split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let offset_ids: Vec<String> = r
        .offset_msg_id
        .as_ref()
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    assert_eq!(uniq.len(), count, "one msgId per message: {r:?}");
    assert_eq!(
        offset_ids.len(),
        count,
        "one offsetMsgId per message: {r:?}"
    );
    let queue_id = r
        .message_queue
        .as_ref()
        .map(|q| q.queue_id())
        .expect("send result names its queue");
    (0..count)
        .map(|k| Ack {
            uniq_key: uniq[k].clone(),
            offset_msg_id: offset_ids[k].clone(),
            queue_id,
            queue_offset: r.queue_offset as i64 + k as i64,
        })
        .collect()
}

/// Sends messages `range` in `mode` and waits for every acknowledgement.
/// Returns (message index, ack) for each acknowledged message; oneway sends
/// have no acknowledgement, so none is returned for them.
async fn send_in_mode(
    producer: &DefaultMQProducer,
    topic: &str,
    range: std::ops::Range<usize>,
    mode: &str,
) -> Vec<(usize, Ack)> {
    match mode {
        "sync" => {
            let mut acks = Vec::with_capacity(range.len());
            for i in range {
                let r = producer
                    .send_with_timeout(message(topic, i, mode), 10_000)
                    .await
                    .unwrap_or_else(|e| panic!("sync send {i}: {e}"))
                    .expect("sync send returns a result");
                acks.push((i, acks_of(&r, 1).remove(0)));
            }
            acks
        }
        "async" => {
            let acks = Arc::new(Mutex::new(Vec::new()));
            let failed = Arc::new(Mutex::new(Vec::new()));
            let done = Arc::new(AtomicUsize::new(0));
            let all_done = Arc::new(Notify::new());
            let total = range.len();
            // At most this many sends in flight, as an application would
            // bound them: the client refuses sends (queue_saturated) when
            // its transport queue is full rather than waiting.
            let window = Arc::new(tokio::sync::Semaphore::new(256));
            for i in range {
                let permit = window
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("semaphore open");
                let (acks, failed, done, all_done) =
                    (acks.clone(), failed.clone(), done.clone(), all_done.clone());
                let permit = Mutex::new(Some(permit));
                producer
                    .send_with_callback_timeout(
                        message(topic, i, mode),
                        move |result, error| {
                            match (result, error) {
                                (Some(r), None) if r.send_status == SendStatus::SendOk => {
                                    let ack = acks_of(r, 1).remove(0);
                                    acks.lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .push((i, ack));
                                }
                                other => failed
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .push(format!("{i}: {other:?}")),
                            }
                            drop(permit.lock().unwrap_or_else(|e| e.into_inner()).take());
                            if done.fetch_add(1, Ordering::SeqCst) + 1 == total {
                                all_done.notify_one();
                            }
                        },
                        10_000,
                    )
                    .await
                    .unwrap_or_else(|e| panic!("async send {i} not accepted: {e}"));
            }
            if done.load(Ordering::SeqCst) < total {
                tokio::time::timeout(Duration::from_secs(60), all_done.notified())
                    .await
                    .expect("every async send callback runs");
            }
            let failed = failed.lock().unwrap_or_else(|e| e.into_inner());
            assert!(
                failed.is_empty(),
                "async sends failed: {:?}",
                &failed[..failed.len().min(5)]
            );
            let acks = acks.lock().unwrap_or_else(|e| e.into_inner()).clone();
            assert_eq!(acks.len(), total, "every async send acknowledged");
            acks
        }
        "oneway" => {
            for i in range {
                producer
                    .send_oneway(message(topic, i, mode))
                    .await
                    .unwrap_or_else(|e| panic!("oneway send {i}: {e}"));
            }
            Vec::new()
        }
        "batch" => {
            let ids: Vec<usize> = range.collect();
            let mut acks = Vec::with_capacity(ids.len());
            for chunk in ids.chunks(100) {
                let msgs: Vec<Message> = chunk.iter().map(|&i| message(topic, i, mode)).collect();
                let r = producer
                    .send_batch_with_timeout(msgs, 10_000)
                    .await
                    .unwrap_or_else(|e| panic!("batch send from {}: {e}", chunk[0]));
                acks.extend(chunk.iter().copied().zip(acks_of(&r, chunk.len())));
            }
            acks
        }
        other => panic!("unknown send mode {other}"),
    }
}

/// Checks that each acknowledged message reached the consumer with the ids,
/// queue and queue offset its acknowledgement named, and that the consumed
/// record's CommitLog offset is the one inside its offsetMsgId.
fn assert_acks_match(
    got: &[Received],
    acks: &[(usize, Ack)],
    mode_of: impl Fn(usize) -> &'static str,
) {
    let by_body: HashMap<&str, &Received> = got.iter().map(|r| (r.body.as_str(), r)).collect();
    for (i, ack) in acks {
        let body = body_of(*i, mode_of(*i));
        let r = by_body
            .get(body.as_str())
            .unwrap_or_else(|| panic!("acknowledged message {i} never consumed"));
        let seen = Ack {
            uniq_key: r.uniq_key.clone(),
            offset_msg_id: r.msg_id.clone(),
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
        };
        assert_eq!(&seen, ack, "message {i}: consumed vs acknowledged");
        assert!(
            r.msg_id
                .to_ascii_uppercase()
                .ends_with(&format!("{:016X}", r.commit_log_offset)),
            "message {i}: offsetMsgId {} does not end with its CommitLog offset {}",
            r.msg_id,
            r.commit_log_offset
        );
    }
}

/// Checks that each queue delivered offsets 0..max exactly (no hole, no
/// repeat), i.e. the ConsumeQueue and the records' QUEUEOFFSET agree.
fn assert_queues_dense(got: &[Received], max_offsets: &[i64]) {
    for (q, &max) in max_offsets.iter().enumerate() {
        let mut offsets: Vec<i64> = got
            .iter()
            .filter(|r| r.queue_id == q as i32)
            .map(|r| r.queue_offset)
            .collect();
        offsets.sort_unstable();
        assert!(
            offsets.iter().copied().eq(0..max),
            "queue {q}: consumed offsets are not exactly 0..{max} ({} consumed)",
            offsets.len()
        );
    }
}

/// Checks that `got` holds every message of `sent` exactly once, intact.
fn assert_exactly_once(got: &[Received], sent: &HashMap<String, Expected>) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut wrong = Vec::new();
    let mut unexpected = Vec::new();
    for r in got {
        *seen.entry(r.body.as_str()).or_default() += 1;
        match sent.get(&r.body) {
            Some(e) if *e == r.got => {}
            Some(e) => wrong.push(format!("{}: sent {e:?}, got {:?}", r.body, r.got)),
            None => unexpected.push(r.body.clone()),
        }
    }
    let dups: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(10).collect();
    let missing: Vec<_> = sent
        .keys()
        .filter(|b| !seen.contains_key(b.as_str()))
        .take(10)
        .collect();
    let n_missing = sent
        .keys()
        .filter(|b| !seen.contains_key(b.as_str()))
        .count();
    assert!(
        wrong.is_empty(),
        "{} messages altered, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    assert!(
        unexpected.is_empty(),
        "unexpected messages: {:?}",
        &unexpected[..unexpected.len().min(5)]
    );
    assert!(dups.is_empty(), "duplicates (body, times): {dups:?}");
    assert!(
        missing.is_empty(),
        "{n_missing} messages missing, e.g. {missing:?}"
    );
    assert_eq!(got.len(), sent.len());
}

const TOPIC_QUEUES: usize = 8;

/// Cases 1 and 2: 10,000 messages in four send modes; one push consumer
/// gets each exactly once with its body, tags, keys and user properties, and
/// commits every queue to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_send_modes_and_push_consumer_exactly_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut broker = Standalone::start(&data, &[]);
    let topic = "CompatSendModes";
    let mut producer = start_producer(&broker, "compat-pg-modes").await;
    create_topic(&mut producer, topic, TOPIC_QUEUES).await;

    let mut sent = HashMap::new();
    let mut acks = Vec::new();
    for (mode, range) in SEND_PLAN.iter().cloned() {
        for i in range.clone() {
            sent.insert(body_of(i, mode), expected(i, mode));
        }
        let a = send_in_mode(&producer, topic, range.clone(), mode).await;
        let want = if mode == "oneway" { 0 } else { range.len() };
        assert_eq!(a.len(), want, "{mode} sends acknowledged");
        acks.extend(a);
    }
    assert_eq!(sent.len(), 10_000);

    // The broker stored all of them (oneway included) before anyone consumes.
    let probe = Probe::new(&broker);
    let deadline = Instant::now() + Duration::from_secs(20);
    let max_offsets = loop {
        let mut max_offsets = Vec::new();
        for q in 0..TOPIC_QUEUES as i32 {
            max_offsets.push(probe.max_offset(topic, q).await);
        }
        let total: i64 = max_offsets.iter().sum();
        if total == 10_000 {
            break max_offsets;
        }
        assert!(total < 10_000, "broker stored {total} > 10,000 messages");
        assert!(
            Instant::now() < deadline,
            "broker stored only {total} of 10,000 (oneway lost?)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        max_offsets.iter().all(|&m| m > 0),
        "the producer spread messages over all queues: {max_offsets:?}"
    );

    let group = "compat-cg-modes";
    let inbox = Arc::new(Inbox::default());
    let consumer = start_push_consumer(
        &broker,
        group,
        topic,
        ConsumeFromWhere::ConsumeFromFirstOffset,
        inbox.clone(),
        0,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(90);
    let all = inbox
        .wait_until(deadline, |got| got.len() >= sent.len())
        .await;
    assert!(
        all,
        "push consumer received {} of {}",
        inbox.snapshot().len(),
        sent.len()
    );
    // The consumer commits its offsets (periodically, the first time 10 s
    // after it starts, and when it shuts down) up to the max.
    shutdown_push_consumer(consumer).await;
    shutdown_producer(producer).await;
    probe
        .wait_committed_to_max(group, topic, TOPIC_QUEUES as i32, commit_deadline())
        .await;
    // Nothing arrived twice, even late.
    let got = inbox.snapshot();
    assert_exactly_once(&got, &sent);
    assert_queues_dense(&got, &max_offsets);
    assert_acks_match(&got, &acks, mode_of);
    // A clean stop leaves a store that checks out record by record.
    broker.stop();
    let (ok, report) = standalone::store_check(&data);
    assert!(ok, "store check after 10,000 messages:\n{report}");
}

/// How messages 0..10,000 of the first case are sent.
const SEND_PLAN: [(&str, std::ops::Range<usize>); 4] = [
    ("sync", 0..2500),
    ("async", 2500..5000),
    ("oneway", 5000..7500),
    ("batch", 7500..10_000),
];

fn mode_of(i: usize) -> &'static str {
    SEND_PLAN
        .iter()
        .find(|(_, r)| r.contains(&i))
        .map(|(m, _)| *m)
        .unwrap_or("sync")
}

/// Case 3: consume, commit, restart the broker (SIGTERM), and a new consumer
/// of the same group gets only what was sent after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_resumes_at_committed_offset_after_broker_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = Standalone::start(&dir.path().join("data"), &[]);
    let topic = "CompatRestart";
    let group = "compat-cg-restart";
    let mut producer = start_producer(&broker, "compat-pg-restart").await;
    create_topic(&mut producer, topic, TOPIC_QUEUES).await;
    let before: HashMap<String, Expected> = (0..400)
        .map(|i| (body_of(i, "sync"), expected(i, "sync")))
        .collect();
    send_in_mode(&producer, topic, 0..400, "sync").await;

    let inbox = Arc::new(Inbox::default());
    let consumer = start_push_consumer(
        &broker,
        group,
        topic,
        ConsumeFromWhere::ConsumeFromFirstOffset,
        inbox.clone(),
        0,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    assert!(
        inbox
            .wait_until(deadline, |got| got.len() >= before.len())
            .await,
        "received {} of {} before the restart",
        inbox.snapshot().len(),
        before.len()
    );
    let probe = Probe::new(&broker);
    shutdown_push_consumer(consumer).await;
    shutdown_producer(producer).await;
    probe
        .wait_committed_to_max(group, topic, TOPIC_QUEUES as i32, commit_deadline())
        .await;
    assert_exactly_once(&inbox.snapshot(), &before);
    drop(probe);

    broker.stop();
    broker.restart();

    let probe = Probe::new(&broker);
    let mut stored = 0;
    for q in 0..TOPIC_QUEUES as i32 {
        let max = probe.max_offset(topic, q).await;
        stored += max;
        assert_eq!(
            probe.committed(group, topic, q).await,
            Some(max),
            "queue {q}: committed offset survives the restart"
        );
    }
    assert_eq!(stored, 400, "every message survives the restart");
    let producer = start_producer(&broker, "compat-pg-restart").await;
    let after: HashMap<String, Expected> = (400..500)
        .map(|i| (body_of(i, "sync"), expected(i, "sync")))
        .collect();
    let acks_after = send_in_mode(&producer, topic, 400..500, "sync").await;
    // FIRST_OFFSET would replay everything if the committed offsets were lost.
    let inbox = Arc::new(Inbox::default());
    let consumer = start_push_consumer(
        &broker,
        group,
        topic,
        ConsumeFromWhere::ConsumeFromFirstOffset,
        inbox.clone(),
        1,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let arrived = inbox
        .wait_until(deadline, |got| {
            got.iter().filter(|r| after.contains_key(&r.body)).count() >= after.len()
        })
        .await;
    assert!(
        arrived,
        "received after restart: {}",
        inbox.snapshot().len()
    );
    shutdown_push_consumer(consumer).await;
    shutdown_producer(producer).await;
    probe
        .wait_committed_to_max(group, topic, TOPIC_QUEUES as i32, commit_deadline())
        .await;
    let got = inbox.snapshot();
    assert_exactly_once(&got, &after);
    // Offsets continue where they were: the first message after the restart
    // in each queue sits right after the ones consumed before it.
    assert_acks_match(&got, &acks_after, |_| "sync");
    broker.stop();
    let (ok, report) = standalone::store_check(&broker.data);
    assert!(ok, "store check after the restart:\n{report}");
}

/// Case 4: two consumers of one group split the 8 queues; every message
/// reaches exactly one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_in_one_group_split_the_queues() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let topic = "CompatSplit";
    let group = "compat-cg-split";
    let mut producer = start_producer(&broker, "compat-pg-split").await;
    let queues = create_topic(&mut producer, topic, TOPIC_QUEUES).await;

    let inbox = Arc::new(Inbox::default());
    let first = start_push_consumer(
        &broker,
        group,
        topic,
        ConsumeFromWhere::ConsumeFromFirstOffset,
        inbox.clone(),
        1,
    )
    .await;
    let second = start_push_consumer(
        &broker,
        group,
        topic,
        ConsumeFromWhere::ConsumeFromFirstOffset,
        inbox.clone(),
        2,
    )
    .await;

    // Rebalancing settles asynchronously. Send one probe per queue per round
    // until a round is consumed with each queue owned by one consumer and
    // both consumers owning queues; probes are not counted below.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut round = 0usize;
    let owners = loop {
        round += 1;
        let tag = format!("probe-{round}-");
        for mq in &queues {
            let m = Message::builder()
                .topic(topic)
                .tags("Probe")
                .body_slice(format!("{tag}{}", mq.queue_id()).as_bytes())
                .build_unchecked();
            producer
                .send_to_queue_with_timeout(m, mq.clone(), 10_000)
                .await
                .expect("probe send");
        }
        let round_deadline = (Instant::now() + Duration::from_secs(10)).min(deadline);
        inbox
            .wait_until(round_deadline, |got| {
                got.iter().filter(|r| r.body.starts_with(&tag)).count() >= queues.len()
            })
            .await;
        let mut owners: HashMap<i32, HashSet<usize>> = HashMap::new();
        for r in inbox.snapshot().iter().filter(|r| r.body.starts_with(&tag)) {
            owners.entry(r.queue_id).or_default().insert(r.consumer);
        }
        let settled = owners.len() == queues.len()
            && owners.values().all(|c| c.len() == 1)
            && owners.values().any(|c| c.contains(&1))
            && owners.values().any(|c| c.contains(&2));
        if settled {
            break owners;
        }
        assert!(
            Instant::now() < deadline,
            "the two consumers never split the queues: last round owners {owners:?}"
        );
    };

    let baseline = inbox.snapshot().len();
    let sent: HashMap<String, Expected> = (0..2000)
        .map(|i| (body_of(i, "sync"), expected(i, "sync")))
        .collect();
    let acks = send_in_mode(&producer, topic, 0..2000, "sync").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let all = inbox
        .wait_until(deadline, |got| {
            got[baseline..]
                .iter()
                .filter(|r| !r.body.starts_with("probe-"))
                .count()
                >= sent.len()
        })
        .await;
    assert!(
        all,
        "received {} of {}",
        inbox.snapshot().len() - baseline,
        sent.len()
    );
    let split: Vec<Received> = inbox
        .snapshot()
        .into_iter()
        .filter(|r| !r.body.starts_with("probe-"))
        .collect();
    assert_exactly_once(&split, &sent);
    assert_acks_match(&split, &acks, |_| "sync");
    let by_first = split.iter().filter(|r| r.consumer == 1).count();
    let by_second = split.iter().filter(|r| r.consumer == 2).count();
    assert!(
        by_first > 0 && by_second > 0,
        "split {by_first}/{by_second}"
    );
    // Each queue's messages went to the consumer that owned it.
    for r in &split {
        assert!(
            owners[&r.queue_id].contains(&r.consumer),
            "queue {} message reached consumer {}",
            r.queue_id,
            r.consumer
        );
    }

    // The first consumer leaves (committing its offsets, unregistering);
    // the broker tells the second, which takes over every queue where the
    // first stopped: the next messages all reach it, none twice.
    shutdown_push_consumer(first).await;
    let later: HashMap<String, Expected> = (2000..2400)
        .map(|i| (body_of(i, "sync"), expected(i, "sync")))
        .collect();
    let later_acks = send_in_mode(&producer, topic, 2000..2400, "sync").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let all = inbox
        .wait_until(deadline, |got| {
            got.iter().filter(|r| later.contains_key(&r.body)).count() >= later.len()
        })
        .await;
    assert!(all, "the remaining consumer did not take over every queue");
    shutdown_push_consumer(second).await;
    shutdown_producer(producer).await;
    Probe::new(&broker)
        .wait_committed_to_max(group, topic, TOPIC_QUEUES as i32, commit_deadline())
        .await;

    let got: Vec<Received> = inbox
        .snapshot()
        .into_iter()
        .filter(|r| !r.body.starts_with("probe-"))
        .collect();
    let mut everything = sent.clone();
    everything.extend(later.clone());
    assert_exactly_once(&got, &everything);
    let taken_over: Vec<Received> = got
        .iter()
        .filter(|r| later.contains_key(&r.body))
        .cloned()
        .collect();
    assert!(
        taken_over.iter().all(|r| r.consumer == 2),
        "a message reached the consumer that left"
    );
    assert_acks_match(&taken_over, &later_acks, |_| "sync");
}

/// Case 5: a lite pull consumer, assigned one queue and positioned at an
/// offset, reads exactly the messages from that offset on, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_consumer_reads_a_queue_from_an_offset() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let topic = "CompatLitePull";
    let mut producer = start_producer(&broker, "compat-pg-lite").await;
    let queues = create_topic(&mut producer, topic, TOPIC_QUEUES).await;
    let mq = queues[3].clone();
    for i in 0..100 {
        let r = producer
            .send_to_queue_with_timeout(message(topic, i, "sync"), mq.clone(), 10_000)
            .await
            .expect("send to queue 3")
            .expect("send result");
        assert_eq!(r.queue_offset, i as u64, "queue offset of message {i}");
    }
    // Noise in another queue, which must not show up.
    producer
        .send_to_queue_with_timeout(message(topic, 1000, "sync"), queues[4].clone(), 10_000)
        .await
        .expect("send to queue 4");
    // A send is acknowledged before its ConsumeQueue unit exists (as in
    // RocketMQ); the client validates seek offsets against GET_MAX_OFFSET.
    Probe::new(&broker)
        .wait_max_offset(topic, 3, 100, Instant::now() + Duration::from_secs(10))
        .await;

    let consumer = DefaultLitePullConsumer::builder(client_runtime("compat-lite"))
        .consumer_group("compat-cg-lite")
        .name_server_addr(broker.namesrv_addr())
        .broker_suspend_max_time_millis(1000)
        .consumer_timeout_millis_when_suspend(5000)
        .pull_batch_size(16)
        .poll_timeout_millis(1000)
        .auto_commit(false)
        .build()
        .expect("lite pull consumer");
    consumer
        .set_sub_expression_for_assign(topic, "*")
        .await
        .expect("sub expression");
    tokio::time::timeout(Duration::from_secs(30), consumer.start())
        .await
        .expect("lite pull start in time")
        .expect("lite pull start");
    // The queue comes from the consumer itself: in assign mode this client
    // resolves broker addresses only from routes it fetched (Java's
    // MQAdminImpl refreshes the route on a miss; rocketmq-client-rust's
    // DefaultLitePullConsumerImpl::min_offset/max_offset do not), so a
    // queue taken from the producer would make `seek` fail.
    let mq = consumer
        .fetch_message_queues(topic)
        .await
        .expect("lite pull route")
        .into_iter()
        .find(|q| q.queue_id() == mq.queue_id())
        .expect("queue 3 in the consumer's route");
    consumer.assign(vec![mq.clone()]).await.expect("assign");
    consumer.seek(&mq, 40).await.expect("seek to 40");

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got: Vec<MessageExt> = Vec::new();
    while got.len() < 60 && Instant::now() < deadline {
        got.extend(consumer.poll_with_timeout(1000).await);
    }
    tokio::time::timeout(Duration::from_secs(30), consumer.shutdown())
        .await
        .expect("lite pull shutdown in time");
    shutdown_producer(producer).await;

    let offsets: Vec<i64> = got.iter().map(|m| m.queue_offset()).collect();
    assert_eq!(
        offsets,
        (40..100).collect::<Vec<i64>>(),
        "offsets read from 40"
    );
    for m in &got {
        let i = m.queue_offset() as usize;
        let r = received(m, 0);
        assert_eq!(m.queue_id(), 3);
        assert_eq!(r.body, body_of(i, "sync"));
        assert_eq!(r.got, expected(i, "sync"));
    }
}

/// Delay levels of one second each, so retries and delayed messages arrive
/// quickly (RocketMQ's third level, the first retry, is 10 s by default).
const FAST_DELAY_LEVELS: &str =
    "messageDelayLevel=1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";

/// Beyond the five cases: a tag-filtered subscription sees only its tags,
/// and a message the listener fails comes back once through the group's
/// retry topic (CONSUMER_SEND_MSG_BACK, delay level, %RETRY% queue) with its
/// topic, body, keys and properties intact and reconsumeTimes 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_filter_and_retry_of_a_failed_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Standalone::start(&dir.path().join("data"), &[FAST_DELAY_LEVELS]);
    let topic = "CompatRetry";
    let group = "compat-cg-retry";
    let mut producer = start_producer(&broker, "compat-pg-retry").await;
    create_topic(&mut producer, topic, 4).await;

    // Message 3 (TagA) fails on its first delivery.
    const FAILS_ONCE: usize = 3;
    let deliveries = Arc::new(Mutex::new(Vec::<(Received, String, i32)>::new()));
    let changed = Arc::new(Notify::new());
    let mut consumer = DefaultMQPushConsumer::builder(client_runtime(group))
        .name_server_addr(broker.namesrv_addr())
        .consumer_group(group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_message_batch_max_size(1)
        .build();
    consumer
        .subscribe(topic, "TagA || TagC")
        .await
        .expect("subscribe with a tag expression");
    {
        let (deliveries, changed) = (deliveries.clone(), changed.clone());
        consumer.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                let mut status = ConsumeConcurrentlyStatus::ConsumeSuccess;
                for m in msgs {
                    let r = received(m, 0);
                    if r.got.seq == FAILS_ONCE.to_string() && m.reconsume_times() == 0 {
                        status = ConsumeConcurrentlyStatus::ReconsumeLater;
                    }
                    deliveries.lock().unwrap_or_else(|e| e.into_inner()).push((
                        r,
                        m.topic().as_str().to_string(),
                        m.reconsume_times(),
                    ));
                }
                changed.notify_waiters();
                Ok(status)
            },
        );
    }
    tokio::time::timeout(Duration::from_secs(30), consumer.start())
        .await
        .expect("consumer start in time")
        .expect("consumer start");

    let acks = send_in_mode(&producer, topic, 0..30, "sync").await;
    let wanted: HashMap<String, Expected> = (0..30)
        .filter(|i| expected(*i, "sync").tags != "TagB")
        .map(|i| (body_of(i, "sync"), expected(i, "sync")))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = |d: &[(Received, String, i32)]| d.len() > wanted.len();
    loop {
        let notified = changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if done(&deliveries.lock().unwrap_or_else(|e| e.into_inner())) {
            break;
        }
        if tokio::time::timeout(left(deadline), notified)
            .await
            .is_err()
        {
            break;
        }
    }
    shutdown_push_consumer(consumer).await;
    shutdown_producer(producer).await;

    let deliveries = deliveries.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        deliveries.iter().all(|(r, _, _)| r.got.tags != "TagB"),
        "a TagB message passed the TagA || TagC filter"
    );
    assert!(
        deliveries.iter().all(|(_, t, _)| t == topic),
        "retried messages show their original topic"
    );
    let firsts: Vec<Received> = deliveries
        .iter()
        .filter(|(_, _, times)| *times == 0)
        .map(|(r, _, _)| r.clone())
        .collect();
    assert_exactly_once(&firsts, &wanted);
    let retries: Vec<&(Received, String, i32)> = deliveries
        .iter()
        .filter(|(_, _, times)| *times > 0)
        .collect();
    assert_eq!(retries.len(), 1, "exactly one redelivery: {retries:?}");
    let (again, _, times) = retries[0];
    assert_eq!(*times, 1, "reconsumeTimes of the redelivery");
    assert_eq!(again.body, body_of(FAILS_ONCE, "sync"));
    assert_eq!(
        again.got,
        expected(FAILS_ONCE, "sync"),
        "properties survive the retry"
    );
    let first_ack = &acks
        .iter()
        .find(|(i, _)| *i == FAILS_ONCE)
        .expect("ack of the failing message")
        .1;
    assert_eq!(
        again.uniq_key, first_ack.uniq_key,
        "the retry keeps the message id"
    );
}

/// An orderly push consumer (LOCK_BATCH_MQ, per-queue serial consumption)
/// gets each queue's messages exactly in queue order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_consumer_gets_each_queue_in_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let topic = "CompatOrderly";
    let group = "compat-cg-orderly";
    let mut producer = start_producer(&broker, "compat-pg-orderly").await;
    let queues = create_topic(&mut producer, topic, 4).await;
    // 60 messages into queues 0 and 1 alternately, 30 each.
    for i in 0..60 {
        producer
            .send_to_queue_with_timeout(message(topic, i, "sync"), queues[i % 2].clone(), 10_000)
            .await
            .expect("send to queue")
            .expect("send result");
    }

    let inbox = Arc::new(Inbox::default());
    let mut consumer = DefaultMQPushConsumer::builder(client_runtime(group))
        .name_server_addr(broker.namesrv_addr())
        .consumer_group(group)
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .consume_message_batch_max_size(4)
        .build();
    consumer.subscribe(topic, "*").await.expect("subscribe");
    {
        let inbox = inbox.clone();
        consumer.register_message_listener_orderly(
            move |msgs: &[&MessageExt], ctx: &mut ConsumeOrderlyContext| {
                ctx.set_auto_commit(true);
                for m in msgs {
                    inbox.push(received(m, 0));
                }
                Ok(ConsumeOrderlyStatus::Success)
            },
        );
    }
    tokio::time::timeout(Duration::from_secs(30), consumer.start())
        .await
        .expect("consumer start in time")
        .expect("consumer start");
    let deadline = Instant::now() + Duration::from_secs(60);
    let all = inbox.wait_until(deadline, |got| got.len() >= 60).await;
    assert!(
        all,
        "orderly consumer received {} of 60",
        inbox.snapshot().len()
    );
    shutdown_push_consumer(consumer).await;
    shutdown_producer(producer).await;

    let got = inbox.snapshot();
    let sent: HashMap<String, Expected> = (0..60)
        .map(|i| (body_of(i, "sync"), expected(i, "sync")))
        .collect();
    assert_exactly_once(&got, &sent);
    for q in 0..2 {
        let order: Vec<i64> = got
            .iter()
            .filter(|r| r.queue_id == q)
            .map(|r| r.queue_offset)
            .collect();
        assert_eq!(
            order,
            (0..30).collect::<Vec<i64>>(),
            "queue {q} consumed in order"
        );
    }
}

/// The producer's admin lookups (view by offsetMsgId, query by key through
/// the index, search offset by time, earliest store time) and a delayed
/// message that arrives under its own topic after its delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_lookups_and_a_delayed_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Standalone::start(&dir.path().join("data"), &[FAST_DELAY_LEVELS]);
    let topic = "CompatLookup";
    let mut producer = start_producer(&broker, "compat-pg-lookup").await;
    let queues = create_topic(&mut producer, topic, 2).await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let acks = send_in_mode(&producer, topic, 0..20, "sync").await;
    Probe::new(&broker)
        .wait_max_offset(
            topic,
            acks[19].1.queue_id,
            acks[19].1.queue_offset + 1,
            Instant::now() + Duration::from_secs(10),
        )
        .await;

    // View by the broker's message id.
    let (i, ack) = &acks[7];
    let viewed = producer
        .view_message(topic, &ack.offset_msg_id)
        .await
        .expect("view message by offsetMsgId");
    let v = received(&viewed, 0);
    assert_eq!(v.body, body_of(*i, "sync"));
    assert_eq!(v.got, expected(*i, "sync"));
    assert_eq!(
        (v.queue_id, v.queue_offset),
        (ack.queue_id, ack.queue_offset)
    );

    // Query by business key through the index.
    let key = format!("key-{i}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let found = loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis() as u64;
        match producer
            .query_message(topic, &key, 32, before - 1000, now + 1000)
            .await
        {
            Ok(r) if !r.message_list().is_empty() => break r,
            other => assert!(Instant::now() < deadline, "query by key {key}: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let bodies: Vec<String> = found
        .message_list()
        .iter()
        .map(|m| received(m, 0).body)
        .collect();
    assert_eq!(
        bodies,
        vec![body_of(*i, "sync")],
        "query by key finds exactly its message"
    );

    // Offsets by time: before everything is the queue start; after, the end.
    let mq = queues
        .iter()
        .find(|q| q.queue_id() == ack.queue_id)
        .expect("queue of message 7")
        .clone();
    assert_eq!(
        producer
            .search_offset(&mq, before - 1000)
            .await
            .expect("search offset"),
        0
    );
    let earliest = producer
        .earliest_msg_store_time(&mq)
        .await
        .expect("earliest store time");
    assert!(
        earliest as u64 >= before - 1000,
        "earliest store time {earliest} vs {before}"
    );

    // A send to a topic nobody created auto-creates it from TBW102 with
    // the producer's default queue count (as RocketMQ does, at most
    // TBW102's own count), routable for the next sends.
    let r = producer
        .send_with_timeout(message("CompatAutoCreated", 0, "sync"), 10_000)
        .await
        .expect("send to a new topic")
        .expect("send result");
    assert_eq!(r.send_status, SendStatus::SendOk);
    let auto_queues = producer
        .fetch_publish_message_queues("CompatAutoCreated")
        .await
        .expect("route of the auto-created topic");
    assert_eq!(
        auto_queues.len(),
        producer.default_topic_queue_nums() as usize,
        "queues of the auto-created topic: {auto_queues:?}"
    );

    // A delayed message (level 2 = 1 s here) through a lite pull consumer.
    let delayed = Message::builder()
        .topic(topic)
        .tags("Later")
        .body_slice(b"delayed-body")
        .delay_level(2)
        .build_unchecked();
    let sent_at = Instant::now();
    let r = producer
        .send_to_queue_with_timeout(delayed, queues[0].clone(), 10_000)
        .await
        .expect("send delayed")
        .expect("send result");
    assert_eq!(r.send_status, SendStatus::SendOk);
    let consumer = DefaultLitePullConsumer::builder(client_runtime("compat-lookup-lite"))
        .consumer_group("compat-cg-lookup")
        .name_server_addr(broker.namesrv_addr())
        // Its shutdown waits for the pull parked at the broker (long
        // polling): keep that short.
        .broker_suspend_max_time_millis(1000)
        .consumer_timeout_millis_when_suspend(5000)
        .poll_timeout_millis(500)
        .auto_commit(false)
        .build()
        .expect("lite pull consumer");
    consumer
        .subscribe_with_expression(topic, "Later")
        .await
        .expect("subscribe");
    consumer.start().await.expect("lite pull start");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while got.is_empty() && Instant::now() < deadline {
        got.extend(consumer.poll_with_timeout(500).await);
    }
    let arrived_after = sent_at.elapsed();
    consumer.shutdown().await;
    shutdown_producer(producer).await;
    assert_eq!(got.len(), 1, "the delayed message arrives once");
    let m = &got[0];
    assert_eq!(m.body().as_deref(), Some(&b"delayed-body"[..]));
    assert_eq!(m.topic().as_str(), topic);
    assert_eq!(prop(m, "TAGS"), "Later");
    assert!(
        arrived_after >= Duration::from_millis(900),
        "delivered before its delay: {arrived_after:?}"
    );
}

/// The send/consume round trip again with a client that encodes its
/// headers in the binary ROCKETMQ form and reports an old protocol version
/// (V4_5_2 = 317, what rocketmq-client-go sends): the broker must decode
/// binary headers, and the NameServer answers such clients with fastjson's
/// bare numeric map keys in route bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_headers_from_an_old_client_version() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let wire = RemotingCommandDefaults::new(317, SerializeType::ROCKETMQ);
    let topic = "CompatBinary";
    let group = "compat-cg-binary";
    let mut producer = start_producer_with(&broker, "compat-pg-binary", wire).await;
    create_topic(&mut producer, topic, 4).await;
    let mut sent = HashMap::new();
    let mut acks = Vec::new();
    for (mode, range) in [
        ("sync", 0..300),
        ("async", 300..600),
        ("oneway", 600..700),
        ("batch", 700..1000),
    ] {
        for i in range.clone() {
            sent.insert(body_of(i, mode), expected(i, mode));
        }
        acks.extend(send_in_mode(&producer, topic, range, mode).await);
    }
    let inbox = Arc::new(Inbox::default());
    let consumer = start_push_consumer_with(
        &broker,
        group,
        topic,
        ConsumeFromWhere::ConsumeFromFirstOffset,
        inbox.clone(),
        0,
        wire,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let all = inbox
        .wait_until(deadline, |got| got.len() >= sent.len())
        .await;
    assert!(all, "received {} of {}", inbox.snapshot().len(), sent.len());
    shutdown_push_consumer(consumer).await;
    shutdown_producer(producer).await;
    Probe::new(&broker)
        .wait_committed_to_max(group, topic, 4, commit_deadline())
        .await;
    let got = inbox.snapshot();
    assert_exactly_once(&got, &sent);
    let mode_of = |i: usize| match i {
        0..300 => "sync",
        300..600 => "async",
        600..700 => "oneway",
        _ => "batch",
    };
    assert_acks_match(&got, &acks, mode_of);
}
