//! `basalt standalone` against a hostile client speaking the raw protocol:
//! names that are paths, counts that are allocations, forged checksums,
//! requests that hold resources, and a record in the log that no queue can
//! hold. After each attack the broker keeps serving other clients, `basalt
//! store check` passes, and the data of every other topic is byte-identical
//! to what it was before.
//!
//! Each case here failed on the broker before the hostile-input work: the
//! first two corrupted or deleted other data, the counts case never answered
//! and grew without bound, the checksum case left a store that refused to
//! open, and the unplaceable record stopped dispatch for every topic.

use crate::raw;
use crate::standalone;

use std::time::{Duration, Instant};

use basalt_common::record::RecordDraft;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, ConsumerSendMsgBackRequestHeader, CreateTopicRequestHeader,
    DeleteTopicRequestHeader, PullMessageRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use basalt_remoting::protocol::{
    ConsumerData, HeartbeatData, LockBatchRequestBody, MessageQueue, SubscriptionData,
};
use raw::*;
use standalone::{Standalone, proc_status_kb, store_check};

/// One batch entry, as a producer encodes it.
fn encode_entry(body: &[u8], props: &[u8]) -> Vec<u8> {
    basalt_common::batch::encode(&[basalt_common::batch::BatchEntry {
        flag: 0,
        body: bytes::Bytes::copy_from_slice(body),
        properties: bytes::Bytes::copy_from_slice(props),
    }])
    .unwrap()
}

/// Sends one message and returns its physical offset (from the msgId).
fn send_one(c: &mut Raw, topic: &str, body: &str) -> i64 {
    let r = c.call(send_request(topic, 0, body.as_bytes()));
    assert_eq!(r.code, response::SUCCESS, "send to {topic}: {:?}", r.remark);
    let id = r.ext_fields.get("msgId").expect("msgId").to_string();
    i64::from_str_radix(&id[id.len() - 16..], 16).expect("offset in msgId")
}

