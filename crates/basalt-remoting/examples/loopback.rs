//! Loopback throughput of the transport: a server that acknowledges every
//! request and clients keeping a deep pipeline of small requests in flight,
//! all in one process on a 2-thread runtime (server and client share the cores).
//!
//! `cargo run --release -p basalt-remoting --example loopback -- [connections] [in_flight_per_conn] [requests] [body_bytes]`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use basalt_remoting::{Channel, RemotingClient, RemotingCommand, RemotingServer, RequestProcessor};
use bytes::Bytes;

struct Ack;

impl RequestProcessor for Ack {
    async fn process(&self, _ch: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        let mut resp = RemotingCommand::response_to(&req);
        resp.ext_fields.insert("queueOffset", "12345");
        Some(resp)
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numeric argument"))
        .collect();
    let conns = args.first().copied().unwrap_or(1);
    let inflight = args.get(1).copied().unwrap_or(256);
    let total = args.get(2).copied().unwrap_or(1_000_000) as u64;
    let body = args.get(3).copied().unwrap_or(100);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let server = RemotingServer::bind("127.0.0.1:0", Arc::new(Ack)).await.unwrap();
        let addr = server.local_addr().to_string();
        let done = Arc::new(AtomicU64::new(0));
        let payload = Bytes::from(vec![b'x'; body]);
        let mut template = RemotingCommand::request(310);
        for (k, v) in [("a", "PG"), ("b", "BenchTopic"), ("c", "TBW102"), ("d", "4"), ("e", "1"),
                       ("f", "0"), ("g", "1700000000000"), ("h", "0"), ("j", "0"), ("k", "false"),
                       ("m", "false")] {
            template.ext_fields.insert(k, v);
        }
        template.body = payload;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..conns {
            let client = RemotingClient::default();
            for _ in 0..inflight {
                let client = client.clone();
                let addr = addr.clone();
                let done = done.clone();
                let template = template.clone();
                tasks.push(tokio::spawn(async move {
                    while done.fetch_add(1, Ordering::Relaxed) < total {
                        client
                            .invoke(&addr, template.clone(), Duration::from_secs(30))
                            .await
                            .unwrap();
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{total} requests, {conns} connection(s) x {inflight} in flight, {body} B body: {:.0} req/s ({secs:.2} s)",
            total as f64 / secs
        );
        server.shutdown().await;
    });
}
