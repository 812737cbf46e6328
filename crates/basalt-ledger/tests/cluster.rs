//! Three ledger runtimes in one process: over the real TCP transport on
//! 127.0.0.1 (port 0) and over the in-memory transport (to partition members).
//!
//! Waits are bounded (a test never hangs) but nothing is asserted about timing.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use basalt_ledger::core::Role;
use basalt_ledger::transport::mem::MemNetwork;
use basalt_ledger::transport::tcp::TcpListener;
use basalt_ledger::{EntryKind, Ledger, LedgerConfig, LedgerError, LedgerHandle, NodeId};
use bytes::BytesMut;
use tokio::sync::mpsc;

const BOUND: Duration = Duration::from_secs(60);

fn config(id: &str, peers: &BTreeMap<NodeId, String>, dir: &Path) -> LedgerConfig {
    let mut c = LedgerConfig::new("g", id, peers.clone(), dir.join(id));
    c.heartbeat_interval_ms = 100;
    c.max_heartbeat_leak = 3;
    c.min_vote_interval_ms = 150;
    c.max_vote_interval_ms = 400;
    c.max_push_timeout_ms = 300;
    c.compare_timeout_ms = 500;
    c.commit_push_interval_ms = 200;
    c.follower_push_wait_ms = 300;
    c.max_wait_ack_ms = 10_000;
    c.leadership_transfer_timeout_ms = 3_000;
    c.data_file_size = 64 * 1024;
    c.index_file_size = 32 * 1024;
    c.checkpoint_interval_ms = 200;
    // Over TCP, n2 sends DLedger's JSON pushes and the others the binary ones:
    // a group with both replicates.
    c.binary_push = id != "n2";
    c
}

fn record(i: usize) -> BytesMut {
    let mut b = BytesMut::new();
    b.extend_from_slice(format!("record-{i:06}-").as_bytes());
    b.resize(100 + i % 300, b'r');
    b
}

