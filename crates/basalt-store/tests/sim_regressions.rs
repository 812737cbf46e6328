//! Named regression tests of store-simulator bugs 4, 5, 6, 10, 11, 12 and
//! 13 (docs/fault-model.md, "Bugs it found"). They were kept only as
//! simulator seeds, and since the replay changed (per-file sync faults, the
//! simulated clock) those seeds no longer take the paths that found them
//! (issue 12). Each test builds the situation the bug needs directly, on
//! the simulated disk or on a real temp dir, and checks the fixed
//! behaviour.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use basalt_disk::{Disk, SimDisk};
use basalt_store::consume_queue::{ConsumeQueue, CqUnit, UNIT_SIZE};
use basalt_store::mapped_file_queue::MappedFileQueue;
use basalt_store::{MessageStore, StoreConfig};
use common::*;

/// Seeds of the power losses a test tries: each unsynced name is kept or
/// lost on a coin of the disk's RNG, so a few seeds cover both outcomes.
const SEEDS: std::ops::Range<u64> = 0..12;

fn unit(p: i64) -> CqUnit {
    CqUnit {
        physical_offset: p,
        size: 100,
        tags_code: p * 7,
    }
}

/// Writes `bytes` at `at` of the real file `path` and syncs it.
fn patch(path: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, at).unwrap();
    f.sync_all().unwrap();
}

/// Bug 4 (seeds 910, 976): a CommitLog file whose creator failed before the
/// directory fsync was used by the next run as it was; records fsynced into
/// it vanished with its name at the next power loss. Loading makes the
/// names it finds durable.
#[test]
fn commit_log_names_found_at_load_survive_a_later_power_loss() {
    for seed in SEEDS {
        let sim = SimDisk::new(seed);
        let dir = PathBuf::from("/store/commitlog");
        let queue = |h| MappedFileQueue::new(&dir, 4096).with_disk(Disk::Sim(h));
        let first = queue(sim.handle());
        first.load().unwrap();
        // The creator's directory fsync fails: the name is only live.
        sim.fail_syncs_under(&dir);
        assert!(first.last_writable(0).is_err());
        sim.clear_dir_faults();
        drop(first);
        let file = dir.join(format!("{:020}", 0));
        assert!(sim.unsynced_names().contains(&file), "seed {seed}");

        // The next run (same kernel: no power loss) finds the file and
        // writes into it; the write is fsynced.
        let second = queue(sim.handle());
        second.load().unwrap();
        assert_eq!(second.file_count(), 1);
        // Recovery finds the file empty: the log ends at 0.
        second.truncate_dirty(0).unwrap();
        let f = second.last_writable(0).unwrap();
        assert_eq!(f.append(&[7u8; 1000]), Some(0));
        assert_eq!(second.flush(0).unwrap(), 1000);
        drop(f);
        drop(second);

        let after = sim.power_loss();
        let third = queue(after);
        third.load().unwrap();
        assert_eq!(third.file_count(), 1, "seed {seed}: the file survives");
        let on_device = sim.durable_contents(&file).expect("the name is durable");
        assert!(on_device[..1000].iter().all(|b| *b == 7), "seed {seed}");
    }
}

/// Bug 11 (seeds 2332, 10999): cleanup deleted several head files and
/// synced the directory once; a power loss kept some removals and lost
/// others, and the gap was refused at load. Each removal is made durable
/// before the next, so a failure or a power loss in the middle leaves a
/// suffix of the log.
#[test]
fn head_files_removed_by_cleanup_leave_a_suffix_at_a_power_loss() {
    for seed in SEEDS {
        let sim = SimDisk::new(seed);
        let dir = PathBuf::from("/store/commitlog");
        let queue = |h| MappedFileQueue::new(&dir, 4096).with_disk(Disk::Sim(h));
        let q = queue(sim.handle());
        q.load().unwrap();
        for _ in 0..4 {
            q.last_writable(0).unwrap().append(&[1u8; 4096]).unwrap();
        }
        assert_eq!(q.flush(0).unwrap(), 4 * 4096);
        assert!(sim.unsynced_names().is_empty());
        // Cleanup takes the three oldest files; the directory fsync fails.
        let victims: Vec<_> = q.files().into_iter().take(3).collect();
        sim.fail_syncs_under(&dir);
        assert!(q.remove_head(&victims, Duration::ZERO).is_err());
        sim.clear_dir_faults();
        assert!(
            sim.unsynced_names().len() <= 1,
            "seed {seed}: one removal at a time is in doubt: {:?}",
            sim.unsynced_names()
        );
        drop(victims);
        drop(q);

        let after = queue(sim.power_loss());
        after
            .load()
            .unwrap_or_else(|e| panic!("seed {seed}: a gap after the power loss: {e}"));
        let starts: Vec<i64> = after.files().iter().map(|f| f.start_offset()).collect();
        assert_eq!(starts.last(), Some(&(3 * 4096)), "seed {seed}");
        assert!(
            starts.windows(2).all(|w| w[1] == w[0] + 4096),
            "seed {seed}: {starts:?}"
        );
    }
}

