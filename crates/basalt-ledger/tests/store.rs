//! Ledger store: append, read, roll, truncate, recovery of torn tails, corrupt
//! middles, checkpoints, the operator check. Purges and resets are in
//! `store_purge_reset.rs`.

mod common;

use std::path::Path;

use basalt_ledger::core::LogRead;
use basalt_ledger::entry::{EntryHeader, EntryKind, HEADER_SIZE, place};
use basalt_ledger::store::{LedgerStore, LedgerStoreError, check_ledger_dir};
use common::*;

#[test]
fn append_read_roll_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(
        (s.end_index(), rec.committed_index, rec.cut.clone()),
        (-1, -1, None)
    );
    append(&mut s, 0, 60, 1);
    append(&mut s, 60, 80, 2);
    assert_eq!(s.end_index(), 79);
    assert_eq!(s.term_at(59), Some(1));
    assert_eq!(s.term_at(60), Some(2));
    // Several data files and index files were used; entries never span files.
    let n_data = std::fs::read_dir(dir.path().join("data")).unwrap().count();
    let n_index = std::fs::read_dir(dir.path().join("index")).unwrap().count();
    assert!(n_data > 3, "{n_data} data files");
    assert_eq!(n_index, 10);
    for i in 0..80 {
        let e = s.entry(i).unwrap().unwrap();
        assert_eq!(&e.body[..], &body(i)[..]);
        assert_eq!(e.pos() / DATA, (e.pos() + e.size() - 1) / DATA);
    }
    // Readers see only what is committed.
    let reader = s.reader();
    assert!(reader.entry(0).is_err());
    s.set_committed(70);
    let e = reader.entry(70).unwrap();
    assert_eq!(&e.body[..], &body(70)[..]);
    assert!(reader.entry(71).is_err());
    // Zero-copy read of the record inside an entry.
    let bytes = reader.read(e.body_pos(), e.body.len()).unwrap();
    assert_eq!(&bytes[..], &body(70)[..]);
    assert!(reader.read(reader.committed_pos() - 4, 8).is_err());
    let batch = reader.entries(65, 100, usize::MAX).unwrap();
    assert_eq!(
        batch.iter().map(|e| e.index).collect::<Vec<_>>(),
        (65..=70).collect::<Vec<_>>()
    );

    sync(&mut s);
    s.prepare_checkpoint(79, 70).run().unwrap();
    drop(s);
    drop(reader);
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(s.end_index(), 79);
    assert_eq!(rec.committed_index, 70);
    assert_eq!(rec.cut, None);
    assert_eq!(s.reader().entry(70).unwrap().body, e.body);
}

#[test]
fn truncate_keeps_a_prefix_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 40, 1);
    sync(&mut s);
    s.prepare_checkpoint(39, -1).run().unwrap();
    let e19 = s.entry(19).unwrap().unwrap();
    s.truncate(20, e19.header.end_pos()).unwrap();
    assert_eq!((s.end_index(), s.end_pos()), (19, e19.header.end_pos()));
    assert_eq!(s.term_at(20), None);
    // Different entries of term 2 follow.
    append(&mut s, 20, 25, 2);
    sync(&mut s);
    drop(s);
    // The checkpoint was lowered by the truncation: reopening does not mistake the
    // rewritten tail for damage of the durable region.
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(rec.cut, None);
    assert_eq!(s.end_index(), 24);
    assert_eq!(s.term_at(24), Some(2));
    assert_eq!(s.term_at(19), Some(1));
}

