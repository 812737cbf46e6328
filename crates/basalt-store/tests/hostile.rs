//! The store's own line of defence against names and numbers that cannot be
//! right, whatever the broker above let through: puts that could not be
//! placed are refused, a record already in the log that cannot be placed is
//! passed over (and listed by the checker) without stopping dispatch, and an
//! I/O error stops dispatch at that record until it can be written, never
//! skipping it.

mod common;

use std::time::Duration;

use basalt_common::constants::property;
use basalt_common::properties;
use basalt_store::check::check_store;
use basalt_store::{MessageStore, PutMessageStatus};
use common::*;

fn wait_dispatch(store: &MessageStore) -> bool {
    store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10))
}

#[test]
fn puts_that_cannot_be_placed_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    for (topic, qid) in [
        ("../Victim", 0),
        ("a/b", 0),
        ("..", 0),
        ("", 0),
        ("T", -1),
        ("T", 2_000_000_000),
    ] {
        let m = Msg::new(topic, qid, body(1, 20));
        assert_eq!(
            store.put_message(&m.draft(host)).status,
            PutMessageStatus::MessageIllegal,
            "{topic:?}/{qid}"
        );
        assert_eq!(
            store.put_messages(&[m.draft(host)]).status,
            PutMessageStatus::MessageIllegal,
            "batch {topic:?}/{qid}"
        );
    }
    let mut forged = Msg::new("T", 0, body(2, 20));
    properties::append(&mut forged.props, property::CRC32, "0123456789");
    assert_eq!(
        store.put_message(&forged.draft(host)).status,
        PutMessageStatus::MessageIllegal
    );
    assert_eq!(store.commit_log().max_offset(), 0, "nothing was appended");
    assert!(!dir.path().join("Victim").exists());
}

#[test]
fn an_unplaceable_record_is_passed_over_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let bad_offset;
    {
        let store = open(dir.path());
        let host = store.store_host();
        assert!(
            store
                .put_message(&Msg::new("Good", 0, body(0, 100)).draft(host))
                .is_ok()
        );
        // Below the store's checks, as a replica or an older version could
        // have written it.
        let bad = Msg::new("a/../../b", 0, body(1, 100));
        bad_offset = store
            .commit_log()
            .append(&bad.draft(host))
            .unwrap()
            .wrote_offset;
        for i in 2..50 {
            assert!(
                store
                    .put_message(&Msg::new("Good", 0, body(i, 100)).draft(host))
                    .is_ok()
            );
        }
        assert!(wait_dispatch(&store), "dispatch went past the bad record");
        assert_eq!(read_queue(&store, "Good", 0).len(), 49);
        assert_eq!(store.dispatcher().unplaceable_records(), 1);
        store.shutdown();
    }
    assert!(!dir.path().join("b").exists());

    // After a crash that lost the queues, recovery re-dispatches the log
    // and passes over the same record instead of refusing to open.
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();
    std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
    {
        let store = open(dir.path());
        assert!(store.recovery_report().abnormal);
        assert_eq!(read_queue(&store, "Good", 0).len(), 49);
        store.shutdown();
    }
    let report = check_store(dir.path(), None).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.unplaceable.len(), 1, "{report}");
    assert_eq!(report.unplaceable[0].0, bad_offset);
    assert!(report.to_string().contains("unplaceable"), "{report}");
}

#[test]
fn an_io_error_stops_dispatch_at_its_record_until_it_clears() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    // A plain file where the queue's directory must go: creating the queue
    // fails with an I/O error until the file is gone.
    std::fs::create_dir_all(dir.path().join("consumequeue")).unwrap();
    let blocker = dir.path().join("consumequeue").join("Blocked");
    std::fs::write(&blocker, b"in the way").unwrap();
    assert!(
        store
            .put_message(&Msg::new("Blocked", 0, body(0, 100)).draft(host))
            .is_ok()
    );
    assert!(
        store
            .put_message(&Msg::new("Other", 0, body(1, 100)).draft(host))
            .is_ok()
    );
    assert!(
        !store.wait_dispatched(store.commit_log().max_offset(), Duration::from_millis(1500)),
        "dispatch must not pass a record it could not write"
    );
    assert!(read_queue(&store, "Other", 0).is_empty());
    std::fs::remove_file(&blocker).unwrap();
    assert!(
        wait_dispatch(&store),
        "dispatch resumes once the error clears"
    );
    assert_eq!(read_queue(&store, "Blocked", 0).len(), 1);
    assert_eq!(read_queue(&store, "Other", 0).len(), 1);
    assert_eq!(store.dispatcher().unplaceable_records(), 0);
}
