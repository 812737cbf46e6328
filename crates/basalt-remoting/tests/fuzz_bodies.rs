//! The cargo-fuzz target bodies (`basalt_remoting::fuzzing`) over proptest
//! inputs, so CI exercises them without cargo-fuzz.

use basalt_remoting::codec::encode_frame;
use basalt_remoting::fuzzing;
use basalt_remoting::protocol::{BrokerData, QueueData, TopicRouteData};
use basalt_remoting::{RemotingCommand, SerializeType};
use proptest::prelude::*;

fn valid_frame(code: i16, binary: bool, pairs: Vec<(String, String)>, body: Vec<u8>) -> Vec<u8> {
    let mut cmd = RemotingCommand::request(code as i32);
    cmd.serialize_type = if binary {
        SerializeType::Rocketmq
    } else {
        SerializeType::Json
    };
    for (k, v) in pairs {
        cmd.ext_fields.insert(k, v);
    }
    cmd.body = body.into();
    encode_frame(&cmd).unwrap().to_vec()
}

const KEYS: &[&str] = &[
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "n",
    "topic",
    "queueId",
    "queueOffset",
    "consumerGroup",
    "offset",
    "brokerId",
    "brokerName",
    "compressed",
    "bodyCrc32",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subVersion",
    "clientID",
    "group",
    "delayLevel",
    "msgId",
    "producerGroup",
    "tranStateTableOffset",
    "commitLogOffset",
    "commitOrRollback",
    "cluster",
    "readQueueNums",
    "writeQueueNums",
    "perm",
    "timestamp",
];

fn ext_text() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (
            proptest::sample::select(KEYS),
            prop_oneof![
                "-?[0-9]{1,20}",
                "(true|false|TRUE|yes)",
                "[a-zA-Z0-9 \u{1}\u{2}é]{0,12}"
            ],
        ),
        0..40,
    )
    .prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes()
    })
}

fn route_text() -> Vec<u8> {
    let mut bd = BrokerData::new("C", "b");
    bd.broker_addrs.insert(0, "1.2.3.4:10911".into());
    bd.broker_addrs.insert(1, "1.2.3.5:10911".into());
    TopicRouteData {
        broker_datas: vec![bd],
        queue_datas: vec![QueueData {
            broker_name: "b".into(),
            perm: 6,
            read_queue_nums: 4,
            topic_sys_flag: 0,
            write_queue_nums: 4,
        }],
        ..Default::default()
    }
    .encode(true)
}

proptest! {
    #[test]
    fn frame_decode_random(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzzing::frame_decode(&data);
    }

    #[test]
    fn frame_decode_mutated(
        code in any::<i16>(), binary in any::<bool>(),
        pairs in proptest::collection::vec(("[a-z]{1,4}", "[a-z0-9\u{1}é]{0,8}"), 0..8),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let mut frame = valid_frame(code, binary, pairs, body);
        fuzzing::frame_decode(&frame);
        for (i, b) in flips {
            let at = i.index(frame.len());
            frame[at] = b;
        }
        fuzzing::frame_decode(&frame);
    }

    #[test]
    fn header_parse(text in ext_text()) {
        fuzzing::parse_all_headers(&fuzzing::ext_from_bytes(&text));
    }

    #[test]
    fn batch_decode_random(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        fuzzing::batch_decode(&data);
    }

    #[test]
    fn route_json_mutated(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), proptest::sample::select(
            &b"{}[]:,\"0123456789 \\az"[..])), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut text = route_text();
        fuzzing::route_json(&text);
        for (i, b) in flips {
            let at = i.index(text.len());
            text[at] = b;
        }
        fuzzing::route_json(&text);
        text.truncate(cut.index(text.len() + 1));
        fuzzing::route_json(&text);
    }

    #[test]
    fn route_json_random(data in "[{}\\[\\]:,\"0-9a-z \\\\]{0,80}") {
        fuzzing::route_json(data.as_bytes());
    }
}

#[test]
fn batch_decode_regression_nonzero_magic_and_crc() {
    // Found by cargo fuzz: MAGICCODE/BODYCRC are ignored on decode and written
    // as 0, so a re-encode is not byte-identical (the first property was wrong).
    let data = [
        0, 0, 0, 22, 0, 0, 3, 0, 195, 0, 0, 2, 195, 0, 22, 0, 0, 0, 0, 0, 0, 0,
    ];
    fuzzing::batch_decode(&data);
}
