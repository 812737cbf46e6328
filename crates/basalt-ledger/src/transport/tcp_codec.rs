//! Which body encoding a request or answer uses on a ledger connection: pushes in
//! Basalt's binary form ([`crate::wire_bin`]) once the peer accepted it in the
//! connection's HELLO, everything else (and every push to a DLedger peer) in
//! DLedger's JSON ([`crate::wire`]). The remoting code tells the receiver which.

use std::time::Duration;

use basalt_remoting::code::response as rcode;
use basalt_remoting::{Channel, ExtFields, RemotingCommand};
use bytes::Bytes;

use crate::protocol::{Request, Response, ResponseCode};
use crate::wire::{self, DecodedRequest, Ids, WireError};
use crate::wire_bin;

/// How long the HELLO of a new connection may take.
const HELLO_TIMEOUT: Duration = Duration::from_secs(1);

/// The push encoding chosen for one outbound connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PushEncoding {
    /// DLedger's JSON with base64 bodies (the peer did not take the binary form).
    Json,
    /// [`wire_bin`]: entries as their on-disk bytes.
    Binary,
}

/// Asks the peer on a fresh connection which push encoding it takes. A DLedger
/// peer answers REQUEST_CODE_NOT_SUPPORTED and gets JSON; so does a peer that
/// does not answer in time (JSON is understood by every member, and the next
/// connection asks again).
pub(super) async fn negotiate(ch: &Channel, allow_binary: bool) -> PushEncoding {
    if !allow_binary {
        return PushEncoding::Json;
    }
    let mut ext = ExtFields::new();
    ext.insert(wire_bin::EXT_ENCODINGS, wire_bin::ENCODING_BIN1);
    let cmd = RemotingCommand::request(wire_bin::HELLO).with_ext(ext);
    match ch.request(cmd, HELLO_TIMEOUT).await {
        Ok(r)
            if r.code == rcode::SUCCESS
                && r.ext_fields.get(wire_bin::EXT_ENCODING) == Some(wire_bin::ENCODING_BIN1) =>
        {
            PushEncoding::Binary
        }
        Ok(_) => PushEncoding::Json,
        Err(e) => {
            tracing::info!(peer = %ch.remote_addr(), error = %e, "no answer to the ledger HELLO; pushing JSON on this connection");
            PushEncoding::Json
        }
    }
}

/// The answer to a HELLO: the binary encoding when the sender offers it.
pub(super) fn answer_hello(req: &RemotingCommand) -> RemotingCommand {
    let mut ext = ExtFields::new();
    if wire_bin::offers_binary(req.ext_fields.get(wire_bin::EXT_ENCODINGS)) {
        ext.insert(wire_bin::EXT_ENCODING, wire_bin::ENCODING_BIN1);
    }
    RemotingCommand::response(rcode::SUCCESS, None).with_ext(ext)
}

/// The remoting command of a request in encoding `enc`. A binary push's body
/// is in pieces that share the entries' buffers (no body is copied).
pub(super) fn encode_request(enc: PushEncoding, ids: &Ids<'_>, req: &Request) -> RemotingCommand {
    match (enc, req) {
        (PushEncoding::Binary, Request::Push(p)) => {
            let (first, rest) = wire_bin::encode_push_parts(ids, p);
            RemotingCommand::request(wire_bin::PUSH_BIN).with_body_parts(first, rest)
        }
        _ => {
            let (code, body) = wire::encode_request(ids, req);
            RemotingCommand::request(code).with_body(body)
        }
    }
}

/// Decodes a request body of remoting code `code` (binary pushes share `body`).
pub(super) fn decode_request(code: i32, body: &Bytes) -> Result<DecodedRequest, WireError> {
    if code == wire_bin::PUSH_BIN {
        wire_bin::decode_push_request(body)
    } else {
        wire::decode_request(code, body)
    }
}

/// The body answering a request of remoting code `code`.
pub(super) fn encode_response(code: i32, ids: &Ids<'_>, resp: &Response) -> Bytes {
    match resp {
        Response::Push(p) if code == wire_bin::PUSH_BIN => wire_bin::encode_push_response(p),
        _ => wire::encode_response(ids, resp),
    }
}

/// An error answer to a request of remoting code `code`.
pub(super) fn error_response(code: i32, ids: &Ids<'_>, term: i64, rc: ResponseCode) -> Bytes {
    if code == wire_bin::PUSH_BIN {
        wire_bin::error_response(term, rc)
    } else {
        wire::error_response(ids, code, term, rc)
    }
}

/// Decodes the answer to a request of remoting code `code`.
pub(super) fn decode_response(code: i32, body: &[u8]) -> Result<Response, WireError> {
    if code == wire_bin::PUSH_BIN {
        wire_bin::decode_push_response(body).map(Response::Push)
    } else {
        wire::decode_response(code, body)
    }
}
