//! The one error type of the I/O layer.

use std::path::{Path, PathBuf};

use thiserror::Error;

/// A failed disk operation. Always names the file (or directory) it was on.
#[derive(Debug, Error)]
pub enum DiskError {
    /// Any I/O failure (EIO from a failed fsync included).
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file system had no room for `bytes` bytes of `path`.
    #[error("no space left on the disk for {bytes} bytes of {path}: {source}")]
    NoSpace {
        path: PathBuf,
        bytes: u64,
        #[source]
        source: std::io::Error,
    },
}

impl DiskError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DiskError::Io {
            path: path.into(),
            source,
        }
    }

    /// An I/O error on `path`, or [`DiskError::NoSpace`] when it says the
    /// disk or the quota is full.
    pub fn io_or_no_space(path: &Path, bytes: u64, source: std::io::Error) -> Self {
        if is_no_space(&source) {
            DiskError::NoSpace {
                path: path.to_path_buf(),
                bytes,
                source,
            }
        } else {
            DiskError::io(path, source)
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            DiskError::Io { path, .. } | DiskError::NoSpace { path, .. } => path,
        }
    }

    /// Whether the error is "not found".
    pub fn is_not_found(&self) -> bool {
        matches!(self, DiskError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    pub(crate) fn eio(path: &Path) -> Self {
        DiskError::io(path, std::io::Error::from_raw_os_error(libc::EIO))
    }

    pub(crate) fn not_found(path: &Path) -> Self {
        DiskError::io(path, std::io::Error::from(std::io::ErrorKind::NotFound))
    }

    pub(crate) fn no_space(path: &Path, bytes: u64) -> Self {
        DiskError::NoSpace {
            path: path.to_path_buf(),
            bytes,
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        }
    }
}

/// Whether an I/O error means the disk or the quota is full.
pub fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Results of the I/O layer.
pub type DiskResult<T> = std::result::Result<T, DiskError>;
