//! Errors of the storage engine.

use std::path::PathBuf;

use basalt_common::CodecError;
use thiserror::Error;

/// Everything that can go wrong in the store. I/O and corruption errors name
/// the file and the offset.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A record or unit failed its checks in a place where later data is valid,
    /// so cutting the log there would silently drop data.
    #[error(
        "corruption in {path} at file offset {file_offset} (global offset {offset}): {reason}; \
         valid data follows at global offset {next_valid}. Refusing to truncate; inspect with `basalt store check`"
    )]
    MiddleCorruption {
        path: PathBuf,
        offset: i64,
        file_offset: usize,
        reason: String,
        next_valid: i64,
    },
    #[error("corrupt {what} in {path} at offset {offset}: {reason}")]
    Corrupt {
        what: &'static str,
        path: PathBuf,
        offset: i64,
        reason: String,
    },
    #[error("bad store layout in {path}: {reason}")]
    Layout { path: PathBuf, reason: String },
    #[error("store is poisoned after a failed fsync ({reason}); writes are refused")]
    Poisoned { reason: String },
    /// The file system had no room for a new file's blocks. Nothing was
    /// written; the store is not poisoned and writes resume once space is
    /// freed.
    #[error("no space left on the disk for {bytes} bytes of {path}: {source}")]
    NoSpace {
        path: PathBuf,
        bytes: u64,
        #[source]
        source: std::io::Error,
    },
    /// `basalt store repair` will not touch this store (see the reason).
    #[error("refusing to repair {path}: {reason}")]
    RepairRefused { path: PathBuf, reason: String },
    #[error("store directory {path} is locked by another process")]
    Locked { path: PathBuf },
    #[error("invalid store configuration: {0}")]
    Config(String),
    #[error("invalid message: {0}")]
    Codec(#[from] CodecError),
    #[error("store is shut down")]
    ShutDown,
}

impl StoreError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }
}

impl StoreError {
    /// Whether the error says the disk (or the user's quota) is full: a
    /// refusal to be retried once space is freed, not a lost write.
    pub fn is_no_space(&self) -> bool {
        match self {
            StoreError::NoSpace { .. } => true,
            StoreError::Io { source, .. } => basalt_disk::is_no_space(source),
            _ => false,
        }
    }
}

impl From<basalt_disk::DiskError> for StoreError {
    fn from(e: basalt_disk::DiskError) -> Self {
        match e {
            basalt_disk::DiskError::Io { path, source } => StoreError::Io { path, source },
            basalt_disk::DiskError::NoSpace {
                path,
                bytes,
                source,
            } => StoreError::NoSpace {
                path,
                bytes,
                source,
            },
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
