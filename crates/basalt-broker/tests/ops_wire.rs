//! The operators' broker codes over the wire: GET/UPDATE_BROKER_CONFIG
//! (26/25), consumeTps in GET_CONSUME_STATS (208), CLONE_GROUP_OFFSET
//! (314), QUERY_CONSUME_QUEUE (321), QUERY_TOPIC_CONSUME_BY_WHO (300), and
//! hostile INVOKE_BROKER_TO_RESET_OFFSET (222) requests.
#![allow(clippy::field_reassign_with_default)] // configs read like broker.conf, one key a line

use std::time::Duration;

use basalt_broker::{BrokerConfig, BrokerHandle};
use basalt_common::properties::Properties;
use basalt_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CloneGroupOffsetRequestHeader, CommandHeader, GetConsumeStatsRequestHeader,
    GetRouteInfoRequestHeader, PullMessageRequestHeader, QueryConsumeQueueRequestHeader,
    QueryConsumerOffsetRequestHeader, SendMessageRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use basalt_remoting::protocol::{ConsumeStats, TopicRouteData};
use basalt_remoting::{RemotingClient, RemotingClientConfig, RemotingCommand};

struct Cluster {
    _dir: tempfile::TempDir,
    _ns: NameServerHandle,
    broker: BrokerHandle,
    client: RemotingClient,
    broker_addr: String,
    ns_addr: String,
}

async fn cluster() -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let ns = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let ns_addr = ns.local_addr().to_string();
    let mut cfg = BrokerConfig::default();
    cfg.disk_space_warning_level_ratio = 100;
    cfg.disk_space_clean_forcibly_ratio = 100;
    cfg.store_path_root_dir = dir.path().to_path_buf();
    cfg.listen_addr = "127.0.0.1".parse().unwrap();
    cfg.listen_port = 0;
    cfg.namesrv_addr = Some(ns_addr.clone());
    cfg.mapped_file_size_commit_log = 1024 * 1024;
    cfg.mapped_file_size_consume_queue = 1000 * 20;
    cfg.max_message_size = 256 * 1024;
    let broker = basalt_broker::start(cfg).await.unwrap();
    let broker_addr = broker.broker().broker_addr();
    Cluster {
        _dir: dir,
        _ns: ns,
        broker,
        client: RemotingClient::new(RemotingClientConfig::default()),
        broker_addr,
        ns_addr,
    }
}

impl Cluster {
    async fn call(&self, cmd: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(&self.broker_addr, cmd, Duration::from_secs(20))
            .await
            .unwrap()
    }

    async fn send(&self, topic: &str, queue_id: i32, body: &[u8]) -> RemotingCommand {
        let mut p = Properties::new();
        p.set("TAGS", "TagA");
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

    async fn settle(&self) {
        let store = self.broker.broker().store().clone();
        let ok = tokio::task::spawn_blocking(move || {
            store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10))
        })
        .await
        .unwrap();
        assert!(ok, "dispatch did not catch up");
    }

    async fn broker_config(&self) -> String {
        let r = self
            .call(RemotingCommand::request(request::GET_BROKER_CONFIG))
            .await;
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert!(r.ext_fields.get("version").is_some(), "a data version");
        String::from_utf8(r.body.to_vec()).unwrap()
    }

    async fn update_config(&self, body: &[u8]) -> RemotingCommand {
        self.call(RemotingCommand::request(request::UPDATE_BROKER_CONFIG).with_body(body.to_vec()))
            .await
    }

    async fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let h = UpdateConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id,
            commit_offset: offset,
        };
        let r = self
            .call(RemotingCommand::request(request::UPDATE_CONSUMER_OFFSET).with_ext(h.to_ext()))
            .await;
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    }

    async fn committed(&self, group: &str, topic: &str, queue_id: i32) -> RemotingCommand {
        let h = QueryConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id,
            set_zero_if_not_found: None,
        };
        self.call(RemotingCommand::request(request::QUERY_CONSUMER_OFFSET).with_ext(h.to_ext()))
            .await
    }

    /// The perm the NameServer routes `topic` with.
    async fn route_perm(&self, topic: &str) -> i32 {
        let h = GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        };
        let r = self
            .client
            .invoke(
                &self.ns_addr,
                RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC).with_ext(h.to_ext()),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        TopicRouteData::decode(&r.body).unwrap().queue_datas[0].perm
    }
}