/// Every message of queue 0 of `topic`, as the bytes a pull returns
/// (waiting until dispatch has made the first one consumable).
fn pull_all(c: &mut Raw, topic: &str) -> Vec<u8> {
    let deadline = Instant::now() + IO_DEADLINE;
    loop {
        let r = c.call(pull_request(topic, 0, 0));
        if r.code == response::SUCCESS {
            return r.body.to_vec();
        }
        assert!(
            Instant::now() < deadline && r.code != response::TOPIC_NOT_EXIST,
            "pull {topic}: {} {:?}",
            r.code,
            r.remark
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The raw bytes of every ConsumeQueue file of `topic`.
fn queue_files(data: &std::path::Path, topic: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let dir = data.join("consumequeue").join(topic);
    let Ok(qs) = std::fs::read_dir(&dir) else {
        return out;
    };
    for q in qs.flatten() {
        for f in std::fs::read_dir(q.path()).into_iter().flatten().flatten() {
            let name = format!(
                "{}/{}",
                q.file_name().to_string_lossy(),
                f.file_name().to_string_lossy()
            );
            out.push((name, std::fs::read(f.path()).unwrap()));
        }
    }
    out.sort();
    out
}

fn assert_refused(r: &RemotingCommand, what: &str) {
    assert_ne!(r.code, response::SUCCESS, "{what} must be refused");
}

fn send_back(group: &str, offset: i64, delay_level: i32) -> RemotingCommand {
    let h = ConsumerSendMsgBackRequestHeader {
        offset,
        group: group.into(),
        delay_level,
        origin_msg_id: None,
        origin_topic: Some("Orders".into()),
        unit_mode: Some(false),
        max_reconsume_times: Some(16),
    };
    RemotingCommand::request(request::CONSUMER_SEND_MSG_BACK).with_ext(h.to_ext())
}

fn heartbeat(group: &str, topic: &str) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: "127.0.0.1@hostile".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            subscription_data_set: vec![SubscriptionData {
                topic: topic.into(),
                sub_string: "*".into(),
                expression_type: "TAG".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    RemotingCommand::request(request::HEART_BEAT).with_body(serde_json::to_vec(&data).unwrap())
}

fn update_offset(group: &str, topic: &str, queue_id: i32) -> RemotingCommand {
    let h = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        commit_offset: 1,
    };
    RemotingCommand::request(request::UPDATE_CONSUMER_OFFSET).with_ext(h.to_ext())
}

fn lock(group: &str, mqs: Vec<MessageQueue>) -> RemotingCommand {
    let body = LockBatchRequestBody {
        client_id: "127.0.0.1@hostile".into(),
        consumer_group: group.into(),
        mq_set: mqs,
        only_this_broker: false,
    };
    RemotingCommand::request(request::LOCK_BATCH_MQ).with_body(serde_json::to_vec(&body).unwrap())
}

fn create_topic(topic: &str, queues: i32) -> RemotingCommand {
    let h = CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: Some("TBW102".into()),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm: 6,
        ..Default::default()
    };
    RemotingCommand::request(request::UPDATE_AND_CREATE_TOPIC).with_ext(h.to_ext())
}

fn delete_topic(topic: &str) -> RemotingCommand {
    let h = DeleteTopicRequestHeader {
        topic: topic.into(),
    };
    RemotingCommand::request(request::DELETE_TOPIC_IN_BROKER).with_ext(h.to_ext())
}

fn create_group(body: &str) -> RemotingCommand {
    RemotingCommand::request(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(body.as_bytes().to_vec())
}

#[test]
fn names_that_are_paths_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let b = Standalone::start(&data, &[]);
    let mut c = Raw::connect(&b.broker_addr());
    let orders = send_one(&mut c, "Orders", "order-1");
    send_one(&mut c, "Victim", "victim-1");
    send_one(&mut c, "Victim", "victim-2");
    assert_serving(&mut c, 0);
    let victim_before = pull_all(&mut c, "Victim");
    let victim_files = queue_files(&data, "Victim");
    assert!(!victim_files.is_empty());

    // The reported attack: a dead-letter send-back whose group walks up
    // into another topic's queue directory.
    assert_refused(
        &c.call(send_back("/../Victim", orders, -1)),
        "send-back into ../Victim",
    );
    // And the one that deleted the CommitLog.
    assert_refused(
        &c.call(send_back("/../../commitlog", orders, -1)),
        "send-back into ../../commitlog",
    );
    assert_refused(
        &c.call(delete_topic("%DLQ%/../../commitlog")),
        "delete %DLQ%/../../commitlog",
    );
    for bad in ["..", "../Victim", "a/b", "x\u{0}y", "."] {
        assert_refused(&c.call(delete_topic(bad)), "delete a path");
        assert_refused(&c.call(create_topic(bad, 1)), "create a path");
        assert_refused(
            &c.call(heartbeat(bad, "Victim")),
            "heartbeat with a path group",
        );
        assert_refused(
            &c.call(heartbeat("CG", bad)),
            "heartbeat subscribing to a path",
        );
        assert_refused(
            &c.call(update_offset(bad, "Victim", 0)),
            "offset for a path group",
        );
        assert_refused(
            &c.call(update_offset("CG", bad, 0)),
            "offset for a path topic",
        );
        assert_refused(&c.call(send_request(bad, 0, b"x")), "send to a path");
        assert_refused(
            &c.call(lock(bad, vec![MessageQueue::new("Victim", "broker-a", 0)])),
            "lock for a path group",
        );
        let mut pull = pull_request("Victim", 0, 0);
        pull.ext_fields.insert("consumerGroup", bad);
        assert_refused(&c.call(pull), "pull for a path group");
        let body = format!(r#"{{"groupName":{}}}"#, serde_json::to_string(bad).unwrap());
        assert_refused(&c.call(create_group(&body)), "create a path group");
    }
    let long_group = "g".repeat(250);
    assert_refused(
        &c.call(send_back(&long_group, orders, -1)),
        "a group too long for a file name",
    );

    assert_serving(&mut c, 1);
    assert_eq!(
        pull_all(&mut c, "Victim"),
        victim_before,
        "Victim's messages"
    );
    assert_eq!(
        queue_files(&data, "Victim"),
        victim_files,
        "Victim's queue files"
    );
    assert!(data.join("commitlog").read_dir().unwrap().next().is_some());
    drop(c);
    let mut b = b;
    b.stop();
    let (ok, report) = store_check(&data);
    assert!(ok, "{report}");
}

#[test]
fn counts_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let b = Standalone::start(&data, &[]);
    let pid = b.pid().unwrap();
    let mut c = Raw::connect(&b.broker_addr());
    send_one(&mut c, "Keep", "keep-1");
    let keep_before = pull_all(&mut c, "Keep");
    let rss_before = proc_status_kb(pid, "VmRSS").unwrap();

    // The reported attack: a group whose retry topic has two billion queues,
    // then a send to the last of them.
    let r = c.call(create_group(
        r#"{"groupName":"Greedy","retryQueueNums":2000000000}"#,
    ));
    assert_refused(&r, "retryQueueNums of two billion");
    let mut to_retry = send_request("%RETRY%Greedy", 0, b"x");
    to_retry.ext_fields.insert("queueId", "2000000000");
    assert_refused(&c.call(to_retry), "a send to queue two billion");
    assert_refused(
        &c.call(send_request("Keep", 2_000_000_000, b"x")),
        "queue id past the topic",
    );
    assert_refused(&c.call(create_topic("Wide", 1_000_000)), "a million queues");
    assert_refused(
        &c.call(create_topic("Wide", 1025)),
        "past maxQueueNumsPerTopic",
    );
    assert_eq!(c.call(create_topic("Wide", 1024)).code, response::SUCCESS);

    // Offsets only for queues that exist.
    let r = c.call(update_offset("CG", "NoSuchTopic", 0));
    assert_eq!(r.code, response::TOPIC_NOT_EXIST, "{:?}", r.remark);
    assert_refused(
        &c.call(update_offset("CG", "Keep", 5000)),
        "offset for queue 5000",
    );
    // Locks only for queues that exist: a made-up set leaves no trace.
    let fake: Vec<MessageQueue> = (0..10_000)
        .map(|i| MessageQueue::new(format!("Fake{i}"), "broker-a", i))
        .collect();
    assert_refused(&c.call(lock("CG", fake)), "locks on 10,000 made-up queues");

    // A batch body over maxMessageSize made of tiny entries.
    let mut batch = Vec::with_capacity(5 << 20);
    let entry = encode_entry(b"b", b"");
    while batch.len() < (4 << 20) + 1 {
        batch.extend_from_slice(&entry);
    }
    let mut req = send_request("Keep", 0, &batch);
    req.code = request::SEND_BATCH_MESSAGE;
    let started = Instant::now();
    assert_refused(&c.call(req), "a 4 MiB batch of tiny entries");
    assert!(started.elapsed() < Duration::from_secs(5));

    assert_serving(&mut c, 0);
    assert_eq!(pull_all(&mut c, "Keep"), keep_before);
    let rss_after = proc_status_kb(pid, "VmRSS").unwrap();
    assert!(
        rss_after < rss_before + 200 * 1024,
        "resident memory grew from {rss_before} kB to {rss_after} kB"
    );
    drop(c);
    let mut b = b;
    b.stop();
    let (ok, report) = store_check(&data);
    assert!(ok, "{report}");
}

#[test]
fn long_polls_and_auto_creation_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let b = Standalone::start(
        &data,
        &["maxLongPollingSuspendMillis=1000", "maxTopicCount=40"],
    );
    let mut c = Raw::connect(&b.broker_addr());
    send_one(&mut c, "Keep", "keep-1");
    pull_all(&mut c, "Keep");
    assert_serving(&mut c, 0);
    // A pull that asks to be held for an hour is held for the broker's limit.
    let h = PullMessageRequestHeader {
        consumer_group: "CG".into(),
        topic: "Keep".into(),
        queue_id: 0,
        queue_offset: 1,
        max_msg_nums: 32,
        sys_flag: 0x2 | 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 3_600_000,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
    };
    let started = Instant::now();
    let r = c.call(RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()));
    assert_eq!(r.code, response::PULL_NOT_FOUND, "{:?}", r.remark);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "held {:?}",
        started.elapsed()
    );

    // Auto-creation stops at maxTopicCount with a clear refusal.
    let mut refused = None;
    for i in 0..60 {
        let r = c.call(send_request(&format!("Auto{i}"), -1, b"a"));
        if r.code != response::SUCCESS {
            refused = Some(r);
            break;
        }
    }
    let r = refused.expect("auto-creation must stop at maxTopicCount");
    assert!(
        r.remark.as_deref().unwrap_or("").contains("maxTopicCount"),
        "{:?}",
        r.remark
    );
    assert_serving(&mut c, 1);
    drop(c);
    let mut b = b;
    b.stop();
    let (ok, report) = store_check(&data);
    assert!(ok, "{report}");
}

