use super::*;
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn decode_all(bytes: &[u8]) -> RemotingCommand {
    let mut buf = BytesMut::from(bytes);
    let cmd = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    cmd
}

#[test]
fn golden_json_frame() {
    // Hand-written: length 0x94 = 4 + 142 + 2, type word JSON | 142, header, body "hi".
    let header = r#"{"code":310,"extFields":{"a":"PG","i":"K\u0001v\u0002"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":401}"#;
    let mut golden = hex("00000094 0000008e");
    golden.extend_from_slice(header.as_bytes());
    golden.extend_from_slice(b"hi");

    let mut cmd = RemotingCommand::request(310);
    cmd.opaque = 42;
    cmd.version = 401;
    cmd.ext_fields.insert("a", "PG");
    cmd.ext_fields.insert("i", "K\u{1}v\u{2}");
    cmd.body = Bytes::from_static(b"hi");
    assert_eq!(&encode_frame(&cmd).unwrap()[..], &golden[..]);
    assert_eq!(decode_all(&golden), cmd);
}

#[test]
fn golden_binary_frame() {
    // code 11, GO(9), version 317, opaque 7, flag 1, remark "ok", ext {k: v}, body "xy".
    let golden = hex("00000025 0100001f
         000b 09 013d 00000007 00000001 00000002 6f6b
         00000008 0001 6b 00000001 76
         7879");
    let cmd = decode_all(&golden);
    assert_eq!(cmd.code, 11);
    assert_eq!(cmd.language, LanguageCode::Go);
    assert_eq!(cmd.version, 317);
    assert_eq!(cmd.opaque, 7);
    assert!(cmd.is_response());
    assert_eq!(cmd.remark.as_deref(), Some("ok"));
    assert_eq!(cmd.ext_fields.get("k"), Some("v"));
    assert_eq!(&cmd.body[..], b"xy");
    assert_eq!(cmd.serialize_type, SerializeType::Rocketmq);
    assert_eq!(&encode_frame(&cmd).unwrap()[..], &golden[..]);
}

#[test]
fn json_quirks_are_tolerated() {
    // #8 nulls, #12 scalar ext values, unknown keys and language, string numbers.
    let h = br#"{"code":"105","language":"KOTLIN","version":317,"opaque":-3,"flag":null,
        "remark":null,"extFields":{"topic":"T","n":5,"b":true,"z":null,"f":1.5},
        "serializeTypeCurrentRPC":"JSON","suspended":false,"extra":{"x":[1,2]}}"#;
    let cmd = decode_json_header(h).unwrap();
    assert_eq!(cmd.code, 105);
    assert_eq!(cmd.language, LanguageCode::Other);
    assert_eq!(cmd.opaque, -3);
    assert_eq!(cmd.flag, 0);
    assert_eq!(cmd.remark, None);
    assert_eq!(cmd.ext_fields.get("topic"), Some("T"));
    assert_eq!(cmd.ext_fields.get("n"), Some("5"));
    assert_eq!(cmd.ext_fields.get("b"), Some("true"));
    assert_eq!(cmd.ext_fields.get("z"), None);
    assert_eq!(cmd.ext_fields.get("f"), Some("1.5"));

    let cmd = decode_json_header(br#"{"code":0,"extFields":null}"#).unwrap();
    assert!(cmd.ext_fields.is_empty());
}

#[test]
fn bad_headers_are_errors() {
    for h in [
        &b"not json"[..],
        br#"{"code":"abc"}"#,
        br#"{"code":{}}"#,
        br#"{"code":1e20}"#,
        br#"{"extFields":[1]}"#,
        br#"{"extFields":{"a":{"b":1}}}"#,
        br#"{"code":1} trailing"#,
        br#"[1,2]"#,
        br#"{"code":9999999999}"#,
    ] {
        assert!(
            decode_json_header(h).is_err(),
            "{:?} should fail",
            String::from_utf8_lossy(h)
        );
    }
}

#[test]
fn frame_errors() {
    let d = FrameDecoder::new(1024);
    // Oversized and negative lengths.
    let mut b = BytesMut::from(&hex("00100000 00000000")[..]);
    assert!(matches!(
        d.decode(&mut b),
        Err(DecodeError::FrameTooLarge { .. })
    ));
    let mut b = BytesMut::from(&hex("ffffffff")[..]);
    assert!(d.decode(&mut b).is_err());
    let mut b = BytesMut::from(&hex("00000002 0000")[..]);
    assert!(d.decode(&mut b).is_err());
    // Header length beyond the frame.
    let mut b = BytesMut::from(&hex("00000006 00000010 0000")[..]);
    assert!(matches!(
        d.decode(&mut b),
        Err(DecodeError::HeaderLength { .. })
    ));
    // Unknown serialize type.
    let mut b = BytesMut::from(&hex("00000004 07000000")[..]);
    assert!(matches!(
        d.decode(&mut b),
        Err(DecodeError::UnknownSerializeType(7))
    ));
    // Incomplete frames wait for more bytes.
    let mut b = BytesMut::from(&hex("0000000a 0000")[..]);
    assert_eq!(d.decode(&mut b).unwrap(), None);
    assert_eq!(b.len(), 6);
}

#[test]
fn binary_rejects_codes_it_cannot_hold() {
    let mut cmd = RemotingCommand::request(200_050);
    cmd.serialize_type = SerializeType::Rocketmq;
    let mut buf = BytesMut::new();
    assert!(encode_header_into(&cmd, &mut buf).is_err());
    assert!(buf.is_empty());
}

#[test]
fn several_frames_in_one_buffer() {
    let mut buf = BytesMut::new();
    for i in 0..5 {
        let mut c = RemotingCommand::request(i);
        c.opaque = i;
        c.body = Bytes::from(vec![i as u8; i as usize]);
        buf.extend_from_slice(&encode_frame(&c).unwrap());
    }
    let d = FrameDecoder::default();
    for i in 0..5 {
        let c = d.decode(&mut buf).unwrap().unwrap();
        assert_eq!(c.opaque, i);
        assert_eq!(c.body.len(), i as usize);
    }
    assert_eq!(d.decode(&mut buf).unwrap(), None);
}

/// Strings with the characters that matter: control bytes, quotes, non-ASCII.
pub(crate) fn text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9 \u{1}\u{2}\"\\\\\n\té漢🎉]{0,24}").unwrap()
}