#[tokio::test]
async fn broker_config_lists_every_key_and_changes_only_live_ones() {
    let c = cluster().await;
    let text = c.broker_config().await;
    for line in ["maxMessageSize=262144", "brokerPermission=6", "listenPort="] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }

    // A live limit takes effect on the next request.
    let r = c.update_config(b"maxMessageSize=1024\n").await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    assert!(c.broker_config().await.contains("maxMessageSize=1024\n"));
    let r = c.send("Live", 0, &[b'x'; 2000]).await;
    assert_eq!(r.code, response::MESSAGE_ILLEGAL, "{:?}", r.remark);
    assert_eq!(c.send("Live", 0, b"small").await.code, response::SUCCESS);

    // Keys fixed at start are refused by name, and nothing of the update applies.
    let r = c
        .update_config(b"maxMessageSize=2048\nlistenPort=1\n")
        .await;
    assert_eq!(r.code, response::NO_PERMISSION);
    let remark = r.remark.unwrap_or_default();
    assert!(
        remark.contains("listenPort") && remark.contains("restart"),
        "{remark}"
    );
    assert!(c.broker_config().await.contains("maxMessageSize=1024\n"));

    // Unknown keys, bad values and hostile bodies.
    for body in [
        b"noSuchKey=1".to_vec(),
        b"brokerPermission=7".to_vec(),
        b"autoCreateTopicEnable=perhaps".to_vec(),
        b"maxMessageSize=99999999999".to_vec(),
        vec![0xff, 0xfe, b'=', 0x80],
        vec![b'a'; 70 * 1024],
        (0..100)
            .map(|i| format!("k{i}=v\n"))
            .collect::<String>()
            .into_bytes(),
    ] {
        let r = c.update_config(&body).await;
        assert_eq!(r.code, response::INVALID_PARAMETER, "{:?}", r.remark);
    }

    // Read-only: sends refused, and the NameServer routes the topic read-only.
    let r = c.update_config(b"brokerPermission=4").await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    assert_eq!(c.send("Live", 0, b"x").await.code, response::NO_PERMISSION);
    assert_eq!(c.route_perm("Live").await, 4);
    let r = c.update_config(b"brokerPermission=6").await;
    assert_eq!(r.code, response::SUCCESS);
    assert_eq!(c.route_perm("Live").await, 6);
    assert_eq!(c.send("Live", 0, b"x").await.code, response::SUCCESS);
}

#[tokio::test]
async fn consume_stats_report_the_rate_a_group_pulls_at() {
    let c = cluster().await;
    for i in 0..10 {
        assert_eq!(c.send("Rate", 0, format!("m{i}").as_bytes()).await.code, 0);
    }
    c.settle().await;
    let stats = |group: &str| {
        let h = GetConsumeStatsRequestHeader {
            consumer_group: group.into(),
            topic: Some("Rate".into()),
        };
        RemotingCommand::request(request::GET_CONSUME_STATS).with_ext(h.to_ext())
    };
    c.commit("rate-group", "Rate", 0, 0).await;
    let before = ConsumeStats::decode(&c.call(stats("rate-group")).await.body).unwrap();
    assert_eq!(before.consume_tps, 0.0, "nothing pulled yet");

    let h = PullMessageRequestHeader {
        consumer_group: "rate-group".into(),
        topic: "Rate".into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
    };
    let r = c
        .call(RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()))
        .await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = ConsumeStats::decode(&c.call(stats("rate-group")).await.body).unwrap();
    // Ten messages pulled. The minute window has no sample of this young
    // key yet, so the rate is taken over at least one sampling interval
    // (10 s): 1 a second, or more if a sample landed in between.
    assert!(
        after.consume_tps >= 1.0 && after.consume_tps <= 50.0,
        "{}",
        after.consume_tps
    );
}

#[tokio::test]
async fn clone_group_offset_copies_committed_offsets() {
    let c = cluster().await;
    assert_eq!(c.send("Clone", 0, b"a").await.code, 0);
    assert_eq!(c.send("Clone", 1, b"b").await.code, 0);
    c.settle().await;
    c.commit("src-group", "Clone", 0, 1).await;
    c.commit("src-group", "Clone", 1, 1).await;
    let clone = |src: &str, dest: &str, topic: Option<&str>| {
        let h = CloneGroupOffsetRequestHeader {
            src_group: src.into(),
            dest_group: dest.into(),
            topic: topic.map(str::to_string),
            offline: true,
        };
        RemotingCommand::request(request::CLONE_GROUP_OFFSET).with_ext(h.to_ext())
    };
    let r = c
        .call(clone("src-group", "dest-group", Some("Clone")))
        .await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    for q in 0..2 {
        let r = c.committed("dest-group", "Clone", q).await;
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(r.ext_fields.get("offset"), Some("1"));
    }
    // Without a topic: every topic the source has offsets for.
    let r = c.call(clone("src-group", "all-group", None)).await;
    assert_eq!(r.code, response::SUCCESS);
    assert_eq!(
        c.committed("all-group", "Clone", 1)
            .await
            .ext_fields
            .get("offset"),
        Some("1")
    );

    // Who consumes the topic: the groups with offsets on it.
    let mut req = RemotingCommand::request(request::QUERY_TOPIC_CONSUME_BY_WHO);
    req.ext_fields.insert("topic", "Clone");
    let r = c.call(req).await;
    assert_eq!(r.code, response::SUCCESS);
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        body["groupList"],
        serde_json::json!(["all-group", "dest-group", "src-group"])
    );

    for bad in [
        clone("bad group", "dest-group", Some("Clone")),
        clone("src-group", &"g".repeat(300), Some("Clone")),
        clone("src-group", "dest-group", Some("bad/topic")),
    ] {
        assert_eq!(c.call(bad).await.code, response::SYSTEM_ERROR);
    }
}

