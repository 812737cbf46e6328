use super::*;
use std::collections::BTreeMap;

fn route() -> TopicRouteData {
    let mut bd = BrokerData::new("DefaultCluster", "broker-a");
    bd.broker_addrs.insert(0, "10.0.0.1:10911".into());
    bd.broker_addrs.insert(1, "10.0.0.2:10911".into());
    TopicRouteData {
        broker_datas: vec![bd],
        filter_server_table: BTreeMap::new(),
        order_topic_conf: None,
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            perm: 6,
            read_queue_nums: 4,
            topic_sys_flag: 0,
            write_queue_nums: 4,
        }],
    }
}

#[test]
fn route_json_quoted_and_bare() {
    let quoted = String::from_utf8(route().encode(false)).unwrap();
    assert_eq!(
        quoted,
        r#"{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"topicSysFlag":0,"writeQueueNums":4}]}"#
    );
    let bare = String::from_utf8(route().encode(true)).unwrap();
    assert!(bare.contains(r#""brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}"#));
    // Both parse back, and standard JSON parsers accept the quoted form.
    assert_eq!(TopicRouteData::decode(bare.as_bytes()).unwrap(), route());
    assert_eq!(TopicRouteData::decode(quoted.as_bytes()).unwrap(), route());
    serde_json::from_str::<serde_json::Value>(&quoted).unwrap();

    assert!(TopicRouteData::bare_keys_for(317, false));
    assert!(!TopicRouteData::bare_keys_for(317, true));
    assert!(!TopicRouteData::bare_keys_for(401, false));
}

#[test]
fn route_reader_tolerates_old_and_odd_input() {
    // topicSynFlag only, numbers as strings, nulls, unknown keys.
    let s = r#"{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"b","cluster":null,"zoneName":"z"}],
        "filterServerTable":null,"orderTopicConf":null,
        "queueDatas":[{"brokerName":"b","perm":"6","readQueueNums":4,"topicSynFlag":2,"writeQueueNums":"4","x":1}],
        "topicQueueMappingByBroker":null}"#;
    let r = TopicRouteData::decode(s.as_bytes()).unwrap();
    assert_eq!(r.queue_datas[0].topic_sys_flag, 2);
    assert_eq!(r.queue_datas[0].perm, 6);
    assert_eq!(r.queue_datas[0].write_queue_nums, 4);
    assert_eq!(r.broker_datas[0].cluster, "");
    assert_eq!(r.broker_datas[0].zone_name.as_deref(), Some("z"));
    assert_eq!(r.broker_datas[0].master_addr(), Some("a:1"));
    assert!(r.filter_server_table.is_empty());
}

#[test]
fn cluster_info_has_bare_keys() {
    let mut ci = ClusterInfo::default();
    let mut bd = BrokerData::new("C", "b");
    bd.broker_addrs.insert(0, "1.2.3.4:10911".into());
    ci.broker_addr_table.insert("b".into(), bd);
    ci.cluster_addr_table
        .entry("C".into())
        .or_default()
        .insert("b".into());
    let s = String::from_utf8(ci.encode()).unwrap();
    assert_eq!(
        s,
        r#"{"brokerAddrTable":{"b":{"brokerAddrs":{0:"1.2.3.4:10911"},"brokerName":"b","cluster":"C","enableActingMaster":false}},"clusterAddrTable":{"C":["b"]}}"#
    );
    assert_eq!(ClusterInfo::decode(s.as_bytes()).unwrap(), ci);
}

fn register_body() -> RegisterBrokerBody {
    let mut table = BTreeMap::new();
    let mut t = TopicConfig::new("TopicTest", 4);
    t.attributes.insert("+message.type".into(), "NORMAL".into());
    table.insert(t.topic_name.clone(), t);
    let mut t = TopicConfig::new("TBW102", 8);
    t.perm = 7;
    t.topic_filter_type = TopicFilterType::MultiTag;
    table.insert(t.topic_name.clone(), t);
    RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter: 3,
                state_version: 0,
                timestamp: 1_700_000_000_000,
            },
            topic_config_table: table,
        },
    }
}

