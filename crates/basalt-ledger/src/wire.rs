//! DLedger's RPC bodies as JSON (docs/ledger-protocol.md#rpc-bodies), carried in remoting frames.
//!
//! | code  | request              | body                                   |
//! |-------|----------------------|----------------------------------------|
//! | 50000 | METADATA             | `MetadataRequest` / `MetadataResponse` |
//! | 51001 | VOTE                 | `VoteRequest` / `VoteResponse`         |
//! | 51002 | HEART_BEAT           | `HeartBeatRequest` / `HeartBeatResponse` |
//! | 51004 | PUSH                 | `PushEntryRequest` / `PushEntryResponse` |
//! | 51005 | LEADERSHIP_TRANSFER  | `LeadershipTransferRequest` / `…Response` |
//!
//! Field names are DLedger's (fastjson of its classes); an entry's body is base64.
//! Basalt extensions, ignored by Java: `preVote` on votes, and for a TRUNCATE the
//! leader's next entry in `batchEntry` (the conflict check).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::entry::{Entry, EntryHeader};
use crate::protocol::{
    HeartbeatRequest, HeartbeatResponse, MetadataResponse, NodeId, PushRequest, PushResponse,
    PushType, Request, Response, ResponseCode, TransferRequest, TransferResponse, VoteRequest,
    VoteResponse, VoteResult,
};

pub const METADATA: i32 = 50000;
pub const VOTE: i32 = 51001;
pub const HEART_BEAT: i32 = 51002;
pub const PUSH: i32 = 51004;
pub const LEADERSHIP_TRANSFER: i32 = 51005;

/// Why a body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("bad JSON body for code {code}: {reason}")]
    Json { code: i32, reason: String },
    #[error("bad binary body for code {code}: {reason}")]
    Binary { code: i32, reason: String },
    #[error("bad entry: {0}")]
    Entry(String),
    #[error("unknown request code {0}")]
    UnknownCode(i32),
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireEntry {
    magic: i32,
    size: i32,
    index: i64,
    term: i64,
    pos: i64,
    #[serde(default)]
    channel: i32,
    #[serde(default)]
    chain_crc: i32,
    #[serde(default)]
    body_crc: i32,
    #[serde(default)]
    body: Option<String>,
}

impl WireEntry {
    fn of(e: &Entry) -> WireEntry {
        WireEntry {
            magic: e.header.magic,
            size: e.header.size,
            index: e.header.index,
            term: e.header.term,
            pos: e.header.pos,
            channel: e.header.channel,
            chain_crc: e.header.chain_crc,
            body_crc: e.header.body_crc,
            body: Some(B64.encode(&e.body)),
        }
    }

    fn into_entry(self) -> Result<Entry, WireError> {
        let body = match self.body {
            Some(b) => B64
                .decode(b.as_bytes())
                .map_err(|e| WireError::Entry(format!("body of {}: {e}", self.index)))?,
            None => Vec::new(),
        };
        let header = EntryHeader {
            magic: self.magic,
            size: self.size,
            index: self.index,
            term: self.term,
            pos: self.pos,
            channel: self.channel,
            chain_crc: self.chain_crc,
            body_crc: self.body_crc,
            body_len: body.len() as i32,
        };
        let entry = Entry {
            header,
            body: Bytes::from(body),
        };
        entry
            .validate()
            .map_err(|e| WireError::Entry(format!("entry {}: {e}", self.index)))?;
        Ok(entry)
    }
}

/// The fields every DLedger request and response carries (`RequestOrResponse`).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Base {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub remote_id: Option<String>,
    #[serde(default)]
    pub local_id: Option<String>,
    #[serde(default = "success")]
    pub code: i32,
    #[serde(default)]
    pub leader_id: Option<String>,
    #[serde(default = "minus_one")]
    pub term: i64,
}

fn success() -> i32 {
    200
}

