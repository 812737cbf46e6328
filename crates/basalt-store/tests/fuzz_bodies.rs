//! The fuzz target bodies over proptest inputs: random bytes and valid
//! records with random damage.

use basalt_common::record::{RecordDraft, stamp};
use proptest::prelude::*;

fn valid_records(n: usize, body: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let b = vec![b'a' + (i % 26) as u8; body];
        let start = out.len();
        RecordDraft {
            topic: "T",
            queue_id: i as i32,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &b,
            properties: b"TAGS\x01x\x02",
        }
        .encode_with_crc_trailer(&mut out)
        .unwrap();
        let len = out.len() - start;
        stamp(&mut out[start..start + len], i as i64, start as i64, 2);
        basalt_common::record::seal_crc(&mut out[start..start + len]);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        basalt_store::fuzzing::record_parse(&data);
        basalt_store::fuzzing::scan_file(&data);
        basalt_store::fuzzing::checkpoint_decode(&data);
    }

    #[test]
    fn damaged_records(n in 1usize..6, body in 0usize..300, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), cut in any::<usize>()) {
        let mut data = valid_records(n, body);
        for (at, x) in flips {
            let len = data.len();
            data[at % len] ^= x;
        }
        let keep = cut % (data.len() + 1);
        data.truncate(keep);
        basalt_store::fuzzing::record_parse(&data);
        basalt_store::fuzzing::scan_file(&data);
    }
}
