//! JSON body decode costs: REGISTER_BROKER's plain body (what the NameServer
//! parses on every registration), a route body (what every client parses on
//! each route refresh) and a heartbeat (what the broker parses per client
//! every 30 s).
//!
//! `cargo bench -p basalt-remoting --bench bodies`

use std::collections::BTreeMap;
use std::hint::black_box;

use basalt_remoting::protocol::{
    BrokerData, DataVersion, HeartbeatData, QueueData, RegisterBrokerBody, TopicConfig,
    TopicConfigSerializeWrapper, TopicRouteData,
};
use criterion::{Criterion, criterion_group, criterion_main};

/// A broker's plain register body with `topics` topics of 8 queues.
fn register_body(topics: usize) -> Vec<u8> {
    let mut table = BTreeMap::new();
    for i in 0..topics {
        let t = TopicConfig::new(format!("BenchTopic_{i:05}"), 8);
        table.insert(t.topic_name.clone(), t);
    }
    RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion::new(1_700_000_000_000),
            topic_config_table: table,
        },
    }
    .to_json()
}

/// A route of three broker groups (master + slave each), bare keys.
fn route_body() -> Vec<u8> {
    let mut route = TopicRouteData::default();
    for b in 0..3 {
        let name = format!("broker-{b}");
        let mut bd = BrokerData::new("DefaultCluster", name.clone());
        bd.broker_addrs.insert(0, format!("10.0.0.{b}:10911"));
        bd.broker_addrs.insert(1, format!("10.0.1.{b}:10911"));
        route.broker_datas.push(bd);
        route.queue_datas.push(QueueData {
            broker_name: name,
            perm: 6,
            read_queue_nums: 8,
            topic_sys_flag: 0,
            write_queue_nums: 8,
        });
    }
    route.encode(true)
}

/// A Java client's heartbeat: one producer and one consumer group.
const HEARTBEAT: &[u8] = br#"{"clientID":"10.0.0.5@12345#9046233847191808","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CG","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB","subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"T"},{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%CG"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"PG"},{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}"#;

fn benches(c: &mut Criterion) {
    for topics in [100usize, 1000] {
        let body = register_body(topics);
        c.bench_function(
            &format!("register_body/plain/{topics}_topics/decode"),
            |b| {
                b.iter(|| {
                    black_box(RegisterBrokerBody::decode(black_box(&body), false, 401).unwrap())
                })
            },
        );
    }
    let route = route_body();
    c.bench_function("route_body/3_brokers/decode", |b| {
        b.iter(|| black_box(TopicRouteData::decode(black_box(&route)).unwrap()))
    });
    c.bench_function("heartbeat/java/decode", |b| {
        b.iter(|| {
            black_box(
                basalt_remoting::fastjson::from_slice::<HeartbeatData>(black_box(HEARTBEAT))
                    .unwrap(),
            )
        })
    });
}

criterion_group!(bodies, benches);
criterion_main!(bodies);
