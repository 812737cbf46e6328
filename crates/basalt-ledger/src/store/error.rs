//! Errors of the ledger store.

use std::path::{Path, PathBuf};

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
        matches!(
            self,
            LedgerStoreError::Io { source, .. }
                if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        )
    }
}

pub(crate) fn io_err(path: &Path, op: &'static str, source: std::io::Error) -> LedgerStoreError {
    LedgerStoreError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}
