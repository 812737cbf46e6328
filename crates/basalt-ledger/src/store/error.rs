//! Errors of the ledger store.

use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why a store operation failed. I/O and corruption errors name the file and,
/// where it applies, the byte offset.
#[derive(Debug, Error)]
pub enum StoreError {
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

pub(crate) fn io_err(path: &Path, op: &'static str, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}