/// Bug 10 (seeds 8197, 9854): recovery cut the log at the very start of a
/// CommitLog file and did not fsync that file, so the cut record stayed on
/// the device under the zeros of the page cache, and a later power loss
/// could bring it back among new records. Abnormal recovery fsyncs the file
/// its cut falls in even when the cut is at the file's start.
#[test]
fn a_cut_at_the_start_of_a_commit_log_file_is_durable() {
    let sim = SimDisk::new(8197);
    let root = Path::new("/store");
    let mut cfg = StoreConfig::for_tests(root);
    cfg.flush_disk_type = basalt_common::config::FlushDiskType::AsyncFlush;
    cfg.disk = Disk::Sim(sim.handle());
    let file_size = cfg.commit_log_file_size as i64;
    let store = MessageStore::open(cfg.clone()).unwrap();
    let host = store.store_host();
    // Records up to the first one in the second file. The checkpoint on
    // the device still says what the open wrote (nothing durable yet), so
    // every record is past the durable point.
    let mut i = 0;
    let victim = loop {
        let m = Msg::new("Cut", 0, body(i, 900));
        let a = store.put_message(&m.draft(host)).append.unwrap();
        i += 1;
        if a.wrote_offset >= file_size {
            break a;
        }
    };
    assert_eq!(victim.wrote_offset, file_size);
    // Dispatch is idle before the power loss (no writer may run during it).
    assert!(store.wait_dispatched(victim.end_offset(), Duration::from_secs(10)));
    store.flush_commit_log().unwrap();
    let second = root.join("commitlog").join(format!("{file_size:020}"));
    // The first record of the second file is damaged: the log ends at the
    // file's start.
    assert!(sim.corrupt(&second, 200, 3));
    let handle = sim.power_loss();
    store.shutdown();

    cfg.disk = Disk::Sim(handle);
    let store = MessageStore::open(cfg).unwrap();
    let report = store.recovery_report().clone();
    assert!(report.abnormal);
    assert_eq!(report.log_end, file_size, "{report:?}");
    let len = (victim.end_offset() - file_size) as usize;
    let on_device = sim.durable_contents(&second).expect("second file");
    assert!(
        on_device[..len].iter().all(|b| *b == 0),
        "the cut record is still on the device"
    );
    store.shutdown();
}

/// Bug 5 (seed 1): an index file's header (which says up to where messages
/// are indexed) reached the disk while the entries it counts did not;
/// re-dispatch skipped those messages and they could not be found by key.
/// Abnormal recovery indexes the whole re-dispatched region again.
#[test]
fn index_entries_lost_behind_a_persisted_header_are_indexed_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    for i in 0..20 {
        let m = Msg::new("Key", 0, body(i, 300));
        assert!(store.put_message(&m.draft(host)).is_ok());
    }
    let end = store.commit_log().max_offset();
    assert!(store.wait_dispatched(end, Duration::from_secs(10)));
    let key = format!("key-{}", String::from_utf8_lossy(&body(13, 300)[..12]));
    let found = store.query_message("Key", &key, 10, 0, i64::MAX);
    assert_eq!(found.messages.len(), 1);
    store.shutdown();

    // The header survives; slots and entries are lost. Then a crash.
    let index_dir = dir.path().join("index");
    let files: Vec<PathBuf> = std::fs::read_dir(&index_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let len = std::fs::metadata(&files[0]).unwrap().len() as usize;
    let header = basalt_store::index::HEADER_SIZE;
    patch(&files[0], header as u64, &vec![0u8; len - header]);
    std::fs::write(dir.path().join("abort"), b"").unwrap();

    let store = open(dir.path());
    assert!(store.recovery_report().abnormal);
    assert!(store.wait_dispatched(end, Duration::from_secs(10)));
    let found = store.query_message("Key", &key, 10, 0, i64::MAX);
    assert_eq!(found.messages.len(), 1, "the message is found by its key");
    let v = basalt_common::record::RecordView::parse(&found.messages[0], true).unwrap();
    assert_eq!(v.queue_offset, 13);
    store.shutdown();
}

