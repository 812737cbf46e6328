//! Damage on disk: torn tails are cut, damage in the middle is refused, and
//! the ConsumeQueues always agree with what the CommitLog keeps.

mod common;

use std::path::{Path, PathBuf};

use basalt_common::record::RecordView;
use basalt_store::checkpoint::Checkpoint;
use basalt_store::{MessageStore, StoreConfig, StoreError};
use common::*;
use rand::{Rng, SeedableRng, rngs::StdRng};

/// A record that was written: where, and what.
#[derive(Debug, Clone)]
struct Written {
    phys: i64,
    end: i64,
    queue_id: i32,
    body: Vec<u8>,
}

/// Writes messages over several 64 KiB files and shuts down cleanly.
fn populate(dir: &Path, rng: &mut StdRng) -> Vec<Written> {
    let store = open(dir);
    let host = store.store_host();
    let mut out = Vec::new();
    for i in 0..400 {
        let q = rng.random_range(0..4);
        let m = Msg::new("Dmg", q, body(i, rng.random_range(50..900)));
        let r = store.put_message(&m.draft(host));
        let a = r.append.expect("put ok");
        out.push(Written {
            phys: a.wrote_offset,
            end: a.end_offset(),
            queue_id: q,
            body: m.body,
        });
    }
    store.shutdown();
    out
}

fn commit_log_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn file_start(p: &Path) -> i64 {
    p.file_name().unwrap().to_str().unwrap().parse().unwrap()
}

/// Reopens (optionally as after a crash) and checks that exactly the records
/// ending at or before `cut` survived, per queue and in order.
fn reopen_and_expect_prefix(
    dir: &Path,
    written: &[Written],
    cut: i64,
    abnormal: bool,
) -> std::sync::Arc<MessageStore> {
    if abnormal {
        std::fs::write(dir.join("abort"), b"1").unwrap();
    }
    let survivors: Vec<&Written> = written.iter().filter(|w| w.end <= cut).collect();
    // The log ends after the last whole record, or at the start of the file
    // the cut is in when no record of that file survived.
    let cut_file_start = cut - cut % (64 * 1024);
    let expect_end = survivors
        .last()
        .map(|w| w.end)
        .unwrap_or(0)
        .max(cut_file_start);
    // The damage stands for a tail that was not fsynced yet: the durable
    // point lies before it. (Damage inside the durable point is refused;
    // see durable_point.rs.)
    let cp = Checkpoint::load(&dir.join("checkpoint")).unwrap();
    cp.reset_commit_log_durable_offset(Some(expect_end));
    cp.flush().unwrap();
    let store = open(dir);
    if abnormal {
        assert!(store.recovery_report().abnormal);
    }
    assert_eq!(store.commit_log().max_offset(), expect_end, "log end");
    assert!(store.wait_dispatched(
        store.commit_log().max_offset(),
        std::time::Duration::from_secs(10)
    ));
    for q in 0..4 {
        let expect: Vec<Vec<u8>> = survivors
            .iter()
            .filter(|w| w.queue_id == q)
            .map(|w| w.body.clone())
            .collect();
        let got: Vec<Vec<u8>> = read_queue(&store, "Dmg", q)
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        assert_eq!(
            got.len(),
            expect.len(),
            "queue {q} length after cut at {cut}"
        );
        assert_eq!(got, expect, "queue {q} content after cut at {cut}");
    }
    assert_consistent(&store);
    // New writes continue at the cut with the right queue offsets.
    let host = store.store_host();
    let r = store.put_message(&Msg::new("Dmg", 0, body(9999, 64)).draft(host));
    let expect_q0 = survivors.iter().filter(|w| w.queue_id == 0).count() as i64;
    assert_eq!(r.append.unwrap().queue_offset, expect_q0);
    store
}

fn last_file_data_range(written: &[Written], last_start: i64) -> (i64, i64) {
    let in_last: Vec<_> = written.iter().filter(|w| w.phys >= last_start).collect();
    (in_last.first().unwrap().phys, in_last.last().unwrap().end)
}

#[test]
fn truncated_file_at_random_byte_is_cut_cleanly() {
    for seed in 0..8u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let written = populate(dir.path(), &mut rng);
        let files = commit_log_files(dir.path());
        let last = files.last().unwrap();
        let start = file_start(last);
        let (lo, hi) = last_file_data_range(&written, start);
        let cut = rng.random_range(lo..=hi);
        let f = std::fs::OpenOptions::new().write(true).open(last).unwrap();
        f.set_len((cut - start) as u64).unwrap();
        drop(f);
        let abnormal = seed % 2 == 1;
        let store = reopen_and_expect_prefix(dir.path(), &written, cut, abnormal);
        drop(store);
    }
}