/// Waits until exactly one member leads (and is ready); returns its position.
async fn leader(nodes: &[Option<LedgerHandle>]) -> usize {
    tokio::time::timeout(BOUND, async {
        loop {
            let leaders: Vec<usize> = nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| {
                    n.as_ref()
                        .is_some_and(|n| n.status().role == Role::Leader && n.status().leader_ready)
                })
                .map(|(i, _)| i)
                .collect();
            if leaders.len() == 1 {
                return leaders[0];
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a leader is elected")
}

/// Appends `n` records through whichever member leads, retrying refusals and
/// unknown outcomes (a retried record may then be in the log twice).
async fn append_many(nodes: &[Option<LedgerHandle>], from: usize, n: usize) -> Vec<i64> {
    let mut indexes = Vec::new();
    let mut next = from;
    let mut in_flight = Vec::new();
    let mut retry: Vec<usize> = Vec::new();
    while next < from + n || !in_flight.is_empty() || !retry.is_empty() {
        while (next < from + n || !retry.is_empty()) && in_flight.len() < 64 {
            let k = retry.pop().unwrap_or_else(|| {
                next += 1;
                next - 1
            });
            let h = nodes[leader(nodes).await].clone().expect("leader is up");
            in_flight.push(tokio::spawn(async move {
                let r = h
                    .append(vec![record(k)], move |slots| {
                        // The broker's hook: write the entry position into the body.
                        let pos = slots[0].pos.to_be_bytes();
                        slots[0].body[92..100].copy_from_slice(&pos);
                    })
                    .await;
                (k, r)
            }));
        }
        let (k, r) = in_flight.remove(0).await.expect("append task");
        match r {
            Ok(receipt) => indexes.push(receipt.last_index),
            Err(
                LedgerError::NotLeader { .. }
                | LedgerError::Transferring
                | LedgerError::LeadershipLost
                | LedgerError::Timeout
                | LedgerError::Shutdown,
            ) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                retry.push(k);
            }
            Err(e) => panic!("append {k} failed: {e}"),
        }
    }
    indexes
}

/// Waits until the leader's published committed index reaches `at_least` (an
/// append's receipt can come before the leader publishes its status), then
/// [`converge`]s.
async fn converge_past(nodes: &[Option<LedgerHandle>], at_least: i64) -> i64 {
    let l = leader(nodes).await;
    let h = nodes[l].clone().expect("leader is up");
    tokio::time::timeout(BOUND, h.wait_committed(at_least))
        .await
        .expect("the leader publishes what it acknowledged")
        .expect("running");
    converge(nodes).await
}

/// Waits until every running member has committed what the leader committed, then
/// checks their committed logs are identical. Returns that index.
async fn converge(nodes: &[Option<LedgerHandle>]) -> i64 {
    let l = leader(nodes).await;
    let target = nodes[l]
        .as_ref()
        .map(|h| h.status().committed_index)
        .unwrap_or(-1);
    for n in nodes.iter().flatten() {
        tokio::time::timeout(BOUND, n.wait_committed(target))
            .await
            .expect("member catches up")
            .expect("running");
    }
    let logs: Vec<Vec<_>> = nodes
        .iter()
        .flatten()
        .map(|n| {
            n.reader()
                .entries(0, target as usize + 1, usize::MAX)
                .expect("committed entries read")
        })
        .collect();
    for log in &logs {
        assert_eq!(log.len() as i64, target + 1);
        assert_eq!(log, &logs[0], "committed logs differ");
    }
    target
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_members_over_tcp_elect_replicate_fail_over_and_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut listeners = Vec::new();
    let mut peers = BTreeMap::new();
    for i in 0..3 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        peers.insert(NodeId::new(&format!("n{i}")), l.local_addr().to_string());
        listeners.push(l);
    }
    let mut nodes: Vec<Option<LedgerHandle>> = Vec::new();
    for (i, l) in listeners.into_iter().enumerate() {
        let h = Ledger::start_with_listener(config(&format!("n{i}"), &peers, dir.path()), l)
            .await
            .unwrap();
        nodes.push(Some(h));
    }

    // Elect, then 1000 appends.
    let first = leader(&nodes).await;
    let idx = append_many(&nodes, 0, 1000).await;
    assert_eq!(idx.len(), 1000);
    let committed = converge_past(&nodes, *idx.iter().max().expect("appends")).await;
    assert!(committed >= 1000);
    // Every stamped body carries its entry position, and a zero-copy read of the
    // committed bytes there returns the body.
    let h = nodes[first].clone().unwrap();
    let entries = h.reader().entries(0, 5000, usize::MAX).unwrap();
    let normal: Vec<_> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::Normal)
        .collect();
    assert!(normal.len() >= 1000);
    for e in &normal {
        let stamped = i64::from_be_bytes(e.body[92..100].try_into().unwrap());
        assert_eq!(stamped, e.pos);
        let bytes = h.reader().read(e.body_pos(), e.body.len()).unwrap();
        assert_eq!(bytes, e.body);
    }

    // Stop the leader while appends are in flight: a new leader takes over.
    let old = nodes[first].take().unwrap();
    let burst: Vec<_> = (0..50)
        .map(|k| {
            let h = old.clone();
            tokio::spawn(async move { h.append(vec![record(5000 + k)], |_| {}).await })
        })
        .collect();
    old.shutdown().await;
    for b in burst {
        let _ = b.await;
    }
    let second = leader(&nodes).await;
    assert_ne!(second, first);
    let more = append_many(&nodes, 1000, 200).await;
    assert_eq!(more.len(), 200);

    // Restart the old leader on its address and directory: it catches up (its
    // unreplicated tail, if any, is compared away and truncated).
    let addr = peers[&NodeId::new(&format!("n{first}"))].clone();
    let listener = TcpListener::bind(&addr).await.unwrap();
    let h = Ledger::start_with_listener(config(&format!("n{first}"), &peers, dir.path()), listener)
        .await
        .unwrap();
    nodes[first] = Some(h);
    let committed = converge_past(&nodes, *more.iter().max().expect("appends")).await;
    assert!(committed >= 1200);
    for n in nodes.iter().flatten() {
        n.shutdown().await;
    }
}

