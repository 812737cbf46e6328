//! MessageStore behaviour: puts, pulls, rolls, batches, recovery, flush
//! modes, poisoning, cleanup, lookups.

mod common;

use std::time::Duration;

use basalt_common::config::FlushDiskType;
use basalt_common::record::RecordView;
use basalt_store::{
    BoundaryType, GetMessageRequest, GetMessageStatus, MessageFilter, MessageStore,
    PutMessageStatus, StoreConfig,
};
use common::*;

fn wait_dispatch(store: &MessageStore) {
    assert!(store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10)));
}

#[test]
fn put_and_pull_across_file_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    let mut expected: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 4];
    for i in 0..600 {
        let q = (i % 4) as i32;
        let m = Msg::new("TopicA", q, body(i, 300 + (i * 37) % 700));
        let r = store.put_message(&m.draft(host));
        assert_eq!(r.status, PutMessageStatus::PutOk, "{:?}", r.detail);
        let a = r.append.unwrap();
        assert_eq!(a.queue_offset, expected[q as usize].len() as i64);
        expected[q as usize].push(m.body);
    }
    assert!(
        store.commit_log().files().file_count() > 4,
        "several 64 KiB files"
    );
    wait_dispatch(&store);
    for q in 0..4 {
        let got = read_queue(&store, "TopicA", q);
        let bodies: Vec<_> = got.iter().map(|(_, b)| b.clone()).collect();
        assert_eq!(bodies, expected[q as usize]);
        for (i, (qo, _)) in got.iter().enumerate() {
            assert_eq!(*qo, i as i64);
        }
    }
    assert_consistent(&store);
}

#[test]
fn batch_gets_consecutive_offsets_in_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    let msgs: Vec<Msg> = (0..10).map(|i| Msg::new("B", 1, body(i, 200))).collect();
    let drafts: Vec<_> = msgs.iter().map(|m| m.draft(host)).collect();
    let r = store.put_messages(&drafts);
    assert!(r.is_ok());
    let a = r.append.unwrap();
    assert_eq!(a.msg_count, 10);
    assert_eq!(a.batch_offsets.len(), 10);
    let r2 = store.put_messages(&drafts);
    assert_eq!(r2.append.unwrap().queue_offset, 10);
    wait_dispatch(&store);
    let got = read_queue(&store, "B", 1);
    assert_eq!(got.len(), 20);
    // Mixed topics in one batch are refused.
    let other = Msg::new("C", 1, body(0, 10));
    let bad = [msgs[0].draft(host), other.draft(host)];
    assert_eq!(
        store.put_messages(&bad).status,
        PutMessageStatus::MessageIllegal
    );
}

#[test]
fn limits_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    let big = Msg::new("T", 0, vec![1; 17 * 1024]);
    assert_eq!(
        store.put_message(&big.draft(host)).status,
        PutMessageStatus::MessageIllegal
    );
    let mut props = Msg::new("T", 0, vec![1; 10]);
    props.props = vec![b'a'; 40_000];
    assert_eq!(
        store.put_message(&props.draft(host)).status,
        PutMessageStatus::PropertiesSizeExceeded
    );
}

#[test]
fn clean_restart_keeps_everything_and_continues_offsets() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        let host = store.store_host();
        for i in 0..300 {
            assert!(
                store
                    .put_message(&Msg::new("R", (i % 3) as i32, body(i, 500)).draft(host))
                    .is_ok()
            );
        }
        store.shutdown();
        assert!(!dir.path().join("abort").exists());
    }
    let store = open(dir.path());
    assert!(!store.recovery_report().abnormal);
    let host = store.store_host();
    let r = store.put_message(&Msg::new("R", 0, body(999, 50)).draft(host));
    assert_eq!(r.append.unwrap().queue_offset, 100);
    wait_dispatch(&store);
    assert_eq!(read_queue(&store, "R", 0).len(), 101);
    assert_consistent(&store);
}

