//! `StoreRepair` (`basalt store repair`): a store refused for middle
//! corruption is cut back to the prefix the operator chose, explicitly.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use basalt_store::repair::{FileCutAction, StoreRepair};
use basalt_store::{MessageStore, StoreConfig, StoreError};
use common::*;

#[derive(Debug, Clone)]
struct Written {
    phys: i64,
    end: i64,
    queue_id: i32,
    body: Vec<u8>,
}

fn populate(dir: &Path) -> Vec<Written> {
    let store = open(dir);
    let host = store.store_host();
    let mut out = Vec::new();
    for i in 0..300 {
        let q = (i % 4) as i32;
        let m = Msg::new("Rep", q, body(i, 150 + (i * 53) % 600));
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

fn commit_log_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Every file under `dir` with its content.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A store damaged in the middle of an older file (valid records and whole
/// files after it): returns what was written and the damaged record.
fn damaged_store(dir: &Path) -> (Vec<Written>, Written) {
    let written = populate(dir);
    let files = commit_log_files(dir);
    assert!(files.len() >= 3, "{} files", files.len());
    let f = &files[files.len() - 2];
    let start: i64 = f.file_name().unwrap().to_str().unwrap().parse().unwrap();
    let in_file: Vec<_> = written
        .iter()
        .filter(|w| w.phys >= start && w.end <= start + 64 * 1024)
        .collect();
    let victim = in_file[in_file.len() / 2].clone();
    let mut raw = std::fs::read(f).unwrap();
    raw[(victim.phys - start) as usize + 30] ^= 0x10; // breaks the CRC
    std::fs::write(f, raw).unwrap();
    std::fs::write(dir.join("abort"), b"").unwrap();
    (written, victim)
}

#[test]
fn refused_store_is_repaired_to_exactly_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let (written, victim) = damaged_store(dir.path());
    let cut = match MessageStore::open(StoreConfig::for_tests(dir.path())) {
        Err(StoreError::MiddleCorruption { offset, .. }) => offset,
        Err(e) => panic!("expected MiddleCorruption, got {e}"),
        Ok(_) => panic!("the damaged store must be refused"),
    };
    assert_eq!(cut, victim.phys);

    // Dry run: a plan, and not a byte changed.
    let before = snapshot(dir.path());
    let repair = StoreRepair::open(dir.path()).unwrap();
    let plan = repair.plan(cut).unwrap();
    assert_eq!(snapshot(dir.path()), before);
    let text = plan.to_string();
    assert!(text.contains(&format!("offsets ..{cut}")), "{text}");
    let files = commit_log_files(dir.path());
    let zeroed: Vec<_> = plan
        .commit_log
        .iter()
        .filter(|c| matches!(c.action, FileCutAction::ZeroFrom { .. }))
        .collect();
    let deleted = plan
        .commit_log
        .iter()
        .filter(|c| matches!(c.action, FileCutAction::Delete { .. }))
        .count();
    assert_eq!(zeroed.len(), 1);
    assert_eq!(zeroed[0].path, files[files.len() - 2]);
    assert_eq!(deleted, 1, "the newest file goes");
    let past: Vec<_> = written.iter().filter(|w| w.phys >= cut).collect();
    let units: u64 = plan.queues.iter().map(|q| q.units).sum();
    assert_eq!(
        units,
        past.len() as u64,
        "every unit at or past the cut is listed"
    );
    assert_eq!(
        plan.records_kept,
        written.iter().filter(|w| w.end <= cut).count() as u64
    );

    // Repair: the store opens with exactly the prefix.
    repair.apply(&plan).unwrap();
    drop(repair);
    let report = basalt_store::check::check_store(dir.path(), None).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.end_offset, cut);
    let store = open(dir.path());
    assert_eq!(store.commit_log().max_offset(), cut);
    assert!(store.wait_dispatched(cut, std::time::Duration::from_secs(10)));
    for q in 0..4 {
        let expect: Vec<Vec<u8>> = written
            .iter()
            .filter(|w| w.queue_id == q && w.end <= cut)
            .map(|w| w.body.clone())
            .collect();
        let got: Vec<Vec<u8>> = read_queue(&store, "Rep", q)
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        assert_eq!(got, expect, "queue {q}");
    }
    assert_consistent(&store);
    // New messages continue the queues where the prefix ends.
    let host = store.store_host();
    let a = store
        .put_message(&Msg::new("Rep", 0, body(7777, 64)).draft(host))
        .append
        .unwrap();
    assert_eq!(a.wrote_offset, cut);
    let q0 = written
        .iter()
        .filter(|w| w.queue_id == 0 && w.end <= cut)
        .count() as i64;
    assert_eq!(a.queue_offset, q0);
}

#[test]
fn repair_refuses_a_running_store_a_ledger_and_a_bad_offset() {
    let dir = tempfile::tempdir().unwrap();
    let written = populate(dir.path());
    let store = open(dir.path());
    match StoreRepair::open(dir.path()) {
        Err(StoreError::RepairRefused { reason, .. }) => {
            assert!(reason.contains("locked"), "{reason}")
        }
        other => panic!("a running store must be refused: {other:?}"),
    }
    store.shutdown();
    drop(store);

    let repair = StoreRepair::open(dir.path()).unwrap();
    let mid = &written[written.len() / 2];
    for bad in [mid.phys + 1, mid.end - 3, 0, -5, i64::MAX] {
        match repair.plan(bad) {
            Err(StoreError::RepairRefused { .. }) => {}
            other => panic!("offset {bad} is no record boundary: {other:?}"),
        }
    }
    let plan = repair.plan(mid.end).unwrap();
    assert!(!plan.is_empty());
    drop(repair);

    std::fs::create_dir(dir.path().join("dledger-n0")).unwrap();
    match StoreRepair::open(dir.path()) {
        Err(StoreError::RepairRefused { reason, .. }) => {
            assert!(reason.contains("ledger"), "{reason}")
        }
        other => panic!("a ledger-mode store must be refused: {other:?}"),
    }
}
