//! Ledger throughput, latency and fail-over on loopback, in one process.
//!
//! ```text
//! cargo run --release -p basalt-ledger --example ledger_bench -- [options]
//!   --nodes N          members (1 or 3; default 3)
//!   --seconds S        load duration (default 10)
//!   --size B           body bytes (default 1024)
//!   --clients C        concurrent appenders, each one append at a time (default 256)
//!   --no-batch-push    one entry per APPEND (DLedger's default)
//!   --memory-ack       acknowledge on write instead of on fsync
//!   --heartbeat-ms H   heartbeat interval (default 2000, DLedger's)
//!   --failover         afterwards, stop the leader and time the next committed append
//!   --dir PATH         where the ledgers live (default: a temp dir)
//! ```
//! Prints appends/s and latency percentiles (and the fail-over time).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use basalt_ledger::core::Role;
use basalt_ledger::transport::tcp::TcpListener;
use basalt_ledger::{AckMode, Ledger, LedgerConfig, LedgerHandle, NodeId};
use bytes::BytesMut;

struct Args {
    nodes: usize,
    seconds: u64,
    size: usize,
    clients: usize,
    batch_push: bool,
    memory_ack: bool,
    heartbeat_ms: u64,
    failover: bool,
    dir: Option<std::path::PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        nodes: 3,
        seconds: 10,
        size: 1024,
        clients: 256,
        batch_push: true,
        memory_ack: false,
        heartbeat_ms: 2000,
        failover: false,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().expect("option value");
        match k.as_str() {
            "--nodes" => a.nodes = v().parse().expect("--nodes"),
            "--seconds" => a.seconds = v().parse().expect("--seconds"),
            "--size" => a.size = v().parse().expect("--size"),
            "--clients" => a.clients = v().parse().expect("--clients"),
            "--no-batch-push" => a.batch_push = false,
            "--memory-ack" => a.memory_ack = true,
            "--heartbeat-ms" => a.heartbeat_ms = v().parse().expect("--heartbeat-ms"),
            "--failover" => a.failover = true,
            "--dir" => a.dir = Some(v().into()),
            other => panic!("unknown option {other}"),
        }
    }
    a
}

async fn leader(nodes: &[Option<LedgerHandle>]) -> usize {
    loop {
        for (i, n) in nodes.iter().enumerate() {
            if let Some(n) = n {
                let s = n.status();
                if s.role == Role::Leader && s.leader_ready {
                    return i;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p) as usize]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let a = args();
    let tmp = tempfile::tempdir().expect("temp dir");
    let base = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let mut listeners = Vec::new();
    let mut peers = BTreeMap::new();
    for i in 0..a.nodes {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        peers.insert(NodeId::new(&format!("n{i}")), l.local_addr().to_string());
        listeners.push(l);
    }
    let mut nodes: Vec<Option<LedgerHandle>> = Vec::new();
    for (i, l) in listeners.into_iter().enumerate() {
        let id = format!("n{i}");
        let mut c = LedgerConfig::new("bench", id.as_str(), peers.clone(), base.join(&id));
        c.heartbeat_interval_ms = a.heartbeat_ms;
        c.enable_batch_push = a.batch_push;
        c.max_pending_requests = 100_000;
        if a.memory_ack {
            c.ack_mode = AckMode::Memory;
        }
        nodes.push(Some(
            Ledger::start_with_listener(c, l).await.expect("start"),
        ));
    }
    let l = leader(&nodes).await;
    let h = nodes[l].clone().expect("leader");
    println!(
        "nodes={} size={} clients={} batch_push={} ack={} seconds={}",
        a.nodes,
        a.size,
        a.clients,
        a.batch_push,
        if a.memory_ack { "memory" } else { "durable" },
        a.seconds
    );

    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.clients {
        let h = h.clone();
        let stop = stop.clone();
        let size = a.size;
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut b = BytesMut::with_capacity(size);
                b.resize(size, b'x');
                let t = Instant::now();
                match h.append(vec![b], |_| {}).await {
                    Ok(_) => lat.push(t.elapsed()),
                    Err(_) => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    tokio::time::sleep(Duration::from_secs(a.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await.expect("client");
        all.extend(lat);
        errors += e;
    }
    let elapsed = start.elapsed();
    all.sort_unstable();
    println!(
        "appends={} errors={} tps={:.0} p50={:?} p99={:?} p999={:?} max={:?}",
        all.len(),
        errors,
        all.len() as f64 / elapsed.as_secs_f64(),
        pct(&all, 0.50),
        pct(&all, 0.99),
        pct(&all, 0.999),
        all.last().copied().unwrap_or_default()
    );

    if a.failover && a.nodes > 1 {
        let old = nodes[l].take().expect("leader");
        let t = Instant::now();
        old.shutdown().await;
        loop {
            let l2 = leader(&nodes).await;
            let h2 = nodes[l2].clone().expect("new leader");
            let mut b = BytesMut::new();
            b.resize(a.size, b'y');
            if h2.append(vec![b], |_| {}).await.is_ok() {
                println!(
                    "failover: leader stopped -> next committed append in {:?}",
                    t.elapsed()
                );
                break;
            }
        }
    }
    for n in nodes.iter().flatten() {
        n.shutdown().await;
    }
}
