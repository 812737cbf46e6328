//! The push encoding a TCP connection negotiates: a peer that answers HELLO
//! with the binary encoding gets PUSH_BIN, a DLedger peer (which answers
//! REQUEST_CODE_NOT_SUPPORTED) gets DLedger's JSON PUSH, and a member told not
//! to offer it sends JSON. The fake peers are plain remoting servers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use basalt_ledger::entry::Entry;
use basalt_ledger::protocol::{
    Envelope, NodeId, PushRequest, PushResponse, PushType, Request, Response, ResponseCode, Rpc,
};
use basalt_ledger::transport::Transport;
use basalt_ledger::transport::tcp::{TcpListener, TcpTransport};
use basalt_ledger::{EntryKind, wire, wire_bin};
use basalt_remoting::code::response as rcode;
use basalt_remoting::{Channel, ExtFields, RemotingCommand, RemotingServer, RequestProcessor};
use bytes::Bytes;
use tokio::sync::mpsc;

const BOUND: Duration = Duration::from_secs(10);

/// A peer that records every request code and answers pushes with SUCCESS.
struct FakePeer {
    /// Answer HELLO with the binary encoding (a Basalt member) or not at all (DLedger).
    speaks_binary: bool,
    seen: mpsc::UnboundedSender<(i32, Bytes)>,
}

impl RequestProcessor for FakePeer {
    async fn process(&self, _ch: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        let _ = self.seen.send((req.code, req.body.clone()));
        let ok = PushResponse {
            term: 3,
            code: ResponseCode::Success,
            index: 5,
            count: 2,
            begin_index: 0,
            end_index: 6,
        };
        let me = NodeId::new("n1");
        let ids = wire::Ids {
            group: "g",
            local_id: &me,
            remote_id: &me,
        };
        Some(match req.code {
            wire_bin::HELLO if self.speaks_binary => {
                let mut ext = ExtFields::new();
                ext.insert(wire_bin::EXT_ENCODING, wire_bin::ENCODING_BIN1);
                RemotingCommand::response(rcode::SUCCESS, None).with_ext(ext)
            }
            wire_bin::PUSH_BIN if self.speaks_binary => {
                RemotingCommand::response(rcode::SUCCESS, None)
                    .with_body(wire_bin::encode_push_response(&ok))
            }
            wire::PUSH => RemotingCommand::response(rcode::SUCCESS, None)
                .with_body(wire::encode_response(&ids, &Response::Push(ok))),
            _ => RemotingCommand::not_supported(&req),
        })
    }
}

fn push() -> PushRequest {
    let e = |i: i64| {
        Entry::new(
            EntryKind::Normal,
            i,
            3,
            i * 100,
            Bytes::from(vec![i as u8; 40]),
        )
    };
    PushRequest {
        term: 3,
        leader_id: NodeId::new("n0"),
        push_type: PushType::Append,
        commit_index: 4,
        entries: vec![e(5), e(6)],
    }
}

/// Sends one push from member n0 to a fake n1; returns the codes n1 saw, the
/// push as n1 decoded it, and the answer n0's inbox got.
async fn exchange(speaks_binary: bool, offer_binary: bool) -> (Vec<i32>, PushRequest, Response) {
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let fake = Arc::new(FakePeer {
        speaks_binary,
        seen: seen_tx,
    });
    let server = RemotingServer::bind("127.0.0.1:0", fake).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peers: BTreeMap<NodeId, String> = [
        (NodeId::new("n0"), listener.local_addr().to_string()),
        (NodeId::new("n1"), server.local_addr().to_string()),
    ]
    .into();
    let (inbox, mut arrived) = mpsc::unbounded_channel();
    let t = TcpTransport::start(
        listener,
        "g",
        &NodeId::new("n0"),
        &peers,
        inbox,
        offer_binary,
    );
    t.send(Envelope {
        from: NodeId::new("n0"),
        to: NodeId::new("n1"),
        rpc: Rpc::Request {
            id: 77,
            body: Request::Push(push()),
        },
    });
    let answer = tokio::time::timeout(BOUND, arrived.recv())
        .await
        .expect("an answer in time")
        .expect("inbox open");
    let Rpc::Response { id, body } = answer.rpc else {
        panic!("expected a response, got {:?}", answer.rpc);
    };
    assert_eq!(id, 77);
    let mut codes = Vec::new();
    let mut pushed = None;
    while let Ok((code, body)) = seen.try_recv() {
        codes.push(code);
        let decoded = match code {
            wire_bin::PUSH_BIN => Some(wire_bin::decode_push_request(&body).unwrap()),
            wire::PUSH => Some(wire::decode_request(code, &body).unwrap()),
            _ => None,
        };
        if let Some(d) = decoded {
            assert_eq!(d.local_id, Some(NodeId::new("n0")));
            assert_eq!(d.remote_id, Some(NodeId::new("n1")));
            if let Request::Push(p) = d.request {
                pushed = Some(p);
            }
        }
    }
    t.shutdown();
    server.shutdown().await;
    (codes, pushed.expect("the push arrived"), body)
}

fn expected_answer() -> Response {
    Response::Push(PushResponse {
        term: 3,
        code: ResponseCode::Success,
        index: 5,
        count: 2,
        begin_index: 0,
        end_index: 6,
    })
}

#[tokio::test]
async fn a_basalt_peer_gets_binary_pushes() {
    let (codes, pushed, answer) = exchange(true, true).await;
    assert_eq!(codes, vec![wire_bin::HELLO, wire_bin::PUSH_BIN]);
    assert_eq!(pushed, push());
    assert_eq!(answer, expected_answer());
}

#[tokio::test]
async fn a_dledger_peer_gets_json_pushes() {
    let (codes, pushed, answer) = exchange(false, true).await;
    assert_eq!(codes, vec![wire_bin::HELLO, wire::PUSH]);
    assert_eq!(pushed, push());
    assert_eq!(answer, expected_answer());
}

#[tokio::test]
async fn a_member_without_binary_push_sends_json() {
    let (codes, pushed, answer) = exchange(true, false).await;
    assert_eq!(codes, vec![wire::PUSH]);
    assert_eq!(pushed, push());
    assert_eq!(answer, expected_answer());
}
