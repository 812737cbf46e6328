//! Tests of [`super::MappedFileQueue`] (kept apart to keep the module short).

use super::*;

fn queue(dir: &Path, size: usize) -> MappedFileQueue {
    let q = MappedFileQueue::new(dir, size);
    q.load().unwrap();
    q
}

#[test]
fn offsets_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let q = queue(dir.path(), 4096);
    for i in 0..3 {
        let f = q.last_writable(0).unwrap();
        assert_eq!(f.start_offset(), i * 4096);
        f.append(&vec![1u8; 4096]).unwrap();
    }
    assert_eq!(q.file_count(), 3);
    assert_eq!(q.max_offset(), 3 * 4096);
    assert_eq!(q.find_by_offset(5000).unwrap().start_offset(), 4096);
    assert!(q.find_by_offset(3 * 4096).is_none());
    assert_eq!(q.flush(0).unwrap(), 3 * 4096);
}

#[test]
fn truncate_deletes_later_files_and_zeroes_tail() {
    let dir = tempfile::tempdir().unwrap();
    let q = queue(dir.path(), 4096);
    for _ in 0..3 {
        q.last_writable(0)
            .unwrap()
            .append(&vec![7u8; 4096])
            .unwrap();
    }
    q.truncate_dirty(5000).unwrap();
    assert_eq!(q.file_count(), 2);
    assert_eq!(q.max_offset(), 5000);
    let f = q.last().unwrap();
    assert!(f.raw()[5000 - 4096..].iter().all(|b| *b == 0));
    assert!(f.raw()[..5000 - 4096].iter().all(|b| *b == 7));
    // Reload sees two contiguous files.
    drop(q);
    let q = queue(dir.path(), 4096);
    assert_eq!(q.file_count(), 2);
}

#[test]
fn load_rejects_gaps_and_bad_sizes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("00000000000000000000"), vec![0u8; 4096]).unwrap();
    std::fs::write(dir.path().join("00000000000000008192"), vec![0u8; 4096]).unwrap();
    let q = MappedFileQueue::new(dir.path(), 4096);
    assert!(matches!(q.load(), Err(StoreError::Layout { .. })));
    std::fs::remove_file(dir.path().join("00000000000000008192")).unwrap();
    // A short file in the middle is an error; the last one is extended.
    std::fs::write(dir.path().join("00000000000000000000"), vec![0u8; 100]).unwrap();
    std::fs::write(dir.path().join("00000000000000004096"), vec![0u8; 100]).unwrap();
    assert!(matches!(q.load(), Err(StoreError::Layout { .. })));
    std::fs::write(dir.path().join("00000000000000000000"), vec![0u8; 4096]).unwrap();
    q.load().unwrap();
    assert_eq!(q.file_count(), 2);
}

#[test]
fn allocator_prepares_next_file() {
    let dir = tempfile::tempdir().unwrap();
    let q = Arc::new(queue(dir.path(), 4096));
    q.start_allocator(true);
    q.last_writable(0)
        .unwrap()
        .append(&vec![1u8; 4096])
        .unwrap();
    // Wait (bounded) for the allocator to prepare file 4096.
    for _ in 0..200 {
        if dir.path().join("00000000000000004096").exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let f = q.last_writable(0).unwrap();
    assert_eq!(f.start_offset(), 4096);
    q.shutdown();
    // The file prepared for 8192 but never used is gone.
    assert!(!dir.path().join("00000000000000008192").exists());
}

#[test]
fn delete_expired_keeps_tail() {
    let dir = tempfile::tempdir().unwrap();
    let q = queue(dir.path(), 4096);
    for _ in 0..3 {
        q.last_writable(0)
            .unwrap()
            .append(&vec![1u8; 4096])
            .unwrap();
    }
    let n = q
        .delete_expired_by_time(Duration::ZERO, true, 10, Duration::ZERO, i64::MAX)
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(q.file_count(), 1);
    assert_eq!(q.min_offset(), 8192);
}

/// Regression (power-loss simulator, seed 64): cleanup deleted the file
/// holding the flush position before it was flushed, and every later flush
/// stopped there: nothing was fsynced again, a clean shutdown included.
#[test]
fn flush_continues_after_the_file_it_stood_in_was_deleted() {
    let disk = basalt_disk::SimDisk::new(64);
    let q = MappedFileQueue::new("/s/q", 4096).with_disk(Disk::Sim(disk.handle()));
    q.load().unwrap();
    q.last_writable(0).unwrap().append(&[1u8; 4096]).unwrap();
    q.last_writable(0).unwrap().append(&[2u8; 100]).unwrap();
    let deleted = q
        .delete_expired_by_time(Duration::ZERO, true, 10, Duration::ZERO, i64::MAX)
        .unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(q.flush(0).unwrap(), 4096 + 100);
    drop(q);
    disk.power_loss();
    let kept = disk
        .durable_contents(Path::new("/s/q/00000000000000004096"))
        .expect("the second file survives");
    assert_eq!(&kept[..100], &[2u8; 100][..]);
}
