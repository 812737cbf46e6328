//! A full disk is a refusal, never a poisoned ledger: a leader's append that
//! needs a file the disk has no room for fails with `NoSpace`; a follower with
//! a full disk drops pushes until space is freed and then catches up; a term
//! that cannot be written is written again until it can.
//!
//! Waits are bounded (a test never hangs) but nothing is asserted about timing.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use basalt_ledger::core::Role;
use basalt_ledger::store::faults;
use basalt_ledger::transport::mem::MemNetwork;
use basalt_ledger::{Ledger, LedgerConfig, LedgerError, LedgerHandle, NodeId};
use bytes::BytesMut;
use tokio::sync::mpsc;

const BOUND: Duration = Duration::from_secs(30);

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
    c.data_file_size = 16 * 1024;
    c.index_file_size = 32 * 64;
    c.checkpoint_interval_ms = 200;
    c
}

async fn members(dir: &Path, n: usize) -> (MemNetwork, Vec<LedgerHandle>) {
    let net = MemNetwork::new();
    let peers: BTreeMap<NodeId, String> = (0..n)
        .map(|i| (NodeId::new(&format!("n{i}")), format!("mem:{i}")))
        .collect();
    let mut nodes = Vec::new();
    for i in 0..n {
        let id = NodeId::new(&format!("n{i}"));
        let (tx, rx) = mpsc::unbounded_channel();
        let t = net.join(id, tx);
        let c = config(&format!("n{i}"), &peers, dir);
        nodes.push(
            Ledger::start_with_transport(c, t as Arc<_>, rx)
                .await
                .unwrap(),
        );
    }
    (net, nodes)
}

async fn leader(nodes: &[LedgerHandle]) -> usize {
    tokio::time::timeout(BOUND, async {
        loop {
            if let Some(i) = nodes
                .iter()
                .position(|n| n.status().role == Role::Leader && n.status().leader_ready)
            {
                return i;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a leader is elected")
}

fn record(i: usize) -> BytesMut {
    let mut b = BytesMut::new();
    b.extend_from_slice(format!("record-{i:06}-").as_bytes());
    b.resize(300, b'r');
    b
}

async fn append(h: &LedgerHandle, i: usize) -> Result<i64, LedgerError> {
    h.append(vec![record(i)], |_| {})
        .await
        .map(|r| r.last_index)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_refuses_appends_on_a_full_disk_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let (_net, nodes) = members(dir.path(), 1).await;
    let h = &nodes[leader(&nodes).await];
    let mut committed = Vec::new();
    for i in 0..10 {
        committed.push(append(h, i).await.unwrap());
    }
    faults::fill_disk_under(dir.path());
    // Files already made (the data file ahead) still take entries; the first
    // that needs a new file is refused.
    let mut i = 10;
    let err = loop {
        match append(h, i).await {
            Ok(idx) => committed.push(idx),
            Err(e) => break e,
        }
        i += 1;
        assert!(i < 1000, "no append was refused");
    };
    assert!(matches!(err, LedgerError::NoSpace(_)), "{err}");
    let s = h.status();
    assert!(!s.poisoned, "a full disk does not poison the ledger");
    assert_eq!(s.role, Role::Leader);
    assert!(matches!(append(h, i).await, Err(LedgerError::NoSpace(_))));

    faults::free_disk_under(dir.path());
    for k in i..i + 100 {
        committed.push(append(h, k).await.expect("appends resume"));
    }
    let entries = h
        .reader()
        .entries(0, usize::MAX, usize::MAX)
        .expect("committed entries read");
    let bodies: Vec<i64> = entries
        .iter()
        .filter(|e| !e.body.is_empty())
        .map(|e| e.index)
        .collect();
    assert_eq!(
        bodies, committed,
        "every acknowledged entry is there, in order"
    );
    h.shutdown().await;
}

/// Appends record `i` through whichever member leads (never `not`), retrying
/// while a busy machine moves the leadership.
async fn append_anywhere(nodes: &[LedgerHandle], i: usize, not: usize) -> i64 {
    loop {
        let l = leader(nodes).await;
        assert_ne!(l, not, "a member that cannot write its vote never leads");
        match append(&nodes[l], i).await {
            Ok(idx) => return idx,
            Err(
                LedgerError::NotLeader { .. }
                | LedgerError::LeadershipLost
                | LedgerError::Timeout
                | LedgerError::Transferring,
            ) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("append {i}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_with_a_full_disk_falls_behind_then_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let (_net, nodes) = members(dir.path(), 3).await;
    let f = (leader(&nodes).await + 1) % 3;
    // The follower holds the start of the log when its disk fills.
    let mut first = 0;
    for i in 0..10 {
        first = append_anywhere(&nodes, i, usize::MAX).await;
    }
    tokio::time::timeout(BOUND, nodes[f].wait_committed(first))
        .await
        .expect("the follower has the first entries")
        .expect("running");
    faults::fill_disk_under(&dir.path().join(format!("n{f}")));
    // The other two members are a majority: appends go on.
    let mut last = 0;
    for i in 10..300 {
        last = append_anywhere(&nodes, i, f).await;
    }
    let s = nodes[f].status();
    assert!(!s.poisoned, "the full follower is not poisoned");
    assert!(
        s.ledger_end_index < last,
        "the full follower could not keep up"
    );
    faults::free_disk_under(&dir.path().join(format!("n{f}")));
    tokio::time::timeout(BOUND, nodes[f].wait_committed(last))
        .await
        .expect("the follower catches up once space is freed")
        .expect("running");
    for n in &nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_that_cannot_be_written_is_written_once_space_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let member = dir.path().join("n0");
    std::fs::create_dir_all(&member).unwrap();
    faults::fill_disk_under(&member);
    let (_net, nodes) = members(dir.path(), 1).await;
    // The election needs the new term on disk first: nobody leads meanwhile,
    // and nothing is poisoned.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let s = nodes[0].status();
    assert_ne!(s.role, Role::Leader);
    assert!(!s.poisoned);
    faults::free_disk_under(&member);
    let l = leader(&nodes).await;
    append(&nodes[l], 1).await.expect("the leader appends");
    nodes[0].shutdown().await;
}
