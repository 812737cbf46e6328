//! A full disk is a clean refusal: puts are refused above
//! `diskSpaceWarningLevelRatio` with a reason naming the disk; a file that
//! cannot be reserved is CREATE_MAPPED_FILE_FAILED, never a poisoned store;
//! writes resume once there is room; disk pressure deletes old files but
//! never one dispatch has not passed.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use basalt_store::disk_space::{DiskUsageSource, FixedUsage};
use basalt_store::{MessageStore, PutMessageStatus, StoreConfig, faults};
use common::*;

fn open_with_usage(dir: &std::path::Path, usage: &Arc<FixedUsage>) -> Arc<MessageStore> {
    let mut c = StoreConfig::for_tests(dir);
    c.disk_usage = Arc::clone(usage) as Arc<dyn DiskUsageSource>;
    // Samples come from the test, not from the timer.
    c.disk_check_interval = Duration::from_secs(3600);
    c.clean_resource_interval = Duration::from_secs(3600);
    MessageStore::open(c).expect("open store")
}

fn wait_dispatch(store: &MessageStore) {
    assert!(store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10)));
}

#[test]
fn puts_are_refused_above_the_warning_ratio_and_accepted_again_below() {
    let dir = tempfile::tempdir().unwrap();
    let usage = FixedUsage::new(50);
    let store = open_with_usage(dir.path(), &usage);
    let host = store.store_host();
    let m = Msg::new("D", 0, body(1, 100));
    assert!(store.put_message(&m.draft(host)).is_ok());

    usage.set(91);
    store.commit_log().disk().sample();
    let r = store.put_message(&m.draft(host));
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    let why = r.detail.unwrap();
    assert!(why.contains("disk full"), "{why}");
    assert!(why.contains("91%"), "{why}");
    assert!(why.contains(&dir.path().display().to_string()), "{why}");
    let r = store.put_messages(&[m.draft(host), m.draft(host)]);
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    assert!(!store.health().is_poisoned());

    // At the ratio itself the disk is not full.
    usage.set(90);
    store.commit_log().disk().sample();
    let r = store.put_message(&m.draft(host));
    assert_eq!(r.status, PutMessageStatus::PutOk, "{:?}", r.detail);
    wait_dispatch(&store);
    assert_eq!(read_queue(&store, "D", 0).len(), 2);
}

/// Puts until one fails, `limit` at most; returns the bodies stored and
/// the failed put's status and detail.
fn put_until_refused(
    store: &MessageStore,
    from: usize,
    limit: usize,
) -> (Vec<Vec<u8>>, Option<(PutMessageStatus, String)>) {
    let host = store.store_host();
    let mut stored = Vec::new();
    for i in from..from + limit {
        let m = Msg::new("F", 0, body(i, 900));
        let r = store.put_message(&m.draft(host));
        if r.status != PutMessageStatus::PutOk {
            return (stored, Some((r.status, r.detail.unwrap_or_default())));
        }
        stored.push(m.body);
    }
    (stored, None)
}

