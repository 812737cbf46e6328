//! Ledger store: retention purges and resets (a truncation that keeps
//! nothing), and recovery after either was interrupted.

mod common;

use basalt_ledger::core::LogRead;
use basalt_ledger::entry::{EntryHeader, EntryKind, HEADER_SIZE, place};
use basalt_ledger::store::{LedgerStore, LedgerStoreError, check_ledger_dir};
use common::*;

#[test]
fn reset_starts_the_log_at_the_leaders_position() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 5, 1);
    // The leader's log starts at index 50, position 5000 (mid-file).
    s.truncate(50, 5000).unwrap();
    assert_eq!(
        (s.begin_index(), s.end_index(), s.end_pos()),
        (-1, -1, 5000)
    );
    let b = body(50);
    let h = EntryHeader::new(EntryKind::Normal, 50, 3, 5000, &b);
    // A truncation is a sync barrier: nothing is written before it is durable.
    assert!(matches!(
        s.append(&[(h, &b)]),
        Err(LedgerStoreError::Invalid(_))
    ));
    sync(&mut s);
    s.append(&[(h, &b)]).unwrap();
    assert_eq!((s.begin_index(), s.end_index()), (50, 50));
    sync(&mut s);
    drop(s);
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(rec.cut, None);
    assert_eq!((s.begin_index(), s.end_index()), (50, 50));
    assert_eq!(&s.entry(50).unwrap().unwrap().body[..], &b[..]);
}

#[test]
fn purge_deletes_old_files_and_moves_the_begin() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 60, 1);
    s.set_committed(59);
    let reader = s.reader();
    let keep = reader.entry(10).unwrap();
    let begin = s.purge_before(3 * DATA).unwrap();
    assert!(begin > 0);
    assert_eq!(reader.begin_index(), begin);
    assert_eq!(s.entry(begin - 1).unwrap(), None);
    // A body read before the purge stays valid: the mapping lives while referenced.
    assert_eq!(&keep.body[..], &body(10)[..]);
    sync(&mut s);
    drop(s);
    let (s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(s.begin_index(), begin);
    assert_eq!(s.end_index(), 59);
}

#[test]
fn a_prepared_purge_deletes_nothing_until_its_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 60, 1);
    s.set_committed(59);
    let reader = s.reader();
    let count = |sub: &str| std::fs::read_dir(dir.path().join(sub)).unwrap().count();
    let (data_before, index_before) = (count("data"), count("index"));
    let job = s.prepare_purge(3 * DATA).unwrap();
    // The writer and the readers already start at the new first entry...
    assert!(job.begin_index > 0);
    assert_eq!(reader.begin_index(), job.begin_index);
    assert_eq!(s.begin_index(), job.begin_index);
    // ...but no file is gone before the job runs (off the runtime task).
    assert_eq!(count("data"), data_before);
    assert_eq!(count("index"), index_before);
    // The writer goes on meanwhile.
    append(&mut s, 60, 65, 1);
    let begin = job.run().unwrap();
    assert!(count("data") < data_before);
    assert_eq!(reader.begin_index(), begin);
    sync(&mut s);
    drop(s);
    let (s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(s.begin_index(), begin);
    assert_eq!(s.end_index(), 64);
}

#[test]
fn purge_never_crosses_the_committed_entry_nor_the_newest_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 60, 1);
    // Only entries ..=20 are committed: the file holding entry 21 (and every
    // later one) stays, whatever position the caller asks to purge before.
    s.set_committed(20);
    let reader = s.reader();
    let first_uncommitted = s.entry(21).unwrap().expect("entry 21").pos();
    let begin = s.purge_before(i64::MAX).unwrap();
    assert!(begin > 0, "files wholly below the commit point go");
    assert!(begin <= 21, "begin {begin} crossed the committed index 20");
    let first_kept = reader.data_files()[0].clone();
    assert!(first_kept.start <= first_uncommitted, "{first_kept:?}");
    for i in begin..=20 {
        reader
            .entry(i)
            .expect("committed entries past the begin stay readable");
    }
    // Once everything is committed, the newest file still stays.
    s.set_committed(59);
    s.purge_before(i64::MAX).unwrap();
    let files = reader.data_files();
    assert!(!files.is_empty());
    assert!(files.last().unwrap().end > s.entry(59).unwrap().unwrap().pos());
    reader.entry(59).expect("the last entry stays readable");
    assert!(reader.begin_index() <= 59);
}

/// A purge whose directory sync fails poisons the store: the directory's
/// state on disk is then unknown, and a later sync that reports success need
/// not cover the earlier removal (a power loss could bring back an older file
/// after a newer one is gone, a gap that cuts the log).
#[test]
fn a_failed_directory_sync_during_a_purge_poisons_the_store() {
    use basalt_disk::{Disk, SimDisk};
    let sim = SimDisk::new(7);
    let dir = std::path::PathBuf::from("/ledger");
    let (mut s, _) = LedgerStore::open_on(Disk::Sim(sim.handle()), opts(&dir)).unwrap();
    append(&mut s, 0, 60, 1);
    sync(&mut s);
    s.set_committed(59);
    let job = s.prepare_purge(3 * DATA).unwrap();
    assert!(job.operations() > 0);
    sim.fail_syncs_under(&dir.join("data"));
    let err = job.run().expect_err("the directory sync fails");
    assert!(err.to_string().contains("data"), "{err}");
    assert!(s.is_poisoned());
    let b = body(60);
    let pos = place(s.end_pos(), (HEADER_SIZE + b.len()) as i64, DATA).unwrap();
    let h = EntryHeader::new(EntryKind::Normal, 60, 1, pos, &b);
    assert!(matches!(
        s.append(&[(h, &b)]),
        Err(LedgerStoreError::Poisoned)
    ));
}