#[test]
fn register_body_plain_round_trip() {
    let b = register_body();
    let json = b.to_json();
    assert_eq!(RegisterBrokerBody::decode(&json, false, 401).unwrap(), b);
    // A 4.x body: no stateVersion, no attributes.
    let old = br#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":5},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":2,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":2}}}}"#;
    let b = RegisterBrokerBody::decode(old, false, 317).unwrap();
    assert_eq!(
        b.topic_config_serialize_wrapper.topic_config_table["T"].read_queue_nums,
        2
    );
}

#[test]
fn register_body_compressed_round_trip() {
    let b = register_body();
    for version in [317, 413, 479] {
        let z = b.encode_compressed(version).unwrap();
        let back = RegisterBrokerBody::decode(&z, true, version).unwrap();
        assert_eq!(back, b, "version {version}");
    }
    assert!(RegisterBrokerBody::decode(b"not zlib", true, 401).is_err());
    // A valid zlib stream whose content is truncated.
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &[0, 0, 0, 50, b'{']).unwrap();
    let z = enc.finish().unwrap();
    assert!(RegisterBrokerBody::decode(&z, true, 401).is_err());
}

#[test]
fn topic_config_line() {
    let mut t = TopicConfig::new("T", 4);
    assert_eq!(t.encode_line(), "T 4 4 6 SINGLE_TAG");
    t.attributes.insert("k".into(), "v".into());
    assert_eq!(t.encode_line(), r#"T 4 4 6 SINGLE_TAG {"k":"v"}"#);
    assert_eq!(TopicConfig::decode_line(&t.encode_line()).unwrap(), t);
    assert!(TopicConfig::decode_line("T 4 x 6 SINGLE_TAG").is_err());
    assert!(TopicConfig::decode_line("T 4").is_err());
}

#[test]
fn heartbeat_parses_java_body_and_unknown_enums() {
    let s = r#"{"clientID":"10.0.0.5@12345","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CG","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}],"unitMode":false},{"consumeType":"CONSUME_SIDEWAYS","groupName":"X","messageModel":null}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"PG"}],"withoutSub":false}"#;
    let hb: HeartbeatData = crate::fastjson::from_str(s).unwrap();
    assert_eq!(hb.client_id, "10.0.0.5@12345");
    let c = &hb.consumer_data_set[0];
    assert_eq!(c.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(c.subscription_data_set[0].code_set, vec![2598919]);
    let odd = &hb.consumer_data_set[1];
    assert_eq!(
        odd.consume_type,
        ConsumeType::Unknown("CONSUME_SIDEWAYS".into())
    );
    assert_eq!(odd.message_model, MessageModel::Clustering);
    assert_eq!(
        odd.consume_from_where,
        ConsumeFromWhere::ConsumeFromLastOffset
    );
    let back: HeartbeatData = serde_json::from_slice(&serde_json::to_vec(&hb).unwrap()).unwrap();
    assert_eq!(back, hb);
}

#[test]
fn check_client_body_as_java_and_the_rust_client_write_it() {
    let java = r#"{"clientId":"10.0.0.5@1","group":"CG","subscriptionData":{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","subString":"a > 1","subVersion":5,"tagsSet":[],"topic":"T"}}"#;
    let b: CheckClientRequestBody = crate::fastjson::from_str(java).unwrap();
    assert_eq!(b.group, "CG");
    let sub = b.subscription_data.as_ref().unwrap();
    assert_eq!(sub.expression_type, "SQL92");
    assert_eq!(sub.sub_string, "a > 1");
    // The Rust client sends "namespace": null; an empty body has no subscription.
    let rust = r#"{"clientId":"c","group":"g","subscriptionData":{"classFilterMode":false,"topic":"T","subString":"x","tagsSet":[],"codeSet":[],"subVersion":0,"expressionType":"SQL92"},"namespace":null}"#;
    let b: CheckClientRequestBody = crate::fastjson::from_str(rust).unwrap();
    assert_eq!(b.namespace, None);
    let b: CheckClientRequestBody = crate::fastjson::from_str("{}").unwrap();
    assert!(b.subscription_data.is_none());
}

#[test]
fn lock_bodies() {
    let s = r#"{"clientId":"c","consumerGroup":"CG","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}],"onlyThisBroker":false}"#;
    let b: LockBatchRequestBody = crate::fastjson::from_str(s).unwrap();
    assert_eq!(b.mq_set[0], MessageQueue::new("T", "broker-a", 0));
    let r = LockBatchResponseBody {
        lock_ok_mq_set: b.mq_set.clone(),
    };
    let j = serde_json::to_string(&r).unwrap();
    assert!(j.starts_with(r#"{"lockOKMQSet":[{"brokerName":"broker-a""#));
}

#[test]
fn stats_with_object_keys_round_trip() {
    let cs = ConsumeStats {
        consume_tps: 1.5,
        offset_table: vec![(
            MessageQueue::new("T", "b", 1),
            OffsetWrapper {
                broker_offset: 10,
                consumer_offset: 7,
                last_timestamp: 99,
                pull_offset: 8,
            },
        )],
    };
    let s = String::from_utf8(cs.encode()).unwrap();
    assert!(s.contains(r#"{{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":10"#));
    assert_eq!(ConsumeStats::decode(s.as_bytes()).unwrap(), cs);

    let ts = TopicStatsTable {
        offset_table: vec![(
            MessageQueue::new("T", "b", 0),
            TopicOffset {
                last_update_timestamp: 1,
                max_offset: 5,
                min_offset: 0,
            },
        )],
    };
    assert_eq!(TopicStatsTable::decode(&ts.encode()).unwrap(), ts);
}

#[test]
fn topic_list_and_consumer_list() {
    let tl: TopicList =
        crate::fastjson::from_str(r#"{"topicList":["B","A"],"brokerAddr":null}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&tl).unwrap(),
        r#"{"topicList":["A","B"]}"#
    );
    let cl = ConsumerListBody {
        consumer_id_list: vec!["a".into()],
    };
    assert_eq!(
        serde_json::to_string(&cl).unwrap(),
        r#"{"consumerIdList":["a"]}"#
    );
}

// Bodies captured on the wire from the Apache RocketMQ C++ client 2.0
// (librocketmq, as bundled by the PyPI package `rocketmq` 0.4.4): enums as
// ordinals, subVersion as a string, no expressionType or classFilterMode,
// codeSet left at 0, and a trailing newline.

const CPP_HEARTBEAT_CLUSTERING: &[u8] = b"{\"clientID\":\"9657-127.0.0.1@DEFAULT\",\"consumerDataSet\":[{\"consumeFromWhere\":0,\"consumeType\":1,\"groupName\":\"CG_exp\",\"messageModel\":1,\"subscriptionDataSet\":[{\"subString\":\"*\",\"subVersion\":\"1796098461759\",\"topic\":\"%RETRY%CG_exp\"},{\"subString\":\"*\",\"subVersion\":\"1796098461759\",\"topic\":\"TExp\"}]}],\"producerDataSet\":[{\"groupName\":\"PG_exp\"}]}\n";

const CPP_HEARTBEAT_BROADCASTING: &[u8] = b"{\"clientID\":\"12754-127.0.0.1@DEFAULT\",\"consumerDataSet\":[{\"consumeFromWhere\":0,\"consumeType\":1,\"groupName\":\"CGbc2\",\"messageModel\":0,\"subscriptionDataSet\":[{\"subString\":\"*\",\"subVersion\":\"1796100592513\",\"topic\":\"TB\"}]}]}\n";

const CPP_HEARTBEAT_TAGS: &[u8] = b"{\"clientID\":\"12757-127.0.0.1@DEFAULT\",\"consumerDataSet\":[{\"consumeFromWhere\":0,\"consumeType\":1,\"groupName\":\"CGtag\",\"messageModel\":1,\"subscriptionDataSet\":[{\"subString\":\"*\",\"subVersion\":\"1796100592730\",\"topic\":\"%RETRY%CGtag\"},{\"codeSet\":[0,0],\"subString\":\"TagA || TagB\",\"subVersion\":\"1796100592730\",\"tagsSet\":[\"TagA\",\"TagB\"],\"topic\":\"TM1\"}]}]}\n";

const CPP_LOCK_BODY: &[u8] = b"{\"clientId\":\"12642-127.0.0.1@DEFAULT\",\"consumerGroup\":\"CGord2\",\"mqSet\":[{\"brokerName\":\"broker-a\",\"queueId\":0,\"topic\":\"TO\"}]}\n";

const CPP_UNLOCK_BODY: &[u8] = b"{\"clientId\":\"12642-127.0.0.1@DEFAULT\",\"consumerGroup\":\"CGord2\",\"mqSet\":[{\"brokerName\":\"broker-a\",\"queueId\":1,\"topic\":\"TO\"},{\"brokerName\":\"broker-a\",\"queueId\":2,\"topic\":\"TO\"},{\"brokerName\":\"broker-a\",\"queueId\":3,\"topic\":\"TO\"}]}\n";

fn sub(topic: &str, sub_string: &str, version: i64) -> SubscriptionData {
    SubscriptionData {
        class_filter_mode: false,
        code_set: vec![],
        expression_type: "TAG".into(),
        sub_string: sub_string.into(),
        sub_version: version,
        tags_set: vec![],
        topic: topic.into(),
    }
}

#[test]
fn cpp_client_clustering_heartbeat() {
    let hb: HeartbeatData = crate::fastjson::from_slice(CPP_HEARTBEAT_CLUSTERING).unwrap();
    let expected = HeartbeatData {
        client_id: "9657-127.0.0.1@DEFAULT".into(),
        consumer_data_set: vec![ConsumerData {
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_type: ConsumeType::ConsumePassively,
            group_name: "CG_exp".into(),
            message_model: MessageModel::Clustering,
            subscription_data_set: vec![
                sub("%RETRY%CG_exp", "*", 1_796_098_461_759),
                sub("TExp", "*", 1_796_098_461_759),
            ],
            unit_mode: false,
        }],
        heartbeat_fingerprint: None,
        producer_data_set: vec![ProducerData {
            group_name: "PG_exp".into(),
        }],
        without_sub: None,
    };
    assert_eq!(hb, expected);
}

#[test]
fn cpp_client_broadcasting_heartbeat() {
    let hb: HeartbeatData = crate::fastjson::from_slice(CPP_HEARTBEAT_BROADCASTING).unwrap();
    assert_eq!(hb.client_id, "12754-127.0.0.1@DEFAULT");
    assert!(hb.producer_data_set.is_empty());
    let c = &hb.consumer_data_set[0];
    assert_eq!(c.message_model, MessageModel::Broadcasting);
    assert_eq!(c.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(
        c.subscription_data_set,
        vec![sub("TB", "*", 1_796_100_592_513)]
    );
}

#[test]
fn cpp_client_tag_heartbeat() {
    let hb: HeartbeatData = crate::fastjson::from_slice(CPP_HEARTBEAT_TAGS).unwrap();
    let s = &hb.consumer_data_set[0].subscription_data_set[1];
    assert_eq!(
        *s,
        SubscriptionData {
            code_set: vec![0, 0],
            tags_set: vec!["TagA".into(), "TagB".into()],
            ..sub("TM1", "TagA || TagB", 1_796_100_592_730)
        }
    );
}

#[test]
fn cpp_client_lock_and_unlock_bodies() {
    let lock: LockBatchRequestBody = crate::fastjson::from_slice(CPP_LOCK_BODY).unwrap();
    assert_eq!(
        lock,
        LockBatchRequestBody {
            client_id: "12642-127.0.0.1@DEFAULT".into(),
            consumer_group: "CGord2".into(),
            mq_set: vec![MessageQueue::new("TO", "broker-a", 0)],
            only_this_broker: false,
        }
    );
    let unlock: UnlockBatchRequestBody = crate::fastjson::from_slice(CPP_UNLOCK_BODY).unwrap();
    let queues: Vec<i32> = unlock.mq_set.iter().map(|q| q.queue_id).collect();
    assert_eq!(queues, [1, 2, 3]);
    assert_eq!(unlock.consumer_group, "CGord2");
}
