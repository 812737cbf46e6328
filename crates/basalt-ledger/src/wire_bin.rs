//! Basalt's binary entry push between Basalt members (docs/ledger-protocol.md#binary-push),
//! negotiated per connection with [`HELLO`]; DLedger's JSON ([`crate::wire`]) stays
//! for everything else and for peers that do not answer the hello.
//!
//! | code  | request   | body                                     |
//! |-------|-----------|------------------------------------------|
//! | 51100 | HELLO     | ext field `encodings` → `encoding`       |
//! | 51104 | PUSH_BIN  | binary push request / binary push answer |
//!
//! A push request, all integers big-endian:
//!
//! ```text
//! u8 version (1) | u8 type (0 APPEND, 1 COMMIT, 2 COMPARE, 3 TRUNCATE)
//! i64 term | i64 commitIndex | u32 entry count
//! 4 × (u16 length, UTF-8): group, localId, remoteId, leaderId
//! per entry: the 48-byte on-disk entry header, then its bodyLen body bytes
//! ```
//!
//! An answer: `u8 version | i32 code | i64 term | i64 index | i32 count |
//! i64 beginIndex | i64 endIndex` (45 bytes). Entries decode as slices of the
//! received frame (no copy) and are checked like JSON ones (header rules, body
//! CRC).

use bytes::{BufMut, Bytes, BytesMut};

use crate::entry::{Entry, EntryHeader, HEADER_SIZE};
use crate::protocol::{NodeId, PushRequest, PushResponse, PushType, Request, ResponseCode};
use crate::wire::{DecodedRequest, Ids, WireError};

/// Basalt-only: "which push encodings do you speak?" (answered NOT_SUPPORTED by
/// DLedger, which then gets JSON).
pub const HELLO: i32 = 51100;
/// Basalt-only: a push in the binary encoding.
pub const PUSH_BIN: i32 = 51104;
/// Ext field of a HELLO request listing the encodings the sender speaks.
pub const EXT_ENCODINGS: &str = "encodings";
/// Ext field of a HELLO answer naming the encoding chosen.
pub const EXT_ENCODING: &str = "encoding";
/// The name of this encoding in HELLO.
pub const ENCODING_BIN1: &str = "bin1";

const VERSION: u8 = 1;
const FIXED: usize = 1 + 1 + 8 + 8 + 4;
/// Size of a binary push answer.
pub const RESPONSE_SIZE: usize = 1 + 4 + 8 + 8 + 4 + 8 + 8;

fn type_code(t: PushType) -> u8 {
    match t {
        PushType::Append => 0,
        PushType::Commit => 1,
        PushType::Compare => 2,
        PushType::Truncate => 3,
    }
}

fn type_of(code: u8) -> Option<PushType> {
    Some(match code {
        0 => PushType::Append,
        1 => PushType::Commit,
        2 => PushType::Compare,
        3 => PushType::Truncate,
        _ => return None,
    })
}

fn bad(reason: impl Into<String>) -> WireError {
    WireError::Binary {
        code: PUSH_BIN,
        reason: reason.into(),
    }
}

fn put_str(out: &mut BytesMut, s: &str) {
    let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.put_u16(b.len() as u16);
    out.put_slice(b);
}

/// The binary body of a push (see the module documentation), in one buffer.
/// The same bytes as [`encode_push_parts`] joined.
pub fn encode_push_request(ids: &Ids<'_>, p: &PushRequest) -> Bytes {
    let (first, rest) = encode_push_parts(ids, p);
    let mut out = BytesMut::with_capacity(first.len() + rest.iter().map(Bytes::len).sum::<usize>());
    out.put_slice(&first);
    for part in &rest {
        out.put_slice(part);
    }
    out.freeze()
}

/// The binary body of a push as pieces to write in order without joining
/// them: the fixed fields and names with the first entry header, then each
/// entry's body (its own buffer, shared, not copied) followed by the next
/// entry header. The headers are slices of one small buffer.
pub fn encode_push_parts(ids: &Ids<'_>, p: &PushRequest) -> (Bytes, Vec<Bytes>) {
    let names = ids.group.len()
        + ids.local_id.as_str().len()
        + ids.remote_id.as_str().len()
        + p.leader_id.as_str().len();
    let mut out = BytesMut::with_capacity(FIXED + 8 + names + HEADER_SIZE * p.entries.len());
    out.put_u8(VERSION);
    out.put_u8(type_code(p.push_type));
    out.put_i64(p.term);
    out.put_i64(p.commit_index);
    out.put_u32(p.entries.len() as u32);
    put_str(&mut out, ids.group);
    put_str(&mut out, ids.local_id.as_str());
    put_str(&mut out, ids.remote_id.as_str());
    put_str(&mut out, p.leader_id.as_str());
    let prefix = out.len();
    for e in &p.entries {
        out.put_slice(&e.header.encode());
    }
    let head = out.freeze();
    let header_end = |i: usize| prefix + HEADER_SIZE * (i + 1);
    let first = head.slice(
        ..if p.entries.is_empty() {
            prefix
        } else {
            header_end(0)
        },
    );
    let mut rest = Vec::with_capacity(2 * p.entries.len());
    for (i, e) in p.entries.iter().enumerate() {
        if i > 0 {
            rest.push(head.slice(header_end(i - 1)..header_end(i)));
        }
        if !e.body.is_empty() {
            rest.push(e.body.clone());
        }
    }
    (first, rest)
}

