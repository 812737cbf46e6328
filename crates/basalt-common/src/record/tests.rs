use super::*;
use proptest::prelude::*;

/// The golden record, written field by field from the spec's table (§4.1).
const GOLDEN_HEX: &str = concat!(
    "00000073",         // TOTALSIZE = 91 + 5 (body) + 9 (topic) + 10 (properties)
    "daa320a7",         // MAGICCODE V1
    "77d18982",         // BODYCRC = crc32("Hello") & 0x7fffffff
    "00000003",         // QUEUEID
    "00000000",         // FLAG
    "0000000000000007", // QUEUEOFFSET
    "00000000000004d2", // PHYSICALOFFSET = 1234
    "00000000",         // SYSFLAG
    "0000018bcfe56800", // BORNTIMESTAMP = 1700000000000
    "0a000005",
    "0000d0a4",         // BORNHOST 10.0.0.5:53412
    "0000018bcfe5687b", // STORETIMESTAMP = 1700000000123
    "0a000001",
    "00002a9f",         // STOREHOST 10.0.0.1:10911
    "00000000",         // RECONSUMETIMES
    "0000000000000000", // PREPARED_TRANSACTION_OFFSET
    "00000005",
    "48656c6c6f", // BODYLEN, BODY "Hello"
    "09",
    "546f70696354657374", // TOPICLEN, TOPIC "TopicTest"
    "000a",
    "54414753015461674102", // PROPERTIESLEN, "TAGS\x01TagA\x02"
);

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn golden_draft() -> RecordDraft<'static> {
    RecordDraft {
        topic: "TopicTest",
        queue_id: 3,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "10.0.0.5:53412".parse().unwrap(),
        store_host: "10.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: b"Hello",
        properties: b"TAGS\x01TagA\x02",
    }
}

#[test]
fn golden_encode_matches_hand_written_bytes() {
    let mut out = Vec::new();
    let len = golden_draft().encode_into(&mut out).unwrap();
    stamp(&mut out, 7, 1234, 1_700_000_000_123);
    assert_eq!(len, 115);
    assert_eq!(out, unhex(GOLDEN_HEX));
}

#[test]
fn golden_decode_gives_the_message() {
    let bytes = unhex(GOLDEN_HEX);
    let v = RecordView::parse(&bytes, true).unwrap();
    assert_eq!(v.magic, MAGIC_V1);
    assert_eq!(v.queue_id, 3);
    assert_eq!(v.queue_offset, 7);
    assert_eq!(v.physical_offset, 1234);
    assert_eq!(v.born_timestamp, 1_700_000_000_000);
    assert_eq!(v.store_timestamp, 1_700_000_000_123);
    assert_eq!(v.born_host, "10.0.0.5:53412".parse().unwrap());
    assert_eq!(v.store_host, "10.0.0.1:10911".parse().unwrap());
    assert_eq!(v.body, b"Hello");
    assert_eq!(v.topic, b"TopicTest");
    assert_eq!(v.property("TAGS"), Some(&b"TagA"[..]));
    assert_eq!(
        v.to_message().offset_msg_id(),
        "0A00000100002A9F00000000000004D2"
    );
}

#[test]
fn parse_rejects_damage() {
    let good = unhex(GOLDEN_HEX);
    // Flipped body byte: CRC mismatch (only when checked).
    let mut bad = good.clone();
    bad[88] ^= 0x01;
    assert!(matches!(
        RecordView::parse(&bad, true),
        Err(CodecError::BadCrc { .. })
    ));
    assert!(RecordView::parse(&bad, false).is_ok());
    // Bad magic.
    let mut bad = good.clone();
    bad[4] = 0;
    assert!(matches!(
        RecordView::parse(&bad, true),
        Err(CodecError::BadMagic { .. })
    ));
    // TOTALSIZE disagrees with the fields.
    let mut bad = good.clone();
    bad[3] = 0x74;
    bad.push(0);
    assert!(matches!(
        RecordView::parse(&bad, true),
        Err(CodecError::BadLength { .. })
    ));
    // Short buffer.
    assert!(RecordView::parse(&good[..100], true).is_err());
    // Every prefix fails cleanly, never panics.
    for n in 0..good.len() {
        assert!(RecordView::parse(&good[..n], true).is_err());
    }
}

