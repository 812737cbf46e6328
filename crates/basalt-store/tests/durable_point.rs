//! Recovery against the checkpoint's CommitLog durable offset: damage past
//! it is an unsynced tail that reached the disk out of order and is cut;
//! damage below it is refused; without it, the old rules stand.

mod common;

use std::path::{Path, PathBuf};

use basalt_store::checkpoint::Checkpoint;
use basalt_store::{MessageStore, StoreConfig, StoreError};
use common::*;

/// A record that was written: where, and in which queue.
#[derive(Debug, Clone)]
struct Written {
    phys: i64,
    end: i64,
    queue_id: i32,
    body: Vec<u8>,
}

/// 300 messages over several 64 KiB files, then a clean shutdown.
fn populate(dir: &Path) -> Vec<Written> {
    let store = open(dir);
    let host = store.store_host();
    let mut out = Vec::new();
    for i in 0..300 {
        let q = (i % 3) as i32;
        let m = Msg::new("Dur", q, body(i, 200 + (i * 37) % 500));
        let a = store.put_message(&m.draft(host)).append.expect("put ok");
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

fn newest_file(dir: &Path) -> (PathBuf, i64) {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    let p = v.pop().unwrap();
    let start = p.file_name().unwrap().to_str().unwrap().parse().unwrap();
    (p, start)
}

/// Zeroes the record `victim` (a lost page of the tail) and marks a crash.
fn zero_record(dir: &Path, victim: &Written) -> PathBuf {
    let (path, start) = newest_file(dir);
    let mut raw = std::fs::read(&path).unwrap();
    raw[(victim.phys - start) as usize..(victim.end - start) as usize].fill(0);
    std::fs::write(&path, raw).unwrap();
    std::fs::write(dir.join("abort"), b"").unwrap();
    path
}

/// Rewrites the checkpoint with the durable offset `durable`.
fn set_durable(dir: &Path, durable: Option<i64>) {
    let cp = Checkpoint::load(&dir.join("checkpoint")).unwrap();
    cp.reset_commit_log_durable_offset(durable);
    cp.flush().unwrap();
}

/// A victim in the newest file with at least three records after it.
fn victim_in_newest(dir: &Path, written: &[Written]) -> Written {
    let (_, start) = newest_file(dir);
    let in_last: Vec<_> = written.iter().filter(|w| w.phys >= start).collect();
    assert!(
        in_last.len() > 6,
        "the newest file holds {} records",
        in_last.len()
    );
    in_last[in_last.len() / 2].clone()
}

fn checkpoint_durable(dir: &Path) -> Option<i64> {
    Checkpoint::load(&dir.join("checkpoint"))
        .unwrap()
        .commit_log_durable_offset()
}

#[test]
fn clean_shutdown_records_the_log_end_as_durable() {
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    assert_eq!(
        checkpoint_durable(dir.path()),
        Some(written.last().unwrap().end)
    );
}

#[test]
fn zeros_then_a_valid_record_past_the_durable_point_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    let victim = victim_in_newest(dir.path(), &written);
    // The checkpoint knew only the records before the victim as fsynced.
    set_durable(dir.path(), Some(victim.phys - 1));
    zero_record(dir.path(), &victim);

    let store = open(dir.path());
    let report = store.recovery_report().clone();
    assert!(report.abnormal);
    assert!(report.cut_past_durable, "the cut is reported: {report:?}");
    assert_eq!(report.durable_offset, Some(victim.phys - 1));
    assert_eq!(report.log_end, victim.phys);
    assert!(report.cut_bytes > 0);
    assert_eq!(store.commit_log().max_offset(), victim.phys);
    assert!(store.wait_dispatched(victim.phys, std::time::Duration::from_secs(10)));
    // Exactly the prefix, queue by queue: the units of the records after the
    // cut (dispatched before the "crash") were truncated too.
    for q in 0..3 {
        let expect: Vec<Vec<u8>> = written
            .iter()
            .filter(|w| w.queue_id == q && w.end <= victim.phys)
            .map(|w| w.body.clone())
            .collect();
        let got: Vec<Vec<u8>> = read_queue(&store, "Dur", q)
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        assert_eq!(got, expect, "queue {q}");
    }
    assert_consistent(&store);
    store.shutdown();
    // The durable point restarts at the recovered end.
    assert_eq!(checkpoint_durable(dir.path()), Some(victim.phys));
    let again = open(dir.path());
    assert_eq!(again.commit_log().max_offset(), victim.phys);
}

#[test]
fn the_same_damage_inside_the_durable_point_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    let victim = victim_in_newest(dir.path(), &written);
    // The clean shutdown recorded the whole log as durable.
    let path = zero_record(dir.path(), &victim);
    match MessageStore::open(StoreConfig::for_tests(dir.path())) {
        Err(StoreError::MiddleCorruption {
            path: p,
            offset,
            next_valid,
            reason,
            ..
        }) => {
            assert_eq!(p, path);
            assert_eq!(offset, victim.phys);
            assert!(next_valid >= victim.end);
            assert!(reason.contains("inside the durable region"), "{reason}");
        }
        Err(e) => panic!("expected MiddleCorruption, got {e}"),
        Ok(_) => panic!("damage inside the durable region must be refused"),
    }
}

