//! NameServer over TCP: register (plain and compressed), route lookups in both
//! key forms, cluster info, unregister, expiry.

use std::collections::BTreeMap;
use std::time::Duration;

use basalt_common::crc::masked_crc32;
use basalt_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, GetRouteInfoRequestHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
};
use basalt_remoting::protocol::{
    ClusterInfo, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
    TopicList, TopicRouteData,
};
use basalt_remoting::{RemotingClient, RemotingCommand};

const T: Duration = Duration::from_secs(10);

async fn start(expiry: Duration, scan: Duration) -> (NameServerHandle, String) {
    let ns = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        broker_expiry: expiry,
        scan_interval: scan,
        ..Default::default()
    })
    .await
    .unwrap();
    let addr = ns.local_addr().to_string();
    (ns, addr)
}

fn body(topics: &[(&str, i32)]) -> RegisterBrokerBody {
    let mut table = BTreeMap::new();
    for (t, q) in topics {
        table.insert(t.to_string(), TopicConfig::new(*t, *q));
    }
    RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter: 1,
                state_version: 0,
                timestamp: 1_700_000_000_000,
            },
            topic_config_table: table,
        },
    }
}

fn register_request(
    name: &str,
    addr: &str,
    id: i64,
    b: &RegisterBrokerBody,
    compressed: bool,
    version: i32,
) -> RemotingCommand {
    let bytes = if compressed {
        b.encode_compressed(version).unwrap()
    } else {
        b.to_json()
    };
    let header = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: format!("{addr}-ha"),
        broker_id: id,
        heartbeat_timeout_millis: None,
        enable_acting_master: Some(false),
        compressed: Some(compressed),
        body_crc32: Some(masked_crc32(&bytes) as i32),
    };
    let mut req = RemotingCommand::request(request::REGISTER_BROKER).with_ext(header.to_ext());
    req.version = version;
    req.body = bytes.into();
    req
}

