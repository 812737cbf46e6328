//! SQL92 property filters over the wire, driven with raw remoting commands:
//! pulls that carry a selector, pulls of a group whose heartbeat
//! subscribed with one, CHECK_CLIENT_CONFIG, and `enablePropertyFilter`.
#![allow(clippy::field_reassign_with_default)] // configs read like broker.conf, one key a line

use std::time::Duration;

use basalt_broker::{BrokerConfig, BrokerHandle};
use basalt_common::properties::Properties;
use basalt_common::record;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeader,
};
use basalt_remoting::{RemotingClient, RemotingClientConfig, RemotingCommand};

const TOPIC: &str = "Props";

struct Broker {
    _dir: tempfile::TempDir,
    handle: Option<BrokerHandle>,
    client: RemotingClient,
    addr: String,
}

async fn broker(property_filter: bool) -> Broker {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = BrokerConfig::default();
    cfg.store_path_root_dir = dir.path().to_path_buf();
    cfg.listen_addr = "127.0.0.1".parse().unwrap();
    cfg.listen_port = 0;
    cfg.namesrv_addr = None;
    cfg.ha_enable = false;
    cfg.mapped_file_size_commit_log = 1024 * 1024;
    cfg.mapped_file_size_consume_queue = 1000 * 20;
    cfg.enable_property_filter = property_filter;
    let handle = basalt_broker::start(cfg).await.unwrap();
    let addr = handle.broker().broker_addr();
    Broker {
        _dir: dir,
        handle: Some(handle),
        client: RemotingClient::new(RemotingClientConfig::default()),
        addr,
    }
}

/// Message `i`: `a` = i, `b` = x or y, `d` only on every third, tags A/B/C.
fn props_of(i: usize) -> Properties {
    let mut p = Properties::new();
    p.set("TAGS", ["A", "B", "C"][i % 3]);
    p.set("a", i.to_string());
    p.set("b", if i.is_multiple_of(2) { "x" } else { "y" });
    if i.is_multiple_of(3) {
        p.set("d", "set");
    }
    p
}

impl Broker {
    async fn call(&self, cmd: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(&self.addr, cmd, Duration::from_secs(20))
            .await
            .unwrap()
    }

    async fn send_all(&self, n: usize) {
        for i in 0..n {
            let h = SendMessageRequestHeader {
                producer_group: "PG".into(),
                topic: TOPIC.into(),
                default_topic: "TBW102".into(),
                default_topic_queue_nums: 1,
                queue_id: 0,
                sys_flag: 0,
                born_timestamp: basalt_common::time::now_millis(),
                flag: 0,
                properties: Some(String::from_utf8(props_of(i).encode()).unwrap()),
                reconsume_times: Some(0),
                unit_mode: Some(false),
                batch: Some(false),
                max_reconsume_times: None,
                broker_name: None,
            };
            let r = self
                .call(
                    RemotingCommand::request(request::SEND_MESSAGE_V2)
                        .with_ext(h.to_ext_v2())
                        .with_body(format!("m{i}").into_bytes()),
                )
                .await;
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        let store = self.handle.as_ref().unwrap().broker().store().clone();
        let caught_up = tokio::task::spawn_blocking(move || {
            store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10))
        })
        .await
        .unwrap();
        assert!(caught_up, "dispatch did not catch up");
    }

    /// One pull from `offset`; `own` = (type, expression) sets the
    /// SUBSCRIPTION flag, `None` relies on the group's heartbeat.
    async fn pull(&self, group: &str, offset: i64, own: Option<(&str, &str)>) -> RemotingCommand {
        let h = PullMessageRequestHeader {
            consumer_group: group.into(),
            topic: TOPIC.into(),
            queue_id: 0,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: if own.is_some() { 0x4 } else { 0 },
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: own.map(|(_, e)| e.to_string()),
            sub_version: 0,
            expression_type: own.map(|(t, _)| t.to_string()),
            max_msg_bytes: None,
        };
        self.call(RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()))
            .await
    }

    /// Every message a group gets from the start to the end of the queue:
    /// the `a` of each.
    async fn pull_all(&self, group: &str, own: Option<(&str, &str)>) -> Vec<usize> {
        let mut got = Vec::new();
        let mut offset = 0;
        loop {
            let r = self.pull(group, offset, own).await;
            match r.code {
                response::SUCCESS => {
                    for m in record::decode_all(&r.body, true).unwrap() {
                        got.push(m.property("a").unwrap().parse().unwrap());
                    }
                }
                response::PULL_NOT_FOUND => return got,
                response::PULL_RETRY_IMMEDIATELY => {}
                other => panic!("pull answered {other}: {:?}", r.remark),
            }
            offset = PullMessageResponseHeader::from_ext(&r.ext_fields)
                .unwrap()
                .next_begin_offset;
        }
    }

    async fn heartbeat(&self, group: &str, expr_type: &str, expression: &str) -> RemotingCommand {
        let hb = serde_json::json!({
            "clientID": format!("127.0.0.1@{group}"),
            "consumerDataSet": [{
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "consumeType": "CONSUME_PASSIVELY",
                "groupName": group,
                "messageModel": "CLUSTERING",
                "subscriptionDataSet": [{
                    "classFilterMode": false, "codeSet": [], "tagsSet": [],
                    "expressionType": expr_type, "subString": expression,
                    "subVersion": 1, "topic": TOPIC,
                }],
                "unitMode": false,
            }],
            "producerDataSet": [],
        });
        self.call(
            RemotingCommand::request(request::HEART_BEAT)
                .with_body(serde_json::to_vec(&hb).unwrap()),
        )
        .await
    }

    async fn check_client(&self, body: &[u8]) -> RemotingCommand {
        self.call(RemotingCommand::request(request::CHECK_CLIENT_CONFIG).with_body(body.to_vec()))
            .await
    }

    async fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
        }
    }
}