#[test]
fn peek_head_classifies() {
    assert_eq!(
        peek_head(&unhex(GOLDEN_HEX)),
        Some(RecordHead::Message { total_size: 115 })
    );
    let mut blank = [0u8; 8];
    encode_blank(&mut blank, 4096);
    assert_eq!(peek_head(&blank), Some(RecordHead::Blank));
    assert_eq!(peek_head(&[0u8; 8]), Some(RecordHead::Zeros));
    assert!(matches!(
        peek_head(&[1, 2, 3, 4, 5, 6, 7, 8]),
        Some(RecordHead::Garbage { .. })
    ));
    assert_eq!(peek_head(&[0u8; 7]), None);
}

#[test]
fn long_topic_uses_v2_magic() {
    let topic = "t".repeat(200);
    let mut d = golden_draft();
    d.topic = &topic;
    let mut out = Vec::new();
    d.encode_into(&mut out).unwrap();
    let v = RecordView::parse(&out, true).unwrap();
    assert_eq!(v.magic, MAGIC_V2);
    assert_eq!(v.topic, topic.as_bytes());
}

/// A decoder written separately from the encoder, straight from the spec's
/// field table, so a symmetric bug in encode and `RecordView::parse` cannot hide.
/// Named fields, body, topic, properties.
type Decoded = (Vec<(String, Vec<u8>)>, Vec<u8>, String, Vec<u8>);

fn reference_decode(b: &[u8]) -> Decoded {
    let be32 = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap());
    let mut fields = Vec::new();
    let mut at = 0;
    let mut take = |name: &str, n: usize, at: &mut usize| {
        fields.push((name.to_string(), b[*at..*at + n].to_vec()));
        *at += n;
    };
    for (name, n) in [
        ("TOTALSIZE", 4),
        ("MAGICCODE", 4),
        ("BODYCRC", 4),
        ("QUEUEID", 4),
        ("FLAG", 4),
        ("QUEUEOFFSET", 8),
        ("PHYSICALOFFSET", 8),
        ("SYSFLAG", 4),
        ("BORNTIMESTAMP", 8),
    ] {
        take(name, n, &mut at);
    }
    let sys = be32(36);
    take("BORNHOST", if sys & 0x10 != 0 { 20 } else { 8 }, &mut at);
    take("STORETIMESTAMP", 8, &mut at);
    take("STOREHOST", if sys & 0x20 != 0 { 20 } else { 8 }, &mut at);
    take("RECONSUMETIMES", 4, &mut at);
    take("PREPARED_TRANSACTION_OFFSET", 8, &mut at);
    let body_len = be32(at) as usize;
    at += 4;
    let body = b[at..at + body_len].to_vec();
    at += body_len;
    let v2 = be32(4) == MAGIC_V2;
    let topic_len = if v2 {
        let l = i16::from_be_bytes([b[at], b[at + 1]]) as usize;
        at += 2;
        l
    } else {
        let l = b[at] as usize;
        at += 1;
        l
    };
    let topic = String::from_utf8(b[at..at + topic_len].to_vec()).unwrap();
    at += topic_len;
    let props_len = i16::from_be_bytes([b[at], b[at + 1]]) as usize;
    at += 2;
    let props = b[at..at + props_len].to_vec();
    at += props_len;
    assert_eq!(
        at,
        be32(0) as usize,
        "TOTALSIZE must equal the sum of the fields"
    );
    (fields, body, topic, props)
}

fn arb_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, p)| SocketAddr::new(Ipv4Addr::from(ip).into(), p)),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, p)| SocketAddr::new(Ipv6Addr::from(ip).into(), p)),
    ]
}

#[derive(Debug, Clone)]
struct ArbRecord {
    topic: String,
    queue_id: i32,
    flag: i32,
    sys_flag: i32,
    born_timestamp: i64,
    born_host: SocketAddr,
    store_host: SocketAddr,
    reconsume_times: i32,
    prepared: i64,
    body: Vec<u8>,
    props: Vec<u8>,
    queue_offset: i64,
    physical_offset: i64,
    store_timestamp: i64,
}

