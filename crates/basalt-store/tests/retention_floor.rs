//! Retention floors: the cleanup keeps every CommitLog file holding a record
//! a holder (the broker's timers, delay levels, transaction checks) still
//! needs, under disk pressure too; only a full disk with nothing else to
//! delete goes past the floor, after the holder was told what it loses.

mod common;

use std::sync::Arc;
use std::time::Duration;

use basalt_store::disk_space::{DiskUsageSource, FixedUsage};
use basalt_store::retention::RetentionFloor;
use basalt_store::{MessageStore, StoreConfig};
use common::*;
use parking_lot::Mutex;

/// A holder with a settable floor that records what it was told.
struct Holder {
    floor: Mutex<Option<i64>>,
    told: Mutex<Vec<(i64, i64)>>,
}

impl RetentionFloor for Holder {
    fn name(&self) -> &'static str {
        "test"
    }
    fn floor(&self) -> Option<i64> {
        *self.floor.lock()
    }
    fn dropping(&self, from: i64, to: i64) -> u64 {
        self.told.lock().push((from, to));
        let f = self.floor.lock().expect("told only while holding");
        // One message lost; the floor moves to the next file.
        *self.floor.lock() = Some(f.max(to));
        1
    }
}

fn open(dir: &std::path::Path, usage: &Arc<FixedUsage>) -> Arc<MessageStore> {
    let mut c = StoreConfig::for_tests(dir);
    c.disk_usage = Arc::clone(usage) as Arc<dyn DiskUsageSource>;
    c.disk_space_warning_level_ratio = 90;
    c.disk_check_interval = Duration::from_secs(3600);
    c.clean_resource_interval = Duration::from_secs(3600);
    MessageStore::open(c).expect("open store")
}

#[test]
fn forced_cleanup_stops_at_the_floor_until_the_disk_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let usage = FixedUsage::new(10);
    let store = open(dir.path(), &usage);
    let host = store.store_host();
    let mut floor = 0;
    for i in 0..600 {
        let r = store.put_message(&Msg::new("P", 0, body(i, 900)).draft(host));
        let a = r.append.expect("stored");
        if i == 200 {
            floor = a.wrote_offset;
        }
    }
    assert!(store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10)));
    let holder = Arc::new(Holder {
        floor: Mutex::new(Some(floor)),
        told: Mutex::new(Vec::new()),
    });
    store.commit_log().retention().register(holder.clone());
    let size = store.config().commit_log_file_size as i64;

    // Above the forcible ratio, below the warning ratio: files before the
    // floor go, the one holding it stays.
    usage.set(87);
    let deleted = store.clean_now(false).unwrap();
    assert!(deleted > 0, "files before the floor go");
    let min = store.commit_log().min_offset();
    println!("floor {floor}: cleanup at 87% kept the log from {min}");
    assert!(
        min <= floor,
        "the file holding the floor {floor} went (min {min})"
    );
    assert!(min > floor - size, "a file wholly before the floor stayed");
    assert!(holder.told.lock().is_empty());
    assert_eq!(store.clean_now(false).unwrap(), 0);
    assert_eq!(store.commit_log().retention().dropped(), 0);

    // Full (sends refused) and nothing else to delete: the file holding the
    // floor goes, the holder is told first, the loss is counted.
    usage.set(95);
    store.commit_log().disk().sample();
    assert!(store.commit_log().disk().is_full());
    let deleted = store.clean_now(false).unwrap();
    let told = holder.told.lock().clone();
    println!("at 95%: {deleted} deleted, holder told {told:?}");
    assert_eq!(deleted, 1, "one file at a time past the floor");
    assert_eq!(told, vec![(min, min + size)]);
    assert_eq!(store.commit_log().min_offset(), min + size);
    assert_eq!(store.commit_log().retention().dropped(), 1);

    // Without a floor the ordinary forced cleanup goes on as before.
    *holder.floor.lock() = None;
    usage.set(87);
    assert!(store.clean_now(false).unwrap() > 0);
    assert_eq!(store.commit_log().retention().dropped(), 1);
}

#[test]
fn expired_files_wait_for_the_floor_too() {
    let dir = tempfile::tempdir().unwrap();
    let usage = FixedUsage::new(10);
    let store = open(dir.path(), &usage);
    let host = store.store_host();
    let mut floor = 0;
    for i in 0..400 {
        let a = store
            .put_message(&Msg::new("E", 0, body(i, 900)).draft(host))
            .append
            .expect("stored");
        if i == 150 {
            floor = a.wrote_offset;
        }
    }
    assert!(store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10)));
    store.commit_log().retention().register(Arc::new(Holder {
        floor: Mutex::new(Some(floor)),
        told: Mutex::new(Vec::new()),
    }));
    // An operator's forced cleanup (every file counts as expired) stops at
    // the floor as well.
    store.clean_now(true).unwrap();
    let min = store.commit_log().min_offset();
    println!("floor {floor}: forced clean kept the log from {min}");
    assert!(min <= floor && min > floor - store.config().commit_log_file_size as i64);
    assert_eq!(store.commit_log().retention().dropped(), 0);
}