fn minus_one() -> i64 {
    -1
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePushRequest {
    #[serde(flatten)]
    base: Base,
    #[serde(rename = "type")]
    push_type: String,
    #[serde(default = "minus_one")]
    commit_index: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entry: Option<WireEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    batch_entry: Vec<WireEntry>,
    #[serde(default)]
    total_size: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePushResponse {
    #[serde(flatten)]
    base: Base,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    index: Option<i64>,
    #[serde(default)]
    count: i32,
    #[serde(default = "minus_one")]
    begin_index: i64,
    #[serde(default = "minus_one")]
    end_index: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVoteRequest {
    #[serde(flatten)]
    base: Base,
    #[serde(default = "minus_one")]
    ledger_end_index: i64,
    #[serde(default = "minus_one")]
    ledger_end_term: i64,
    #[serde(default)]
    pre_vote: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireVoteResponse {
    #[serde(flatten)]
    base: Base,
    #[serde(default)]
    vote_result: Option<String>,
    #[serde(default)]
    pre_vote: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireTransferRequest {
    #[serde(flatten)]
    base: Base,
    #[serde(default)]
    transfer_id: Option<String>,
    #[serde(default)]
    transferee_id: Option<String>,
    #[serde(default)]
    take_leadership_ledger_index: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMetadataResponse {
    #[serde(flatten)]
    base: Base,
    #[serde(default)]
    peers: BTreeMap<String, String>,
}

/// Identity fields to put on the wire.
#[derive(Debug, Clone)]
pub struct Ids<'a> {
    pub group: &'a str,
    pub local_id: &'a NodeId,
    pub remote_id: &'a NodeId,
}

fn base(ids: &Ids<'_>, term: i64, code: i32, leader: Option<&NodeId>) -> Base {
    Base {
        group: Some(ids.group.to_string()),
        remote_id: Some(ids.remote_id.to_string()),
        local_id: Some(ids.local_id.to_string()),
        code,
        leader_id: leader.map(|l| l.to_string()),
        term,
    }
}

fn json<T: Serialize>(v: &T) -> Bytes {
    // Serializing these plain structs cannot fail.
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

fn parse<'a, T: Deserialize<'a>>(code: i32, body: &'a [u8]) -> Result<T, WireError> {
    serde_json::from_slice(body).map_err(|e| WireError::Json {
        code,
        reason: e.to_string(),
    })
}

fn node(v: Option<String>) -> Option<NodeId> {
    v.filter(|s| !s.is_empty()).map(NodeId::from)
}

/// The remoting code and JSON body of a request.
pub fn encode_request(ids: &Ids<'_>, req: &Request) -> (i32, Bytes) {
    match req {
        Request::Vote(v) => (
            VOTE,
            json(&WireVoteRequest {
                base: base(ids, v.term, 200, Some(&v.candidate)),
                ledger_end_index: v.ledger_end_index,
                ledger_end_term: v.ledger_end_term,
                pre_vote: v.pre_vote,
            }),
        ),
        Request::Heartbeat(h) => (
            HEART_BEAT,
            json(&base(ids, h.term, 200, Some(&h.leader_id))),
        ),
        Request::Push(p) => {
            let (entry, batch_entry) = match p.push_type {
                PushType::Append if p.entries.len() > 1 => {
                    (None, p.entries.iter().map(WireEntry::of).collect())
                }
                _ => (
                    p.entries.first().map(WireEntry::of),
                    p.entries.iter().skip(1).map(WireEntry::of).collect(),
                ),
            };
            (
                PUSH,
                json(&WirePushRequest {
                    base: base(ids, p.term, 200, Some(&p.leader_id)),
                    push_type: p.push_type.name().to_string(),
                    commit_index: p.commit_index,
                    entry,
                    batch_entry,
                    total_size: p.entries.iter().map(|e| e.size()).sum(),
                }),
            )
        }
        Request::Transfer(t) => (
            LEADERSHIP_TRANSFER,
            json(&WireTransferRequest {
                base: base(ids, t.term, 200, Some(&t.transfer_id)),
                transfer_id: Some(t.transfer_id.to_string()),
                transferee_id: Some(t.transferee_id.to_string()),
                take_leadership_ledger_index: t.take_leadership_ledger_index,
            }),
        ),
        Request::Metadata => (METADATA, json(&base(ids, -1, 200, None))),
    }
}

/// A decoded request with the identity fields it carried.
#[derive(Debug, Clone)]
pub struct DecodedRequest {
    pub group: Option<String>,
    pub local_id: Option<NodeId>,
    pub remote_id: Option<NodeId>,
    pub request: Request,
}

/// Decodes the JSON body of a request with remoting code `code`.
pub fn decode_request(code: i32, body: &[u8]) -> Result<DecodedRequest, WireError> {
    let (b, request) = match code {
        VOTE => decode_vote_request(code, body)?,
        HEART_BEAT => decode_heartbeat_request(code, body)?,
        PUSH => decode_push_request(code, body)?,
        LEADERSHIP_TRANSFER => decode_transfer_request(code, body)?,
        METADATA => {
            let b: Base = if body.is_empty() {
                Base::default()
            } else {
                parse(code, body)?
            };
            (b, Request::Metadata)
        }
        other => return Err(WireError::UnknownCode(other)),
    };
    Ok(DecodedRequest {
        group: b.group,
        local_id: node(b.local_id),
        remote_id: node(b.remote_id),
        request,
    })
}

fn decode_vote_request(code: i32, body: &[u8]) -> Result<(Base, Request), WireError> {
    let v: WireVoteRequest = parse(code, body)?;
    let candidate = node(v.base.leader_id.clone()).ok_or_else(|| WireError::Json {
        code,
        reason: "vote request without leaderId".into(),
    })?;
    let r = Request::Vote(VoteRequest {
        term: v.base.term,
        candidate,
        ledger_end_term: v.ledger_end_term,
        ledger_end_index: v.ledger_end_index,
        pre_vote: v.pre_vote,
    });
    Ok((v.base, r))
}

fn decode_heartbeat_request(code: i32, body: &[u8]) -> Result<(Base, Request), WireError> {
    let b: Base = parse(code, body)?;
    let leader_id = node(b.leader_id.clone()).ok_or_else(|| WireError::Json {
        code,
        reason: "heartbeat without leaderId".into(),
    })?;
    let r = Request::Heartbeat(HeartbeatRequest {
        term: b.term,
        leader_id,
    });
    Ok((b, r))
}

fn decode_push_request(code: i32, body: &[u8]) -> Result<(Base, Request), WireError> {
    let p: WirePushRequest = parse(code, body)?;
    let push_type = PushType::from_name(&p.push_type).ok_or_else(|| WireError::Json {
        code,
        reason: format!("unknown push type {:?}", p.push_type),
    })?;
    let leader_id = node(p.base.leader_id.clone()).ok_or_else(|| WireError::Json {
        code,
        reason: "push without leaderId".into(),
    })?;
    let mut entries = Vec::new();
    if let Some(e) = p.entry {
        entries.push(e.into_entry()?);
    }
    for e in p.batch_entry {
        entries.push(e.into_entry()?);
    }
    let r = Request::Push(PushRequest {
        term: p.base.term,
        leader_id,
        push_type,
        commit_index: p.commit_index,
        entries,
    });
    Ok((p.base, r))
}

fn decode_transfer_request(code: i32, body: &[u8]) -> Result<(Base, Request), WireError> {
    let t: WireTransferRequest = parse(code, body)?;
    let (Some(transfer_id), Some(transferee_id)) = (node(t.transfer_id), node(t.transferee_id))
    else {
        return Err(WireError::Json {
            code,
            reason: "transfer request without transferId/transfereeId".into(),
        });
    };
    let r = Request::Transfer(TransferRequest {
        term: t.base.term,
        transfer_id,
        transferee_id,
        take_leadership_ledger_index: t.take_leadership_ledger_index,
    });
    Ok((t.base, r))
}

/// The JSON body of a response.
pub fn encode_response(ids: &Ids<'_>, resp: &Response) -> Bytes {
    match resp {
        Response::Vote(v) => json(&WireVoteResponse {
            base: base(ids, v.term, 200, None),
            vote_result: Some(v.result.name().to_string()),
            pre_vote: v.pre_vote,
        }),
        Response::Heartbeat(h) => json(&base(ids, h.term, h.code.code(), None)),
        Response::Push(p) => json(&WirePushResponse {
            base: base(ids, p.term, p.code.code(), None),
            index: (p.index >= 0).then_some(p.index),
            count: p.count,
            begin_index: p.begin_index,
            end_index: p.end_index,
        }),
        Response::Transfer(t) => json(&base(ids, t.term, t.code.code(), None)),
        Response::Metadata(m) => json(&WireMetadataResponse {
            base: base(ids, m.term, 200, m.leader_id.as_ref()),
            peers: m
                .peers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }),
    }
}

/// A DLedger error answer (`code`, current term) for a request of remoting code
/// `request_code`, when the request could not be handed to the core.
pub fn error_response(ids: &Ids<'_>, request_code: i32, term: i64, code: ResponseCode) -> Bytes {
    match request_code {
        PUSH => json(&WirePushResponse {
            base: base(ids, term, code.code(), None),
            index: None,
            count: 0,
            begin_index: -1,
            end_index: -1,
        }),
        VOTE => json(&WireVoteResponse {
            base: base(ids, term, code.code(), None),
            vote_result: Some(VoteResult::Unknown.name().to_string()),
            pre_vote: false,
        }),
        _ => json(&base(ids, term, code.code(), None)),
    }
}

/// Decodes the JSON body of the response to a request of remoting code `code`.
pub fn decode_response(code: i32, body: &[u8]) -> Result<Response, WireError> {
    Ok(match code {
        VOTE => {
            let v: WireVoteResponse = parse(code, body)?;
            Response::Vote(VoteResponse {
                term: v.base.term,
                result: v
                    .vote_result
                    .as_deref()
                    .map(VoteResult::from_name)
                    .unwrap_or(VoteResult::Unknown),
                pre_vote: v.pre_vote,
            })
        }
        HEART_BEAT => {
            let b: Base = parse(code, body)?;
            Response::Heartbeat(HeartbeatResponse {
                term: b.term,
                code: ResponseCode::from_code(b.code),
            })
        }
        PUSH => {
            let p: WirePushResponse = parse(code, body)?;
            Response::Push(PushResponse {
                term: p.base.term,
                code: ResponseCode::from_code(p.base.code),
                index: p.index.unwrap_or(-1),
                count: p.count,
                begin_index: p.begin_index,
                end_index: p.end_index,
            })
        }
        LEADERSHIP_TRANSFER => {
            let b: Base = parse(code, body)?;
            Response::Transfer(TransferResponse {
                term: b.term,
                code: ResponseCode::from_code(b.code),
            })
        }
        METADATA => {
            let m: WireMetadataResponse = parse(code, body)?;
            Response::Metadata(MetadataResponse {
                term: m.base.term,
                leader_id: node(m.base.leader_id),
                peers: m
                    .peers
                    .into_iter()
                    .map(|(k, v)| (NodeId::from(k), v))
                    .collect(),
            })
        }
        other => return Err(WireError::UnknownCode(other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::EntryKind;
    use proptest::prelude::*;

    fn ids() -> (NodeId, NodeId) {
        (NodeId::new("n0"), NodeId::new("n1"))
    }

    #[test]
    fn push_request_json_matches_dledger_field_names() {
        let (a, b) = ids();
        let id = Ids {
            group: "g",
            local_id: &a,
            remote_id: &b,
        };
        let e = Entry::new(EntryKind::Normal, 3, 2, 96, Bytes::from_static(b"hi"));
        let req = Request::Push(PushRequest {
            term: 2,
            leader_id: a.clone(),
            push_type: PushType::Append,
            commit_index: 1,
            entries: vec![e.clone()],
        });
        let (code, body) = encode_request(&id, &req);
        assert_eq!(code, PUSH);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["type"], "APPEND");
        assert_eq!(v["group"], "g");
        assert_eq!(v["remoteId"], "n1");
        assert_eq!(v["localId"], "n0");
        assert_eq!(v["leaderId"], "n0");
        assert_eq!(v["commitIndex"], 1);
        assert_eq!(v["entry"]["body"], "aGk=");
        assert_eq!(v["entry"]["bodyCrc"], e.header.body_crc);
        let d = decode_request(code, &body).unwrap();
        assert_eq!(d.request, req);
        assert_eq!(d.group.as_deref(), Some("g"));
    }

    #[test]
    fn java_style_push_with_computed_getters_decodes() {
        let json = br#"{"batch":false,"code":200,"commitIndex":-1,"count":1,"entry":{"body":"aGk=","bodyCrc":0,"chainCrc":0,"channel":0,"index":0,"magic":1,"pos":0,"size":50,"term":1},"firstEntryIndex":0,"group":"default","lastEntryIndex":0,"leaderId":"n0","localId":"n0","remoteId":"n1","term":1,"totalSize":0,"type":"COMPARE"}"#;
        // DLedger 0.3.1.2 leaves bodyCrc 0: the decoder must reject it (Basalt
        // checks every body) rather than accept an unchecked entry.
        assert!(decode_request(PUSH, json).is_err());
        let fixed = String::from_utf8_lossy(json).replace(
            "\"bodyCrc\":0",
            &format!("\"bodyCrc\":{}", crate::entry::body_crc(b"hi")),
        );
        let d = decode_request(PUSH, fixed.as_bytes()).unwrap();
        match d.request {
            Request::Push(p) => {
                assert_eq!(p.push_type, PushType::Compare);
                assert_eq!(&p.entries[0].body[..], b"hi");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn responses_round_trip() {
        let (a, b) = ids();
        let id = Ids {
            group: "g",
            local_id: &b,
            remote_id: &a,
        };
        let cases = vec![
            (
                PUSH,
                Response::Push(PushResponse {
                    term: 3,
                    code: ResponseCode::InconsistentState,
                    index: 7,
                    count: 1,
                    begin_index: 0,
                    end_index: 5,
                }),
            ),
            (
                PUSH,
                Response::Push(PushResponse {
                    term: 3,
                    code: ResponseCode::Success,
                    index: -1,
                    count: 0,
                    begin_index: 0,
                    end_index: 5,
                }),
            ),
            (
                VOTE,
                Response::Vote(VoteResponse {
                    term: 4,
                    result: VoteResult::RejectAlreadyVoted,
                    pre_vote: true,
                }),
            ),
            (
                HEART_BEAT,
                Response::Heartbeat(HeartbeatResponse {
                    term: 4,
                    code: ResponseCode::ExpiredTerm,
                }),
            ),
            (
                LEADERSHIP_TRANSFER,
                Response::Transfer(TransferResponse {
                    term: 4,
                    code: ResponseCode::Success,
                }),
            ),
            (
                METADATA,
                Response::Metadata(MetadataResponse {
                    term: 4,
                    leader_id: Some(a.clone()),
                    peers: [(a.clone(), "h:1".to_string())].into(),
                }),
            ),
        ];
        for (code, r) in cases {
            let body = encode_response(&id, &r);
            assert_eq!(decode_response(code, &body).unwrap(), r);
        }
        let v: serde_json::Value = serde_json::from_slice(&encode_response(
            &id,
            &Response::Vote(VoteResponse {
                term: 1,
                result: VoteResult::Accept,
                pre_vote: false,
            }),
        ))
        .unwrap();
        assert_eq!(v["voteResult"], "ACCEPT");
    }

    #[test]
    fn requests_round_trip() {
        let (a, b) = ids();
        let id = Ids {
            group: "g",
            local_id: &a,
            remote_id: &b,
        };
        let e = |i| {
            Entry::new(
                EntryKind::Normal,
                i,
                2,
                i * 60,
                Bytes::from(vec![i as u8; 12]),
            )
        };
        let cases = vec![
            Request::Vote(VoteRequest {
                term: 5,
                candidate: a.clone(),
                ledger_end_term: 4,
                ledger_end_index: 9,
                pre_vote: true,
            }),
            Request::Heartbeat(HeartbeatRequest {
                term: 5,
                leader_id: a.clone(),
            }),
            Request::Push(PushRequest {
                term: 5,
                leader_id: a.clone(),
                push_type: PushType::Append,
                commit_index: 3,
                entries: vec![e(4), e(5), e(6)],
            }),
            Request::Push(PushRequest {
                term: 5,
                leader_id: a.clone(),
                push_type: PushType::Truncate,
                commit_index: 3,
                entries: vec![e(4), e(5)],
            }),
            Request::Push(PushRequest {
                term: 5,
                leader_id: a.clone(),
                push_type: PushType::Commit,
                commit_index: 3,
                entries: vec![],
            }),
            Request::Transfer(TransferRequest {
                term: 5,
                transfer_id: a.clone(),
                transferee_id: b.clone(),
                take_leadership_ledger_index: 9,
            }),
            Request::Metadata,
        ];
        for r in cases {
            let (code, body) = encode_request(&id, &r);
            assert_eq!(decode_request(code, &body).unwrap().request, r);
        }
    }

    proptest! {
        #[test]
        fn decoders_never_panic(code in prop_oneof![Just(VOTE), Just(PUSH), Just(HEART_BEAT), Just(METADATA), Just(LEADERSHIP_TRANSFER), any::<i32>()],
                                body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_request(code, &body);
            let _ = decode_response(code, &body);
        }
    }
}
