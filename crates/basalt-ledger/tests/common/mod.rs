//! Fixtures shared by the ledger store's test files: small files (so that
//! entries roll over files quickly), deterministic bodies, appends and
//! on-disk damage.
#![allow(dead_code)]

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use basalt_ledger::core::LogRead;
use basalt_ledger::entry::{EntryHeader, EntryKind, HEADER_SIZE, place};
use basalt_ledger::store::{LedgerStore, LedgerStoreError, StoreOptions};

pub const DATA: i64 = 1024;
pub const INDEX: i64 = 32 * 8;

pub fn opts(dir: &Path) -> StoreOptions {
    StoreOptions {
        dir: dir.to_path_buf(),
        data_file_size: DATA,
        index_file_size: INDEX,
    }
}

pub fn body(i: i64) -> Vec<u8> {
    let len = 10 + (i * 37 % 150) as usize;
    (0..len).map(|k| (i as usize * 7 + k) as u8).collect()
}

/// Appends entries `from..to` of term `term`.
pub fn append(store: &mut LedgerStore, from: i64, to: i64, term: i64) {
    for i in from..to {
        let b = body(i);
        let size = (HEADER_SIZE + b.len()) as i64;
        let pos = place(store.end_pos(), size, DATA).unwrap();
        let h = EntryHeader::new(EntryKind::Normal, i, term, pos, &b);
        store.append(&[(h, &b)]).unwrap();
    }
}

pub fn sync(store: &mut LedgerStore) {
    store.prepare_sync().run().unwrap();
}

pub fn data_file(dir: &Path, k: i64) -> PathBuf {
    dir.join("data").join(format!("{:020}", k * DATA))
}

pub fn poke(path: &Path, offset: u64, bytes: &[u8]) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
    f.sync_all().unwrap();
}

pub fn index_file(dir: &Path, k: i64) -> PathBuf {
    dir.join("index").join(format!("{:020}", k * INDEX))
}

/// Where opening the store in `dir` found damage it refuses: the file, the
/// offset in it and the reason. Panics if the store opens, or fails in
/// another way.
pub fn open_refused(dir: &Path) -> (PathBuf, u64, String) {
    match LedgerStore::open(opts(dir)) {
        Err(LedgerStoreError::Corrupt {
            path,
            offset,
            reason,
        }) => (path, offset, reason),
        Err(e) => panic!("expected damage to be refused, got another error: {e}"),
        Ok((s, _)) => panic!(
            "expected damage to be refused; recovery kept {} entries",
            s.end_index() + 1
        ),
    }
}
