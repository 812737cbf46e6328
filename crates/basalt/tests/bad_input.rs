//! `basalt standalone` under hostile input over raw TCP: garbage, truncated,
//! oversized and wrongly typed frames, unknown request codes. The broker must
//! answer or close only the offending connection, keep serving everyone else,
//! never crash, shut down cleanly, and leave a store that `basalt store
//! check` accepts.

mod standalone;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use basalt_remoting::code::{request, response};
use basalt_remoting::codec::{decode_frame, encode_frame};
use basalt_remoting::header::{
    CommandHeader, GetMaxOffsetRequestHeader, PullMessageRequestHeader, SendMessageRequestHeader,
};
use basalt_remoting::{RemotingCommand, SerializeType};

use standalone::Standalone;

const IO_DEADLINE: Duration = Duration::from_secs(10);

/// What the broker did with a connection after some input.
#[derive(Debug)]
enum Outcome {
    /// It answered with this command.
    Reply(Box<RemotingCommand>),
    /// It closed the connection (EOF or reset).
    Closed,
    /// Nothing within the deadline, connection still open.
    Silent,
}

/// A raw connection that writes arbitrary bytes and reads whole frames.
struct Raw {
    s: TcpStream,
    next_opaque: i32,
}

impl Raw {
    fn connect(addr: &str) -> Raw {
        let s = TcpStream::connect(addr).expect("connect to the broker");
        s.set_nodelay(true).expect("nodelay");
        Raw {
            s,
            next_opaque: 1000,
        }
    }

    /// Writes bytes; a reset by the broker is not an error here (the
    /// broker may close as soon as it has seen enough).
    fn write(&mut self, bytes: &[u8]) {
        match self.s.write_all(bytes) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {}
            Err(e) => panic!("write: {e}"),
        }
    }

    fn read_exact_or_closed(&mut self, buf: &mut [u8], deadline: Instant) -> Result<(), Outcome> {
        let mut at = 0;
        while at < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Outcome::Silent);
            }
            self.s.set_read_timeout(Some(left)).expect("read timeout");
            match self.s.read(&mut buf[at..]) {
                Ok(0) => return Err(Outcome::Closed),
                Ok(n) => at += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(Outcome::Silent);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Err(Outcome::Closed);
                }
                Err(e) => panic!("read: {e}"),
            }
        }
        Ok(())
    }

    /// Reads the next frame, or reports a close or silence.
    fn next(&mut self, wait: Duration) -> Outcome {
        let deadline = Instant::now() + wait;
        let mut len = [0u8; 4];
        if let Err(o) = self.read_exact_or_closed(&mut len, deadline) {
            return o;
        }
        let len = i32::from_be_bytes(len);
        assert!(
            (4..=16 << 20).contains(&len),
            "broker sent a frame of length {len}"
        );
        let mut frame = vec![0u8; len as usize];
        if let Err(o) = self.read_exact_or_closed(&mut frame, deadline) {
            panic!("broker sent a truncated frame ({o:?})");
        }
        Outcome::Reply(Box::new(
            decode_frame(frame.into()).expect("broker frames decode"),
        ))
    }

    /// Sends a well-formed request and returns the response to it.
    fn call(&mut self, mut cmd: RemotingCommand) -> RemotingCommand {
        self.next_opaque += 1;
        cmd.opaque = self.next_opaque;
        let bytes = encode_frame(&cmd).expect("encode");
        self.write(&bytes);
        match self.next(IO_DEADLINE) {
            Outcome::Reply(r) => {
                assert_eq!(r.opaque, cmd.opaque, "response echoes the opaque");
                assert_eq!(r.flag & 1, 1, "response flag");
                *r
            }
            other => panic!("no response to code {}: {other:?}", cmd.code),
        }
    }

    /// Sends raw bytes and returns what the broker did.
    fn send_raw(&mut self, bytes: &[u8], wait: Duration) -> Outcome {
        self.write(bytes);
        self.next(wait)
    }
}

/// `[len][type<<24 | header len][header][body]` with a JSON header.
fn json_frame(header: &str, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header.as_bytes());
    f.extend_from_slice(body);
    f
}

fn json_header(code: i32, opaque: i32, flag: i32, ext: &str) -> String {
    format!(
        r#"{{"code":{code},"extFields":{{{ext}}},"flag":{flag},"language":"JAVA","opaque":{opaque},"serializeTypeCurrentRPC":"JSON","version":479}}"#
    )
}

fn send_header(topic: &str, queue_id: i32) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some("TAGS\u{1}A\u{2}KEYS\u{1}k\u{2}".into()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        max_reconsume_times: None,
        broker_name: None,
    }
}

fn send_request(topic: &str, queue_id: i32, body: &[u8]) -> RemotingCommand {
    RemotingCommand::request(request::SEND_MESSAGE_V2)
        .with_ext(send_header(topic, queue_id).to_ext_v2())
        .with_body(body.to_vec())
}

fn pull_request(topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    let h = PullMessageRequestHeader {
        consumer_group: "CG".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: 0x4, // SUBSCRIPTION
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
    };
    RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext())
}

/// The good client: a send that succeeds and can be pulled back.
fn assert_serving(good: &mut Raw, n: usize) {
    let body = format!("still-serving-{n}");
    let r = good.call(send_request("Survivor", 0, body.as_bytes()));
    assert_eq!(
        r.code,
        response::SUCCESS,
        "send after bad input #{n}: {:?}",
        r.remark
    );
    let offset: i64 = r
        .ext_fields
        .get("queueOffset")
        .and_then(|v| v.parse().ok())
        .expect("queueOffset in the send response");
    // A send is acknowledged before its ConsumeQueue unit exists: wait for
    // dispatch (a real consumer only pulls offsets the broker handed out).
    let deadline = Instant::now() + IO_DEADLINE;
    loop {
        let h = GetMaxOffsetRequestHeader {
            topic: "Survivor".into(),
            queue_id: 0,
            committed: None,
        };
        let r = good.call(RemotingCommand::request(request::GET_MAX_OFFSET).with_ext(h.to_ext()));
        let max: i64 = r
            .ext_fields
            .get("offset")
            .and_then(|v| v.parse().ok())
            .expect("offset in the GET_MAX_OFFSET response");
        if max > offset {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "message {offset} never dispatched (max {max})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = good.call(pull_request("Survivor", 0, offset));
    assert_eq!(
        r.code,
        response::SUCCESS,
        "pull after bad input #{n}: {:?}",
        r.remark
    );
    assert!(
        r.body.windows(body.len()).any(|w| w == body.as_bytes()),
        "pulled record holds the body"
    );
}

fn expect_closed(o: Outcome, what: &str) {
    assert!(
        matches!(o, Outcome::Closed),
        "{what}: expected a close, got {o:?}"
    );
}

fn expect_error_reply(o: Outcome, what: &str) -> RemotingCommand {
    match o {
        Outcome::Reply(r) => {
            assert_ne!(r.code, response::SUCCESS, "{what}: must not succeed");
            assert_eq!(r.flag & 1, 1, "{what}: a response");
            *r
        }
        other => panic!("{what}: expected an error response, got {other:?}"),
    }
}

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
