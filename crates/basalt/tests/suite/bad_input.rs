//! `basalt standalone` under hostile input over raw TCP: garbage, truncated,
//! oversized and wrongly typed frames, unknown request codes. The broker must
//! answer or close only the offending connection, keep serving everyone else,
//! never crash, shut down cleanly, and leave a store that `basalt store
//! check` accepts.

use crate::raw;
use crate::standalone;

use std::net::Shutdown;
use std::time::Duration;

use basalt_remoting::code::{request, response};
use basalt_remoting::{RemotingCommand, SerializeType};

use raw::*;
use standalone::Standalone;

#[test]
fn hostile_frames_hurt_only_their_own_connection() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut broker = Standalone::start(&data, &["mappedFileSizeCommitLog=16777216"]);
    let addr = broker.broker_addr();
    let mut good = Raw::connect(&addr);
    assert_serving(&mut good, 0);

    // A connection left with half a frame must not block anyone.
    let mut hanging = Raw::connect(&addr);
    let frame = json_frame(&json_header(request::HEART_BEAT, 1, 0, ""), b"{}");
    hanging.write(&frame[..frame.len() / 2]);
    assert_serving(&mut good, 1);

    let short = Duration::from_secs(1);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "ASCII garbage",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ),
        ("a whole frame of random bytes", {
            let mut f = 4092i32.to_be_bytes().to_vec();
            f.extend((1..=4092u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
            f
        }),
        ("negative length", (-5i32).to_be_bytes().to_vec()),
        ("length below the header word", 2i32.to_be_bytes().to_vec()),
        ("oversized length (64 MiB)", {
            let mut f = (64i32 << 20).to_be_bytes().to_vec();
            f.extend_from_slice(&[0u8; 64]);
            f
        }),
        ("header longer than the frame", {
            let mut f = 20i32.to_be_bytes().to_vec();
            f.extend_from_slice(&1000u32.to_be_bytes());
            f.extend_from_slice(&[b'{'; 16]);
            f
        }),
        ("unknown serialize type", {
            let h = json_header(request::HEART_BEAT, 2, 0, "");
            let mut f = json_frame(&h, b"");
            f[4] = 7;
            f
        }),
        (
            "header that is not JSON",
            json_frame("{not json at all", b""),
        ),
        (
            "JSON header with a string code",
            json_frame(r#"{"code":"ten","flag":0,"opaque":3}"#, b""),
        ),
        (
            "JSON header nested 100k deep",
            json_frame(&"[".repeat(100_000), b""),
        ),
        (
            "JSON header that is an array",
            json_frame(r#"[1,2,3]"#, b""),
        ),
        ("binary header truncated", {
            let mut f = 12i32.to_be_bytes().to_vec();
            f.extend_from_slice(&((1u32 << 24) | 8).to_be_bytes());
            f.extend_from_slice(&[0, 34, 0, 0, 1, 0, 0, 0]);
            f
        }),
        ("binary header with a huge remark length", {
            let mut h = Vec::new();
            h.extend_from_slice(&34i16.to_be_bytes()); // code
            h.push(0); // language
            h.extend_from_slice(&479i16.to_be_bytes());
            h.extend_from_slice(&7i32.to_be_bytes()); // opaque
            h.extend_from_slice(&0i32.to_be_bytes()); // flag
            h.extend_from_slice(&i32::MAX.to_be_bytes()); // remark length
            let mut f = ((4 + h.len()) as i32).to_be_bytes().to_vec();
            f.extend_from_slice(&((1u32 << 24) | h.len() as u32).to_be_bytes());
            f.extend_from_slice(&h);
            f
        }),
        ("binary header with an ext key running past the end", {
            let mut h = Vec::new();
            h.extend_from_slice(&34i16.to_be_bytes());
            h.push(0);
            h.extend_from_slice(&479i16.to_be_bytes());
            h.extend_from_slice(&8i32.to_be_bytes());
            h.extend_from_slice(&0i32.to_be_bytes());
            h.extend_from_slice(&0i32.to_be_bytes()); // no remark
            h.extend_from_slice(&10i32.to_be_bytes()); // ext area length
            h.extend_from_slice(&300i16.to_be_bytes()); // key length past the area
            h.extend_from_slice(b"abcdefgh");
            let mut f = ((4 + h.len()) as i32).to_be_bytes().to_vec();
            f.extend_from_slice(&((1u32 << 24) | h.len() as u32).to_be_bytes());
            f.extend_from_slice(&h);
            f
        }),
    ];
    for (n, (what, bytes)) in cases.iter().enumerate() {
        let mut c = Raw::connect(&addr);
        let o = c.send_raw(bytes, IO_DEADLINE);
        expect_closed(o, what);
        assert_serving(&mut good, 100 + n);
    }

    // Well-framed requests with bad content get an error reply and the
    // connection stays usable.
    let mut c = Raw::connect(&addr);
    let typed_cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "unknown request code",
            json_frame(&json_header(9999, 11, 0, ""), b""),
        ),
        (
            "negative request code",
            json_frame(&json_header(-7, 12, 0, ""), b""),
        ),
        (
            "send with a non-numeric queueId",
            json_frame(
                &json_header(
                    request::SEND_MESSAGE_V2,
                    13,
                    0,
                    r#""a":"PG","b":"T","c":"TBW102","d":"4","e":"zero","f":"0","g":"0","h":"0""#,
                ),
                b"x",
            ),
        ),
        (
            "send with an out-of-range int",
            json_frame(
                &json_header(
                    request::SEND_MESSAGE_V2,
                    14,
                    0,
                    r#""a":"PG","b":"T","c":"TBW102","d":"4","e":"99999999999","f":"0","g":"0","h":"0""#,
                ),
                b"x",
            ),
        ),
        (
            "send without its header",
            json_frame(&json_header(request::SEND_MESSAGE_V2, 15, 0, ""), b"x"),
        ),
        (
            "batch with a lying record size",
            json_frame(
                &json_header(
                    request::SEND_BATCH_MESSAGE,
                    16,
                    0,
                    r#""a":"PG","b":"Survivor","c":"TBW102","d":"4","e":"0","f":"0","g":"0","h":"0","m":"true""#,
                ),
                &{
                    let mut b = 1_000_000i32.to_be_bytes().to_vec();
                    b.extend_from_slice(&[0u8; 30]);
                    b
                },
            ),
        ),
        (
            "heartbeat whose body is not JSON",
            json_frame(
                &json_header(request::HEART_BEAT, 17, 0, ""),
                b"\x00\x01garbage",
            ),
        ),
        (
            "pull with a negative queue id",
            json_frame(
                &json_header(
                    request::PULL_MESSAGE,
                    18,
                    0,
                    r#""consumerGroup":"CG","topic":"Survivor","queueId":"-3","queueOffset":"0","maxMsgNums":"32","sysFlag":"4","commitOffset":"0","suspendTimeoutMillis":"0","subscription":"*","subVersion":"0""#,
                ),
                b"",
            ),
        ),
        (
            "pull with an unparsable subscription",
            json_frame(
                &json_header(
                    request::PULL_MESSAGE,
                    19,
                    0,
                    r#""consumerGroup":"CG","topic":"Survivor","queueId":"0","queueOffset":"0","maxMsgNums":"32","sysFlag":"4","commitOffset":"0","suspendTimeoutMillis":"0","subscription":"a || (","subVersion":"0","expressionType":"SQL92""#,
                ),
                b"",
            ),
        ),
        (
            "offset query without a queueId",
            json_frame(
                &json_header(
                    request::QUERY_CONSUMER_OFFSET,
                    20,
                    0,
                    r#""consumerGroup":"CG","topic":"Survivor""#,
                ),
                b"",
            ),
        ),
        (
            "body above maxMessageSize",
            json_frame(
                &json_header(
                    request::SEND_MESSAGE_V2,
                    21,
                    0,
                    r#""a":"PG","b":"Survivor","c":"TBW102","d":"4","e":"0","f":"0","g":"0","h":"0""#,
                ),
                &vec![7u8; 5 << 20],
            ),
        ),
    ];
    for (n, (what, bytes)) in typed_cases.iter().enumerate() {
        let r = expect_error_reply(c.send_raw(bytes, IO_DEADLINE), what);
        assert_eq!(r.opaque, 11 + n as i32, "{what}: opaque echoed");
        if n == 0 {
            assert_eq!(r.code, response::REQUEST_CODE_NOT_SUPPORTED, "{what}");
        }
        assert_serving(&mut c, 200 + n);
    }

    // Oneway requests get no reply, even when they make no sense, and a
    // stray response frame is ignored.
    let stray = [
        json_frame(&json_header(9999, 30, 2, ""), b""),
        json_frame(
            &json_header(
                request::UPDATE_CONSUMER_OFFSET,
                31,
                2,
                r#""consumerGroup":"CG""#,
            ),
            b"",
        ),
        json_frame(&json_header(response::SYSTEM_ERROR, 424242, 1, ""), b""),
    ];
    for (n, f) in stray.iter().enumerate() {
        match c.send_raw(f, short) {
            Outcome::Silent => {}
            other => panic!("oneway/stray frame #{n}: expected silence, got {other:?}"),
        }
        assert_serving(&mut c, 300 + n);
    }

    // A binary (ROCKETMQ) header request is answered too.
    let mut bin = send_request("Survivor", 0, b"binary-header");
    bin.serialize_type = SerializeType::Rocketmq;
    assert_eq!(c.call(bin).code, response::SUCCESS);

    // The half-frame connection: finishing it now gets its answer, closing
    // it half-way is fine too.
    hanging.write(&frame[frame.len() / 2..]);
    match hanging.next(IO_DEADLINE) {
        Outcome::Reply(r) => assert_eq!(r.opaque, 1),
        other => panic!("completed frame: {other:?}"),
    }
    let mut torn = Raw::connect(&addr);
    torn.write(&frame[..7]);
    torn.s.shutdown(Shutdown::Write).expect("half close");
    expect_closed(torn.next(IO_DEADLINE), "frame torn by the client");

    // And the same against the NameServer port.
    let ns = broker.namesrv_addr();
    let mut ns_bad = Raw::connect(&ns);
    expect_closed(
        ns_bad.send_raw(b"\xff\xff\xff\xffjunk", IO_DEADLINE),
        "namesrv garbage",
    );
    let mut ns_good = Raw::connect(&ns);
    let r = ns_good.call(RemotingCommand::request(9999));
    assert_eq!(r.code, response::REQUEST_CODE_NOT_SUPPORTED);
    let r = ns_good.call(RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO));
    assert_eq!(r.code, response::SUCCESS);

    assert_serving(&mut good, 999);
    assert!(broker.is_running(), "the broker survived");
    drop((good, c, hanging, ns_good));
    broker.stop();
    let (ok, report) = standalone::store_check(&data);
    assert!(ok, "store check after hostile input:\n{report}");
}
