//! Fault injection for tests of the store on the real disk: make fsyncs of
//! files under a directory fail (a failed fsync must poison the store), or
//! block reservations fail as on a full disk (a full disk must be a clean
//! refusal). The registry lives in the I/O layer ([`basalt_disk::faults`]),
//! which checks it on every real sync and reservation; tests that can pick
//! their disk use [`basalt_disk::SimDisk`] instead.

use std::path::Path;

pub use basalt_disk::faults::{clear, fail_fsyncs_under, fill_disk_under, free_disk_under};

use crate::error::Result;

/// Called before an fsync the I/O layer does not make itself.
pub(crate) fn check_fsync(path: &Path) -> Result<()> {
    Ok(basalt_disk::faults::check_fsync(path)?)
}
