//! The broker over the wire, driven with raw remoting commands: send, pull,
//! long polling, heartbeats, offsets, admin, delayed delivery, bad input.
#![allow(clippy::field_reassign_with_default)] // configs read like broker.conf, one key a line

mod tx_wire;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use basalt_broker::{BrokerConfig, BrokerHandle};
use basalt_common::properties::Properties;
use basalt_common::record;
use basalt_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, PullMessageRequestHeader, PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
};
use basalt_remoting::protocol::TopicRouteData;
use basalt_remoting::{RemotingClient, RemotingClientConfig, RemotingCommand};

struct Cluster {
    _dir: tempfile::TempDir,
    ns: Option<NameServerHandle>,
    broker: Option<BrokerHandle>,
    client: RemotingClient,
    broker_addr: String,
    ns_addr: String,
}

async fn cluster_with(edit: impl FnOnce(&mut BrokerConfig)) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let ns = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let ns_addr = ns.local_addr().to_string();
    let mut cfg = BrokerConfig::default();
    // Tests must not depend on how full the machine's disk is.
    cfg.disk_space_warning_level_ratio = 100;
    cfg.disk_space_clean_forcibly_ratio = 100;
    cfg.store_path_root_dir = dir.path().to_path_buf();
    cfg.listen_addr = "127.0.0.1".parse().unwrap();
    cfg.listen_port = 0;
    cfg.namesrv_addr = Some(ns_addr.clone());
    cfg.mapped_file_size_commit_log = 1024 * 1024;
    cfg.mapped_file_size_consume_queue = 1000 * 20;
    cfg.max_message_size = 256 * 1024;
    edit(&mut cfg);
    let broker = basalt_broker::start(cfg).await.unwrap();
    let broker_addr = broker.broker().broker_addr();
    Cluster {
        _dir: dir,
        ns: Some(ns),
        broker: Some(broker),
        client: RemotingClient::new(RemotingClientConfig::default()),
        broker_addr,
        ns_addr,
    }
}

async fn cluster() -> Cluster {
    cluster_with(|_| {}).await
}

impl Cluster {
    async fn call(&self, cmd: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(&self.broker_addr, cmd, Duration::from_secs(20))
            .await
            .unwrap()
    }

    async fn send(&self, topic: &str, queue_id: i32, body: &[u8], tags: &str) -> RemotingCommand {
        let mut p = Properties::new();
        p.set("TAGS", tags);
        p.set("KEYS", format!("k-{}", String::from_utf8_lossy(body)));
        let h = SendMessageRequestHeader {
            producer_group: "PG".into(),
            topic: topic.into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id,
            sys_flag: 0,
            born_timestamp: basalt_common::time::now_millis(),
            flag: 0,
            properties: Some(String::from_utf8(p.encode()).unwrap()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            batch: Some(false),
            max_reconsume_times: None,
            broker_name: None,
        };
        self.call(
            RemotingCommand::request(request::SEND_MESSAGE_V2)
                .with_ext(h.to_ext_v2())
                .with_body(body.to_vec()),
        )
        .await
    }

    async fn pull(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        sub: &str,
        suspend_ms: i64,
    ) -> RemotingCommand {
        let h = PullMessageRequestHeader {
            consumer_group: "CG".into(),
            topic: topic.into(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: 0x4 | if suspend_ms > 0 { 0x2 } else { 0 },
            commit_offset: 0,
            suspend_timeout_millis: suspend_ms,
            subscription: Some(sub.into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            max_msg_bytes: None,
        };
        self.call(RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()))
            .await
    }

    /// Waits until dispatch has caught up with everything sent so far
    /// (a send is acknowledged before its ConsumeQueue unit exists).
    async fn settle(&self) {
        let store = self.broker.as_ref().unwrap().broker().store().clone();
        let ok = tokio::task::spawn_blocking(move || {
            store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10))
        })
        .await
        .unwrap();
        assert!(ok, "dispatch did not catch up");
    }

    async fn stop(mut self) {
        if let Some(b) = self.broker.take() {
            b.shutdown().await;
        }
        if let Some(n) = self.ns.take() {
            n.shutdown().await;
        }
    }
}

