//! A raw remoting connection for black-box tests of `basalt standalone`:
//! writes arbitrary bytes, reads whole frames, and builds the few requests
//! the hostile-input tests need.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};
use basalt_remoting::codec::{decode_frame, encode_frame};
use basalt_remoting::header::{
    CommandHeader, GetMaxOffsetRequestHeader, PullMessageRequestHeader, SendMessageRequestHeader,
};

pub const IO_DEADLINE: Duration = Duration::from_secs(10);

/// What the broker did with a connection after some input.
#[derive(Debug)]
pub enum Outcome {
    /// It answered with this command.
    Reply(Box<RemotingCommand>),
    /// It closed the connection (EOF or reset).
    Closed,
    /// Nothing within the deadline, connection still open.
    Silent,
}

/// A raw connection that writes arbitrary bytes and reads whole frames.
pub struct Raw {
    pub s: TcpStream,
    pub next_opaque: i32,
}

impl Raw {
    pub fn connect(addr: &str) -> Raw {
        let s = TcpStream::connect(addr).expect("connect to the broker");
        s.set_nodelay(true).expect("nodelay");
        Raw {
            s,
            next_opaque: 1000,
        }
    }

    /// Writes bytes; a reset by the broker is not an error here (the
    /// broker may close as soon as it has seen enough).
    pub fn write(&mut self, bytes: &[u8]) {
        match self.s.write_all(bytes) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {}
            Err(e) => panic!("write: {e}"),
        }
    }

    pub fn read_exact_or_closed(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
    ) -> Result<(), Outcome> {
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
    pub fn next(&mut self, wait: Duration) -> Outcome {
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
    pub fn call(&mut self, mut cmd: RemotingCommand) -> RemotingCommand {
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
    pub fn send_raw(&mut self, bytes: &[u8], wait: Duration) -> Outcome {
        self.write(bytes);
        self.next(wait)
    }
}

/// `[len][type<<24 | header len][header][body]` with a JSON header.
pub fn json_frame(header: &str, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header.as_bytes());
    f.extend_from_slice(body);
    f
}

pub fn json_header(code: i32, opaque: i32, flag: i32, ext: &str) -> String {
    format!(
        r#"{{"code":{code},"extFields":{{{ext}}},"flag":{flag},"language":"JAVA","opaque":{opaque},"serializeTypeCurrentRPC":"JSON","version":479}}"#
    )
}

pub fn send_header(topic: &str, queue_id: i32) -> SendMessageRequestHeader {
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

pub fn send_request(topic: &str, queue_id: i32, body: &[u8]) -> RemotingCommand {
    RemotingCommand::request(request::SEND_MESSAGE_V2)
        .with_ext(send_header(topic, queue_id).to_ext_v2())
        .with_body(body.to_vec())
}

pub fn pull_request(topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
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
pub fn assert_serving(good: &mut Raw, n: usize) {
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

pub fn expect_closed(o: Outcome, what: &str) {
    assert!(
        matches!(o, Outcome::Closed),
        "{what}: expected a close, got {o:?}"
    );
}

pub fn expect_error_reply(o: Outcome, what: &str) -> RemotingCommand {
    match o {
        Outcome::Reply(r) => {
            assert_ne!(r.code, response::SUCCESS, "{what}: must not succeed");
            assert_eq!(r.flag & 1, 1, "{what}: a response");
            *r
        }
        other => panic!("{what}: expected an error response, got {other:?}"),
    }
}
