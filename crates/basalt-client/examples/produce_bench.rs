//! Producer throughput with a window of sends in flight.
//!
//! `cargo run --release -p basalt-client --example produce_bench -- MODE WINDOW TOTAL BODY [binary|json]`
//!
//! * `ack` — an in-process server that answers every send at once (with a
//!   NameServer route): what the client path itself costs;
//! * `broker` — an in-process Basalt broker (async flush, temp dir);
//! * `NAMESRV_ADDR` (anything else) — an existing cluster; topic `BenchTopic`.
//!
//! Client, and in-process servers, share one 2-worker tokio runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use basalt_client::{ClientConfig, Message, Producer, SerializeType};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, RegisterBrokerRequestHeader, SendMessageResponseHeader,
};
use basalt_remoting::protocol::{
    DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
};
use basalt_remoting::{Channel, RemotingClient, RemotingCommand, RemotingServer, RequestProcessor};

const TOPIC: &str = "BenchTopic";

/// Answers sends like a broker would, without storing anything.
struct Ack(AtomicU64);

impl RequestProcessor for Ack {
    async fn process(&self, _ch: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        if req.code != request::SEND_MESSAGE_V2 {
            return Some(RemotingCommand::response_to(&req));
        }
        let n = self.0.fetch_add(1, Ordering::Relaxed) as i64;
        let mut r = RemotingCommand::response_to(&req);
        r.ext_fields = SendMessageResponseHeader {
            msg_id: "7F00000100002A9F0000000000000000".into(),
            queue_id: 0,
            queue_offset: n,
            transaction_id: None,
            batch_uniq_id: None,
        }
        .to_ext();
        r.ext_fields.insert("MSG_REGION", "DefaultRegion");
        r.ext_fields.insert("TRACE_ON", "true");
        Some(r)
    }
}

/// Registers the ack server; the returned connection must stay open (the
/// NameServer forgets a broker whose registering channel closes).
async fn register(namesrv: &str, broker_addr: &str) -> RemotingClient {
    let mut table = std::collections::BTreeMap::new();
    table.insert(TOPIC.to_string(), TopicConfig::new(TOPIC, 8));
    let body = RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion::new(1),
            topic_config_table: table,
        },
    }
    .to_json();
    let header = RegisterBrokerRequestHeader {
        broker_name: "bench-broker".into(),
        broker_addr: broker_addr.into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: broker_addr.into(),
        broker_id: 0,
        heartbeat_timeout_millis: None,
        enable_acting_master: None,
        compressed: Some(false),
        body_crc32: None,
    };
    let req = RemotingCommand::request(request::REGISTER_BROKER)
        .with_ext(header.to_ext())
        .with_body(body);
    let client = RemotingClient::default();
    let resp = client
        .invoke(namesrv, req, Duration::from_secs(5))
        .await
        .expect("register");
    assert_eq!(resp.code, response::SUCCESS);
    client
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().cloned().unwrap_or_else(|| "ack".into());
    let window: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let total: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(500_000);
    let body_len: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(100);
    let serialize = match args.get(4).map(String::as_str) {
        Some("json") => SerializeType::Json,
        _ => SerializeType::Rocketmq,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut _keep: Vec<Box<dyn std::any::Any>> = Vec::new();
        let mut _dir = None;
        let mut broker_handle = None;
        let namesrv = match mode.as_str() {
            "ack" | "broker" => {
                let ns = basalt_namesrv::NameServer::start(basalt_namesrv::NamesrvConfig {
                    listen: "127.0.0.1:0".parse().expect("addr"),
                    ..Default::default()
                })
                .await
                .expect("namesrv");
                let ns_addr = ns.local_addr().to_string();
                _keep.push(Box::new(ns));
                if mode == "ack" {
                    let server = RemotingServer::bind("127.0.0.1:0", Arc::new(Ack(AtomicU64::new(0))))
                        .await
                        .expect("bind");
                    let conn = register(&ns_addr, &server.local_addr().to_string()).await;
                    _keep.push(Box::new(conn));
                    _keep.push(Box::new(server));
                } else {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let cfg = basalt_broker::BrokerConfig {
                        store_path_root_dir: dir.path().to_path_buf(),
                        listen_addr: "127.0.0.1".parse().expect("ip"),
                        broker_ip1: "127.0.0.1".parse().expect("ip"),
                        listen_port: 0,
                        namesrv_addr: Some(ns_addr.clone()),
                        ..Default::default()
                    };
                    let b = basalt_broker::start(cfg).await.expect("broker");
                    let admin = basalt_client::Admin::new(ClientConfig::new(&ns_addr));
                    let addr = b.broker().broker_addr();
                    loop {
                        if admin.create_topic(&addr, &TopicConfig::new(TOPIC, 8)).await.is_ok()
                            && admin.topic_route(TOPIC).await.is_ok()
                        {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    admin.shutdown();
                    broker_handle = Some(b);
                    _dir = Some(dir);
                }
                ns_addr
            }
            addr => addr.to_string(),
        };
        let config = ClientConfig {
            serialize_type: serialize,
            ..ClientConfig::new(namesrv)
        };
        let producer = Producer::new("BenchProducer", config);
        producer.start().await.expect("start");
        let msg = Message::new(TOPIC, vec![b'x'; body_len]);
        producer.send(&msg).await.expect("warm-up send");
        let done = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..window {
            let p = producer.clone();
            let msg = msg.clone();
            let done = done.clone();
            let failed = failed.clone();
            tasks.push(tokio::spawn(async move {
                while done.fetch_add(1, Ordering::Relaxed) < total {
                    if p.send(&msg).await.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "mode={mode} window={window} body={body_len}B header={serialize:?}: {total} sends in {secs:.2} s = {:.0} msg/s ({} failed)",
            total as f64 / secs,
            failed.load(Ordering::Relaxed)
        );
        producer.shutdown().await;
        if let Some(b) = broker_handle {
            b.shutdown().await;
        }
    });
}