fn bodies(resp: &RemotingCommand) -> Vec<(i64, Vec<u8>)> {
    record::decode_all(&resp.body, true)
        .unwrap()
        .into_iter()
        .map(|m| (m.queue_offset, m.body.to_vec()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_then_pull_and_route_registration() {
    let c = cluster().await;
    for i in 0..10 {
        let r = c
            .send("Orders", 1, format!("m{i}").as_bytes(), "TagA")
            .await;
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let h = SendMessageResponseHeader::from_ext(&r.ext_fields).unwrap();
        assert_eq!(h.queue_id, 1);
        assert_eq!(h.queue_offset, i);
        assert_eq!(h.msg_id.len(), 32);
        assert!(r.ext_fields.get("MSG_REGION").is_some());
    }
    c.settle().await;
    let r = c.pull("Orders", 1, 0, "*", 0).await;
    assert_eq!(r.code, response::SUCCESS);
    let got = bodies(&r);
    assert_eq!(got.len(), 10);
    assert_eq!(got[3], (3, b"m3".to_vec()));
    let h = PullMessageResponseHeader::from_ext(&r.ext_fields).unwrap();
    assert_eq!(h.next_begin_offset, 10);
    assert_eq!(h.max_offset, 10);

    // The auto-created topic reaches the NameServer.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let cmd = RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC).with_ext({
            let mut e = basalt_remoting::ExtFields::new();
            e.insert("topic", "Orders");
            e
        });
        let resp = c
            .client
            .invoke(&c.ns_addr, cmd, Duration::from_secs(3))
            .await
            .unwrap();
        if resp.code == response::SUCCESS {
            let route = TopicRouteData::decode(&resp.body).unwrap();
            assert_eq!(
                route.broker_datas[0]
                    .broker_addrs
                    .get(&0)
                    .map(String::as_str),
                Some(c.broker_addr.as_str())
            );
            break;
        }
        assert!(Instant::now() < deadline, "topic never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.stop().await;
}

/// Every stored message carries the broker's MSG_REGION and TRACE_ON, as
/// Java's broker writes them (the 5.x Java client's consume trace skips a
/// message without a region); a client's own values are replaced, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_messages_carry_region_and_trace_switch() {
    let c = cluster().await;
    let plain = c.send("Regions", 0, b"plain", "T").await;
    assert_eq!(plain.code, response::SUCCESS, "{:?}", plain.remark);
    let mut p = Properties::new();
    p.set("MSG_REGION", "Forged");
    p.set("TRACE_ON", "false");
    let h = SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: "Regions".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: basalt_common::time::now_millis(),
        flag: 0,
        properties: Some(String::from_utf8(p.encode()).unwrap()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        max_reconsume_times: None,
        broker_name: None,
    };
    let forged = c
        .call(
            RemotingCommand::request(request::SEND_MESSAGE_V2)
                .with_ext(h.to_ext_v2())
                .with_body(b"forged".to_vec()),
        )
        .await;
    assert_eq!(forged.code, response::SUCCESS, "{:?}", forged.remark);
    c.settle().await;
    let r = c.pull("Regions", 0, 0, "*", 0).await;
    let msgs = record::decode_all(&r.body, true).unwrap();
    assert_eq!(msgs.len(), 2);
    for m in &msgs {
        let props = String::from_utf8_lossy(&m.properties).into_owned();
        let count = |name: &str| props.matches(&format!("{name}\u{1}")).count();
        assert_eq!(
            basalt_common::properties::find(&m.properties, "MSG_REGION"),
            Some(&b"DefaultRegion"[..]),
            "{props:?}"
        );
        assert_eq!(
            basalt_common::properties::find(&m.properties, "TRACE_ON"),
            Some(&b"true"[..]),
            "{props:?}"
        );
        assert_eq!(
            (count("MSG_REGION"), count("TRACE_ON")),
            (1, 1),
            "{props:?}"
        );
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_statuses_tags_and_long_polling() {
    let c = cluster().await;
    assert_eq!(c.send("T", 0, b"a", "TagA").await.code, response::SUCCESS);
    assert_eq!(c.send("T", 0, b"b", "TagB").await.code, response::SUCCESS);
    // Tag filter: only TagB.
    c.settle().await;
    let r = c.pull("T", 0, 0, "TagB", 0).await;
    assert_eq!(r.code, response::SUCCESS);
    assert_eq!(bodies(&r), vec![(1, b"b".to_vec())]);
    // Offset past the end: moved (to the min offset while it is 0, as in
    // Java's getMessage).
    let r = c.pull("T", 0, 50, "*", 0).await;
    assert_eq!(r.code, response::PULL_OFFSET_MOVED);
    assert_eq!(
        PullMessageResponseHeader::from_ext(&r.ext_fields)
            .unwrap()
            .next_begin_offset,
        0
    );
    // At the end, no suspend: not found at once.
    let r = c.pull("T", 0, 2, "*", 0).await;
    assert_eq!(r.code, response::PULL_NOT_FOUND);

    // Long polling: a held pull is answered when a message arrives.
    let started = Instant::now();
    let puller = {
        let client = RemotingClient::new(RemotingClientConfig::default());
        let addr = c.broker_addr.clone();
        tokio::spawn(async move {
            let h = PullMessageRequestHeader {
                consumer_group: "CG".into(),
                topic: "T".into(),
                queue_id: 0,
                queue_offset: 2,
                max_msg_nums: 32,
                sys_flag: 0x4 | 0x2,
                commit_offset: 0,
                suspend_timeout_millis: 15_000,
                subscription: Some("*".into()),
                sub_version: 0,
                expression_type: None,
                max_msg_bytes: None,
            };
            client
                .invoke(
                    &addr,
                    RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()),
                    Duration::from_secs(30),
                )
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !puller.is_finished(),
        "the pull is held while there is nothing"
    );
    assert_eq!(c.send("T", 0, b"c", "TagA").await.code, response::SUCCESS);
    let r = puller.await.unwrap();
    assert_eq!(r.code, response::SUCCESS);
    assert_eq!(bodies(&r), vec![(2, b"c".to_vec())]);
    assert!(
        started.elapsed() < Duration::from_secs(14),
        "answered on arrival, not on timeout"
    );

    // A held pull with nothing arriving answers PULL_NOT_FOUND after its time.
    let r = c.pull("T", 0, 3, "*", 500).await;
    assert_eq!(r.code, response::PULL_NOT_FOUND);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_offsets_persist_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let mk = |root: std::path::PathBuf| {
        move |cfg: &mut BrokerConfig| {
            cfg.store_path_root_dir = root;
            cfg.namesrv_addr = None;
        }
    };
    let c = cluster_with(mk(root.clone())).await;
    c.send("Off", 0, b"x", "A").await;
    let upd = UpdateConsumerOffsetRequestHeader {
        consumer_group: "G1".into(),
        topic: "Off".into(),
        queue_id: 0,
        commit_offset: 1,
    };
    let r = c
        .call(RemotingCommand::request(request::UPDATE_CONSUMER_OFFSET).with_ext(upd.to_ext()))
        .await;
    assert_eq!(r.code, response::SUCCESS);
    let q = |group: &str| {
        RemotingCommand::request(request::QUERY_CONSUMER_OFFSET).with_ext(
            QueryConsumerOffsetRequestHeader {
                consumer_group: group.into(),
                topic: "Off".into(),
                queue_id: 0,
                set_zero_if_not_found: None,
            }
            .to_ext(),
        )
    };
    let r = c.call(q("G1")).await;
    assert_eq!(r.ext_fields.get("offset"), Some("1"));
    // An unknown group on a queue whose first message is in memory starts at 0.
    let r = c.call(q("Fresh")).await;
    assert_eq!(r.code, response::SUCCESS);
    assert_eq!(r.ext_fields.get("offset"), Some("0"));
    c.stop().await;

    let c = cluster_with(mk(root.clone())).await;
    let r = c.call(q("G1")).await;
    assert_eq!(
        r.ext_fields.get("offset"),
        Some("1"),
        "offset survives a restart"
    );
    let text = std::fs::read_to_string(root.join("config/consumerOffset.json")).unwrap();
    assert!(text.contains("\"Off@G1\":{0:1}"), "{text}");
    c.stop().await;
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_membership_and_consumer_list() {
    let c = cluster().await;
    let hb = r#"{"clientID":"10.0.0.5@1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CG1","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"HB"}],"unitMode":false}],"producerDataSet":[{"groupName":"PG"}]}"#;
    let r = c
        .call(RemotingCommand::request(request::HEART_BEAT).with_body(hb.as_bytes().to_vec()))
        .await;
    assert_eq!(r.code, response::SUCCESS);
    let mut ext = basalt_remoting::ExtFields::new();
    ext.insert("consumerGroup", "CG1");
    let r = c
        .call(RemotingCommand::request(request::GET_CONSUMER_LIST_BY_GROUP).with_ext(ext))
        .await;
    assert_eq!(r.code, response::SUCCESS);
    assert!(String::from_utf8_lossy(&r.body).contains("10.0.0.5@1"));
    // The retry topic of the group was created.
    assert!(
        c.broker
            .as_ref()
            .unwrap()
            .broker()
            .topics()
            .contains("%RETRY%CG1")
    );
    // Bad heartbeat bodies get an error, not a crash.
    let r = c
        .call(RemotingCommand::request(request::HEART_BEAT).with_body(b"{not json".to_vec()))
        .await;
    assert_eq!(r.code, response::SYSTEM_ERROR);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_message_is_delivered_after_its_level() {
    let c = cluster_with(|cfg| cfg.message_delay_level = "1s 2s".into()).await;
    let mut p = Properties::new();
    p.set("DELAY", "1");
    let h = SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: "Later".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 1,
        queue_id: 0,
        born_timestamp: basalt_common::time::now_millis(),
        properties: Some(String::from_utf8(p.encode()).unwrap()),
        ..Default::default()
    };
    let sent = Instant::now();
    let r = c
        .call(
            RemotingCommand::request(request::SEND_MESSAGE_V2)
                .with_ext(h.to_ext_v2())
                .with_body(b"later".to_vec()),
        )
        .await;
    assert_eq!(r.code, response::SUCCESS);
    let r = c.pull("Later", 0, 0, "*", 0).await;
    assert_ne!(r.code, response::SUCCESS, "not visible before its delay");
    let r = c.pull("Later", 0, 0, "*", 10_000).await;
    assert_eq!(r.code, response::SUCCESS);
    assert!(sent.elapsed() >= Duration::from_millis(900));
    let msgs = record::decode_all(&r.body, true).unwrap();
    assert_eq!(&msgs[0].body[..], b"later");
    assert!(msgs[0].property("DELAY").is_none());
    assert_eq!(msgs[0].property("REAL_TOPIC").as_deref(), Some("Later"));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_errors_and_the_broker_keeps_serving() {
    let c = cluster().await;
    // Unknown code.
    let r = c.call(RemotingCommand::request(9999)).await;
    assert_eq!(r.code, response::REQUEST_CODE_NOT_SUPPORTED);
    // Missing send header fields.
    let r = c
        .call(RemotingCommand::request(request::SEND_MESSAGE_V2).with_body(b"x".to_vec()))
        .await;
    assert_eq!(r.code, response::SYSTEM_ERROR);
    // Illegal topic name and body too large.
    assert_eq!(
        c.send("bad topic", 0, b"x", "A").await.code,
        response::MESSAGE_ILLEGAL
    );
    let big = vec![1u8; 300 * 1024];
    assert_eq!(
        c.send("Big", 0, &big, "A").await.code,
        response::MESSAGE_ILLEGAL
    );
    // Queue id out of range.
    c.send("Q", 0, b"x", "A").await;
    assert_eq!(
        c.send("Q", 99, b"x", "A").await.code,
        response::SYSTEM_ERROR
    );
    // Garbage on a raw socket closes only that connection.
    use tokio::io::AsyncWriteExt;
    let addr: SocketAddr = c.broker_addr.parse().unwrap();
    let mut raw = tokio::net::TcpStream::connect(addr).await.unwrap();
    raw.write_all(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3])
        .await
        .unwrap();
    raw.write_all(b"garbage garbage garbage").await.unwrap();
    drop(raw);
    assert_eq!(c.send("Q", 0, b"still", "A").await.code, response::SUCCESS);
    c.stop().await;
}

/// Sends a transaction's half message to `topic` queue 0; returns the send
/// response header.
async fn send_half(c: &Cluster, topic: &str, body: &[u8]) -> SendMessageResponseHeader {
    let r = c.call(tx_wire::half_request(topic, body)).await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    SendMessageResponseHeader::from_ext(&r.ext_fields).unwrap()
}

/// END_TRANSACTION for the half `sent` names.
async fn end_tx(
    c: &Cluster,
    sent: &SendMessageResponseHeader,
    group: &str,
    queue_offset: i64,
    decision: i32,
) -> RemotingCommand {
    c.call(tx_wire::end_request(sent, group, queue_offset, decision))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_transaction_checks_the_half_and_applies_one_decision() {
    use basalt_common::sysflag::{TRANSACTION_COMMIT_TYPE as COMMIT, TRANSACTION_ROLLBACK_TYPE};
    let c = cluster().await;
    let sent = send_half(&c, "TxWire", b"a").await;
    assert_eq!(sent.transaction_id.as_deref(), Some("TX-a"));
    let committed_later = send_half(&c, "TxWire", b"b").await;
    c.settle().await;
    let r = c.pull("TxWire", 0, 0, "*", 0).await;
    assert_ne!(r.code, response::SUCCESS, "a half message is invisible");

    // The header must name this group's half at its queue offset.
    let q = sent.queue_offset;
    let r = end_tx(&c, &sent, "OtherGroup", q, COMMIT).await;
    assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
    let r = end_tx(&c, &sent, tx_wire::GROUP, q + 7, COMMIT).await;
    assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
    let r = end_tx(&c, &sent, tx_wire::GROUP, q, 5).await;
    assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
    let r = end_tx(&c, &sent, tx_wire::GROUP, q, 0).await;
    assert_eq!(r.code, response::SUCCESS, "unknown leaves the half alone");
    c.settle().await;
    assert_ne!(c.pull("TxWire", 0, 0, "*", 0).await.code, response::SUCCESS);

    // One commit stores the message once; a repeat changes nothing; the
    // opposite decision is refused.
    for _ in 0..2 {
        let r = end_tx(&c, &sent, tx_wire::GROUP, q, COMMIT).await;
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    }
    let r = end_tx(&c, &sent, tx_wire::GROUP, q, TRANSACTION_ROLLBACK_TYPE).await;
    assert_eq!(r.code, response::TRANSACTION_FAILED, "{:?}", r.remark);
    let r = end_tx(
        &c,
        &committed_later,
        tx_wire::GROUP,
        committed_later.queue_offset,
        COMMIT,
    )
    .await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    c.settle().await;
    let r = c.pull("TxWire", 0, 0, "*", 0).await;
    assert_eq!(r.code, response::SUCCESS);
    let msgs = record::decode_all(&r.body, true).unwrap();
    let got: Vec<&[u8]> = msgs.iter().map(|m| &m.body[..]).collect();
    assert_eq!(got, vec![b"a".as_slice(), b"b".as_slice()], "each once");
    for (m, half) in msgs.iter().zip([&sent, &committed_later]) {
        assert_eq!(basalt_common::sysflag::transaction_type(m.sys_flag), COMMIT);
        assert!(m.property("TRAN_MSG").is_none());
        assert!(m.property("REAL_TOPIC").is_none());
        let (_, half_log_offset) = basalt_common::msgid::decode(&half.msg_id).unwrap();
        assert_eq!(
            m.prepared_transaction_offset, half_log_offset,
            "names its half"
        );
    }
    c.stop().await;
}
