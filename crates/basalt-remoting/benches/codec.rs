//! Codec costs on the hot path: a SEND_MESSAGE_V2-like request (14 ext fields,
//! 1 KiB body) and a pull response header.
//!
//! `cargo bench -p basalt-remoting --bench codec`

use std::hint::black_box;

use basalt_remoting::codec::{FrameDecoder, encode_header_into};
use basalt_remoting::header::{CommandHeader, PullMessageResponseHeader, SendMessageRequestHeader};
use basalt_remoting::{RemotingCommand, SerializeType};
use bytes::{Bytes, BytesMut};
use criterion::{Criterion, criterion_group, criterion_main};

fn send_request(ty: SerializeType) -> RemotingCommand {
    let h = SendMessageRequestHeader {
        producer_group: "benchmark_producer_group".into(),
        topic: "BenchmarkTopic".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_123,
        flag: 0,
        properties: Some(
            "UNIQ_KEY\u{1}7F0000010B2A18B4AAC2714A4B7F0000\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}"
                .into(),
        ),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        max_reconsume_times: Some(16),
        broker_name: Some("broker-a".into()),
    };
    let mut cmd = RemotingCommand::request(310).with_ext(h.to_ext_v2());
    cmd.opaque = 123_456;
    cmd.serialize_type = ty;
    cmd.body = Bytes::from(vec![b'x'; 1024]);
    cmd
}

fn pull_response() -> RemotingCommand {
    let h = PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: 1_234_567,
        min_offset: 0,
        max_offset: 9_999_999,
        offset_delta: None,
        topic_sys_flag: None,
        group_sys_flag: None,
        forbidden_type: None,
    };
    let mut cmd = RemotingCommand::response(0, Some("FOUND".into())).with_ext(h.to_ext());
    cmd.opaque = 77;
    cmd
}

/// Encodes into a reused buffer (as the writer task does) and decodes the frame.
fn round_trip(
    cmd: &RemotingCommand,
    buf: &mut BytesMut,
    decoder: &FrameDecoder,
) -> RemotingCommand {
    buf.clear();
    encode_header_into(cmd, buf).unwrap();
    buf.extend_from_slice(&cmd.body);
    let mut frame = buf.split();
    let out = decoder.decode(&mut frame).unwrap().unwrap();
    buf.unsplit(frame);
    out
}

fn benches(c: &mut Criterion) {
    let decoder = FrameDecoder::default();
    for (name, ty) in [
        ("json", SerializeType::Json),
        ("binary", SerializeType::Rocketmq),
    ] {
        let cmd = send_request(ty);
        let mut buf = BytesMut::with_capacity(4096);
        c.bench_function(&format!("send_v2_request/{name}/encode"), |b| {
            b.iter(|| {
                buf.clear();
                encode_header_into(black_box(&cmd), &mut buf).unwrap();
                black_box(buf.len())
            })
        });
        c.bench_function(&format!("send_v2_request/{name}/encode+decode"), |b| {
            b.iter(|| black_box(round_trip(black_box(&cmd), &mut buf, &decoder)))
        });
    }
    let cmd = send_request(SerializeType::Json);
    let mut frame = BytesMut::new();
    encode_header_into(&cmd, &mut frame).unwrap();
    let header = frame.split_off(8).freeze();
    c.bench_function("send_v2_request/json/decode_header_only", |b| {
        b.iter(|| {
            black_box(basalt_remoting::codec::decode_json_header(black_box(&header)).unwrap())
        })
    });
    c.bench_function("send_v2_request/json/encode+decode+parse_header", |b| {
        let mut buf = BytesMut::with_capacity(4096);
        b.iter(|| {
            let back = round_trip(black_box(&cmd), &mut buf, &decoder);
            black_box(SendMessageRequestHeader::from_ext(&back.ext_fields).unwrap())
        })
    });
    let resp = pull_response();
    c.bench_function("pull_response_header/json/encode+decode", |b| {
        let mut buf = BytesMut::with_capacity(1024);
        b.iter(|| black_box(round_trip(black_box(&resp), &mut buf, &decoder)))
    });
}

criterion_group!(codec, benches);
criterion_main!(codec);