pub(crate) fn command() -> impl Strategy<Value = RemotingCommand> {
    (
        any::<i16>(),
        0u8..14,
        any::<i16>(),
        any::<i32>(),
        any::<i32>(),
        proptest::option::of(text()),
        proptest::collection::vec((text(), text()), 0..16),
        proptest::collection::vec(any::<u8>(), 0..512),
        any::<bool>(),
    )
        .prop_map(
            |(code, lang, version, opaque, flag, remark, ext, body, binary)| {
                let mut ext_fields = ExtFields::new();
                for (k, v) in ext {
                    ext_fields.insert(format!("k{k}"), v);
                }
                RemotingCommand {
                    code: code as i32,
                    language: LanguageCode::from_code(lang),
                    version: version as i32,
                    opaque,
                    flag,
                    // The binary header reads an empty remark as null, like Java.
                    remark: remark.filter(|r| !(binary && r.is_empty())),
                    ext_fields,
                    body: Bytes::from(body),
                    body_parts: Vec::new(),
                    serialize_type: if binary {
                        SerializeType::Rocketmq
                    } else {
                        SerializeType::Json
                    },
                }
            },
        )
}

proptest! {
    #[test]
    fn round_trips(cmd in command()) {
        let mut buf = encode_frame(&cmd).unwrap();
        let back = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
        prop_assert!(buf.is_empty());
        prop_assert_eq!(back, cmd);
    }

    #[test]
    fn split_header_and_body_equals_whole(cmd in command()) {
        let mut head = BytesMut::new();
        encode_header_into(&cmd, &mut head).unwrap();
        head.extend_from_slice(&cmd.body);
        prop_assert_eq!(head, encode_frame(&cmd).unwrap());
    }

    #[test]
    fn a_body_in_pieces_encodes_as_the_joined_body(
        cmd in command(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        // Cut the body at arbitrary points (empty pieces included).
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(cmd.body.len() + 1)).collect();
        at.sort_unstable();
        let mut pieces = Vec::new();
        let mut from = 0;
        for a in at.into_iter().chain([cmd.body.len()]) {
            pieces.push(cmd.body.slice(from..a));
            from = a;
        }
        let first = pieces.remove(0);
        let split = cmd.clone().with_body_parts(first, pieces);
        prop_assert_eq!(split.body_len(), cmd.body.len());
        let mut head = BytesMut::new();
        encode_header_into(&split, &mut head).unwrap();
        head.extend_from_slice(&split.body);
        for p in &split.body_parts {
            head.extend_from_slice(p);
        }
        prop_assert_eq!(&head, &encode_frame(&cmd).unwrap());
        prop_assert_eq!(head, encode_frame(&split).unwrap());
    }

    #[test]
    fn decode_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut buf = BytesMut::from(&raw[..]);
        let d = FrameDecoder::new(4096);
        while let Ok(Some(_)) = d.decode(&mut buf) {}
    }
}