/// A cursor over a received body that never reads past its end.
struct Cursor<'a> {
    body: &'a Bytes,
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<Bytes, WireError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.body.len())
            .ok_or_else(|| bad(format!("{what} at byte {} runs past the body", self.at)))?;
        let s = self.body.slice(self.at..end);
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], WireError> {
        let b = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&b);
        Ok(a)
    }

    fn text(&mut self, what: &str) -> Result<String, WireError> {
        let len = u16::from_be_bytes(self.array(what)?) as usize;
        let b = self.take(len, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| bad(format!("{what} is not UTF-8")))
    }

    fn entry(&mut self) -> Result<Entry, WireError> {
        let at = self.at;
        let hb = self.take(HEADER_SIZE, "entry header")?;
        let header =
            EntryHeader::decode(&hb).map_err(|e| bad(format!("entry at byte {at}: {e}")))?;
        let body = self.take(header.body_len as usize, "entry body")?;
        header
            .check_body(&body)
            .map_err(|e| bad(format!("entry {} at byte {at}: {e}", header.index)))?;
        Ok(Entry { header, body })
    }
}

/// Decodes a binary push; entry bodies share `body`'s buffer.
pub fn decode_push_request(body: &Bytes) -> Result<DecodedRequest, WireError> {
    let mut c = Cursor { body, at: 0 };
    let [version, kind] = c.array::<2>("version")?;
    if version != VERSION {
        return Err(bad(format!("unknown version {version}")));
    }
    let push_type = type_of(kind).ok_or_else(|| bad(format!("unknown push type {kind}")))?;
    let term = i64::from_be_bytes(c.array("term")?);
    let commit_index = i64::from_be_bytes(c.array("commitIndex")?);
    let count = u32::from_be_bytes(c.array("count")?) as usize;
    let group = c.text("group")?;
    let local_id = c.text("localId")?;
    let remote_id = c.text("remoteId")?;
    let leader_id = c.text("leaderId")?;
    if leader_id.is_empty() {
        return Err(bad("push without leaderId"));
    }
    // Every entry takes at least a header: a count the body cannot hold is refused
    // before anything is allocated for it.
    if count > (body.len() - c.at) / HEADER_SIZE {
        return Err(bad(format!("{count} entries cannot fit in the body")));
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        entries.push(c.entry()?);
    }
    if c.at != body.len() {
        return Err(bad(format!(
            "{} bytes after the last entry",
            body.len() - c.at
        )));
    }
    let node = |s: String| (!s.is_empty()).then(|| NodeId::from(s));
    Ok(DecodedRequest {
        group: (!group.is_empty()).then_some(group),
        local_id: node(local_id),
        remote_id: node(remote_id),
        request: Request::Push(PushRequest {
            term,
            leader_id: NodeId::from(leader_id),
            push_type,
            commit_index,
            entries,
        }),
    })
}

/// The binary answer to a push.
pub fn encode_push_response(p: &PushResponse) -> Bytes {
    let mut out = BytesMut::with_capacity(RESPONSE_SIZE);
    out.put_u8(VERSION);
    out.put_i32(p.code.code());
    out.put_i64(p.term);
    out.put_i64(p.index);
    out.put_i32(p.count);
    out.put_i64(p.begin_index);
    out.put_i64(p.end_index);
    out.freeze()
}

/// Decodes a binary push answer.
pub fn decode_push_response(body: &[u8]) -> Result<PushResponse, WireError> {
    if body.len() != RESPONSE_SIZE {
        return Err(bad(format!(
            "push answer of {} bytes, expected {RESPONSE_SIZE}",
            body.len()
        )));
    }
    if body[0] != VERSION {
        return Err(bad(format!("unknown version {}", body[0])));
    }
    let i32_at = |o: usize| i32::from_be_bytes([body[o], body[o + 1], body[o + 2], body[o + 3]]);
    let i64_at = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&body[o..o + 8]);
        i64::from_be_bytes(a)
    };
    Ok(PushResponse {
        code: ResponseCode::from_code(i32_at(1)),
        term: i64_at(5),
        index: i64_at(13),
        count: i32_at(21),
        begin_index: i64_at(25),
        end_index: i64_at(33),
    })
}

/// A binary push answer refusing the request with `code`.
pub fn error_response(term: i64, code: ResponseCode) -> Bytes {
    encode_push_response(&PushResponse {
        term,
        code,
        index: -1,
        count: 0,
        begin_index: -1,
        end_index: -1,
    })
}

/// Whether a HELLO's `encodings` list offers the binary encoding.
pub fn offers_binary(encodings: Option<&str>) -> bool {
    encodings.is_some_and(|l| l.split(',').any(|e| e.trim() == ENCODING_BIN1))
}

#[cfg(test)]
#[path = "wire_bin_tests.rs"]
mod tests;