#[test]
fn abnormal_restart_rebuilds_lost_consume_queues() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        let host = store.store_host();
        for i in 0..400 {
            assert!(
                store
                    .put_message(&Msg::new("X", (i % 5) as i32, body(i, 400)).draft(host))
                    .is_ok()
            );
        }
        store.shutdown();
    }
    // Pretend the last run crashed before its ConsumeQueues reached disk.
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    std::fs::write(dir.path().join("abort"), b"1").unwrap();
    std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
    let store = open(dir.path());
    assert!(store.recovery_report().abnormal);
    for q in 0..5 {
        assert_eq!(read_queue(&store, "X", q).len(), 80);
    }
    assert_consistent(&store);
}

#[test]
fn sync_flush_acknowledges_after_fsync_with_many_writers() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::for_tests(dir.path());
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    let store = MessageStore::open(cfg).unwrap();
    let host = store.store_host();
    std::thread::scope(|s| {
        for t in 0..16 {
            let store = &store;
            s.spawn(move || {
                for i in 0..50 {
                    let m = Msg::new("S", t % 4, body(i, 256));
                    let mut r = store.put_message(&m.draft(host));
                    store.wait_durable_blocking(&mut r, true);
                    assert_eq!(r.status, PutMessageStatus::PutOk);
                    let end = r.append.unwrap().end_offset();
                    assert!(store.commit_log().flushed_offset() >= end);
                }
            });
        }
    });
    wait_dispatch(&store);
    let total: usize = (0..4).map(|q| read_queue(&store, "S", q).len()).sum();
    assert_eq!(total, 800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_flush_async_wait() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::for_tests(dir.path());
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    let store = MessageStore::open(cfg).unwrap();
    let host = store.store_host();
    let mut tasks = Vec::new();
    for i in 0..64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let m = Msg::new("AS", 0, body(i, 128));
            store.put_message_durable(&m.draft(host), true).await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().status, PutMessageStatus::PutOk);
    }
}

#[test]
fn transient_store_pool_mode_commits_then_serves() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut cfg = StoreConfig::for_tests(dir.path());
        cfg.transient_store_pool_enable = true;
        cfg.transient_store_pool_size = 3;
        cfg.commit_interval_commit_log = Duration::from_millis(10);
        let store = MessageStore::open(cfg).unwrap();
        let host = store.store_host();
        for i in 0..500 {
            assert!(
                store
                    .put_message(&Msg::new("P", (i % 2) as i32, body(i, 500)).draft(host))
                    .is_ok()
            );
        }
        let end = store.commit_log().max_wrote_offset();
        assert!(
            store.wait_dispatched(end, Duration::from_secs(10)),
            "commit makes data readable"
        );
        assert_eq!(read_queue(&store, "P", 0).len(), 250);
        store.shutdown();
    }
    let store = open(dir.path());
    assert_eq!(read_queue(&store, "P", 1).len(), 250);
    assert_consistent(&store);
}

#[test]
fn failed_fsync_poisons_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::for_tests(dir.path());
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    cfg.sync_flush_timeout = Duration::from_secs(5);
    let store = MessageStore::open(cfg).unwrap();
    let host = store.store_host();
    let m = Msg::new("F", 0, body(1, 100));
    let mut ok = store.put_message(&m.draft(host));
    store.wait_durable_blocking(&mut ok, true);
    assert_eq!(ok.status, PutMessageStatus::PutOk);

    basalt_store::faults::fail_fsyncs_under(dir.path());
    let mut r = store.put_message(&m.draft(host));
    store.wait_durable_blocking(&mut r, true);
    assert_eq!(
        r.status,
        PutMessageStatus::ServiceNotAvailable,
        "fsync failure is never acknowledged"
    );
    assert!(store.health().is_poisoned());
    // Later writes are refused outright, even after the disk "recovers".
    basalt_store::faults::clear(dir.path());
    let r = store.put_message(&m.draft(host));
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    assert!(r.detail.unwrap().contains("poisoned"));
    store.shutdown();
    // The abort file stays so the next start recovers fully.
    assert!(dir.path().join("abort").exists());
}

