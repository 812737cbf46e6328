//! Whole-file read-only views for the offline tools (`basalt store check`,
//! `dump`, `repair`), which read store files without writing them and may
//! look at a store a broker is using.

use std::ops::Deref;
use std::path::Path;

use crate::error::{DiskError, DiskResult};

/// The bytes of one file, read-only: a shared mapping on the real disk, a
/// copy of the page cache on the simulated one. Nothing is written through it.
pub enum ReadOnlyMap {
    Mapped(memmap2::Mmap),
    Copied(Vec<u8>),
}

impl std::fmt::Debug for ReadOnlyMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadOnlyMap({} bytes)", self.len())
    }
}

impl Deref for ReadOnlyMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ReadOnlyMap::Mapped(m) => m,
            ReadOnlyMap::Copied(v) => v,
        }
    }
}

/// Maps `path` read-only (an empty file is an empty view).
pub(crate) fn map_real(path: &Path) -> DiskResult<ReadOnlyMap> {
    let f = std::fs::File::open(path).map_err(|e| DiskError::io(path, e))?;
    let len = f.metadata().map_err(|e| DiskError::io(path, e))?.len();
    if len == 0 {
        return Ok(ReadOnlyMap::Copied(Vec::new()));
    }
    // SAFETY: a read-only mapping. Another process may append to the file
    // or rewrite bytes the caller then validates (every record and unit is
    // checked before use); it is never truncated while mapped except by a
    // cleanup that deletes whole files, whose pages stay valid until unmap.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| DiskError::io(path, e))?;
    Ok(ReadOnlyMap::Mapped(map))
}