/// Regression (power-loss simulator, seed 0): a damaged record inside the
/// durable region with nothing valid after it was cut with only a log line,
/// losing acknowledged messages. It must be refused, naming file and offset.
#[test]
fn damage_of_the_last_durable_record_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    let last = written.last().unwrap().clone();
    let (path, start) = newest_file(dir.path());
    let mut raw = std::fs::read(&path).unwrap();
    raw[(last.phys - start) as usize + 100] ^= 0x10;
    std::fs::write(&path, raw).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();
    match MessageStore::open(StoreConfig::for_tests(dir.path())) {
        Err(StoreError::Corrupt {
            path: p,
            offset,
            reason,
            ..
        }) => {
            assert_eq!(p, path);
            assert_eq!(offset, last.phys - start);
            assert!(reason.contains("inside the durable region"), "{reason}");
        }
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("damage of durable data must be refused"),
    }
}

#[test]
fn damage_just_at_the_durable_point_is_past_it() {
    // The durable offset is exclusive: a record starting exactly there was
    // not covered by the fsync it reports.
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    let victim = victim_in_newest(dir.path(), &written);
    set_durable(dir.path(), Some(victim.phys));
    zero_record(dir.path(), &victim);
    let store = open(dir.path());
    assert!(store.recovery_report().cut_past_durable);
    assert_eq!(store.commit_log().max_offset(), victim.phys);
}

#[test]
fn without_a_durable_point_middle_damage_is_refused_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    let victim = victim_in_newest(dir.path(), &written);
    set_durable(dir.path(), None);
    let cp = Checkpoint::load(&dir.path().join("checkpoint")).unwrap();
    cp.set_crc_trailer(None);
    cp.flush().unwrap();
    let raw = std::fs::read(dir.path().join("checkpoint")).unwrap();
    assert!(
        raw[52..].iter().all(|b| *b == 0),
        "an old-format checkpoint"
    );
    zero_record(dir.path(), &victim);
    match MessageStore::open(StoreConfig::for_tests(dir.path())) {
        Err(StoreError::MiddleCorruption { offset, reason, .. }) => {
            assert_eq!(offset, victim.phys);
            assert!(!reason.contains("durable"), "{reason}");
        }
        Err(e) => panic!("expected MiddleCorruption, got {e}"),
        Ok(_) => panic!("middle damage without a durable point must be refused"),
    }
    // And a torn tail (nothing valid after) is still cut.
    let (path, start) = newest_file(dir.path());
    let mut raw = std::fs::read(&path).unwrap();
    raw[(victim.phys - start) as usize..].fill(0);
    std::fs::write(&path, raw).unwrap();
    let store = open(dir.path());
    assert_eq!(store.commit_log().max_offset(), victim.phys);
    assert!(!store.recovery_report().cut_past_durable);
    assert_eq!(store.recovery_report().durable_offset, None);
}