#[test]
fn torn_tails_are_cut() {
    // Each case damages the tail after the checkpointed durable end (index 29).
    type Damage = fn(&Path, &LedgerStore);
    let cases: Vec<(&str, Damage)> = vec![
        ("bad crc", |dir, s| {
            let e = s.entry(38).unwrap().unwrap();
            let f = data_file(dir, e.pos() / DATA);
            poke(&f, (e.pos() % DATA) as u64 + 50, &[0xFF]);
        }),
        ("bad magic", |dir, s| {
            let e = s.entry(38).unwrap().unwrap();
            poke(
                &data_file(dir, e.pos() / DATA),
                (e.pos() % DATA) as u64,
                &[0, 0, 0, 9],
            );
        }),
        ("bad size", |dir, s| {
            let e = s.entry(38).unwrap().unwrap();
            poke(
                &data_file(dir, e.pos() / DATA),
                (e.pos() % DATA) as u64 + 4,
                &[0, 0, 0x7F, 0],
            );
        }),
        ("short entry (zeros in the body)", |dir, s| {
            let e = s.entry(39).unwrap().unwrap();
            let f = data_file(dir, e.pos() / DATA);
            poke(&f, (e.pos() % DATA) as u64 + 48, &vec![0u8; e.body.len()]);
        }),
    ];
    for (name, damage) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
        append(&mut s, 0, 40, 1);
        sync(&mut s);
        s.prepare_checkpoint(29, 20).run().unwrap();
        let cut_index = if name.starts_with("short") { 39 } else { 38 };
        let expect_pos = s.entry(cut_index).unwrap().unwrap().pos();
        damage(dir.path(), &s);
        drop(s);
        let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
        assert_eq!(s.end_index(), cut_index - 1, "{name}");
        assert_eq!(
            rec.cut.as_ref().map(|c| c.0),
            Some(expect_pos),
            "{name}: {rec:?}"
        );
        assert_eq!(s.end_pos(), expect_pos, "{name}");
        // The cut bytes read as zeros and new entries can follow.
        drop(s);
        let report = check_ledger_dir(dir.path()).unwrap();
        assert_eq!(report.first_bad, None, "{name}: {report:?}");
        assert_eq!(report.last_index, cut_index - 1, "{name}");
        let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
        append(&mut s, cut_index, cut_index + 3, 2);
        assert_eq!(s.end_index(), cut_index + 2);
    }
}

#[test]
fn zero_tail_and_index_running_past_the_data_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 12, 1);
    sync(&mut s);
    s.prepare_checkpoint(11, 11).run().unwrap();
    // Entry 12's index unit reached the disk, its data did not.
    let unit = [
        0u8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 60, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 0,
        0, 0, 0, 1,
    ];
    let index_file = dir.path().join("index").join(format!("{:020}", INDEX));
    poke(&index_file, (12 * 32 - INDEX) as u64, &unit);
    drop(s);
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(s.end_index(), 11);
    assert_eq!(rec.cut, None);
    assert_eq!(s.term_at(12), None);
    let bytes = std::fs::read(&index_file).unwrap();
    assert!(
        bytes[(12 * 32 - INDEX) as usize..].iter().all(|b| *b == 0),
        "index unit 12 cut"
    );
}

#[test]
fn damage_in_the_durable_region_is_an_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 40, 1);
    sync(&mut s);
    s.prepare_checkpoint(39, 39).run().unwrap();
    let e = s.entry(36).unwrap().unwrap();
    let file = data_file(dir.path(), e.pos() / DATA);
    poke(&file, (e.pos() % DATA) as u64 + 60, &[0xAB, 0xCD]);
    drop(s);
    let err = match LedgerStore::open(opts(dir.path())) {
        Err(e) => e,
        Ok(_) => panic!("opening a store with a corrupt durable entry must fail"),
    };
    match &err {
        LedgerStoreError::Corrupt {
            path,
            offset,
            reason,
        } => {
            assert_eq!(path, &file);
            assert_eq!(*offset, (e.pos() % DATA) as u64);
            assert!(reason.contains("CRC"), "{reason}");
        }
        other => panic!("unexpected error {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{:020}", (e.pos() / DATA) * DATA)),
        "{msg}"
    );
    // The operator check reports the same spot without touching the files.
    let r = check_ledger_dir(dir.path()).unwrap();
    let bad = r.first_bad.clone().unwrap();
    assert_eq!((bad.path, bad.offset), (file, (e.pos() % DATA) as u64));
    assert_eq!(r.last_index, 35);
    assert_eq!(r.terms, vec![(1, 0, 36)]);
    assert!(!r.is_ok());
    let text = r.to_string();
    assert!(
        text.contains("entries:          36") && text.contains("CRC"),
        "{text}"
    );
}

#[test]
fn poisoned_store_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 2, 1);
    s.poison();
    let b = body(2);
    let h = EntryHeader::new(EntryKind::Normal, 2, 1, s.end_pos(), &b);
    assert!(matches!(
        s.append(&[(h, &b)]),
        Err(LedgerStoreError::Poisoned)
    ));
    assert!(matches!(s.truncate(1, 0), Err(LedgerStoreError::Poisoned)));
}

#[test]
fn misplaced_appends_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 1, 1);
    let b = body(5);
    let h = EntryHeader::new(EntryKind::Normal, 5, 1, s.end_pos(), &b);
    assert!(matches!(
        s.append(&[(h, &b)]),
        Err(LedgerStoreError::Invalid(_))
    ));
    let h = EntryHeader::new(EntryKind::Normal, 1, 1, s.end_pos() + 8, &b);
    assert!(matches!(
        s.append(&[(h, &b)]),
        Err(LedgerStoreError::Invalid(_))
    ));
}