/// `__CRC32#` 0x01 ten digits 0x02 at the end of the properties: what the
/// store appends itself when `enabledAppendPropCRC` is on.
fn forged_crc_properties() -> String {
    "TAGS\u{1}A\u{2}__CRC32#\u{1}0123456789\u{2}".into()
}

#[test]
fn a_forged_crc_trailer_never_reaches_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut b = Standalone::start(&data, &["enabledAppendPropCRC=false"]);
    let mut c = Raw::connect(&b.broker_addr());
    let mut req = send_request("Forged", 0, b"forged body");
    req.ext_fields.insert("i", forged_crc_properties());
    let r = c.call(req);
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let mut batch_req = send_request(
        "Forged",
        0,
        &encode_entry(b"batched", forged_crc_properties().as_bytes()),
    );
    batch_req.code = request::SEND_BATCH_MESSAGE;
    assert_eq!(c.call(batch_req).code, response::SUCCESS);
    assert_serving(&mut c, 0);
    drop(c);
    // A crash: abnormal recovery checks every record again.
    b.kill();
    b.restart();
    let mut c = Raw::connect(&b.broker_addr());
    assert_serving(&mut c, 1);
    let pulled = pull_all(&mut c, "Forged");
    assert!(pulled.windows(11).any(|w| w == b"forged body"));
    assert!(
        !pulled.windows(8).any(|w| w == b"__CRC32#"),
        "the forged trailer was stored"
    );
    drop(c);
    b.stop();
    let (ok, report) = store_check(&data);
    assert!(ok, "{report}");
}