/// A reset (a truncation that keeps nothing) changes nothing on disk until its
/// sync, and that sync makes the checkpoint claim nothing before it removes
/// the old files; so recovery can refuse a log that ends before what the
/// checkpoint claims. The old checkpoint with the old files gone is refused.
#[test]
fn a_reset_makes_the_checkpoint_claim_nothing_before_it_removes_files() {
    use basalt_ledger::store::meta;
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 40, 1);
    sync(&mut s);
    s.set_committed(20);
    s.prepare_checkpoint(39, 20).run().unwrap();
    let claimed = meta::load_checkpoint(&basalt_disk::Disk::Real, dir.path())
        .unwrap()
        .unwrap();
    assert_eq!(claimed.end_index, 20);
    let count = |sub: &str| std::fs::read_dir(dir.path().join(sub)).unwrap().count();
    let (data_before, index_before) = (count("data"), count("index"));
    // The leader's log starts at 100, position 30 files on.
    s.reset(100, 30 * DATA + 100).unwrap();
    assert_eq!((s.begin_index(), s.end_index()), (-1, -1));
    assert_eq!((count("data"), count("index")), (data_before, index_before));
    assert_eq!(
        meta::load_checkpoint(&basalt_disk::Disk::Real, dir.path()).unwrap(),
        Some(claimed),
        "nothing on disk changes before the sync"
    );
    sync(&mut s);
    let after = meta::load_checkpoint(&basalt_disk::Disk::Real, dir.path())
        .unwrap()
        .unwrap();
    assert_eq!((after.end_index, after.committed_index), (-1, -1));
    assert_eq!((count("data"), count("index")), (0, 0));
    // The first entry after the reset gets its file with the leading blank.
    let b = body(100);
    let pos = place(30 * DATA + 100, (HEADER_SIZE + b.len()) as i64, DATA).unwrap();
    let h = EntryHeader::new(EntryKind::Normal, 100, 3, pos, &b);
    s.append(&[(h, &b)]).unwrap();
    sync(&mut s);
    drop(s);
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(rec.cut, None);
    assert_eq!((s.begin_index(), s.end_index()), (100, 100));
    assert_eq!(&s.entry(100).unwrap().unwrap().body[..], &b[..]);
    drop(s);
    // The old checkpoint back, over the reset's empty log: refused.
    let dir2 = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir2.path())).unwrap();
    append(&mut s, 0, 40, 1);
    sync(&mut s);
    s.set_committed(20);
    s.reset(100, 30 * DATA + 100).unwrap();
    sync(&mut s);
    drop(s);
    meta::store_checkpoint(&basalt_disk::Disk::Real, dir2.path(), claimed).unwrap();
    match LedgerStore::open(opts(dir2.path())) {
        Err(LedgerStoreError::Corrupt { path, reason, .. }) => {
            assert_eq!(path, dir2.path().join("data"));
            assert!(reason.contains("checkpoint's durable entry 20"), "{reason}");
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("an empty log under a checkpoint claiming entry 20 was accepted"),
    }
}

/// Regression (ledger power-loss simulator, a power loss in the middle of a
/// reset's removals, seed 361): the removal of the first index file reached
/// the disk and that of the first data file did not. Recovery refused
/// ("position 0 is before the first file") where it must rebuild the units;
/// it now recreates the missing index files before the first one.
#[test]
fn index_files_lost_before_a_kept_one_are_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 30, 1);
    sync(&mut s);
    drop(s);
    std::fs::remove_file(index_file(dir.path(), 0)).unwrap();
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!((s.begin_index(), s.end_index()), (0, 29));
    assert!(rec.index_units_fixed >= 8, "{}", rec.index_units_fixed);
    for i in 0..30 {
        assert_eq!(s.entry(i).unwrap().unwrap().body, body(i));
    }
    drop(s);
    let r = check_ledger_dir(dir.path()).unwrap();
    assert!(r.is_ok() && r.index_mismatches == 0, "{r}");
}

/// Regression (ledger power-loss soak, seed 1831): a power loss in the middle
/// of a reset's removals kept a run of the old entries from the middle of the
/// log (the first file's removal reached the disk, a later one's did not).
/// Recovery accepted it, the member led with a log missing its head, and the
/// cluster lost entries it had committed. The reset's checkpoint now names the
/// reset, and recovery removes a log that does not begin with its entry.
#[test]
fn leftovers_of_an_interrupted_reset_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 40, 1);
    sync(&mut s);
    s.reset(50, 30 * DATA + 100).unwrap();
    let job = s.prepare_sync();
    assert!(job.reset_operations() > 2);
    // The checkpoint and the first unlink only; then the power goes.
    job.run_reset_first(2).unwrap();
    drop(job);
    drop(s);
    assert!(!data_file(dir.path(), 0).exists() && data_file(dir.path(), 1).exists());
    let (s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(s.end_index(), -1, "no run of old entries is kept");
    assert_eq!(
        std::fs::read_dir(dir.path().join("data")).unwrap().count(),
        0
    );
}
