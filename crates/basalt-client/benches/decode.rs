//! The consumer's decode of a pull body: 32 stored records with 1 KiB
//! bodies and the properties a Java producer and the broker set (UNIQ_KEY,
//! WAIT, TAGS, KEYS, CLUSTER). The noise-free number for the client's
//! consume path (issue 33).
//!
//! `cargo bench -p basalt-client --bench decode`

use std::hint::black_box;
use std::net::SocketAddr;

use basalt_client::decode::decode_messages;
use basalt_common::properties::Properties;
use basalt_common::record::RecordDraft;
use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const RECORDS: usize = 32;

fn pull_body() -> Bytes {
    let mut props = Properties::new();
    props.set("UNIQ_KEY", "7F0000010B2A18B4AAC2714A4B7F0000");
    props.set("WAIT", "true");
    props.set("TAGS", "TagA");
    props.set("KEYS", "order-12345");
    props.set("CLUSTER", "DefaultCluster");
    let properties = props.encode();
    let body = vec![b'x'; 1024];
    let host: SocketAddr = "127.0.0.1:10911".parse().expect("literal address");
    let draft = RecordDraft {
        topic: "BenchDecode",
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: &body,
        properties: &properties,
    };
    let mut out = Vec::new();
    for _ in 0..RECORDS {
        draft.encode_into(&mut out).expect("a valid draft");
    }
    Bytes::from(out)
}

fn benches(c: &mut Criterion) {
    let body = pull_body();
    let mut g = c.benchmark_group("client_decode");
    g.throughput(Throughput::Elements(RECORDS as u64));
    g.bench_function("pull_body_32x1KiB", |b| {
        b.iter(|| {
            let (msgs, err) = decode_messages(black_box(&body));
            assert!(err.is_none() && msgs.len() == RECORDS);
            msgs
        })
    });
    g.finish();
}

criterion_group!(decode, benches);
criterion_main!(decode);
