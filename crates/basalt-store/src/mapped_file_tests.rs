//! Tests of [`super::MappedFile`] (kept apart to keep the module short).

use super::*;

#[test]
fn names_round_trip() {
    assert_eq!(file_name(1073741824), "00000000001073741824");
    assert_eq!(parse_file_name("00000000001073741824"), Some(1073741824));
    assert_eq!(parse_file_name("1073741824"), None);
    assert_eq!(parse_file_name("0000000000107374182x"), None);
}

#[test]
fn append_read_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mf = Arc::new(MappedFile::create(dir.path(), 4096, 8192, None).unwrap());
    assert_eq!(mf.append(b"hello"), Some(0));
    assert_eq!(mf.append(b" world"), Some(5));
    assert_eq!(mf.slice(0, 11).unwrap(), b"hello world");
    assert!(mf.slice(0, 12).is_none());
    let b = mf.bytes(6, 5).unwrap();
    assert_eq!(&b[..], b"world");
    assert_eq!(mf.flush(0).unwrap(), 11);
    assert!(mf.append(&vec![0u8; 8192]).is_none());
    assert_eq!(mf.path().file_name().unwrap(), "00000000000000004096");
}

#[test]
fn write_buffer_is_invisible_until_committed() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Arc::new(TransientStorePool::new(1, 8192));
    let mf = MappedFile::create(dir.path(), 0, 8192, Some(&pool)).unwrap();
    assert_eq!(pool.available(), 0);
    mf.append(b"abc").unwrap();
    assert_eq!(mf.wrote_position(), 3);
    assert_eq!(mf.committed_position(), 0);
    assert!(mf.slice(0, 3).is_none());
    // Less than 4 pages waiting: nothing to commit.
    assert_eq!(mf.commit(4).unwrap(), 0);
    assert_eq!(mf.commit(0).unwrap(), 3);
    assert_eq!(mf.slice(0, 3).unwrap(), b"abc");
    assert_eq!(mf.flush(0).unwrap(), 3);
    // Reopening sees the committed bytes on disk.
    let again = MappedFile::open(mf.path(), 0, 8192).unwrap();
    assert_eq!(&again.raw()[..3], b"abc");
    drop(mf);
    assert_eq!(pool.available(), 1);
}

#[test]
fn create_reserves_and_full_disk_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mf = MappedFile::create(dir.path(), 0, 8192, None).unwrap();
    assert!(mf.is_reserved());
    crate::faults::fill_disk_under(dir.path());
    let err = MappedFile::create(dir.path(), 8192, 8192, None).unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert!(!dir.path().join(file_name(8192)).exists());
    // A file found on disk is reserved lazily; on a full disk that fails
    // cleanly and the file stays as it was.
    let again = MappedFile::open(mf.path(), 0, 8192).unwrap();
    assert!(!again.is_reserved());
    crate::faults::free_disk_under(dir.path());
    again.ensure_reserved().unwrap();
    assert!(again.is_reserved());
    crate::faults::fill_disk_under(dir.path());
    assert!(MappedFile::create(dir.path(), 16384, 8192, None).is_err());
    crate::faults::free_disk_under(dir.path());
    MappedFile::create(dir.path(), 16384, 8192, None).unwrap();
}

#[test]
fn open_rejects_wrong_size() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(file_name(0));
    std::fs::write(&p, b"short").unwrap();
    assert!(matches!(
        MappedFile::open(&p, 0, 4096),
        Err(StoreError::Layout { .. })
    ));
}