#[test]
fn an_unplaceable_record_in_the_log_does_not_stop_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Write a store whose log holds a record no queue can hold (a replica
    // or an older version could have written it), between good records,
    // and leave it as a crash would: abnormal recovery re-dispatches it all.
    {
        let mut cfg = basalt_store::StoreConfig::new(&data);
        cfg.commit_log_file_size = 1 << 30;
        cfg.consume_queue_units_per_file = 300_000;
        let store = basalt_store::MessageStore::open(cfg).unwrap();
        let host = store.store_host();
        for (i, topic) in ["Before", "a/../../escape", "After"].iter().enumerate() {
            let body = format!("record-{i}");
            let draft = RecordDraft {
                topic,
                queue_id: 0,
                flag: 0,
                sys_flag: 0,
                born_timestamp: 1_700_000_000_000,
                born_host: host,
                store_host: host,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: body.as_bytes(),
                properties: b"",
            };
            store.commit_log().append(&draft).unwrap();
        }
        store.flush_commit_log().unwrap();
        store.shutdown();
    }
    std::fs::remove_dir_all(data.join("consumequeue")).unwrap();
    std::fs::write(data.join("abort"), b"").unwrap();

    let mut b = Standalone::start(&data, &[]);
    let mut c = Raw::connect(&b.broker_addr());
    for topic in ["Before", "After"] {
        assert_eq!(c.call(create_topic(topic, 1)).code, response::SUCCESS);
    }
    assert!(
        pull_all(&mut c, "Before")
            .windows(8)
            .any(|w| w == b"record-0")
    );
    assert!(
        pull_all(&mut c, "After")
            .windows(8)
            .any(|w| w == b"record-2")
    );
    assert_serving(&mut c, 0);
    assert!(!data.join("escape").exists());
    drop(c);
    b.stop();
    let (ok, report) = store_check(&data);
    assert!(ok, "{report}");
    assert!(report.contains("unplaceable"), "{report}");
}