/// Bug 6 (seed 5): units straddle sectors, so an unsynced unit can persist
/// half old, half new and point into the middle of a record. It passed the
/// queue's own recovery, and re-dispatch then skipped the record as a
/// repeat. Abnormal recovery cuts the units pointing into the re-dispatched
/// region and writes them again from the log.
#[test]
fn a_torn_unit_pointing_into_a_record_is_rewritten_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let host = store.store_host();
    let mut bodies = Vec::new();
    let mut last = None;
    for i in 0..9 {
        let m = Msg::new("Torn", 0, body(i, 300));
        last = store.put_message(&m.draft(host)).append;
        bodies.push((i as i64, m.body));
    }
    let last = last.unwrap();
    assert!(store.wait_dispatched(last.end_offset(), Duration::from_secs(10)));
    store.shutdown();

    // The last unit's offset is torn to a point inside its record (still
    // past the end of the unit before it, so it looks valid).
    let cq = dir
        .path()
        .join("consumequeue/Torn/0")
        .join(format!("{:020}", 0));
    let inside = last.wrote_offset + 40;
    patch(&cq, 8 * UNIT_SIZE as u64, &inside.to_be_bytes());
    std::fs::write(dir.path().join("abort"), b"").unwrap();

    let store = open(dir.path());
    assert!(store.recovery_report().abnormal);
    assert!(store.wait_dispatched(last.end_offset(), Duration::from_secs(10)));
    assert_eq!(read_queue(&store, "Torn", 0), bodies);
    assert_consistent(&store);
    store.shutdown();
}

/// Bug 12 (seed 2267): a unit torn to a physical offset below its
/// predecessor's passed as valid and lowered the queue's physical end, so
/// the abnormal recovery's cut of the re-dispatched region skipped the
/// queue. A unit pointing below the end of the one before it ends the
/// queue's used part.
#[test]
fn a_unit_torn_below_its_predecessor_ends_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 16 * UNIT_SIZE);
    cq.load().unwrap();
    for i in 0..6 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    cq.flush(0).unwrap();
    let path = cq.files().files()[0].path().to_path_buf();
    drop(cq);
    // Unit 3's offset is torn from 300 to 133, below unit 2's end (300).
    patch(&path, 3 * UNIT_SIZE as u64, &133i64.to_be_bytes());

    let cq = ConsumeQueue::new(dir.path(), "T", 0, 16 * UNIT_SIZE);
    cq.load().unwrap();
    cq.recover().unwrap();
    assert_eq!(cq.max_offset(), 3);
    assert_eq!(cq.max_physic_offset(), 300);
    // Re-dispatch from 300 writes unit 3 again.
    cq.truncate_dirty(300).unwrap();
    cq.put_unit(3, unit(300)).unwrap();
    assert_eq!(cq.unit_at(3), Some(unit(300)));
    assert_eq!(cq.max_offset(), 4);
}

/// Bug 13 (seeds 1842, 1974, 2958): a ConsumeQueue's new files are named
/// without a directory fsync (it comes with the queue's flush); a power
/// loss kept a later name and lost an earlier one, and the gap was refused
/// at load. The files after a gap are deleted and dispatched again.
#[test]
fn files_after_a_gap_in_consume_queue_names_are_deleted_and_refilled() {
    let dir = tempfile::tempdir().unwrap();
    let size = 4 * UNIT_SIZE;
    let cq = ConsumeQueue::new(dir.path(), "T", 0, size);
    cq.load().unwrap();
    for i in 0..12 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    cq.flush(0).unwrap();
    let files: Vec<PathBuf> = cq
        .files()
        .files()
        .iter()
        .map(|f| f.path().to_path_buf())
        .collect();
    assert_eq!(files.len(), 3);
    drop(cq);
    // The second file's name was lost, the third's kept.
    std::fs::remove_file(&files[1]).unwrap();

    let cq = ConsumeQueue::new(dir.path(), "T", 0, size);
    cq.load()
        .expect("a gap in a ConsumeQueue's names is not refused");
    assert!(!files[2].exists(), "the file after the gap is deleted");
    cq.recover().unwrap();
    assert_eq!(cq.max_offset(), 4);
    for i in 4..12 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    assert_eq!(cq.unit_at(9), Some(unit(900)));
    assert_eq!(cq.files().file_count(), 3);
}