#[test]
fn query_by_key_and_unique_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    for i in 0..50 {
        let mut m = Msg::new("Q", 0, body(i, 64));
        let mut p = basalt_common::properties::Properties::new();
        p.set("KEYS", format!("order-{} shared", i % 10));
        p.set("UNIQ_KEY", format!("UNIQ{i:04}"));
        m.props = p.encode();
        assert!(store.put_message(&m.draft(host)).is_ok());
    }
    wait_dispatch(&store);
    let r = store.query_message("Q", "order-3", 100, 0, i64::MAX);
    assert_eq!(r.messages.len(), 5);
    let r = store.query_message("Q", "UNIQ0042", 100, 0, i64::MAX);
    assert_eq!(r.messages.len(), 1);
    let v = RecordView::parse(&r.messages[0], true).unwrap();
    assert_eq!(v.queue_offset, 42);
    assert_eq!(
        store
            .query_message("Q", "shared", 7, 0, i64::MAX)
            .messages
            .len(),
        7
    );
    assert!(
        store
            .query_message("Other", "order-3", 100, 0, i64::MAX)
            .messages
            .is_empty()
    );
    // VIEW_MESSAGE_BY_ID path.
    let rec = store.look_message_by_offset(v.physical_offset).unwrap();
    assert_eq!(&rec[..], &r.messages[0][..]);
}

struct TagFilter(i64);
impl MessageFilter for TagFilter {
    fn matches_tags_code(&self, t: i64) -> bool {
        t == self.0
    }
}

#[test]
fn pull_statuses_and_tag_filter() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    let req = |offset| GetMessageRequest {
        topic: "G",
        queue_id: 0,
        offset,
        max_msgs: 32,
        max_bytes: None,
        correct_offsets: true,
    };
    assert_eq!(
        store.get_message(&req(0), None).status,
        GetMessageStatus::NoMatchedLogicQueue
    );
    for i in 0..10 {
        let mut m = Msg::new("G", 0, body(i, 64));
        let mut p = basalt_common::properties::Properties::new();
        p.set("TAGS", if i % 2 == 0 { "even" } else { "odd" });
        m.props = p.encode();
        assert!(store.put_message(&m.draft(host)).is_ok());
    }
    wait_dispatch(&store);
    let r = store.get_message(&req(10), None);
    assert_eq!(r.status, GetMessageStatus::OffsetOverflowOne);
    assert_eq!(r.next_begin_offset, 10);
    let r = store.get_message(&req(15), None);
    assert_eq!(r.status, GetMessageStatus::OffsetOverflowBadly);
    assert_eq!(
        r.next_begin_offset, 0,
        "min is 0 so the correction goes to min"
    );
    let even = basalt_common::hash::java_string_hash("even") as i64;
    let r = store.get_message(&req(0), Some(&TagFilter(even)));
    assert_eq!(r.status, GetMessageStatus::Found);
    assert_eq!(r.messages.len(), 5);
    assert_eq!(r.next_begin_offset, 10);
    let none = basalt_common::hash::java_string_hash("none") as i64;
    let r = store.get_message(&req(0), Some(&TagFilter(none)));
    assert_eq!(r.status, GetMessageStatus::NoMatchedMessage);
    assert_eq!(r.next_begin_offset, 10);
    // max_msgs
    let mut small = req(0);
    small.max_msgs = 3;
    let r = store.get_message(&small, None);
    assert_eq!(r.messages.len(), 3);
    assert_eq!(r.next_begin_offset, 3);
}

#[test]
fn search_offset_by_store_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    let mut times = Vec::new();
    for i in 0..6 {
        let r = store.put_message(&Msg::new("TS", 0, body(i, 32)).draft(host));
        times.push(r.append.unwrap().store_timestamp);
        std::thread::sleep(Duration::from_millis(3));
    }
    wait_dispatch(&store);
    assert_eq!(
        store.offset_in_queue_by_time("TS", 0, times[3], BoundaryType::Lower),
        3
    );
    assert_eq!(
        store.offset_in_queue_by_time("TS", 0, times[3], BoundaryType::Upper),
        3
    );
    assert_eq!(
        store.offset_in_queue_by_time("TS", 0, times[3] + 1, BoundaryType::Lower),
        4
    );
    assert_eq!(
        store.offset_in_queue_by_time("TS", 0, times[3] + 1, BoundaryType::Upper),
        3
    );
    assert_eq!(
        store.offset_in_queue_by_time("TS", 0, 0, BoundaryType::Lower),
        0
    );
    assert_eq!(
        store.offset_in_queue_by_time("TS", 0, i64::MAX, BoundaryType::Lower),
        6
    );
    assert_eq!(store.earliest_message_time("TS", 0), Some(times[0]));
}