/// Three members over the in-memory network.
async fn mem_cluster(
    dir: &Path,
    tweak: impl Fn(&mut LedgerConfig),
) -> (MemNetwork, Vec<Option<LedgerHandle>>) {
    let net = MemNetwork::new();
    let peers: BTreeMap<NodeId, String> = (0..3)
        .map(|i| (NodeId::new(&format!("n{i}")), format!("mem:{i}")))
        .collect();
    let mut nodes = Vec::new();
    for i in 0..3 {
        let id = NodeId::new(&format!("n{i}"));
        let (tx, rx) = mpsc::unbounded_channel();
        let t = net.join(id.clone(), tx);
        let mut c = config(&format!("n{i}"), &peers, dir);
        tweak(&mut c);
        nodes.push(Some(
            Ledger::start_with_transport(c, t as Arc<_>, rx)
                .await
                .unwrap(),
        ));
    }
    (net, nodes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_leader_is_replaced_and_its_uncommitted_tail_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let (net, nodes) = mem_cluster(dir.path(), |_| {}).await;
    let first = leader(&nodes).await;
    append_many(&nodes, 0, 100).await;
    converge(&nodes).await;
    // Cut the leader off; what it accepts now cannot commit.
    let old = nodes[first].clone().unwrap();
    net.isolate(&NodeId::new(&format!("n{first}")));
    let stranded: Vec<_> = (0..10)
        .map(|k| {
            let h = old.clone();
            tokio::spawn(async move { h.append(vec![record(900 + k)], |_| {}).await })
        })
        .collect();
    // The others elect a new leader and go on.
    let others: Vec<Option<LedgerHandle>> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| if i == first { None } else { n.clone() })
        .collect();
    let second = leader(&others).await;
    assert_ne!(second, first);
    append_many(&others, 100, 50).await;
    for s in stranded {
        let r = s.await.unwrap();
        assert!(
            r.is_err(),
            "an append on the cut-off leader must not succeed: {r:?}"
        );
    }
    // Heal: the old leader steps down, its stranded entries are truncated, and all
    // committed logs agree.
    net.heal();
    let committed = converge(&nodes).await;
    let log = nodes[first]
        .as_ref()
        .unwrap()
        .reader()
        .entries(0, committed as usize + 1, usize::MAX)
        .unwrap();
    let bodies: Vec<_> = log
        .iter()
        .filter(|e| e.kind == EntryKind::Normal)
        .map(|e| e.body.clone())
        .collect();
    for k in 0..10 {
        assert!(
            !bodies.contains(&record(900 + k).freeze()),
            "stranded entry {k} was committed"
        );
    }
    for n in nodes.iter().flatten() {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_transfer_and_preferred_leader() {
    let dir = tempfile::tempdir().unwrap();
    let (_net, nodes) = mem_cluster(dir.path(), |_| {}).await;
    let first = leader(&nodes).await;
    append_many(&nodes, 0, 20).await;
    let target = (first + 1) % 3;
    nodes[first]
        .as_ref()
        .unwrap()
        .transfer_leadership(NodeId::new(&format!("n{target}")))
        .await
        .expect("transfer");
    assert_eq!(leader(&nodes).await, target);
    append_many(&nodes, 20, 20).await;
    converge(&nodes).await;
    for n in nodes.iter().flatten() {
        n.shutdown().await;
    }

    // A preferred leader takes over by itself.
    let dir = tempfile::tempdir().unwrap();
    let (_net, nodes) =
        mem_cluster(dir.path(), |c| c.preferred_leader = Some(NodeId::new("n2"))).await;
    tokio::time::timeout(BOUND, async {
        loop {
            if nodes[2].as_ref().unwrap().status().role == Role::Leader {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the preferred leader leads");
    append_many(&nodes, 0, 10).await;
    assert_eq!(leader(&nodes).await, 2);
    for n in nodes.iter().flatten() {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_refuse_appends_with_the_leader_address() {
    let dir = tempfile::tempdir().unwrap();
    let (_net, nodes) = mem_cluster(dir.path(), |_| {}).await;
    let l = leader(&nodes).await;
    let f = (l + 1) % 3;
    let err = nodes[f]
        .as_ref()
        .unwrap()
        .append(vec![record(1)], |_| {})
        .await
        .unwrap_err();
    match err {
        LedgerError::NotLeader {
            leader_id,
            leader_addr,
        } => {
            assert_eq!(leader_id, Some(NodeId::new(&format!("n{l}"))));
            assert_eq!(leader_addr.as_deref(), Some(format!("mem:{l}").as_str()));
        }
        other => panic!("expected NotLeader, got {other}"),
    }
    let st = nodes[f].as_ref().unwrap().status();
    assert_eq!(st.role, Role::Follower);
    assert_eq!(st.leader_id, Some(NodeId::new(&format!("n{l}"))));
    for n in nodes.iter().flatten() {
        n.shutdown().await;
    }
}