/// JSON header text in the shapes clients send, plus the quirks the fast
/// parser must either handle exactly like serde or decline.
fn header_json() -> impl Strategy<Value = String> {
    let scalar = prop_oneof![
        text().prop_map(|s| serde_json::to_string(&s).unwrap()),
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("-0".to_string()),
        Just("1.5".to_string()),
        Just("1e3".to_string()),
        Just("007".to_string()),
        Just("\"\\ud83c\\udf89 \\u00e9 \\/\"".to_string()),
        Just("\"\\ud83c\"".to_string()),
        Just("{\"x\":[1]}".to_string()),
        Just("\"105\"".to_string()),
    ];
    let key = prop_oneof![
        Just("code"),
        Just("language"),
        Just("version"),
        Just("opaque"),
        Just("flag"),
        Just("remark"),
        Just("serializeTypeCurrentRPC"),
        Just("other"),
        Just("k\\u0041"),
    ];
    let ext = proptest::collection::vec(("[a-z]{1,3}", scalar.clone()), 0..6).prop_map(|kv| {
        let inner: Vec<String> = kv
            .into_iter()
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        format!("{{{}}}", inner.join(","))
    });
    let entry = prop_oneof![
        (key, scalar.clone()).prop_map(|(k, v)| format!("\"{k}\":{v}")),
        ext.prop_map(|e| format!("\"extFields\":{e}")),
        Just("\"extFields\":null".to_string()),
        Just("\"language\":\"GO\"".to_string()),
    ];
    (
        proptest::collection::vec(entry, 0..10),
        "[ \n]{0,2}",
        prop_oneof![Just(""), Just(" "), Just("x")],
    )
        .prop_map(|(entries, ws, tail)| {
            format!("{ws}{{{ws}{}}}{tail}", entries.join(&format!(",{ws}")))
        })
}

proptest! {
    #[test]
    fn header_parser_agrees_with_serde(h in header_json()) {
        if let Some(fast) = header_parser::parse(h.as_bytes()) {
            prop_assert_eq!(Ok(fast), decode_json_header_serde(h.as_bytes()));
        }
    }

    #[test]
    fn header_parser_takes_what_we_encode(cmd in command()) {
        let mut cmd = cmd;
        cmd.serialize_type = SerializeType::Json;
        let frame = encode_frame(&cmd).unwrap();
        let header = &frame[8..frame.len() - cmd.body.len()];
        let fast = header_parser::parse(header);
        prop_assert!(fast.is_some());
        let mut fast = fast.unwrap();
        fast.body = cmd.body.clone();
        prop_assert_eq!(fast, cmd);
    }
}

#[test]
fn header_parser_handles_java_header() {
    let h = br#"{"code":310,"extFields":{"a":"PG","b":"T","i":"UNIQ_KEY\u0001x\u0002"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    let cmd = header_parser::parse(h).unwrap();
    assert_eq!(cmd.ext_fields.get("i"), Some("UNIQ_KEY\u{1}x\u{2}"));
    assert_eq!(Ok(cmd), decode_json_header_serde(h));
    // Quirks go to serde.
    assert!(header_parser::parse(br#"{"code":"105"}"#).is_none());
    assert!(header_parser::parse(br#"{"code":1,"extFields":{"n":1.5}}"#).is_none());
}
