//! Producer and pull consumer against scripted fake brokers registered with a
//! real basalt-namesrv.

mod common;

use std::time::Duration;

use basalt_client::{
    ClientConfig, ClientError, Message, Producer, ProducerOptions, PullConsumer, PullStatus,
    SendStatus, TopicQueue,
};
use basalt_common::batch;
use basalt_remoting::code::{request, response};
use common::*;

fn config(ns: &str) -> ClientConfig {
    ClientConfig {
        request_timeout: Duration::from_secs(5),
        ..ClientConfig::new(ns)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_v2_header_fields_and_body() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("T1", 4)]).await;
    let p = Producer::new("PG", config(&ns_addr));
    p.start().await.unwrap();
    let msg = Message::new("T1", "hello")
        .with_tags("TagA")
        .with_keys(["k1", "k2"])
        .with_flag(7)
        .with_property("color", "red");
    let before = basalt_common::time::now_millis();
    let r = p.send(&msg).await.unwrap();
    let after = basalt_common::time::now_millis();
    assert_eq!(r.status, SendStatus::SendOk);
    assert_eq!(r.msg_id.len(), 32);
    assert_eq!(r.region_id, "DefaultRegion");

    let sends = b.requests_with(request::SEND_MESSAGE_V2);
    assert_eq!(sends.len(), 1);
    let req = &sends[0];
    let keys: Vec<&str> = req.ext_fields.iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "n"
        ]
    );
    let get = |k: &str| req.ext_fields.get(k).unwrap().to_string();
    assert_eq!(get("a"), "PG");
    assert_eq!(get("b"), "T1");
    assert_eq!(get("c"), "TBW102");
    assert_eq!(get("d"), "4");
    let queue_id: i32 = get("e").parse().unwrap();
    assert!((0..4).contains(&queue_id));
    assert_eq!(get("f"), "0");
    let born: i64 = get("g").parse().unwrap();
    assert!(born >= before && born <= after);
    assert_eq!(get("h"), "7");
    assert_eq!(
        get("i"),
        format!(
            "UNIQ_KEY\u{1}{}\u{2}TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}WAIT\u{1}true\u{2}color\u{1}red\u{2}",
            r.msg_id
        )
    );
    assert_eq!(get("j"), "0");
    assert_eq!(get("k"), "false");
    assert_eq!(get("m"), "false");
    assert_eq!(get("n"), "broker-a");
    assert_eq!(&req.body[..], b"hello");

    assert_eq!(r.queue, TopicQueue::new("T1", "broker-a", queue_id));
    assert_eq!(r.queue_offset, 0);
    assert_eq!(
        r.offset_msg_id,
        basalt_common::msgid::encode(b.addr().parse().unwrap(), 0)
    );
    let stored = b.messages("T1", queue_id);
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].property("UNIQ_KEY").as_deref(),
        Some(r.msg_id.as_str())
    );
    assert_eq!(stored[0].flag, 7);

    // Topic names are checked before the first lookup; bodies every time.
    for bad in [Message::new("bad topic", "x"), Message::new("T1", "")] {
        assert!(matches!(
            p.send(&bad).await,
            Err(ClientError::InvalidMessage(_))
        ));
    }
    assert!(p.fetch_publish_queues("bad/topic").await.is_err());

    p.shutdown().await;
    let unreg = b.requests_with(request::UNREGISTER_CLIENT);
    assert_eq!(unreg.len(), 1);
    assert_eq!(unreg[0].ext_fields.get("producerGroup"), Some("PG"));
    assert_eq!(
        p.send(&msg).await.unwrap_err().to_string(),
        ClientError::NotStarted.to_string()
    );
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_busy_is_retried_on_the_other_broker() {
    let (ns, ns_addr) = start_namesrv().await;
    let a = FakeBroker::start("broker-a", &ns_addr, &[("T2", 4)]).await;
    let b = FakeBroker::start("broker-b", &ns_addr, &[("T2", 4)]).await;
    a.state.script.lock().fail_all_sends = Some(response::SYSTEM_BUSY);
    let p = Producer::new("PG", config(&ns_addr));
    p.start().await.unwrap();
    // Round-robin over 8 queues: some first attempts land on broker-a.
    for i in 0..8 {
        let r = p.send(&Message::new("T2", format!("m{i}"))).await.unwrap();
        assert_eq!(r.queue.broker_name, "broker-b", "send {i}");
    }
    assert!(a.count(request::SEND_MESSAGE_V2) >= 1);
    assert_eq!(b.count(request::SEND_MESSAGE_V2), 8);
    // Every retry went to the other broker: at most one attempt per message at a.
    assert!(a.count(request::SEND_MESSAGE_V2) <= 8);

    // Both busy: 1 + 2 retries, then the broker's error.
    b.state.script.lock().fail_all_sends = Some(response::SYSTEM_BUSY);
    let (a0, b0) = (
        a.count(request::SEND_MESSAGE_V2),
        b.count(request::SEND_MESSAGE_V2),
    );
    let err = p.send(&Message::new("T2", "x")).await.unwrap_err();
    assert_eq!(err.response_code(), Some(response::SYSTEM_BUSY));
    let attempts = a.count(request::SEND_MESSAGE_V2) - a0 + b.count(request::SEND_MESSAGE_V2) - b0;
    assert_eq!(attempts, 3);

    // A code Java does not retry fails at once.
    a.state.script.lock().fail_all_sends = Some(response::MESSAGE_ILLEGAL);
    b.state.script.lock().fail_all_sends = Some(response::MESSAGE_ILLEGAL);
    let (a0, b0) = (
        a.count(request::SEND_MESSAGE_V2),
        b.count(request::SEND_MESSAGE_V2),
    );
    let err = p.send(&Message::new("T2", "x")).await.unwrap_err();
    assert_eq!(err.response_code(), Some(response::MESSAGE_ILLEGAL));
    let attempts = a.count(request::SEND_MESSAGE_V2) - a0 + b.count(request::SEND_MESSAGE_V2) - b0;
    assert_eq!(attempts, 1);

    // "Stored, but" codes are results, not errors.
    a.state.script.lock().fail_all_sends = None;
    b.state.script.lock().fail_all_sends = None;
    a.state
        .script
        .lock()
        .stored_but
        .push_back(response::FLUSH_DISK_TIMEOUT);
    b.state
        .script
        .lock()
        .stored_but
        .push_back(response::FLUSH_DISK_TIMEOUT);
    let (a0, b0) = (
        a.count(request::SEND_MESSAGE_V2),
        b.count(request::SEND_MESSAGE_V2),
    );
    let r = p.send(&Message::new("T2", "x")).await.unwrap();
    assert_eq!(r.status, SendStatus::FlushDiskTimeout);
    let attempts = a.count(request::SEND_MESSAGE_V2) - a0 + b.count(request::SEND_MESSAGE_V2) - b0;
    assert_eq!(attempts, 1);
    p.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topic_falls_back_to_the_auto_create_route() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[]).await;
    let p = Producer::new("PG", config(&ns_addr));
    p.start().await.unwrap();
    let r = p.send(&Message::new("NewTopic", "first")).await.unwrap();
    assert_eq!(r.status, SendStatus::SendOk);
    let req = &b.requests_with(request::SEND_MESSAGE_V2)[0];
    assert_eq!(req.ext_fields.get("b"), Some("NewTopic"));
    assert_eq!(req.ext_fields.get("c"), Some("TBW102"));
    assert_eq!(req.ext_fields.get("d"), Some("4"));
    // TBW102 has 8 queues; the fallback route offers min(4, 8).
    assert!(r.queue.queue_id < 4);
    assert_eq!(p.fetch_publish_queues("NewTopic").await.unwrap().len(), 4);
    // The broker registers the topic it created.
    let inst = p.instance().clone();
    let mut found = false;
    for _ in 0..200 {
        if inst.fetch_route("NewTopic").await.is_ok() {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(found, "the auto-created topic was never registered");
    p.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_body_and_result() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TB", 1)]).await;
    let p = Producer::new("PG", config(&ns_addr));
    p.start().await.unwrap();
    let msgs = vec![
        Message::new("TB", "one").with_tags("A").with_flag(1),
        Message::new("TB", "two").with_key("k2").with_flag(2),
        Message::new("TB", "three").with_property("p", "v"),
    ];
    let r = p.send_batch(&msgs).await.unwrap();
    let ids: Vec<&str> = r.msg_id.split(',').collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(r.offset_msg_id.split(',').count(), 3);
    assert_eq!(r.queue_offset, 0);

    let req = &b.requests_with(request::SEND_BATCH_MESSAGE)[0];
    assert_eq!(req.ext_fields.get("m"), Some("true"));
    assert_eq!(req.ext_fields.get("i"), Some("WAIT\u{1}true\u{2}"));
    assert_eq!(req.ext_fields.get("f"), Some("0"));
    let entries = batch::decode(&req.body).unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!(
        entries.iter().map(|e| e.flag).collect::<Vec<_>>(),
        [1, 2, 0]
    );
    assert_eq!(&entries[1].body[..], b"two");
    for (e, id) in entries.iter().zip(&ids) {
        let props = String::from_utf8(e.properties.to_vec()).unwrap();
        assert_eq!(prop(&props, "UNIQ_KEY").as_deref(), Some(*id));
        assert_eq!(prop(&props, "WAIT").as_deref(), Some("true"));
    }
    assert_eq!(
        prop(&String::from_utf8_lossy(&entries[0].properties), "TAGS").as_deref(),
        Some("A")
    );
    assert_eq!(
        prop(&String::from_utf8_lossy(&entries[1].properties), "KEYS").as_deref(),
        Some("k2")
    );
    assert_eq!(
        prop(&String::from_utf8_lossy(&entries[2].properties), "p").as_deref(),
        Some("v")
    );
    let stored = b.messages("TB", 0);
    assert_eq!(
        stored.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
        [0, 1, 2]
    );

    // Batch rules.
    let mixed = vec![Message::new("TB", "a"), Message::new("Other", "b")];
    assert!(matches!(
        p.send_batch(&mixed).await,
        Err(ClientError::InvalidMessage(_))
    ));
    let delayed = vec![Message::new("TB", "a").with_delay_level(2)];
    assert!(matches!(
        p.send_batch(&delayed).await,
        Err(ClientError::InvalidMessage(_))
    ));
    assert!(matches!(
        p.send_batch(&[]).await,
        Err(ClientError::InvalidMessage(_))
    ));
    p.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_to_oneway_async_v1_and_compression() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("T3", 4)]).await;
    let p = Producer::new("PG", config(&ns_addr));
    p.start().await.unwrap();

    let mq = TopicQueue::new("T3", "broker-a", 2);
    let r = p.send_to(&Message::new("T3", "to-2"), &mq).await.unwrap();
    assert_eq!(r.queue, mq);
    assert_eq!(b.messages("T3", 2).len(), 1);
    let wrong = TopicQueue::new("Other", "broker-a", 0);
    assert!(p.send_to(&Message::new("T3", "x"), &wrong).await.is_err());

    p.send_oneway(&Message::new("T3", "oneway")).await.unwrap();
    wait_until("oneway stored", || {
        (0..4).map(|q| b.messages("T3", q).len()).sum::<usize>() == 2
    })
    .await;

    let handles: Vec<_> = (0..20)
        .map(|i| p.send_async(Message::new("T3", format!("async-{i}"))))
        .collect();
    for h in handles {
        assert_eq!(h.await.unwrap().unwrap().status, SendStatus::SendOk);
    }

    // A large compressible body is zlib-compressed; pulling restores it.
    let big = "abcdefgh".repeat(2048);
    let r = p
        .send_to(
            &Message::new("T3", big.clone()),
            &TopicQueue::new("T3", "broker-a", 3),
        )
        .await
        .unwrap();
    let last = b.requests_with(request::SEND_MESSAGE_V2).pop().unwrap();
    assert_eq!(last.ext_fields.get("f"), Some("769")); // COMPRESSED | ZLIB << 8
    assert!(last.body.len() < big.len());
    let c = PullConsumer::new("PULLG", config(&ns_addr));
    c.start().await.unwrap();
    let pr = c
        .pull(&r.queue, "*", r.queue_offset, 1, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        pr.msgs[0].body == big.as_bytes(),
        "the body was not restored"
    );
    assert_eq!(pr.msgs[0].sys_flag & 1, 0);

    // The V1 form with long header names.
    let v1 = Producer::with_options(
        "PG1",
        config(&ns_addr),
        ProducerOptions {
            send_smart_msg: false,
            ..Default::default()
        },
    );
    v1.start().await.unwrap();
    v1.send(&Message::new("T3", "v1")).await.unwrap();
    let req = &b.requests_with(request::SEND_MESSAGE)[0];
    assert_eq!(req.ext_fields.get("producerGroup"), Some("PG1"));
    assert_eq!(req.ext_fields.get("defaultTopic"), Some("TBW102"));
    assert_eq!(req.ext_fields.get("bname"), Some("broker-a"));
    v1.shutdown().await;
    c.shutdown().await;
    p.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_consumer_decodes_filters_and_tracks_offsets() {
    let (ns, ns_addr) = start_namesrv().await;
    let b = FakeBroker::start("broker-a", &ns_addr, &[("TP", 2)]).await;
    for i in 0..6 {
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        b.put(
            "TP",
            0,
            format!("body-{i}").as_bytes(),
            &format!("UNIQ_KEY\u{1}U{i}\u{2}TAGS\u{1}{tag}\u{2}KEYS\u{1}key{i}\u{2}"),
        );
    }
    let c = PullConsumer::new("PULLG", config(&ns_addr));
    assert!(matches!(
        c.pull(
            &TopicQueue::new("TP", "broker-a", 0),
            "*",
            0,
            1,
            Duration::from_secs(1)
        )
        .await,
        Err(ClientError::NotStarted)
    ));
    c.start().await.unwrap();
    let queues = c.fetch_queues("TP").await.unwrap();
    assert_eq!(
        queues,
        [
            TopicQueue::new("TP", "broker-a", 0),
            TopicQueue::new("TP", "broker-a", 1)
        ]
    );
    let mq = &queues[0];

    let r = c
        .pull(mq, "*", 0, 32, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(r.msgs.len(), 6);
    assert_eq!((r.next_begin_offset, r.min_offset, r.max_offset), (6, 0, 6));
    let m = &r.msgs[3];
    assert_eq!(m.queue_offset, 3);
    assert_eq!(&m.body[..], b"body-3");
    assert_eq!(m.msg_id, "U3");
    assert_eq!(m.tags.as_deref(), Some("TagB"));
    assert_eq!(m.keys, ["key3"]);
    assert_eq!(m.broker_name, "broker-a");
    assert_eq!(m.property("MAX_OFFSET"), Some("6"));
    assert_eq!(m.store_host.to_string(), b.addr());
    assert_eq!(
        m.offset_msg_id,
        basalt_common::msgid::encode(m.store_host, m.commit_log_offset)
    );
    let req = b.requests_with(request::PULL_MESSAGE).pop().unwrap();
    assert_eq!(req.ext_fields.get("sysFlag"), Some("4")); // SUBSCRIPTION only
    assert_eq!(req.ext_fields.get("subscription"), Some("*"));

    // Broker-side filtering by tag hash.
    let r = c
        .pull(mq, "TagA", 0, 32, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        r.msgs.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
        [0, 2, 4]
    );
    // A broker that returns everything (hash collisions): the client filters again.
    b.state.script.lock().no_broker_filter = true;
    let r = c
        .pull(mq, "TagB || TagC", 0, 32, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(
        r.msgs.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
        [1, 3, 5]
    );
    assert_eq!(r.next_begin_offset, 6);
    b.state.script.lock().no_broker_filter = false;

    // At the end: nothing new; past the end: offset moved.
    let r = c
        .pull(mq, "*", 6, 32, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!((r.status, r.next_begin_offset), (PullStatus::NoNewMsg, 6));
    let r = c
        .pull(mq, "*", 100, 32, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.next_begin_offset),
        (PullStatus::OffsetIllegal, 6)
    );
    let r = c
        .pull(mq, "TagZ", 0, 32, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.next_begin_offset),
        (PullStatus::NoMatchedMsg, 6)
    );

    // Long polling: the pull is held until a message arrives.
    let c2 = c.clone();
    let mq2 = mq.clone();
    let held = tokio::spawn(async move {
        c2.pull_blocking(&mq2, "*", 6, 32, Duration::from_secs(20))
            .await
    });
    wait_until("the blocking pull reached the broker", || {
        b.requests_with(request::PULL_MESSAGE)
            .iter()
            .any(|r| r.ext_fields.get("sysFlag") == Some("6"))
    })
    .await;
    b.put("TP", 0, b"late", "");
    let r = held.await.unwrap().unwrap();
    assert_eq!(r.status, PullStatus::Found);
    assert_eq!(&r.msgs[0].body[..], b"late");

    // Offsets.
    assert_eq!(c.query_offset(mq).await.unwrap(), None);
    c.update_offset(mq, 5).await.unwrap();
    assert_eq!(c.query_offset(mq).await.unwrap(), Some(5));
    assert_eq!(b.consumer_offset("PULLG", "TP", 0), Some(5));
    assert_eq!(c.max_offset(mq).await.unwrap(), 7);
    assert_eq!(c.min_offset(mq).await.unwrap(), 0);
    assert_eq!(c.search_offset(mq, 0).await.unwrap(), 0);
    assert_eq!(c.search_offset(mq, i64::MAX).await.unwrap(), 7);
    assert!(
        c.pull(mq, "*", -1, 1, Duration::from_secs(1))
            .await
            .is_err()
    );

    c.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_broker_is_skipped_on_retry() {
    let (ns, ns_addr) = start_namesrv().await;
    let a = FakeBroker::start("broker-a", &ns_addr, &[("TD", 2)]).await;
    let b = FakeBroker::start("broker-b", &ns_addr, &[("TD", 2)]).await;
    let p = Producer::new("PG", config(&ns_addr));
    p.start().await.unwrap();
    p.send(&Message::new("TD", "warm")).await.unwrap();
    // broker-a goes away; the client's cached route still lists it.
    a.shutdown().await;
    for i in 0..8 {
        let r = p.send(&Message::new("TD", format!("m{i}"))).await.unwrap();
        assert_eq!(r.queue.broker_name, "broker-b", "send {i}");
    }
    assert!(b.count(request::SEND_MESSAGE_V2) >= 8);
    p.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}
