//! Bodies of the fuzz targets (`fuzz/`), shared with plain tests so CI exercises
//! them without cargo-fuzz. None may panic, whatever the input.

use crate::entry::{EntryHeader, HEADER_SIZE, IndexUnit};
use crate::store::scan_bytes;
use crate::{wire, wire_bin};

/// Entry header and index unit decoding: what decodes re-encodes to the same bytes.
pub fn entry_decode(data: &[u8]) {
    if let Ok(h) = EntryHeader::decode(data) {
        assert_eq!(&h.encode()[..], &data[..HEADER_SIZE]);
        let _ = h.check_body(&data[HEADER_SIZE..]);
    }
    if let Some(u) = IndexUnit::decode(data) {
        assert_eq!(&u.encode()[..], &data[..crate::entry::INDEX_UNIT_SIZE]);
    }
}

/// DLedger JSON bodies: the first byte picks the RPC code, the rest is the body.
/// A request that decodes re-encodes and decodes to the same request.
pub fn wire_decode(data: &[u8]) {
    let codes = [
        wire::VOTE,
        wire::HEART_BEAT,
        wire::PUSH,
        wire::LEADERSHIP_TRANSFER,
        wire::METADATA,
    ];
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let code = codes[first as usize % codes.len()];
    if let Ok(d) = wire::decode_request(code, body) {
        let me = crate::protocol::NodeId::new("n0");
        let ids = wire::Ids {
            group: "g",
            local_id: &me,
            remote_id: &me,
        };
        let (c, again) = wire::encode_request(&ids, &d.request);
        assert_eq!(c, code);
        let back = wire::decode_request(c, &again).expect("re-encoded request decodes");
        assert_eq!(back.request, d.request);
    }
    let _ = wire::decode_response(code, body);
}

/// Basalt's binary push and its answer: a push that decodes re-encodes to the
/// same bytes, an answer that decodes re-encodes to the same bytes.
pub fn wire_bin_decode(data: &[u8]) {
    let body = bytes::Bytes::copy_from_slice(data);
    if let Ok(d) = wire_bin::decode_push_request(&body)
        && let crate::protocol::Request::Push(p) = &d.request
    {
        let empty = crate::protocol::NodeId::new("");
        let local = d.local_id.clone().unwrap_or_else(|| empty.clone());
        let remote = d.remote_id.clone().unwrap_or(empty);
        let ids = wire::Ids {
            group: d.group.as_deref().unwrap_or(""),
            local_id: &local,
            remote_id: &remote,
        };
        assert_eq!(wire_bin::encode_push_request(&ids, p), body);
    }
    if let Ok(r) = wire_bin::decode_push_response(data) {
        assert_eq!(&wire_bin::encode_push_response(&r)[..], data);
    }
}

/// The recovery scanner over arbitrary data files: the first byte picks the file
/// size, the rest are the files' bytes.
pub fn ledger_scan(data: &[u8]) {
    let Some((&first, files)) = data.split_first() else {
        return;
    };
    let file_size = 128 + (first as i64) * 8;
    let (end_pos, entries) = scan_bytes(files, file_size);
    assert!(end_pos >= 0);
    assert!(entries <= files.len() as u64 / HEADER_SIZE as u64 + 1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn entry_decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            entry_decode(&data);
        }

        #[test]
        fn wire_decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            wire_decode(&data);
        }

        #[test]
        fn ledger_scan_never_panics(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
            ledger_scan(&data);
        }
    }

    #[test]
    fn ledger_scan_reads_real_entries() {
        use crate::entry::{EntryKind, place};
        let mut files = vec![0u8; 4 * 256];
        let mut end = 0i64;
        for i in 0..10 {
            let body = vec![i as u8; 20];
            let size = 48 + 20;
            let pos = place(end, size, 256).unwrap();
            if pos != end {
                files[end as usize..end as usize + 4].copy_from_slice(&(-1i32).to_be_bytes());
                files[end as usize + 4..end as usize + 8]
                    .copy_from_slice(&((pos - end) as i32).to_be_bytes());
            }
            let h = EntryHeader::new(EntryKind::Normal, i, 1, pos, &body);
            files[pos as usize..pos as usize + 48].copy_from_slice(&h.encode());
            files[pos as usize + 48..pos as usize + 68].copy_from_slice(&body);
            end = pos + size;
        }
        // First byte 16 → file size 128 + 16 * 8 = 256.
        let mut data = vec![16u8];
        data.extend_from_slice(&files);
        let (end_pos, entries) = scan_bytes(&data[1..], 256);
        assert_eq!((end_pos, entries), (end, 10));
        ledger_scan(&data);
    }
}
