//! The broker's whole request path in one process, without sockets: a
//! SEND_MESSAGE_V2 frame (1 KiB body, the Java client's ext fields) is
//! decoded, handled by the broker's own processor over a real store
//! (ASYNC_FLUSH, its flush and dispatch tasks running), and the reply is
//! encoded into a frame. Also a batch of 16 in one request, and the single
//! send with `transientStorePoolEnable` (appends by pwrite). This is the
//! noise-free number to track per change of the hot path (issue 33); what it
//! leaves out is the socket, the connection task and the client.
//!
//! `cargo bench -p basalt-broker --bench request_path`
#![allow(clippy::field_reassign_with_default)] // configs read like broker.conf, one key a line

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use basalt_broker::BrokerConfig;
use basalt_broker::processor::BrokerProcessor;
use basalt_common::properties::Properties;
use basalt_remoting::codec::{FrameDecoder, encode_frame};
use basalt_remoting::header::SendMessageRequestHeader;
use basalt_remoting::{Channel, RemotingCommand, RequestProcessor};
use bytes::{Bytes, BytesMut};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const TOPIC: &str = "BenchRequestPath";

fn send_header(batch: bool) -> SendMessageRequestHeader {
    let mut p = Properties::new();
    p.set("UNIQ_KEY", "7F0000010B2A18B4AAC2714A4B7F0000");
    p.set("WAIT", "true");
    p.set("TAGS", "TagA");
    SendMessageRequestHeader {
        producer_group: "bench_producer_group".into(),
        topic: TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: basalt_common::time::now_millis(),
        flag: 0,
        properties: Some(String::from_utf8(p.encode()).expect("text properties")),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(batch),
        max_reconsume_times: Some(16),
        broker_name: Some("broker-a".into()),
    }
}

/// The frame a Java client sends for one message (`code` 310, V2 header).
fn single_frame() -> BytesMut {
    let mut cmd = RemotingCommand::request(310).with_ext(send_header(false).to_ext_v2());
    cmd.opaque = 1;
    cmd.body = Bytes::from(vec![b'x'; 1024]);
    encode_frame(&cmd).expect("encodes")
}

/// One message of a batch body (MessageBatch's per-message layout: total
/// size, magic 0, body CRC 0, flag 0, body, properties).
fn batch_entry(out: &mut Vec<u8>, body: &[u8], props: &[u8]) {
    let total = 4 + 4 + 4 + 4 + 4 + body.len() + 2 + props.len();
    out.extend_from_slice(&(total as i32).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&(body.len() as i32).to_be_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&(props.len() as i16).to_be_bytes());
    out.extend_from_slice(props);
}

/// A batch of 16 × 1 KiB (`code` 320, SEND_BATCH_MESSAGE).
fn batch_frame() -> BytesMut {
    let mut body = Vec::new();
    for i in 0..16 {
        let mut p = Properties::new();
        p.set("UNIQ_KEY", format!("7F0000010B2A18B4AAC2714A4B7F{i:04X}"));
        p.set("WAIT", "true");
        batch_entry(&mut body, &[b'x'; 1024], &p.encode());
    }
    let mut cmd = RemotingCommand::request(320).with_ext(send_header(true).to_ext_v2());
    cmd.opaque = 2;
    cmd.body = Bytes::from(body);
    encode_frame(&cmd).expect("encodes")
}

struct Rig {
    rt: tokio::runtime::Runtime,
    processor: Arc<BrokerProcessor>,
    channel: Channel,
    decoder: FrameDecoder,
    _dir: tempfile::TempDir,
    _broker: basalt_broker::BrokerHandle,
}

impl Rig {
    /// A broker over a fresh store; `transient_pool`: appends go through
    /// `transientStorePoolEnable`'s buffers and pwrite, not the mapping.
    fn start(transient_pool: bool) -> Rig {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cfg = BrokerConfig::default();
        cfg.store_path_root_dir = dir.path().to_path_buf();
        cfg.listen_addr = "127.0.0.1".parse().expect("addr");
        cfg.listen_port = 0;
        cfg.namesrv_addr = None;
        cfg.enable_grpc_server = false;
        cfg.disk_space_warning_level_ratio = 100;
        cfg.disk_space_clean_forcibly_ratio = 100;
        cfg.transient_store_pool_enable = transient_pool;
        let broker = rt
            .block_on(basalt_broker::start(cfg))
            .expect("broker starts");
        let processor = Arc::new(BrokerProcessor::new(broker.broker()));
        let (channel, _replies) = Channel::detached(
            "127.0.0.1:1".parse().expect("addr"),
            "127.0.0.1:2".parse().expect("addr"),
            "bench".into(),
            16,
        );
        Rig {
            rt,
            processor,
            channel,
            decoder: FrameDecoder::new(16 * 1024 * 1024),
            _dir: dir,
            _broker: broker,
        }
    }

    /// Frame in, reply frame out; panics on anything but SUCCESS.
    fn round(&self, frame: &BytesMut) -> BytesMut {
        let mut src = frame.clone();
        let req = self
            .decoder
            .decode(&mut src)
            .expect("decodes")
            .expect("whole frame");
        let reply = self
            .rt
            .block_on(self.processor.process(&self.channel, req))
            .expect("a reply");
        assert_eq!(reply.code, 0, "{:?}", reply.remark);
        encode_frame(&reply).expect("encodes")
    }
}

fn request_path(c: &mut Criterion) {
    let rig = Rig::start(false);
    let single = single_frame();
    let batch = batch_frame();
    rig.round(&single); // creates the topic
    let mut g = c.benchmark_group("request_path");
    g.measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Elements(1));
    g.bench_function("send_1KiB", |b| b.iter(|| black_box(rig.round(&single))));
    g.throughput(Throughput::Elements(16));
    g.bench_function("send_batch_16x1KiB", |b| {
        b.iter(|| black_box(rig.round(&batch)))
    });
    drop(rig);
    let pooled = Rig::start(true);
    pooled.round(&single);
    g.throughput(Throughput::Elements(1));
    g.bench_function("send_1KiB_transient_pool", |b| {
        b.iter(|| black_box(pooled.round(&single)))
    });
    g.finish();
}

criterion_group!(benches, request_path);
criterion_main!(benches);