prop_compose! {
    fn arb_record()(
        (topic, queue_id, flag, sys_flag, born_timestamp, born_host, store_host) in (
            "[A-Za-z0-9_%|-]{1,200}", 0i32..1024, any::<i32>(),
            any::<i32>().prop_map(|f| f & 0x70D), any::<i64>(), arb_addr(), arb_addr()),
        (reconsume_times, prepared, body, props, queue_offset, physical_offset, store_timestamp) in (
            0i32..100, any::<i64>(), proptest::collection::vec(any::<u8>(), 0..2048),
            proptest::collection::vec(any::<u8>(), 0..300), any::<i64>(), any::<i64>(), any::<i64>()),
    ) -> ArbRecord {
        ArbRecord { topic, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
            reconsume_times, prepared, body, props, queue_offset, physical_offset, store_timestamp }
    }
}

proptest! {
    #[test]
    fn round_trip_and_reference_agree(r in arb_record()) {
        let ArbRecord { topic, queue_id, flag, sys_flag, born_timestamp: born_ts, born_host,
            store_host, reconsume_times: reconsume, prepared, body, props, queue_offset: qoff,
            physical_offset: poff, store_timestamp: sts } = r;
        let draft = RecordDraft {
            topic: &topic, queue_id, flag, sys_flag, born_timestamp: born_ts, born_host, store_host,
            reconsume_times: reconsume, prepared_transaction_offset: prepared, body: &body,
            properties: &props,
        };
        let mut out = Vec::new();
        let len = draft.encode_into(&mut out).unwrap();
        stamp(&mut out, qoff, poff, sts);
        prop_assert_eq!(len, out.len());

        let v = RecordView::parse(&out, true).unwrap();
        prop_assert_eq!(v.queue_id, queue_id);
        prop_assert_eq!(v.flag, flag);
        prop_assert_eq!(v.queue_offset, qoff);
        prop_assert_eq!(v.physical_offset, poff);
        prop_assert_eq!(v.store_timestamp, sts);
        prop_assert_eq!(v.born_timestamp, born_ts);
        prop_assert_eq!(v.born_host, born_host);
        prop_assert_eq!(v.store_host, store_host);
        prop_assert_eq!(v.reconsume_times, reconsume);
        prop_assert_eq!(v.prepared_transaction_offset, prepared);
        prop_assert_eq!(v.body, &body[..]);
        prop_assert_eq!(v.topic, topic.as_bytes());
        prop_assert_eq!(v.properties, &props[..]);
        prop_assert_eq!(v.sys_flag & !0x30, sys_flag);

        let (fields, rbody, rtopic, rprops) = reference_decode(&out);
        prop_assert_eq!(rbody, body);
        prop_assert_eq!(rtopic, topic);
        prop_assert_eq!(rprops, props);
        let field = |n: &str| fields.iter().find(|(k, _)| k == n).unwrap().1.clone();
        prop_assert_eq!(field("QUEUEOFFSET"), qoff.to_be_bytes().to_vec());
        prop_assert_eq!(field("PHYSICALOFFSET"), poff.to_be_bytes().to_vec());
        prop_assert_eq!(field("STORETIMESTAMP"), sts.to_be_bytes().to_vec());
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = RecordView::parse(&bytes, true);
        let _ = peek_head(&bytes);
        let _ = decode_all(&bytes, true);
    }
}