#[test]
fn full_disk_refuses_an_append_before_writing_and_appends_resume() {
    use basalt_ledger::store::faults;
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 3, 1);
    faults::fill_disk_under(dir.path());
    // Append until an entry needs a file that does not exist yet.
    let mut i = 3;
    let err = loop {
        let b = body(i);
        let size = (HEADER_SIZE + b.len()) as i64;
        let pos = place(s.end_pos(), size, DATA).unwrap();
        let h = EntryHeader::new(EntryKind::Normal, i, 1, pos, &b);
        match s.append(&[(h, &b)]) {
            Ok(()) => i += 1,
            Err(e) => break e,
        }
        assert!(i < 100, "no new file was ever needed");
    };
    assert!(err.is_no_space(), "{err}");
    assert_eq!(
        s.end_index(),
        i - 1,
        "nothing of the refused entry was written"
    );
    assert!(!s.is_poisoned());
    // A file that could not get its blocks is not left behind.
    let files = std::fs::read_dir(dir.path().join("data")).unwrap().count() as i64;
    assert_eq!(files, s.end_pos() / DATA + 1);
    faults::free_disk_under(dir.path());
    append(&mut s, i, i + 20, 1);
    sync(&mut s);
    drop(s);
    let (s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(s.end_index(), i + 19);
    let r = check_ledger_dir(dir.path()).unwrap();
    assert!(r.is_ok(), "{r:?}");
}

/// Regression (ledger power-loss simulator, seed 5): a power loss kept the
/// name of a later data file and lost an earlier one; recovery refused the
/// gap. Files after a gap are an unsynced tail: removed, the log kept up to it.
#[test]
fn files_after_a_gap_are_removed_as_an_unsynced_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 60, 1);
    sync(&mut s);
    assert!(s.end_pos() > 4 * DATA, "the entries fill several files");
    drop(s);
    std::fs::remove_file(data_file(dir.path(), 2)).unwrap();
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert!(s.end_pos() <= 2 * DATA && s.end_index() < 59);
    assert!(!data_file(dir.path(), 3).exists() && !data_file(dir.path(), 4).exists());
    for i in 0..=s.end_index() {
        assert_eq!(s.entry(i).unwrap().unwrap().body, body(i));
    }
    assert_eq!(rec.committed_index, -1);
}

/// Regression (ledger power-loss simulator, seed 26): the blank that closed a
/// file survived a power loss and the entry after it did not; recovery put the
/// end after the blank, the leader placed the next entry right after the last
/// one, and the member refused every append from then on.
#[test]
fn a_trailing_blank_without_its_entry_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 60, 1);
    sync(&mut s);
    // The first entry of a file whose predecessor left room for a blank.
    let k = (1..60)
        .find(|&i| {
            let (prev, e) = (
                s.entry(i - 1).unwrap().unwrap(),
                s.entry(i).unwrap().unwrap(),
            );
            e.pos() % DATA == 0 && prev.header.end_pos() < e.pos()
        })
        .expect("an entry after a blank");
    let prev_end = s.entry(k - 1).unwrap().unwrap().header.end_pos();
    let file = s.entry(k).unwrap().unwrap().pos() / DATA;
    drop(s);
    std::fs::remove_file(data_file(dir.path(), file)).unwrap();
    let (s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!((s.end_index(), s.end_pos()), (k - 1, prev_end));
}

/// Regression (ledger power-loss simulator, seed 24): a flipped bit in the
/// index field of the first entry made every later index look like a torn
/// tail, and recovery cut the whole durable log. The checkpoint's entry must
/// be where its synced index unit says: otherwise recovery refuses. (With
/// header CRCs the flipped bit is caught at the header itself; a log written
/// without them, as DLedger writes, still relies on the checkpoint's entry.)
#[test]
fn a_bad_header_before_the_checkpoint_entry_is_refused() {
    for header_crcs in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
        append(&mut s, 0, 40, 1);
        sync(&mut s);
        s.prepare_checkpoint(39, 39).run().unwrap();
        drop(s);
        poke(&data_file(dir.path(), 0), 8, &5000i64.to_be_bytes());
        let want = if header_crcs {
            "header CRC mismatch"
        } else {
            // A DLedger log: no CRC in the header, no rule in the checkpoint.
            poke(&data_file(dir.path(), 0), 36, &[0u8; 4]);
            std::fs::write(
                dir.path().join("checkpoint"),
                "endIndex=39\ncommittedIndex=39\n",
            )
            .unwrap();
            "checkpoint's durable entry 39"
        };
        let (_, offset, reason) = open_refused(dir.path());
        assert!(reason.contains(want), "{reason}");
        // The damaged header itself, or where the checkpoint's entry should
        // have been.
        assert!(!header_crcs || offset == 0, "{offset}");
    }
}