async fn route(client: &RemotingClient, ns: &str, topic: &str, version: i32) -> RemotingCommand {
    let h = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: None,
    };
    let mut req = RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC).with_ext(h.to_ext());
    req.version = version;
    client.invoke(ns, req, T).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_and_look_up_routes() {
    let (ns, addr) = start(Duration::from_secs(120), Duration::from_secs(5)).await;
    let client = RemotingClient::default();

    // broker-a registers with a plain JSON body, broker-b with a compressed one.
    let r = client
        .invoke(
            &addr,
            register_request(
                "broker-a",
                "10.0.0.1:10911",
                0,
                &body(&[("T", 4), ("A", 1)]),
                false,
                401,
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let r = client
        .invoke(
            &addr,
            register_request(
                "broker-b",
                "10.0.0.2:10911",
                0,
                &body(&[("T", 2)]),
                true,
                479,
            ),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    // A slave of broker-a learns its master's addresses.
    let r = client
        .invoke(
            &addr,
            register_request(
                "broker-a",
                "10.0.0.3:10911",
                1,
                &body(&[("T", 4)]),
                false,
                401,
            ),
            T,
        )
        .await
        .unwrap();
    let h = RegisterBrokerResponseHeader::from_ext(&r.ext_fields).unwrap();
    assert_eq!(h.master_addr.as_deref(), Some("10.0.0.1:10911"));
    assert_eq!(h.ha_server_addr.as_deref(), Some("10.0.0.1:10911-ha"));

    // Go clients (version 317) get bare keys; 401+ gets quoted keys.
    let old = route(&client, &addr, "T", 317).await;
    assert_eq!(old.code, response::SUCCESS);
    let text = String::from_utf8(old.body.to_vec()).unwrap();
    assert!(
        text.contains(r#""brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.3:10911"}"#),
        "{text}"
    );
    assert!(!text.contains("orderTopicConf"));
    let new = route(&client, &addr, "T", 401).await;
    let text = String::from_utf8(new.body.to_vec()).unwrap();
    assert!(
        text.contains(r#""brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.3:10911"}"#),
        "{text}"
    );
    let rd = TopicRouteData::decode(&new.body).unwrap();
    assert_eq!(rd, TopicRouteData::decode(&old.body).unwrap());
    assert_eq!(rd.queue_datas.len(), 2);
    assert_eq!(rd.broker_datas.len(), 2);

    // acceptStandardJsonOnly forces quoted keys for old versions too.
    let mut req = RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC).with_ext(
        GetRouteInfoRequestHeader {
            topic: "T".into(),
            accept_standard_json_only: Some(true),
        }
        .to_ext(),
    );
    req.version = 317;
    let r = client.invoke(&addr, req, T).await.unwrap();
    assert!(String::from_utf8_lossy(&r.body).contains(r#"{"0":"#));

    let missing = route(&client, &addr, "nope", 401).await;
    assert_eq!(missing.code, response::TOPIC_NOT_EXIST);
    assert!(missing.remark.unwrap().contains("nope"));

    // Cluster info: bare keys always.
    let ci = client
        .invoke(
            &addr,
            RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
            T,
        )
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&ci.body).contains(r#""brokerAddrs":{0:"#));
    let ci = ClusterInfo::decode(&ci.body).unwrap();
    assert_eq!(ci.cluster_addr_table["DefaultCluster"].len(), 2);
    assert_eq!(ci.broker_addr_table["broker-a"].broker_addrs.len(), 2);

    let tl = client
        .invoke(
            &addr,
            RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
            T,
        )
        .await
        .unwrap();
    let tl: TopicList = serde_json::from_slice(&tl.body).unwrap();
    assert_eq!(
        tl.topic_list.into_iter().collect::<Vec<_>>(),
        vec!["A", "T"]
    );

    // Delete A, unregister broker-b.
    let mut del = RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV);
    del.ext_fields.insert("topic", "A");
    assert_eq!(client.invoke(&addr, del, T).await.unwrap().code, 0);
    assert_eq!(
        route(&client, &addr, "A", 401).await.code,
        response::TOPIC_NOT_EXIST
    );
    let un = UnregisterBrokerRequestHeader {
        broker_name: "broker-b".into(),
        broker_addr: "10.0.0.2:10911".into(),
        cluster_name: "DefaultCluster".into(),
        broker_id: 0,
    };
    let r = client
        .invoke(
            &addr,
            RemotingCommand::request(request::UNREGISTER_BROKER).with_ext(un.to_ext()),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0);
    let rd = TopicRouteData::decode(&route(&client, &addr, "T", 401).await.body).unwrap();
    assert_eq!(rd.queue_datas.len(), 1);

    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_error_responses() {
    let (ns, addr) = start(Duration::from_secs(120), Duration::from_secs(5)).await;
    let client = RemotingClient::default();
    // CRC mismatch.
    let mut req = register_request("b", "1.1.1.1:1", 0, &body(&[("T", 1)]), false, 401);
    req.ext_fields.insert("bodyCrc32", "12345");
    let r = client.invoke(&addr, req, T).await.unwrap();
    assert_eq!(r.code, response::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("crc32 not match"));
    // Missing header field.
    let r = client
        .invoke(
            &addr,
            RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, response::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("topic"));
    // Undecodable body.
    let mut req = register_request("b", "1.1.1.1:1", 0, &body(&[]), true, 401);
    req.body = bytes::Bytes::from_static(b"garbage");
    req.ext_fields.insert("bodyCrc32", "0");
    let r = client.invoke(&addr, req, T).await.unwrap();
    assert_eq!(r.code, response::SYSTEM_ERROR);
    // Unknown code.
    let r = client
        .invoke(&addr, RemotingCommand::request(request::PULL_MESSAGE), T)
        .await
        .unwrap();
    assert_eq!(r.code, response::REQUEST_CODE_NOT_SUPPORTED);
    ns.shutdown().await;
}

async fn wait_until_gone(client: &RemotingClient, addr: &str, topic: &str) {
    for _ in 0..400 {
        if route(client, addr, topic, 401).await.code == response::TOPIC_NOT_EXIST {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("route of {topic} never went away");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_brokers_expire_and_closed_connections_drop_routes() {
    let (ns, addr) = start(Duration::from_millis(300), Duration::from_millis(50)).await;
    let client = RemotingClient::default();
    let r = client
        .invoke(
            &addr,
            register_request("e", "9.9.9.9:1", 0, &body(&[("E", 1)]), false, 401),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, 0);
    assert_eq!(route(&client, &addr, "E", 401).await.code, 0);
    wait_until_gone(&client, &addr, "E").await;

    // A broker whose connection closes is dropped without waiting for expiry.
    let (ns2, addr2) = start(Duration::from_secs(120), Duration::from_secs(60)).await;
    let broker = RemotingClient::default();
    broker
        .invoke(
            &addr2,
            register_request("c", "8.8.8.8:1", 0, &body(&[("C", 1)]), false, 401),
            T,
        )
        .await
        .unwrap();
    assert_eq!(route(&client, &addr2, "C", 401).await.code, 0);
    broker.shutdown();
    wait_until_gone(&client, &addr2, "C").await;

    ns.shutdown().await;
    ns2.shutdown().await;
}

/// RocketMQ 5's broker with `compressedRegister=true` deflates the body but
/// sends `compressed=false` (seen from a 5.5.0 broker): the body is still
/// read, as the zlib header says, and its topics are routed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_body_under_a_false_header_is_read() {
    let (ns, addr) = start(Duration::from_secs(120), Duration::from_secs(5)).await;
    let client = RemotingClient::default();
    let b = body(&[("Z1", 2), ("Z2", 3)]);
    let mut req = register_request("broker-z", "10.0.0.9:10911", 0, &b, true, 413);
    req.ext_fields.insert("compressed", "false");
    let r = client.invoke(&addr, req, T).await.unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    for (t, q) in [("Z1", 2), ("Z2", 3)] {
        let r = route(&client, &addr, t, 413).await;
        assert_eq!(r.code, response::SUCCESS, "{t}: {:?}", r.remark);
        let rd = TopicRouteData::decode(&r.body).unwrap();
        println!("{t}: {:?}", rd.queue_datas);
        assert_eq!(rd.queue_datas[0].write_queue_nums, q);
    }
    drop(ns);
}

/// A RocketMQ 5.5 broker's split registration stamps every part of a round
/// with the same data version: the topics of a later part are still routed
/// (a topic the broker name has no queue data for is always taken).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_parts_with_one_version_are_all_taken() {
    let (ns, addr) = start(Duration::from_secs(120), Duration::from_secs(5)).await;
    let client = RemotingClient::default();
    for part in [&[("P1", 1), ("P2", 2)][..], &[("P3", 3)][..]] {
        let req = register_request("broker-p", "10.0.0.7:10911", 0, &body(part), true, 413);
        let r = client.invoke(&addr, req, T).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    }
    for (t, q) in [("P1", 1), ("P2", 2), ("P3", 3)] {
        let r = route(&client, &addr, t, 413).await;
        assert_eq!(r.code, response::SUCCESS, "{t}: {:?}", r.remark);
        let rd = TopicRouteData::decode(&r.body).unwrap();
        println!("{t}: {:?}", rd.queue_datas);
        assert_eq!(rd.queue_datas[0].write_queue_nums, q);
    }
    drop(ns);
}
