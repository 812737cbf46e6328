//! Retention and catch-up across a purge: three runtimes over the in-memory
//! network; one follower is cut off while the others append across many data
//! files and purge their old ones; healed, the follower is behind the
//! leader's first kept entry, so it discards its log and starts over from
//! there, and every member ends with the same entries from that point.
//!
//! Waits are bounded (a test never hangs); nothing is asserted about timing.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use basalt_ledger::core::Role;
use basalt_ledger::transport::mem::MemNetwork;
use basalt_ledger::{Ledger, LedgerConfig, LedgerError, LedgerHandle, NodeId};
use bytes::BytesMut;
use tokio::sync::mpsc;

const BOUND: Duration = Duration::from_secs(60);
const DATA_FILE: i64 = 16 * 1024;

fn config(id: &str, peers: &BTreeMap<NodeId, String>, dir: &Path) -> LedgerConfig {
    let mut c = LedgerConfig::new("g", id, peers.clone(), dir.join(id));
    c.heartbeat_interval_ms = 100;
    c.min_vote_interval_ms = 150;
    c.max_vote_interval_ms = 400;
    c.max_push_timeout_ms = 300;
    c.compare_timeout_ms = 500;
    c.commit_push_interval_ms = 200;
    c.follower_push_wait_ms = 300;
    c.max_wait_ack_ms = 10_000;
    c.data_file_size = DATA_FILE;
    c.index_file_size = 32 * 256;
    c.checkpoint_interval_ms = 200;
    c
}

async fn start(net: &MemNetwork, i: usize, dir: &Path) -> LedgerHandle {
    let peers: BTreeMap<NodeId, String> = (0..3)
        .map(|i| (NodeId::new(&format!("n{i}")), format!("mem:{i}")))
        .collect();
    let id = NodeId::new(&format!("n{i}"));
    let (tx, rx) = mpsc::unbounded_channel();
    let t = net.join(id, tx);
    Ledger::start_with_transport(config(&format!("n{i}"), &peers, dir), t as Arc<_>, rx)
        .await
        .unwrap()
}

/// The member of `nodes` (by position) that leads and is ready.
async fn leader(nodes: &[&LedgerHandle]) -> usize {
    tokio::time::timeout(BOUND, async {
        loop {
            let l: Vec<usize> = (0..nodes.len())
                .filter(|i| {
                    let s = nodes[*i].status();
                    s.role == Role::Leader && s.leader_ready
                })
                .collect();
            if l.len() == 1 {
                return l[0];
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a leader is elected")
}

/// Appends `n` bodies of ~500 bytes through the leader of `nodes`,
/// retrying refusals and unknown outcomes (a leader change under load: the
/// body may be stored twice, which this test does not mind).
async fn append_many(nodes: &[&LedgerHandle], n: usize) {
    let mut k = 0;
    while k < n {
        let h = nodes[leader(nodes).await];
        let mut b = BytesMut::new();
        b.resize(500, b'a' + (k % 26) as u8);
        match h.append(vec![b], |_| {}).await {
            Ok(_) => k += 1,
            Err(
                LedgerError::NotLeader { .. }
                | LedgerError::Transferring
                | LedgerError::Timeout
                | LedgerError::LeadershipLost,
            ) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("append failed: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_first_kept_entry_starts_over_there() {
    let dir = tempfile::tempdir().unwrap();
    let net = MemNetwork::new();
    let n0 = start(&net, 0, dir.path()).await;
    let n1 = start(&net, 1, dir.path()).await;
    let n2 = start(&net, 2, dir.path()).await;
    let all = [&n0, &n1, &n2];
    leader(&all).await;
    append_many(&all, 20).await;
    // Cut n2 off; only n0 and n1 go on (a majority of three).
    for h in &all {
        tokio::time::timeout(BOUND, h.wait_committed(20))
            .await
            .unwrap()
            .unwrap();
    }
    let stale_end = n2.status().ledger_end_index;
    net.isolate(&NodeId::new("n2"));
    let two = [&n0, &n1];
    append_many(&two, 300).await; // ~150 KB: about nine data files
    let target = two[leader(&two).await].status().committed_index;
    for h in &two {
        tokio::time::timeout(BOUND, h.wait_committed(target))
            .await
            .unwrap()
            .unwrap();
    }
    // Every member purges its own old files, never past its committed entry.
    for h in &two {
        let committed = h.status().committed_index;
        let files_before = h.reader().data_files().len();
        let begin = h.purge_before(i64::MAX).await.unwrap();
        assert!(
            begin > stale_end + 1,
            "n2's end {stale_end} must be below the first kept entry {begin}"
        );
        assert!(begin <= committed);
        assert!(h.reader().data_files().len() < files_before);
        // The status is published by the member's loop after the purge;
        // wait for it rather than read a snapshot from before (this raced).
        let mut w = h.watch();
        tokio::time::timeout(BOUND, w.wait_for(|s| s.ledger_begin_index == begin))
            .await
            .expect("the status shows the new first entry")
            .unwrap();
    }
    let leader_begin = n0
        .status()
        .ledger_begin_index
        .max(n1.status().ledger_begin_index);

    // Heal: n2 is far behind the first kept entry; it starts over there.
    net.heal();
    append_many(&all, 5).await;
    let l = all[leader(&all).await];
    let end = l.status().committed_index;
    tokio::time::timeout(BOUND, n2.wait_committed(end))
        .await
        .unwrap()
        .unwrap();
    let begin2 = n2.status().ledger_begin_index;
    assert!(
        begin2 > stale_end,
        "n2 discarded its old log (begin {begin2})"
    );
    assert!(
        begin2 <= leader_begin,
        "n2 starts at its leader's first kept entry (begin {begin2}, leaders' {leader_begin})"
    );
    // From n2's first entry on, every member holds the same committed entries.
    let theirs = l.reader().entries(begin2, usize::MAX, usize::MAX).unwrap();
    let mine = n2.reader().entries(begin2, usize::MAX, usize::MAX).unwrap();
    assert_eq!(mine.first().map(|e| e.index), Some(begin2));
    let upto = end.min(theirs.last().unwrap().index);
    let pick = |v: &[basalt_ledger::LedgerEntry]| -> Vec<_> {
        v.iter().filter(|e| e.index <= upto).cloned().collect()
    };
    assert_eq!(
        pick(&mine),
        pick(&theirs),
        "n2's log differs from the leader's"
    );
    // n2's old files are gone: its first data file is the leader's first kept one
    // or later.
    let first_file = n2.reader().data_files()[0].start;
    assert!(first_file >= DATA_FILE, "n2 still holds its first file");
    for h in all {
        h.shutdown().await;
    }
}
