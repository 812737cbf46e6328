//! The cargo-fuzz target bodies (`basalt_client::fuzzing`) over proptest
//! inputs, so CI exercises them without cargo-fuzz.

use basalt_client::fuzzing;
use basalt_common::record::{RecordDraft, stamp};
use proptest::prelude::*;

fn record(topic: &str, body: &[u8], props: &[u8], sys_flag: i32, v6: bool, qo: i64) -> Vec<u8> {
    let host = if v6 {
        "[fe80::1]:10911"
    } else {
        "10.0.0.1:10911"
    };
    let draft = RecordDraft {
        topic,
        queue_id: 1,
        flag: 0,
        sys_flag,
        born_timestamp: 1,
        born_host: host.parse().unwrap(),
        store_host: host.parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: props,
    };
    let mut out = Vec::new();
    draft.encode_into(&mut out).unwrap();
    stamp(&mut out, qo, qo * 1000, 2);
    out
}

proptest! {
    #[test]
    fn pull_body_arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzzing::pull_body(&data);
    }

    #[test]
    fn pull_body_mutated_records(
        bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..4),
        tags in proptest::collection::vec(prop_oneof!["TagA", "TagB", "TagC"], 1..4),
        sys_flag in prop_oneof![Just(0), Just(1), Just(0x301), Just(0xC0), Just(0x10)],
        v6 in any::<bool>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    ) {
        let mut data = Vec::new();
        for (i, b) in bodies.iter().enumerate() {
            let props = format!("TAGS\u{1}{}\u{2}UNIQ_KEY\u{1}U{i}\u{2}", tags[i % tags.len()]);
            data.extend(record("T", b, props.as_bytes(), sys_flag, v6, i as i64));
        }
        for (at, v) in flips {
            let i = at.index(data.len());
            data[i] ^= v;
        }
        fuzzing::pull_body(&data);
    }

    #[test]
    fn offset_file_arbitrary(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        fuzzing::offset_file(&data);
    }

    #[test]
    fn offset_file_shaped(entries in proptest::collection::vec(("[a-zA-Z%_-]{1,12}", "[a-z\"\\\\{}:,]{1,8}", 0i32..64, any::<i64>()), 0..6)) {
        let mut text = String::from("{\"offsetTable\":{");
        for (i, (t, b, q, o)) in entries.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            let key = serde_json::json!({"brokerName": b, "queueId": q, "topic": t});
            text.push_str(&key.to_string());
            text.push(':');
            text.push_str(&o.to_string());
        }
        text.push_str("}}");
        fuzzing::offset_file(text.as_bytes());
    }

    #[test]
    fn response_bodies_arbitrary(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        fuzzing::response_bodies(&data);
    }
}

#[test]
fn pull_body_decodes_a_valid_ipv6_batch() {
    let mut data = record("T", b"a", b"TAGS\x01TagA\x02", 0, true, 0);
    data.extend(record("T", b"b", b"", 0, true, 1));
    fuzzing::pull_body(&data);
    let (msgs, err) = basalt_client::decode::decode_messages(&bytes::Bytes::from(data));
    assert!(err.is_none());
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0].offset_msg_id.len(), 56);
}