#[test]
fn crc_trailer_detects_any_flip_outside_its_key() {
    let mut out = Vec::new();
    let len = golden_draft().encode_with_crc_trailer(&mut out).unwrap();
    // "TAGS\x01TagA\x02" already ends with 0x02: the trailer adds 20 bytes.
    assert_eq!(len, 115 + CRC_TRAILER_LEN);
    stamp(&mut out, 7, 1234, 1_700_000_000_123);
    seal_crc(&mut out);
    let v = RecordView::parse(&out, true).unwrap();
    assert_eq!(v.property("TAGS"), Some(&b"TagA"[..]));
    let stored = v.property("__CRC32#").unwrap();
    assert_eq!(stored.len(), 10);
    // Digits are least significant first.
    let crc = crate::crc::masked_crc32(&out[..len - CRC_TRAILER_LEN]);
    let mut expect = format!("{crc:010}").into_bytes();
    expect.reverse();
    assert_eq!(stored, &expect[..]);
    for at in 0..len {
        if (len - CRC_TRAILER_LEN..len - 11).contains(&at) || at == len - 1 {
            continue; // the trailer's frame: damaging it hides the trailer
        }
        let mut bad = out.clone();
        bad[at] ^= 0x10;
        assert!(
            RecordView::parse(&bad, true).is_err(),
            "flip at {at} went unnoticed"
        );
    }
}

#[test]
fn crc_trailer_adds_separator_when_missing() {
    let mut d = golden_draft();
    d.properties = b"A\x01b";
    let mut out = Vec::new();
    let len = d.encode_with_crc_trailer(&mut out).unwrap();
    stamp(&mut out, 0, 0, 0);
    seal_crc(&mut out);
    let v = RecordView::parse(&out, true).unwrap();
    assert_eq!(v.properties.len(), 3 + 1 + CRC_TRAILER_LEN);
    assert_eq!(v.property("A"), Some(&b"b"[..]));
    assert_eq!(len, out.len());
    // Empty properties get no separator.
    d.properties = b"";
    let mut out = Vec::new();
    d.encode_with_crc_trailer(&mut out).unwrap();
    seal_crc(&mut out);
    assert_eq!(
        RecordView::parse(&out, true).unwrap().properties.len(),
        CRC_TRAILER_LEN
    );
}

/// Regression (power-loss simulator, seed 608): a record whose last sector
/// was torn kept the trailer's key but lost its digits and final 0x02; it
/// was then read as a record without a trailer and passed on its body CRC.
#[test]
fn a_torn_crc_trailer_with_its_key_intact_is_damage() {
    let mut out = Vec::new();
    let len = golden_draft().encode_with_crc_trailer(&mut out).unwrap();
    stamp(&mut out, 7, 1234, 1_700_000_000_123);
    seal_crc(&mut out);
    let mut torn = out.clone();
    torn[len - 8..].fill(0);
    assert!(RecordView::parse(&torn, true).is_err());
    let mut end = out.clone();
    end[len - 1] ^= 0x10;
    assert!(RecordView::parse(&end, true).is_err());
    assert!(RecordView::parse(&out, true).is_ok());
}

/// A record whose trailer key took a flipped bit, or whose trailer was
/// zeroed by a torn sector, reads as one written without a trailer and
/// passes on its body CRC; `require_crc_trailer` is how a reader that knows
/// the trailer was written catches it (the power-loss simulator found
/// records with zeroed properties accepted this way).
#[test]
fn a_damaged_trailer_key_is_caught_when_the_trailer_is_required() {
    let mut out = Vec::new();
    let len = golden_draft().encode_with_crc_trailer(&mut out).unwrap();
    stamp(&mut out, 7, 1234, 1_700_000_000_123);
    seal_crc(&mut out);
    assert!(require_crc_trailer(&out).is_ok());
    for at in len - CRC_TRAILER_LEN..len - 11 {
        for bit in 0..8 {
            let mut bad = out.clone();
            bad[at] ^= 1 << bit;
            // Alone, the body CRC passes: the record looks trailer-less.
            let v = RecordView::parse(&bad, true).expect("reads as trailer-less");
            assert!(!has_crc_trailer(v.bytes));
            assert_eq!(
                require_crc_trailer(&bad),
                Err(CodecError::MissingCrcTrailer {
                    at: len - CRC_TRAILER_LEN
                }),
                "flip at {at} bit {bit}"
            );
        }
    }
    // The tail of the properties and the trailer zeroed (a torn sector).
    let mut torn = out.clone();
    torn[len - 30..].fill(0);
    assert!(RecordView::parse(&torn, true).is_ok());
    assert!(require_crc_trailer(&torn).is_err());
}