fn check_body(expr_type: &str, expression: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "clientId": "127.0.0.1@c", "group": "CG",
        "subscriptionData": {
            "classFilterMode": false, "codeSet": [], "tagsSet": [],
            "expressionType": expr_type, "subString": expression,
            "subVersion": 1, "topic": TOPIC,
        },
    }))
    .unwrap()
}

fn expected(n: usize, keep: impl Fn(usize) -> bool) -> Vec<usize> {
    (0..n).filter(|i| keep(*i)).collect()
}

const N: usize = 90;

/// A selector and which message numbers it should match.
type Case = (&'static str, fn(usize) -> bool);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_with_their_own_selector_get_exactly_the_matching_messages() {
    let b = broker(true).await;
    b.send_all(N).await;
    let cases: [Case; 5] = [
        ("a > 5 AND b = 'x'", |i| i > 5 && i % 2 == 0),
        ("a BETWEEN 10 AND 20 OR a IN ('70', '71')", |i| {
            (10..=20).contains(&i) || i == 70 || i == 71
        }),
        ("d IS NULL", |i| i % 3 != 0),
        ("TAGS IN ('A','B')", |i| i % 3 != 2),
        ("NOT (b = 'x') AND d IS NOT NULL", |i| {
            i % 2 == 1 && i % 3 == 0
        }),
    ];
    for (sql, keep) in cases {
        assert_eq!(
            b.pull_all("CG-own", Some(("SQL92", sql))).await,
            expected(N, keep),
            "{sql}"
        );
    }
    // TAG pulls are unchanged.
    assert_eq!(
        b.pull_all("CG-own", Some(("TAG", "C"))).await,
        expected(N, |i| i % 3 == 2)
    );
    // A selector that does not compile: refused with where it goes wrong.
    let r = b.pull("CG-own", 0, Some(("SQL92", "a > 5 AND"))).await;
    assert_eq!(r.code, response::SUBSCRIPTION_PARSE_FAILED);
    let remark = r.remark.unwrap_or_default();
    assert!(remark.contains("line 1, column 10"), "{remark}");
    let r = b.pull("CG-own", 0, Some(("SQL93", "a > 5"))).await;
    assert_eq!(r.code, response::SUBSCRIPTION_PARSE_FAILED);
    assert!(r.remark.unwrap_or_default().contains("SQL93"));
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_subscriptions_with_a_selector_filter_their_pulls() {
    let b = broker(true).await;
    b.send_all(N).await;
    let r = b.heartbeat("CG-hb", "SQL92", "c IS NULL AND a < 10").await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    assert_eq!(b.pull_all("CG-hb", None).await, expected(10, |_| true));
    // An invalid selector: the heartbeat is accepted (as in RocketMQ), its
    // pulls are refused and say why.
    let r = b.heartbeat("CG-bad", "SQL92", "a IN (1, 2)").await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let r = b.pull("CG-bad", 0, None).await;
    assert_eq!(r.code, response::SUBSCRIPTION_PARSE_FAILED);
    let remark = r.remark.unwrap_or_default();
    assert!(remark.contains("line 1, column 7"), "{remark}");
    assert!(remark.contains("expected a quoted string"), "{remark}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_client_config_answers_as_rocketmq() {
    let b = broker(true).await;
    let ok = |r: &RemotingCommand| assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    ok(&b.check_client(&check_body("TAG", "A || B")).await);
    ok(&b.check_client(&check_body("", "*")).await);
    ok(&b
        .check_client(&check_body("SQL92", "a > 1 AND b IS NOT NULL"))
        .await);
    ok(&b.check_client(b"").await);
    ok(&b.check_client(br#"{"clientId":"c","group":"g"}"#).await);
    let r = b.check_client(&check_body("SQL92", "a >< 1")).await;
    assert_eq!(r.code, response::SUBSCRIPTION_PARSE_FAILED);
    let remark = r.remark.unwrap_or_default();
    assert!(remark.contains("line 1, column 4"), "{remark}");
    let r = b.check_client(&check_body("JSONPATH", "$.a")).await;
    assert_eq!(r.code, response::SUBSCRIPTION_PARSE_FAILED);
    let r = b.check_client(b"{not json").await;
    assert_eq!(r.code, response::SYSTEM_ERROR);
    // The broker keeps serving.
    ok(&b.check_client(&check_body("SQL92", "TRUE")).await);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_enable_property_filter_sql92_is_refused() {
    let b = broker(false).await;
    b.send_all(6).await;
    let words = "The broker does not support consumer to filter message by SQL92";
    let r = b.check_client(&check_body("SQL92", "a > 1")).await;
    assert_eq!(r.code, response::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some(words));
    let r = b.pull("CG", 0, Some(("SQL92", "a > 1"))).await;
    assert_eq!(r.code, response::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some(words));
    assert_eq!(
        b.heartbeat("CG-hb", "SQL92", "a > 1").await.code,
        response::SUCCESS
    );
    let r = b.pull("CG-hb", 0, None).await;
    assert_eq!(r.code, response::SYSTEM_ERROR);
    // TAG subscriptions do not need it.
    ok_tag(&b).await;
    b.stop().await;
}

async fn ok_tag(b: &Broker) {
    let r = b.check_client(&check_body("TAG", "*")).await;
    assert_eq!(r.code, response::SUCCESS);
    assert_eq!(
        b.pull_all("CG", Some(("TAG", "*"))).await,
        expected(6, |_| true)
    );
}