/// A record's damaged trailer key (a flipped bit in `__CRC32#`) made it
/// look as if written without the trailer, and it passed on its body CRC.
/// The checkpoint's CRC-trailer rule says this store wrote one: inside the
/// durable region that is refused, naming the file and the offset.
#[test]
fn a_flipped_bit_in_the_trailer_key_of_a_durable_record_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    let rule = Checkpoint::load(&dir.path().join("checkpoint"))
        .unwrap()
        .crc_trailer()
        .expect("a store writing trailers records the rule");
    assert_eq!(rule.from, 0);
    let victim = victim_in_newest(dir.path(), &written);
    let (path, start) = newest_file(dir.path());
    let mut raw = std::fs::read(&path).unwrap();
    raw[(victim.end - start) as usize - 15] ^= 0x04; // inside "__CRC32#"
    std::fs::write(&path, raw).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();
    match MessageStore::open(StoreConfig::for_tests(dir.path())) {
        Err(StoreError::MiddleCorruption {
            path: p,
            file_offset,
            reason,
            ..
        }) => {
            assert_eq!(p, path);
            assert_eq!(file_offset as i64, victim.phys - start);
            assert!(reason.contains("CRC trailer missing"), "{reason}");
        }
        Err(e) => panic!("expected MiddleCorruption, got {e}"),
        Ok(_) => panic!("a record that lost its trailer must not pass"),
    }
}

/// Regression (power-loss simulator with the index check on, seeds 63,
/// 191, 312 and more): a power loss tore the last sector of an unsynced
/// record back to zeros over its KEYS and its trailer; the record passed on
/// its body CRC, recovery kept it and indexed the zeroed keys, and the
/// index did not find it by its key. Past the durable point it is now cut.
#[test]
fn a_record_whose_trailer_was_zeroed_past_the_durable_point_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    let last = written.last().unwrap().clone();
    set_durable(dir.path(), Some(last.phys));
    let (path, start) = newest_file(dir.path());
    let mut raw = std::fs::read(&path).unwrap();
    raw[(last.end - start) as usize - 30..(last.end - start) as usize].fill(0);
    std::fs::write(&path, raw).unwrap();
    std::fs::write(dir.path().join("abort"), b"").unwrap();
    let store = open(dir.path());
    assert_eq!(store.commit_log().max_offset(), last.phys);
    assert!(
        store.recovery_report().stop.contains("CRC trailer missing"),
        "{}",
        store.recovery_report().stop
    );
}

/// Records written with the trailer off (by RocketMQ, or by Basalt with
/// `enabledAppendPropCRC` false) are not held to the rule once it is on,
/// and switching it off withdraws the rule before the first append.
#[test]
fn the_trailer_rule_covers_only_records_written_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut off = StoreConfig::for_tests(dir.path());
    off.append_prop_crc = false;
    let store = MessageStore::open(off.clone()).unwrap();
    let host = store.store_host();
    for i in 0..20 {
        let m = Msg::new("Dur", 0, body(i, 300));
        store.put_message(&m.draft(host)).append.expect("put ok");
    }
    let end_off = store.commit_log().max_offset();
    store.shutdown();
    assert_eq!(
        Checkpoint::load(&dir.path().join("checkpoint"))
            .unwrap()
            .crc_trailer(),
        None
    );
    // Trailer on: the rule starts at the log end; a crash re-scans the
    // trailer-less records and keeps them.
    let store = open(dir.path());
    let m = Msg::new("Dur", 0, body(99, 300));
    store.put_message(&m.draft(host)).append.expect("put ok");
    let end_on = store.commit_log().max_offset();
    store.shutdown();
    let rule = Checkpoint::load(&dir.path().join("checkpoint"))
        .unwrap()
        .crc_trailer()
        .unwrap();
    assert_eq!(rule.from, end_off);
    std::fs::write(dir.path().join("abort"), b"").unwrap();
    let store = open(dir.path());
    assert!(store.recovery_report().abnormal);
    assert_eq!(store.commit_log().max_offset(), end_on);
    store.shutdown();
    // Off again: the rule is gone from the checkpoint as the store opens.
    let store = MessageStore::open(off).unwrap();
    assert_eq!(store.checkpoint().crc_trailer(), None);
    assert_eq!(
        Checkpoint::load(&dir.path().join("checkpoint"))
            .unwrap()
            .crc_trailer(),
        None
    );
    store.shutdown();
}