#[test]
fn cleanup_deletes_old_files_and_moves_min_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    for i in 0..800 {
        assert!(
            store
                .put_message(&Msg::new("C", (i % 2) as i32, body(i, 400)).draft(host))
                .is_ok()
        );
    }
    wait_dispatch(&store);
    let files_before = store.commit_log().files().file_count();
    assert!(files_before >= 5);
    let deleted = store.clean_now(true).unwrap();
    assert_eq!(
        deleted,
        files_before.min(11) - 1,
        "all but the newest (at most 10 per round)"
    );
    let min = store.commit_log().min_offset();
    assert!(min > 0);
    let qmin = store.min_offset_in_queue("C", 0);
    assert!(qmin > 0);
    let r = store.get_message(
        &GetMessageRequest {
            topic: "C",
            queue_id: 0,
            offset: 0,
            max_msgs: 32,
            max_bytes: None,
            correct_offsets: true,
        },
        None,
    );
    assert_eq!(r.status, GetMessageStatus::OffsetTooSmall);
    assert_eq!(r.next_begin_offset, qmin);
    // What remains is consistent and readable, also after a restart.
    assert_consistent(&store);
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.min_offset_in_queue("C", 0), qmin);
    assert_consistent(&store);
}

#[test]
fn second_open_of_a_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _a = open(dir.path());
    let b = MessageStore::open(StoreConfig::for_tests(dir.path()));
    assert!(matches!(b, Err(basalt_store::StoreError::Locked { .. })));
}

/// A log read from elsewhere (ledger mode's ledger), fixed offsets.
struct ElsewhereLog;

impl basalt_store::MessageLog for ElsewhereLog {
    fn min_offset(&self) -> i64 {
        4096
    }
    fn max_offset(&self) -> i64 {
        9000
    }
    fn read_bytes(&self, _offset: i64, _size: usize) -> Option<bytes::Bytes> {
        None
    }
    fn roll_next_file(&self, offset: i64) -> i64 {
        offset + 1
    }
}

#[test]
fn stats_report_the_log_records_are_read_from() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    let r = store.put_message(&Msg::new("TopicA", 0, body(1, 100)).draft(host));
    assert_eq!(r.status, PutMessageStatus::PutOk);
    let local_end = store.commit_log().max_offset();
    assert!(local_end > 0);
    assert_eq!(store.stats().commit_log_max_offset, local_end);
    assert!(!store.has_external_log());
    drop(store);

    let store = MessageStore::open_with_source(
        StoreConfig::for_tests(dir.path()),
        Default::default(),
        basalt_store::MessageSource::External(std::sync::Arc::new(ElsewhereLog)),
    )
    .unwrap();
    let s = store.stats();
    assert_eq!(
        (
            s.commit_log_min_offset,
            s.commit_log_max_offset,
            s.commit_log_flushed_offset
        ),
        (4096, 9000, 9000),
        "ledger mode reports the ledger's offsets, not the unused CommitLog's"
    );
}

/// With an external log the store runs no CommitLog service: nothing
/// dispatches (or complains about) the local CommitLog, puts are refused,
/// and reads go to the external log.
#[test]
fn a_store_over_an_external_log_runs_no_commit_log_service() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open_with_source(
        StoreConfig::for_tests(dir.path()),
        Default::default(),
        basalt_store::MessageSource::External(std::sync::Arc::new(ElsewhereLog)),
    )
    .unwrap();
    assert!(store.has_external_log());
    assert!(store.dispatch_service().is_none());
    assert!(!store.wait_dispatched(0, Duration::from_secs(5)));
    assert_eq!(store.clean_now(true).unwrap(), 0);
    let host = store.store_host();
    let r = store.put_message(&Msg::new("TopicA", 0, body(1, 100)).draft(host));
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    assert_eq!(store.log().max_offset(), 9000);
    assert!(
        !dir.path()
            .join("commitlog")
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(false),
        "no CommitLog file is prepared for an external log"
    );
    store.shutdown();
    assert!(!dir.path().join("abort").exists(), "a clean shutdown");
}