#[tokio::test]
async fn query_consume_queue_returns_units_from_an_index() {
    let c = cluster().await;
    for i in 0..3 {
        assert_eq!(
            c.send("Cq", 0, format!("body-{i}").as_bytes()).await.code,
            0
        );
    }
    c.settle().await;
    let query = |queue_id: i32, index: i64, count: i32| {
        let h = QueryConsumeQueueRequestHeader {
            topic: "Cq".into(),
            queue_id,
            index,
            count,
            consumer_group: "no-such-group".into(),
        };
        RemotingCommand::request(request::QUERY_CONSUME_QUEUE).with_ext(h.to_ext())
    };
    let r = c.call(query(0, 1, 10)).await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["maxQueueIndex"], 3);
    assert_eq!(body["minQueueIndex"], 0);
    assert_eq!(body["filterData"], "no-such-group@Cq is not online!");
    let units = body["queueData"].as_array().unwrap();
    assert_eq!(units.len(), 2);
    let off = |i: usize| units[i]["physicOffset"].as_i64().unwrap();
    let size = |i: usize| units[i]["physicSize"].as_i64().unwrap();
    assert_eq!(off(1), off(0) + size(0), "records back to back");

    let r = c.call(query(0, 3, 10)).await;
    assert_eq!(r.code, response::SUCCESS);
    assert!(r.remark.unwrap_or_default().contains("not exist"));
    assert_eq!(
        c.call(query(0, 0, 0)).await.code,
        response::INVALID_PARAMETER
    );
    assert_eq!(
        c.call(query(0, 0, 100_000)).await.code,
        response::INVALID_PARAMETER
    );
    assert_eq!(c.call(query(7, 0, 1)).await.code, response::SYSTEM_ERROR);
}

#[tokio::test]
async fn hostile_reset_offset_requests_get_errors_and_the_broker_serves_on() {
    let c = cluster().await;
    assert_eq!(c.send("Reset", 0, b"a").await.code, 0);
    c.settle().await;
    c.commit("reset-group", "Reset", 0, 1).await;
    let reset = |topic: &str, group: &str, timestamp: &str| {
        let mut req = RemotingCommand::request(request::INVOKE_BROKER_TO_RESET_OFFSET);
        req.ext_fields.insert("topic", topic);
        req.ext_fields.insert("group", group);
        req.ext_fields.insert("timestamp", timestamp);
        req.ext_fields.insert("isForce", "true");
        req
    };
    for (topic, group, ts) in [
        ("Reset", "bad group!", "0"),
        ("Reset", &"g".repeat(300), "0"),
        ("", "reset-group", "0"),
        ("../etc", "reset-group", "0"),
        ("Reset", "reset-group", "-5"),
        ("Reset", "reset-group", "i64::MIN"),
        ("Reset", "reset-group", "99999999999999999999999"),
        ("NoSuchTopic", "reset-group", "0"),
        ("Reset", "no-such-group", "0"),
    ] {
        let r = c.call(reset(topic, group, ts)).await;
        assert_eq!(r.code, response::SYSTEM_ERROR, "{topic} {group} {ts}");
    }
    // Times far in the past and future are answered, not refused: the
    // first offset and the end of the queue.
    for (ts, want) in [("0", "0"), (&i64::MAX.to_string() as &str, "1")] {
        let r = c.call(reset("Reset", "reset-group", ts)).await;
        assert_eq!(r.code, response::SUCCESS, "{ts}: {:?}", r.remark);
        let got = c.committed("reset-group", "Reset", 0).await;
        assert_eq!(got.ext_fields.get("offset"), Some(want), "{ts}");
    }
    assert_eq!(c.send("Reset", 0, b"still serving").await.code, 0);
}
