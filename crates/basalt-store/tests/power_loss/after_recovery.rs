//! Crashes during and right after a crash recovery. Recovery no longer
//! syncs ConsumeQueue files one by one: it owes one sync of the queues'
//! file system to the first flush round (`SyncDebt`), and the checkpoint's
//! ConsumeQueue time moves only after it. A power loss before that payment
//! may leave the queues on the device as the first crash left them; the
//! next recovery starts from the same checkpoint and rebuilds them from the
//! CommitLog, so every acknowledged message is read through its queue.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use basalt_common::config::FlushDiskType;
use basalt_disk::SimDisk;
use basalt_store::{MessageStore, PutMessageStatus};

use crate::common::{Msg, assert_consistent, body, read_queue};
use crate::world::{ROOT, config};

/// Acknowledged bodies by (topic, queue), in put order.
type Acked = BTreeMap<(String, i32), Vec<Vec<u8>>>;

const QUEUES: [(&str, i32); 4] = [("SimA", 0), ("SimA", 1), ("SimB", 0), ("SimB", 1)];

fn open(disk: &Arc<SimDisk>) -> Result<Arc<MessageStore>, String> {
    MessageStore::open(config(FlushDiskType::SyncFlush, disk.handle())).map_err(|e| e.to_string())
}

/// Puts `n` messages (SYNC_FLUSH, each waited for), all dispatched.
fn put(store: &MessageStore, acked: &mut Acked, next: &mut usize, n: usize) {
    for _ in 0..n {
        let (topic, q) = QUEUES[*next % QUEUES.len()];
        let m = Msg::new(topic, q, body(*next, 150 + (*next * 53) % 400));
        *next += 1;
        let mut r = store.put_message(&m.draft(store.store_host()));
        store.wait_durable_blocking(&mut r, true);
        assert_eq!(r.status, PutMessageStatus::PutOk);
        acked.entry((topic.into(), q)).or_default().push(m.body);
    }
    let end = store.commit_log().max_offset();
    assert!(store.wait_dispatched(end, Duration::from_secs(10)));
}

/// Every acknowledged message is read through its queue, in order, and
/// every queue agrees with the log.
fn check(store: &MessageStore, acked: &Acked, seed: u64, when: &str) {
    for ((topic, q), bodies) in acked {
        let got: Vec<Vec<u8>> = read_queue(store, topic, *q)
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        assert_eq!(&got, bodies, "seed {seed}, {when}: {topic}/{q}");
    }
    assert_consistent(store);
}

/// The ConsumeQueue files of the store, as their paths.
fn queue_files(store: &MessageStore) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = store
        .consume_queues()
        .all()
        .iter()
        .flat_map(|q| q.files().files())
        .map(|f| f.path().to_path_buf())
        .collect();
    v.sort();
    v
}

/// Power loss with `store` running; the dead process's shutdown fails.
fn power_loss(disk: &Arc<SimDisk>, store: Arc<MessageStore>) {
    let _ = disk.power_loss();
    store.shutdown();
}

/// A store whose last 60 messages were acknowledged after the checkpoint's
/// ConsumeQueue time (their units unsynced), crashed by a power loss.
fn crashed_store(seed: u64) -> (Arc<SimDisk>, Acked) {
    let disk = SimDisk::new(seed);
    let mut acked = Acked::new();
    let mut next = 0;
    let store = open(&disk).unwrap();
    put(&store, &mut acked, &mut next, 60);
    store.flush_queues_and_checkpoint().unwrap();
    // Past recovery's 3 s margin: the scan starts at a later file.
    disk.advance_clock(5_000);
    put(&store, &mut acked, &mut next, 60);
    power_loss(&disk, store);
    (disk, acked)
}

#[test]
fn a_crash_right_after_recovery_loses_nothing() {
    let mut left_unsynced = 0;
    for seed in 0..12 {
        let (disk, acked) = crashed_store(seed);
        let store = open(&disk).unwrap();
        assert!(store.recovery_report().abnormal);
        check(&store, &acked, seed, "after the first recovery");
        assert!(
            store.consume_queues().sync_debt().is_owed(),
            "seed {seed}: recovery owes its queue syncs"
        );
        // Recovery synced no queue file: the device holds what the crash
        // left, not what recovery rewrote.
        let files = queue_files(&store);
        let unsynced = files.iter().any(|p| {
            let live = store
                .consume_queues()
                .all()
                .iter()
                .flat_map(|q| q.files().files())
                .find(|f| f.path() == p)
                .map(|f| f.raw().to_vec());
            disk.durable_contents(p) != live
        });
        left_unsynced += usize::from(unsynced);

        // Crash again before any ConsumeQueue flush.
        power_loss(&disk, store);
        let store = open(&disk).unwrap();
        assert!(store.recovery_report().abnormal);
        check(&store, &acked, seed, "after a crash right after recovery");

        // The first flush round pays the debt: then the device has every
        // queue file as the process sees it.
        store.flush_queues_and_checkpoint().unwrap();
        assert!(!store.consume_queues().sync_debt().is_owed());
        for f in store
            .consume_queues()
            .all()
            .iter()
            .flat_map(|q| q.files().files())
        {
            assert_eq!(
                disk.durable_contents(f.path()).as_deref(),
                Some(f.raw()),
                "seed {seed}: {} synced",
                f.path().display()
            );
        }
        power_loss(&disk, store);
        let store = open(&disk).unwrap();
        check(&store, &acked, seed, "after a crash after the flush");
        store.shutdown();
    }
    // The power losses above tore or lost unsynced units in most seeds:
    // recovery's rewrite of them was then in the page cache only.
    assert!(
        left_unsynced > 0,
        "no seed left a queue file unsynced after recovery"
    );
}

/// A crash during the open, after recovery cut and rebuilt the queues
/// (the checkpoint write that follows it fails), then a power loss: the
/// next recovery still rebuilds every queue.
#[test]
fn a_crash_during_recovery_loses_nothing() {
    for seed in 0..12 {
        let (disk, acked) = crashed_store(seed);
        let checkpoint = Path::new(ROOT).join("checkpoint");
        disk.fail_syncs_under(&basalt_disk::temp_path(&checkpoint));
        assert!(open(&disk).is_err(), "seed {seed}: the open stops");
        disk.clear_dir_faults();
        let _ = disk.power_loss();
        let store = open(&disk).unwrap();
        check(&store, &acked, seed, "after a crash during recovery");
        store.shutdown();
    }
}