#[test]
fn zeroed_tail_is_cut_cleanly() {
    for seed in 10..18u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let written = populate(dir.path(), &mut rng);
        let files = commit_log_files(dir.path());
        let last = files.last().unwrap();
        let start = file_start(last);
        let (lo, hi) = last_file_data_range(&written, start);
        let cut = rng.random_range(lo..hi);
        let mut raw = std::fs::read(last).unwrap();
        raw[(cut - start) as usize..].fill(0);
        std::fs::write(last, raw).unwrap();
        reopen_and_expect_prefix(dir.path(), &written, cut, seed % 2 == 0);
    }
}

#[test]
fn flipped_byte_in_last_record_cuts_only_that_record() {
    for seed in 20..28u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let written = populate(dir.path(), &mut rng);
        let files = commit_log_files(dir.path());
        let last = files.last().unwrap();
        let start = file_start(last);
        let victim = written.last().unwrap();
        let mut raw = std::fs::read(last).unwrap();
        let at = rng.random_range(victim.phys..victim.end) - start;
        raw[at as usize] ^= 1 << rng.random_range(0..8);
        std::fs::write(last, raw).unwrap();
        reopen_and_expect_prefix(dir.path(), &written, victim.phys, seed % 2 == 0);
    }
}

#[test]
fn damage_in_the_middle_is_refused_with_file_and_offset() {
    for seed in 30..36u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let written = populate(dir.path(), &mut rng);
        let files = commit_log_files(dir.path());
        // A record in the newest file with valid records after it.
        let last = files.last().unwrap();
        let start = file_start(last);
        let in_last: Vec<_> = written.iter().filter(|w| w.phys >= start).collect();
        assert!(in_last.len() > 3);
        let victim = in_last[rng.random_range(0..in_last.len() - 2)];
        let mut raw = std::fs::read(last).unwrap();
        // Damage the body (CRC) or the magic.
        let at = if seed % 2 == 0 {
            victim.phys - start + 4
        } else {
            victim.end - start - 5
        };
        raw[at as usize] ^= 0x40;
        std::fs::write(last, raw).unwrap();
        if seed % 3 == 0 {
            std::fs::write(dir.path().join("abort"), b"1").unwrap();
        }
        match MessageStore::open(StoreConfig::for_tests(dir.path())) {
            Err(StoreError::MiddleCorruption {
                path,
                offset,
                next_valid,
                ..
            }) => {
                assert_eq!(&path, last);
                assert_eq!(offset, victim.phys);
                assert!(next_valid > victim.phys);
                let msg = StoreError::MiddleCorruption {
                    path: path.clone(),
                    offset,
                    file_offset: (offset - start) as usize,
                    reason: "x".into(),
                    next_valid,
                }
                .to_string();
                assert!(
                    msg.contains(&path.display().to_string()) && msg.contains(&offset.to_string())
                );
            }
            Err(e) => panic!("expected MiddleCorruption, got {e}"),
            Ok(_) => panic!("a store damaged in the middle must not open"),
        }
        // The files are untouched: nothing was cut.
        assert_eq!(std::fs::metadata(last).unwrap().len(), 64 * 1024);
        let report = basalt_store::check::check_store(dir.path(), None).unwrap();
        assert!(!report.is_ok());
        assert_eq!(report.first_bad.as_ref().unwrap().0, victim.phys);
        assert!(report.valid_after_bad.is_some());
    }
}

#[test]
fn damaged_consume_queue_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(99);
    let written = populate(dir.path(), &mut rng);
    // Zero the middle of one ConsumeQueue file (a torn page).
    let qdir = dir.path().join("consumequeue").join("Dmg").join("1");
    let mut files: Vec<_> = std::fs::read_dir(&qdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut raw = std::fs::read(&files[0]).unwrap();
    raw[200..400].fill(0);
    std::fs::write(&files[0], raw).unwrap();
    let end = written.last().unwrap().end;
    let store = reopen_and_expect_prefix(dir.path(), &written, end, false);
    // Cutting units after a clean shutdown forces a full re-dispatch.
    assert!(store.recovery_report().abnormal);
    assert!(store.recovery_report().consume_queue_units_dropped > 0);
}

#[test]
fn check_reports_a_clean_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let written = populate(dir.path(), &mut rng);
    let report = basalt_store::check::check_store(dir.path(), None).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.records, written.len() as u64);
    assert_eq!(report.end_offset, written.last().unwrap().end);
    assert_eq!(report.topics["Dmg"].records, written.len() as u64);
    assert!(report.consume_queue_units >= written.len() as u64);
    let mut lines = Vec::new();
    basalt_store::check::dump_store(dir.path(), None, None, 5, |l| lines.push(l.clone())).unwrap();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0].offset, 0);
    let first_file = std::fs::read(dir.path().join("commitlog/00000000000000000000")).unwrap();
    let v = RecordView::parse(&first_file, true).unwrap();
    assert_eq!(lines[0].body_size, v.body.len());
}
