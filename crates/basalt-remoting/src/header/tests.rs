use super::*;

fn ext(pairs: &[(&str, &str)]) -> ExtFields {
    pairs.iter().copied().collect()
}

#[test]
fn send_header_v1_and_v2_parse_to_the_same_struct() {
    let v2 = ext(&[
        ("a", "PG"),
        ("b", "T"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "-1"),
        ("f", "0"),
        ("g", "1700000000000"),
        ("h", "0"),
        ("i", "UNIQ_KEY\u{1}abc\u{2}WAIT\u{1}true\u{2}"),
        ("j", "0"),
        ("k", "false"),
        ("m", "false"),
        ("n", "broker-a"),
    ]);
    let h2 = SendMessageRequestHeader::from_ext(&v2).unwrap();
    assert_eq!(h2.topic, "T");
    assert_eq!(h2.queue_id, -1);
    assert_eq!(h2.born_timestamp, 1_700_000_000_000);
    assert_eq!(h2.broker_name.as_deref(), Some("broker-a"));
    assert_eq!(h2.max_reconsume_times, None);
    assert_eq!(h2.batch, Some(false));

    let v1 = h2.to_ext_v1();
    assert_eq!(v1.get("producerGroup"), Some("PG"));
    assert_eq!(v1.get("bname"), Some("broker-a"));
    let h1 = SendMessageRequestHeader::from_ext(&v1).unwrap();
    assert_eq!(h1, h2);
    assert_eq!(
        SendMessageRequestHeader::from_ext(&h1.to_ext_v2()).unwrap(),
        h2
    );
}

#[test]
fn missing_and_invalid_fields_are_named() {
    let mut v2 = ext(&[("a", "PG"), ("b", "T"), ("c", "TBW102"), ("d", "4")]);
    assert_eq!(
        SendMessageRequestHeader::from_ext(&v2).unwrap_err(),
        HeaderError::Missing { field: "e" }
    );
    v2.insert("e", "zero");
    assert_eq!(
        SendMessageRequestHeader::from_ext(&v2).unwrap_err(),
        HeaderError::Invalid {
            field: "e",
            value: "zero".into()
        }
    );
    assert_eq!(
        PullMessageRequestHeader::from_ext(&ext(&[("consumerGroup", "g")])).unwrap_err(),
        HeaderError::Missing { field: "topic" }
    );
}

#[test]
fn pull_header_round_trips_and_skips_nones() {
    let h = PullMessageRequestHeader {
        consumer_group: "CG".into(),
        topic: "T".into(),
        queue_id: 3,
        queue_offset: 100,
        max_msg_nums: 32,
        sys_flag: 0b11,
        commit_offset: 90,
        suspend_timeout_millis: 15000,
        subscription: None,
        sub_version: 1,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
    };
    let e = h.to_ext();
    assert_eq!(e.len(), 10);
    assert_eq!(e.get("suspendTimeoutMillis"), Some("15000"));
    assert!(!e.contains_key("subscription"));
    assert_eq!(PullMessageRequestHeader::from_ext(&e).unwrap(), h);
}

#[test]
fn lenient_booleans() {
    let e = ext(&[("topic", "T"), ("acceptStandardJsonOnly", "TRUE")]);
    let h = GetRouteInfoRequestHeader::from_ext(&e).unwrap();
    assert_eq!(h.accept_standard_json_only, Some(true));
    let e = ext(&[("topic", "T"), ("acceptStandardJsonOnly", "yes")]);
    let h = GetRouteInfoRequestHeader::from_ext(&e).unwrap();
    assert_eq!(h.accept_standard_json_only, Some(false));
}

#[test]
fn register_broker_header_round_trips() {
    let h = RegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "127.0.0.1:10911".into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: "127.0.0.1:10912".into(),
        broker_id: 0,
        heartbeat_timeout_millis: Some(120_000),
        enable_acting_master: Some(false),
        compressed: Some(true),
        body_crc32: Some(12345),
    };
    assert_eq!(
        RegisterBrokerRequestHeader::from_ext(&h.to_ext()).unwrap(),
        h
    );
}

#[test]
fn every_header_survives_arbitrary_ext() {
    // The fuzz body over a few hand-picked inputs; proptest covers more.
    for e in [
        ext(&[]),
        ext(&[("topic", "T"), ("queueId", "1"), ("offset", "x")]),
        ext(&[("b", "T"), ("e", "99999999999")]),
    ] {
        crate::fuzzing::parse_all_headers(&e);
    }
}

/// The JSON header the C++ client 2.0 (librocketmq, under the Python binding
/// 0.4.4) sends for a batch: SEND_MESSAGE (code 10) with `"batch":"1"` and
/// numbers for some ext fields, captured on the wire.
const CPP_BATCH_SEND_HEADER: &[u8] = br#"{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"ID5jK4K/aGz6jB8vHobZ8dmLZDw=","batch":"1","bornTimestamp":"1796098423201","defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,"producerGroup":"PG_exp","properties":"WAIT\u0001true\u0002","queueId":3,"reconsumeTimes":"0","sysFlag":0,"topic":"TExp","unitMode":"0"},"flag":0,"language":"CPP","opaque":7,"remark":"","version":63}
"#;

#[test]
fn cpp_client_batch_flag_is_a_batch() {
    let cmd = crate::codec::decode_json_header(CPP_BATCH_SEND_HEADER).unwrap();
    assert_eq!(cmd.code, crate::code::request::SEND_MESSAGE);
    let h = SendMessageRequestHeader::from_ext(&cmd.ext_fields).unwrap();
    assert_eq!(h.batch, Some(true));
    assert_eq!(h.queue_id, 3);
    assert_eq!(h.default_topic_queue_nums, 4);
    assert_eq!(h.unit_mode, Some(false));
    assert_eq!(h.properties.as_deref(), Some("WAIT\u{1}true\u{2}"));
    // Its single sends say "0"; later C++ versions print true/false.
    for (text, batch) in [("0", false), ("1", true), ("true", true), ("TRUE", true)] {
        let mut e = cmd.ext_fields.clone();
        e.insert("batch", text);
        let h = SendMessageRequestHeader::from_ext(&e).unwrap();
        assert_eq!(h.batch, Some(batch), "{text}");
    }
    for (text, batch) in [("false", false), ("yes", false), ("", false), (" 1 ", true)] {
        assert_eq!(batch_flag(text), batch, "{text:?}");
    }
    // Other boolean fields keep Java's parseBoolean: "1" is false.
    let mut e = cmd.ext_fields.clone();
    e.insert("unitMode", "1");
    assert_eq!(
        SendMessageRequestHeader::from_ext(&e).unwrap().unit_mode,
        Some(false)
    );
}
