//! Errors of the ledger store.

use std::path::PathBuf;

use thiserror::Error;

/// Why a ledger store operation failed. I/O and corruption errors name the file
/// and, where it applies, the byte offset.
#[derive(Debug, Error)]
pub enum LedgerStoreError {
    #[error("{op} {path:?}: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A failed operation of the storage I/O layer (names the file).
    #[error(transparent)]
    Disk(#[from] basalt_disk::DiskError),
    #[error("corrupt ledger file {path:?} at offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("store poisoned by an earlier I/O failure; it refuses writes")]
    Poisoned,
    #[error("invalid store argument: {0}")]
    Invalid(String),
}

impl LedgerStoreError {
    /// Whether the disk (or the quota) is full: nothing was written, and the same
    /// operation succeeds once space is freed. Not a reason to poison the store.
    pub fn is_no_space(&self) -> bool {
        match self {
            LedgerStoreError::Io { source, .. } => basalt_disk::is_no_space(source),
            LedgerStoreError::Disk(basalt_disk::DiskError::NoSpace { .. }) => true,
            LedgerStoreError::Disk(basalt_disk::DiskError::Io { source, .. }) => {
                basalt_disk::is_no_space(source)
            }
            _ => false,
        }
    }
}
