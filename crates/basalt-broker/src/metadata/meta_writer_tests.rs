use super::*;
use crate::metadata::journal::JournalFile;
use std::sync::atomic::{AtomicU64, Ordering};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn writer_coalesces_and_reports_progress() {
    let dir = tempfile::tempdir().unwrap();
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = Arc::clone(&counter);
    let w = MetadataWriter::start(ConfigFile::new(dir.path(), "m.json"), move || {
        c.load(std::sync::atomic::Ordering::SeqCst).to_string()
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut last = 0;
    for i in 1..=100 {
        counter.store(i, std::sync::atomic::Ordering::SeqCst);
        last = w.mark_changed();
    }
    rt.block_on(w.written(last)).unwrap();
    let text = std::fs::read_to_string(w.path()).unwrap();
    assert_eq!(text, "100");
    w.stop();
}

#[test]
fn writer_reports_a_failed_write() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file's parent should be: every write fails.
    std::fs::write(dir.path().join("config"), b"not a directory").unwrap();
    let w = MetadataWriter::start(ConfigFile::new(dir.path(), "m.json"), || "x".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let g = w.mark_changed();
    let err = rt.block_on(w.written(g)).unwrap_err();
    assert!(err.contains("m.json"), "{err}");
    assert!(w.flush_now().is_err());
    w.stop();
}

/// A journaled writer appends bursts of changes as frames, writes the
/// snapshot only when asked (or past the bound), and empties the journal
/// when it does.
#[test]
fn journaled_writer_appends_then_compacts() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(dir.path(), "j.json");
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    let jpath = dir.path().join("config/j.json.journal");
    let (journal, _) = JournalFile::open(&jpath).unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&counter);
    let w = MetadataWriter::start_journaled(file.clone(), journal, 0, move || {
        c.load(Ordering::SeqCst).to_string()
    });
    let mut last = 0;
    for i in 1..=200u64 {
        counter.store(i, Ordering::SeqCst);
        last = w.record_change(i.to_le_bytes().to_vec());
    }
    block_on(w.written(last)).unwrap();
    assert!(!file.path().exists(), "no snapshot before compaction");
    let (_, entries) = JournalFile::open(&jpath).unwrap();
    let seen: Vec<u64> = entries
        .iter()
        .map(|(_, e)| u64::from_le_bytes(e.as_slice().try_into().unwrap()))
        .collect();
    assert_eq!(seen, (1..=200).collect::<Vec<_>>(), "every entry, in order");
    w.flush_now().unwrap();
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "200");
    assert_eq!(std::fs::metadata(&jpath).unwrap().len(), 0);
    // A change the journal cannot describe is written as a snapshot.
    counter.store(7, Ordering::SeqCst);
    let g = w.mark_changed();
    block_on(w.written(g)).unwrap();
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "7");
    w.stop();
}

/// Past its bound the journal is folded into the snapshot by the thread.
#[test]
fn journal_past_its_bound_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(dir.path(), "b.json");
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    let jpath = dir.path().join("config/b.json.journal");
    let (journal, _) = JournalFile::open(&jpath).unwrap();
    let w = MetadataWriter::start_journaled(file.clone(), journal, 0, || "snap".into());
    let big = vec![7u8; (JOURNAL_MIN_BOUND / 2) as usize];
    for _ in 0..2 {
        let g = w.record_change(big.clone());
        block_on(w.written(g)).unwrap();
    }
    assert!(std::fs::metadata(&jpath).unwrap().len() >= JOURNAL_MIN_BOUND);
    let g = w.record_change(b"small".to_vec());
    block_on(w.written(g)).unwrap();
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "snap");
    assert_eq!(std::fs::metadata(&jpath).unwrap().len(), 0);
    w.stop();
}