/// Regression (found by the ledger power-loss simulator): a flipped high bit
/// of an entry's index overflowed the index-unit position (a panic in debug
/// builds). Such a header is damage: in the unsynced tail it is cut.
#[test]
fn an_out_of_range_entry_index_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 20, 1);
    sync(&mut s);
    let e = s.entry(10).unwrap().unwrap();
    drop(s);
    let bad = 10i64 | 0x4000_0000_0000_0000;
    poke(
        &data_file(dir.path(), e.pos() / DATA),
        (e.pos() % DATA) as u64 + 8,
        &bad.to_be_bytes(),
    );
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(s.end_index(), 9);
    assert!(rec.cut.is_some_and(|(_, why)| why.contains("out of range")));
}

/// Regression (ledger power-loss simulator with the checker run after every
/// restart, seed 192): `check_ledger_dir` refused a directory with index files
/// after a gap in the names (a creation a power loss kept out of order), which
/// recovery opens, treating them as an unsynced tail. The checker now lists
/// them as strays and checks the contiguous run, as recovery does; its end
/// position is right after the last entry, not after the blank that closed its
/// file (recovery cuts that blank).
#[test]
fn the_checker_reports_files_after_a_gap_as_strays() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 60, 1);
    sync(&mut s);
    drop(s);
    std::fs::remove_file(data_file(dir.path(), 2)).unwrap();
    let r = check_ledger_dir(dir.path()).expect("a gap is an unsynced tail, not an error");
    assert!(r.is_ok(), "{r}");
    assert_eq!(r.data_files, 2);
    assert!(r.stray_files.contains(&data_file(dir.path(), 3)), "{r}");
    assert!(r.to_string().contains("after a gap"), "{r}");
    // Recovery agrees: it keeps what the checker saw and removes the strays.
    let (s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!((s.end_index(), s.end_pos()), (r.last_index, r.end_pos));
}

/// A log that ends cleanly (zeros, no more files) before the checkpoint's
/// durable entry lost durable entries: recovery refuses it, naming the data
/// file and the offset where the log ends. (Before resets made the checkpoint
/// claim nothing first, a reset left exactly this behind legitimately.)
#[test]
fn a_log_ending_cleanly_before_the_checkpoint_entry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s, _) = LedgerStore::open(opts(dir.path())).unwrap();
    append(&mut s, 0, 40, 1);
    sync(&mut s);
    s.prepare_checkpoint(39, 39).run().unwrap();
    // An entry in the middle of a file, right after its predecessor.
    let k = (20..39)
        .find(|&i| {
            let (p, e) = (
                s.entry(i - 1).unwrap().unwrap(),
                s.entry(i).unwrap().unwrap(),
            );
            p.header.end_pos() == e.pos() && e.pos() % DATA != 0
        })
        .expect("an entry inside a file");
    let e = s.entry(k).unwrap().unwrap();
    let last_file = s.end_pos() / DATA;
    drop(s);
    // Entries k.. and their index units read as zeros: the log ends cleanly.
    let file = data_file(dir.path(), e.pos() / DATA);
    let off = (e.pos() % DATA) as u64;
    poke(&file, off, &vec![0u8; (DATA as u64 - off) as usize]);
    for f in e.pos() / DATA + 1..=last_file {
        std::fs::remove_file(data_file(dir.path(), f)).unwrap();
    }
    let unit = k * 32;
    poke(
        &index_file(dir.path(), unit / INDEX),
        (unit % INDEX) as u64,
        &vec![0u8; (INDEX - unit % INDEX) as usize],
    );
    for f in unit / INDEX + 1..=39 * 32 / INDEX {
        let _ = std::fs::remove_file(index_file(dir.path(), f));
    }
    let (path, offset, reason) = open_refused(dir.path());
    assert_eq!((path, offset), (file, off));
    assert!(
        reason.contains(&format!("ends after index {}", k - 1))
            && reason.contains("checkpoint's durable entry 39"),
        "{reason}"
    );
}
