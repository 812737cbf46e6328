//! The NameServer's KV config over TCP: put, get, list, delete, their
//! persistence across a restart, ORDER_TOPIC_CONFIG in routes, and
//! hostile names and sizes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use basalt_common::crc::masked_crc32;
use basalt_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, GetKvListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
    KvConfigKeyRequestHeader, PutKvConfigRequestHeader, RegisterBrokerRequestHeader,
};
use basalt_remoting::protocol::{
    KvTable, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicRouteData,
};
use basalt_remoting::{RemotingClient, RemotingClientConfig, RemotingCommand};

const T: Duration = Duration::from_secs(10);

async fn start(kv_path: &Path, order: bool) -> (NameServerHandle, String) {
    let ns = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        kv_config_path: Some(kv_path.to_path_buf()),
        order_message_enable: order,
        ..Default::default()
    })
    .await
    .unwrap();
    let addr = ns.local_addr().to_string();
    (ns, addr)
}

fn put(ns: &str, key: &str, value: &str) -> RemotingCommand {
    let h = PutKvConfigRequestHeader {
        namespace: ns.into(),
        key: key.into(),
        value: value.into(),
    };
    RemotingCommand::request(request::PUT_KV_CONFIG).with_ext(h.to_ext())
}

fn by_key(code: i32, ns: &str, key: &str) -> RemotingCommand {
    let h = KvConfigKeyRequestHeader {
        namespace: ns.into(),
        key: key.into(),
    };
    RemotingCommand::request(code).with_ext(h.to_ext())
}

fn list(ns: &str) -> RemotingCommand {
    let h = GetKvListByNamespaceRequestHeader {
        namespace: ns.into(),
    };
    RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE).with_ext(h.to_ext())
}

async fn call(c: &RemotingClient, addr: &str, cmd: RemotingCommand) -> RemotingCommand {
    c.invoke(addr, cmd, T).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_config_is_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("namesrv").join("kvConfig.json");
    let c = RemotingClient::new(RemotingClientConfig::default());
    let (ns, addr) = start(&path, false).await;

    let r = call(&c, &addr, by_key(request::GET_KV_CONFIG, "app", "k1")).await;
    assert_eq!(r.code, response::QUERY_NOT_FOUND);
    assert_eq!(
        r.remark.as_deref(),
        Some("No config item, Namespace: app Key: k1")
    );
    assert_eq!(
        call(&c, &addr, list("app")).await.code,
        response::QUERY_NOT_FOUND
    );

    for (k, v) in [("k1", "v1"), ("k2", "v2"), ("k1", "v1b")] {
        assert_eq!(
            call(&c, &addr, put("app", k, v)).await.code,
            response::SUCCESS
        );
    }
    let r = call(&c, &addr, by_key(request::DELETE_KV_CONFIG, "app", "k2")).await;
    assert_eq!(r.code, response::SUCCESS);
    // Deleting what is not there succeeds, as in Java.
    let r = call(&c, &addr, by_key(request::DELETE_KV_CONFIG, "app", "nope")).await;
    assert_eq!(r.code, response::SUCCESS);
    ns.shutdown().await;

    let (_ns, addr) = start(&path, false).await;
    let r = call(&c, &addr, by_key(request::GET_KV_CONFIG, "app", "k1")).await;
    assert_eq!(r.code, response::SUCCESS);
    assert_eq!(r.ext_fields.get("value"), Some("v1b"));
    let r = call(&c, &addr, list("app")).await;
    assert_eq!(r.code, response::SUCCESS);
    let t: KvTable = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        t.table,
        BTreeMap::from([("k1".to_string(), "v1b".to_string())])
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("configTable"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_and_sizes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = RemotingClient::new(RemotingClientConfig::default());
    let (_ns, addr) = start(&dir.path().join("kv.json"), false).await;
    let long = "n".repeat(256);
    let big = "v".repeat(64 * 1024 + 1);
    for cmd in [
        put("", "k", "v"),
        put("ns", "", "v"),
        put(&long, "k", "v"),
        put("ns", &long, "v"),
        put("ns", "k", &big),
        by_key(request::GET_KV_CONFIG, &long, "k"),
        by_key(request::DELETE_KV_CONFIG, "ns", &long),
        list(""),
        RemotingCommand::request(request::PUT_KV_CONFIG),
    ] {
        let r = call(&c, &addr, cmd).await;
        assert_eq!(r.code, response::SYSTEM_ERROR, "{:?}", r.remark);
    }
    // Still serving.
    assert_eq!(
        call(&c, &addr, put("ns", "k", "v")).await.code,
        response::SUCCESS
    );
}

fn register(broker: &str, addr: &str, topic: &str) -> RemotingCommand {
    let mut table = BTreeMap::new();
    table.insert(topic.to_string(), TopicConfig::new(topic, 4));
    let body = RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: Default::default(),
            topic_config_table: table,
        },
    }
    .to_json();
    let h = RegisterBrokerRequestHeader {
        broker_name: broker.into(),
        broker_addr: addr.into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: String::new(),
        broker_id: 0,
        heartbeat_timeout_millis: None,
        enable_acting_master: Some(false),
        compressed: Some(false),
        body_crc32: Some(masked_crc32(&body) as i32),
    };
    RemotingCommand::request(request::REGISTER_BROKER)
        .with_ext(h.to_ext())
        .with_body(body)
}

async fn order_conf(c: &RemotingClient, addr: &str, topic: &str) -> Option<String> {
    let h = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: None,
    };
    let r = call(
        c,
        addr,
        RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC).with_ext(h.to_ext()),
    )
    .await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    TopicRouteData::decode(&r.body).unwrap().order_topic_conf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_carry_the_order_topic_config_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let c = RemotingClient::new(RemotingClientConfig::default());
    for (name, enabled) in [("on", true), ("off", false)] {
        let (_ns, addr) = start(&dir.path().join(format!("{name}.json")), enabled).await;
        let r = call(
            &c,
            &addr,
            register("broker-a", "127.0.0.1:10911", "Ordered"),
        )
        .await;
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert_eq!(order_conf(&c, &addr, "Ordered").await, None);
        let r = call(
            &c,
            &addr,
            put("ORDER_TOPIC_CONFIG", "Ordered", "broker-a:4"),
        )
        .await;
        assert_eq!(r.code, response::SUCCESS);
        let want = enabled.then(|| "broker-a:4".to_string());
        assert_eq!(order_conf(&c, &addr, "Ordered").await, want, "{name}");
    }
}