#[test]
fn no_room_for_a_new_file_is_a_clean_refusal_and_writes_resume() {
    let dir = tempfile::tempdir().unwrap();
    let usage = FixedUsage::new(10);
    let store = open_with_usage(dir.path(), &usage);
    let (mut acked, refused) = put_until_refused(&store, 0, 100);
    assert!(refused.is_none());

    // The disk fills: no new file can get its blocks. Files already made
    // (the allocator's next one) still take messages.
    faults::fill_disk_under(dir.path());
    let (more, refused) = put_until_refused(&store, 1000, 1000);
    acked.extend(more);
    let (status, detail) = refused.expect("a put is refused once no file can be created");
    assert_eq!(status, PutMessageStatus::CreateMappedFileFailed);
    assert!(detail.contains("no space"), "{detail}");
    assert!(
        !store.health().is_poisoned(),
        "a full disk is not a lost write"
    );
    // Refusals repeat cleanly, and reads go on.
    let (_, again) = put_until_refused(&store, 5000, 1);
    assert_eq!(again.unwrap().0, PutMessageStatus::CreateMappedFileFailed);
    // The ConsumeQueue flush service cannot rewrite the checkpoint either
    // (it needs a new block); that keeps the old one and poisons nothing.
    std::thread::sleep(store.config().flush_interval_consume_queue + Duration::from_millis(300));
    assert!(!store.health().is_poisoned());

    // Space comes back: puts succeed again (after the short back-off).
    faults::free_disk_under(dir.path());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (ok, refused) = put_until_refused(&store, 9000 + acked.len(), 1);
        acked.extend(ok);
        match refused {
            None => break,
            Some((s, d)) => {
                assert_eq!(s, PutMessageStatus::CreateMappedFileFailed, "{d}");
                assert!(Instant::now() < deadline, "puts did not resume: {d}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    let (more, refused) = put_until_refused(&store, 20_000, 200);
    assert!(refused.is_none(), "{refused:?}");
    acked.extend(more);
    wait_dispatch(&store);
    let bodies: Vec<_> = read_queue(&store, "F", 0)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    assert_eq!(
        bodies, acked,
        "every acknowledged message is readable, in order"
    );
    assert_consistent(&store);

    // And after a restart.
    drop(store);
    let store = open_with_usage(dir.path(), &usage);
    let bodies: Vec<_> = read_queue(&store, "F", 0)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    assert_eq!(bodies, acked);
}

#[test]
fn a_store_opens_and_serves_reads_when_no_file_can_be_created() {
    let dir = tempfile::tempdir().unwrap();
    let usage = FixedUsage::new(10);
    let store = open_with_usage(dir.path(), &usage);
    let (acked, _) = put_until_refused(&store, 0, 50);
    wait_dispatch(&store);
    drop(store);
    faults::fill_disk_under(dir.path());
    usage.set(100);
    let store = open_with_usage(dir.path(), &usage);
    let bodies: Vec<_> = read_queue(&store, "F", 0)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    assert_eq!(bodies, acked);
    let r = store.put_message(&Msg::new("F", 0, body(1, 10)).draft(store.store_host()));
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    faults::free_disk_under(dir.path());
    usage.set(10);
    store.commit_log().disk().sample();
    let r = store.put_message(&Msg::new("F", 0, body(2, 10)).draft(store.store_host()));
    assert!(r.is_ok(), "{:?}", r.detail);
}

#[test]
fn disk_pressure_deletes_old_files_but_never_undispatched_ones() {
    let dir = tempfile::tempdir().unwrap();
    let usage = FixedUsage::new(10);
    let store = open_with_usage(dir.path(), &usage);
    let host = store.store_host();
    for i in 0..300 {
        assert!(
            store
                .put_message(&Msg::new("P", 0, body(i, 900)).draft(host))
                .is_ok()
        );
    }
    wait_dispatch(&store);
    // Dispatch stops here; everything after it must survive any cleanup.
    let held = store.commit_log().max_offset();
    store.set_dispatch_limit(Arc::new(move || held));
    for i in 300..600 {
        assert!(
            store
                .put_message(&Msg::new("P", 0, body(i, 900)).draft(host))
                .is_ok()
        );
    }
    let files = store.commit_log().files().file_count();
    assert!(files >= 8, "{files} files");

    // Below the forcible ratio nothing young goes.
    usage.set(80);
    assert_eq!(store.clean_now(false).unwrap(), 0);
    // Above it the oldest files go, one by one, while pressure lasts — but
    // only those dispatch has passed.
    usage.set(99);
    let deleted = store.clean_now(false).unwrap();
    assert!(deleted > 0);
    let min = store.commit_log().min_offset();
    assert!(
        min <= held,
        "a file past the dispatch position {held} was deleted (min {min})"
    );
    let size = store.config().commit_log_file_size as i64;
    assert!(
        min > held - size,
        "every dispatched file but the one holding {held} went"
    );
    // Once usage drops, deletion stops.
    usage.set(50);
    assert_eq!(store.clean_now(false).unwrap(), 0);
    assert_eq!(store.commit_log().min_offset(), min);
    // With cleanFileForciblyEnable off, pressure deletes nothing young.
    drop(store);
    let mut c = StoreConfig::for_tests(dir.path());
    c.disk_usage = FixedUsage::new(99) as Arc<dyn DiskUsageSource>;
    c.clean_file_forcibly_enable = false;
    c.disk_check_interval = Duration::from_secs(3600);
    let store = MessageStore::open(c).unwrap();
    wait_dispatch(&store);
    assert_eq!(store.clean_now(false).unwrap(), 0);
    assert_eq!(store.commit_log().min_offset(), min);
}

#[test]
fn clean_shutdown_does_not_wait_for_a_dispatch_the_full_disk_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let usage = FixedUsage::new(10);
    let store = open_with_usage(dir.path(), &usage);
    let host = store.store_host();
    store.set_dispatch_limit(Arc::new(|| 0));
    // More messages than one ConsumeQueue file holds (100 units in tests).
    let mut acked = Vec::new();
    for i in 0..150 {
        let m = Msg::new("S", 0, body(i, 100));
        assert!(store.put_message(&m.draft(host)).is_ok());
        acked.push(m.body);
    }
    faults::fill_disk_under(dir.path());
    store.set_dispatch_limit(Arc::new(|| i64::MAX));
    // Dispatch reaches the end of the first ConsumeQueue file and cannot
    // create the second.
    assert!(!store.wait_dispatched(store.commit_log().max_offset(), Duration::from_millis(500)));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(store);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("a clean shutdown finishes on a full disk");
    faults::free_disk_under(dir.path());
    let store = open_with_usage(dir.path(), &usage);
    let bodies: Vec<_> = read_queue(&store, "S", 0)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    assert_eq!(bodies, acked);
}

#[test]
fn recovery_on_a_full_disk_opens_and_keeps_queue_offsets_unique() {
    let dir = tempfile::tempdir().unwrap();
    let usage = FixedUsage::new(10);
    let store = open_with_usage(dir.path(), &usage);
    let host = store.store_host();
    store.set_dispatch_limit(Arc::new(|| 0));
    let mut acked = Vec::new();
    for i in 0..150 {
        let m = Msg::new("R", 0, body(i, 100));
        assert!(store.put_message(&m.draft(host)).is_ok());
        acked.push(m.body);
    }
    // The disk fills before any of it is dispatched; the store stops (its
    // queues end short of the log, so the abort marker stays).
    faults::fill_disk_under(dir.path());
    drop(store);
    assert!(dir.path().join("abort").exists());

    // Recovery cannot write a ConsumeQueue file, but the store opens, and a
    // new message gets the queue offset after the undispatched ones.
    let store = open_with_usage(dir.path(), &usage);
    assert!(store.recovery_report().dispatch_stopped_at.is_some());
    let m = Msg::new("R", 0, body(150, 100));
    let r = store.put_message(&m.draft(store.store_host()));
    assert!(r.is_ok(), "{:?}", r.detail);
    assert_eq!(r.append.unwrap().queue_offset, 150);
    acked.push(m.body);

    // Room again: dispatch resumes where recovery stopped.
    faults::free_disk_under(dir.path());
    wait_dispatch(&store);
    let got = read_queue(&store, "R", 0);
    let offsets: Vec<i64> = got.iter().map(|(o, _)| *o).collect();
    assert_eq!(offsets, (0..151).collect::<Vec<i64>>());
    let bodies: Vec<_> = got.into_iter().map(|(_, b)| b).collect();
    assert_eq!(bodies, acked);
    assert_consistent(&store);
}
