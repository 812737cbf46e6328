use super::*;
use crate::entry::EntryKind;
use proptest::prelude::*;

fn ids<'a>(a: &'a NodeId, b: &'a NodeId) -> Ids<'a> {
    Ids {
        group: "g",
        local_id: a,
        remote_id: b,
    }
}

fn entry(i: i64, len: usize) -> Entry {
    Entry::new(
        EntryKind::Normal,
        i,
        2,
        i * 100,
        Bytes::from(vec![i as u8; len]),
    )
}

#[test]
fn push_round_trips_and_shares_the_frame() {
    let (a, b) = (NodeId::new("n0"), NodeId::new("n1"));
    for (t, entries) in [
        (
            PushType::Append,
            vec![entry(4, 10), entry(5, 0), entry(6, 1000)],
        ),
        (PushType::Compare, vec![entry(4, 3)]),
        (PushType::Truncate, vec![entry(4, 3), entry(5, 3)]),
        (PushType::Commit, vec![]),
    ] {
        let p = PushRequest {
            term: 7,
            leader_id: a.clone(),
            push_type: t,
            commit_index: 3,
            entries,
        };
        let body = encode_push_request(&ids(&a, &b), &p);
        let d = decode_push_request(&body).unwrap();
        assert_eq!(d.request, Request::Push(p.clone()));
        assert_eq!(d.group.as_deref(), Some("g"));
        assert_eq!(d.local_id, Some(a.clone()));
        assert_eq!(d.remote_id, Some(b.clone()));
        if let Request::Push(q) = d.request {
            for e in q.entries.iter().filter(|e| !e.body.is_empty()) {
                // The body is a slice of the received frame, not a copy.
                let range = body.as_ptr_range();
                assert!(range.contains(&e.body.as_ptr()));
            }
        }
    }
}

#[test]
fn push_parts_share_the_entry_bodies() {
    let (a, b) = (NodeId::new("n0"), NodeId::new("n1"));
    let noop = Entry::new(EntryKind::Noop, 6, 2, 600, Bytes::new());
    let entries = vec![entry(4, 10), entry(5, 3000), noop];
    let p = PushRequest {
        term: 7,
        leader_id: a.clone(),
        push_type: PushType::Append,
        commit_index: 3,
        entries: entries.clone(),
    };
    let (first, rest) = encode_push_parts(&ids(&a, &b), &p);
    // first: fixed fields, names and entry 4's header; then body 4, header 5,
    // body 5, header 6 (the no-op has no body piece).
    assert_eq!(rest.len(), 4);
    assert_eq!(
        rest[0].as_ptr(),
        entries[0].body.as_ptr(),
        "body 4 is not copied"
    );
    assert_eq!(
        rest[2].as_ptr(),
        entries[1].body.as_ptr(),
        "body 5 is not copied"
    );
    assert_eq!(rest[1].len(), HEADER_SIZE);
    assert_eq!(rest[3].len(), HEADER_SIZE);
    assert_eq!(
        &first[first.len() - HEADER_SIZE..],
        &entries[0].header.encode()[..]
    );
    let mut joined = first.to_vec();
    rest.iter().for_each(|r| joined.extend_from_slice(r));
    assert_eq!(&joined[..], &encode_push_request(&ids(&a, &b), &p)[..]);
    let d = decode_push_request(&Bytes::from(joined)).unwrap();
    assert_eq!(d.request, Request::Push(p));
}

#[test]
fn damaged_pushes_are_refused() {
    let (a, b) = (NodeId::new("n0"), NodeId::new("n1"));
    let p = PushRequest {
        term: 7,
        leader_id: a.clone(),
        push_type: PushType::Append,
        commit_index: 3,
        entries: vec![entry(4, 10)],
    };
    let body = encode_push_request(&ids(&a, &b), &p).to_vec();
    // A flipped body byte fails the CRC.
    let mut crc = body.clone();
    *crc.last_mut().unwrap() ^= 1;
    assert!(decode_push_request(&Bytes::from(crc)).is_err());
    // Truncated anywhere, or with trailing bytes.
    for n in 0..body.len() {
        assert!(decode_push_request(&Bytes::copy_from_slice(&body[..n])).is_err());
    }
    let mut long = body.clone();
    long.push(0);
    assert!(decode_push_request(&Bytes::from(long)).is_err());
    // An unknown version or type.
    let mut v = body.clone();
    v[0] = 9;
    assert!(decode_push_request(&Bytes::from(v)).is_err());
    let mut t = body.clone();
    t[1] = 9;
    assert!(decode_push_request(&Bytes::from(t)).is_err());
    // A huge count is refused without allocating for it.
    let mut c = body;
    c[18..22].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(decode_push_request(&Bytes::from(c)).is_err());
}

#[test]
fn responses_round_trip() {
    let r = PushResponse {
        term: 3,
        code: ResponseCode::InconsistentState,
        index: 7,
        count: 2,
        begin_index: 0,
        end_index: 5,
    };
    let body = encode_push_response(&r);
    assert_eq!(body.len(), RESPONSE_SIZE);
    assert_eq!(decode_push_response(&body).unwrap(), r);
    let e = decode_push_response(&error_response(4, ResponseCode::UnknownGroup)).unwrap();
    assert_eq!(
        (e.term, e.code, e.index),
        (4, ResponseCode::UnknownGroup, -1)
    );
    assert!(decode_push_response(&body[..RESPONSE_SIZE - 1]).is_err());
}

#[test]
fn hello_offers() {
    assert!(offers_binary(Some("json, bin1")));
    assert!(!offers_binary(Some("bin2")));
    assert!(!offers_binary(None));
}

fn arb_entry() -> impl Strategy<Value = Entry> {
    (
        0i64..1 << 40,
        0i64..1 << 20,
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
    )
        .prop_map(|(i, t, body, noop)| {
            if noop {
                Entry::new(EntryKind::Noop, i, t, i * 7, Bytes::new())
            } else {
                Entry::new(EntryKind::Normal, i, t, i * 7, Bytes::from(body))
            }
        })
}

proptest! {
    #[test]
    fn any_push_round_trips(term in any::<i64>(), commit in any::<i64>(), kind in 0u8..4,
                            leader in "[a-z0-9]{1,8}", group in "[a-z]{0,8}",
                            entries in proptest::collection::vec(arb_entry(), 0..6)) {
        let a = NodeId::from(leader.as_str());
        let b = NodeId::new("n9");
        let p = PushRequest {
            term,
            leader_id: a.clone(),
            push_type: type_of(kind).unwrap(),
            commit_index: commit,
            entries,
        };
        let ids = Ids { group: &group, local_id: &a, remote_id: &b };
        let body = encode_push_request(&ids, &p);
        let d = decode_push_request(&body).unwrap();
        prop_assert_eq!(d.request, Request::Push(p));
    }

    #[test]
    fn any_response_round_trips(term in any::<i64>(), code in any::<i32>(), index in any::<i64>(),
                                count in any::<i32>(), begin in any::<i64>(), end in any::<i64>()) {
        let r = PushResponse {
            term,
            code: ResponseCode::from_code(code),
            index,
            count,
            begin_index: begin,
            end_index: end,
        };
        prop_assert_eq!(decode_push_response(&encode_push_response(&r)).unwrap(), r);
    }

    #[test]
    fn binary_decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        crate::fuzzing::wire_bin_decode(&data);
    }
}
