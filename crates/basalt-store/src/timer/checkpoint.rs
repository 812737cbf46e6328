//! The timer checkpoint, `{root}/config/timercheck`
//! (docs/storage-format.md#timer-checkpoint): how far the TimerLog is on
//! disk, how far the timer topic's queue was enqueued into it, and how far
//! delivery has progressed. 48 bytes, replaced atomically, checked on read.
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 0 | 8 | magic `BSLTTMCK` |
//! | 8 | 8 | TimerLog position: every entry below it is on disk |
//! | 16 | 8 | next timer-queue offset to enqueue (the one after the entry ending there) |
//! | 24 | 8 | read time: every slot before it is delivered |
//! | 32 | 8 | reserved, 0 |
//! | 40 | 4 | CRC32 of bytes 0..40 |
//! | 44 | 4 | reserved, 0 |

use std::path::Path;

use basalt_disk::Disk;

use crate::error::{Result, StoreError};

const MAGIC: &[u8; 8] = b"BSLTTMCK";
const FILE_SIZE: usize = 48;

/// See the module documentation. Written only after the TimerLog was
/// fsynced up to `log_end` and the copies of every slot before `read_ms`
/// were durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerCheckpoint {
    pub log_end: i64,
    pub enqueue_next: i64,
    pub read_ms: i64,
}

impl TimerCheckpoint {
    pub fn encode(&self) -> [u8; FILE_SIZE] {
        let mut b = [0u8; FILE_SIZE];
        b[0..8].copy_from_slice(MAGIC);
        b[8..16].copy_from_slice(&self.log_end.to_be_bytes());
        b[16..24].copy_from_slice(&self.enqueue_next.to_be_bytes());
        b[24..32].copy_from_slice(&self.read_ms.to_be_bytes());
        let crc = crc32fast::hash(&b[..40]);
        b[40..44].copy_from_slice(&crc.to_be_bytes());
        b
    }

    /// Decodes a checkpoint image; the error gives the offset and reason.
    pub fn decode(b: &[u8]) -> std::result::Result<TimerCheckpoint, (i64, String)> {
        if b.len() != FILE_SIZE {
            return Err((
                0,
                format!("file is {} bytes, expected {FILE_SIZE}", b.len()),
            ));
        }
        if &b[0..8] != MAGIC {
            return Err((0, "bad magic".into()));
        }
        let stored = u32::from_be_bytes([b[40], b[41], b[42], b[43]]);
        let computed = crc32fast::hash(&b[..40]);
        if stored != computed {
            return Err((
                40,
                format!("CRC {stored:#010x} does not match {computed:#010x}"),
            ));
        }
        let at = |a: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[a..a + 8]);
            i64::from_be_bytes(x)
        };
        let c = TimerCheckpoint {
            log_end: at(8),
            enqueue_next: at(16),
            read_ms: at(24),
        };
        if c.log_end < 0 || c.enqueue_next < 0 || c.read_ms < 0 {
            return Err((8, format!("negative value in {c:?}")));
        }
        Ok(c)
    }

    /// Reads the checkpoint: `Ok(None)` when there is none, an error naming
    /// the file when it is damaged.
    pub fn load(path: &Path) -> Result<Option<TimerCheckpoint>> {
        Self::load_on(&Disk::Real, path)
    }

    /// [`TimerCheckpoint::load`] from `disk`.
    pub fn load_on(disk: &Disk, path: &Path) -> Result<Option<TimerCheckpoint>> {
        let Some(raw) = disk.read_file(path)? else {
            return Ok(None);
        };
        TimerCheckpoint::decode(&raw)
            .map(Some)
            .map_err(|(offset, reason)| StoreError::Corrupt {
                what: "timer checkpoint",
                path: path.to_path_buf(),
                offset,
                reason,
            })
    }

    /// Replaces the file atomically (temp file, fsync, rename, fsync dir).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.save_on(&Disk::Real, path)
    }

    /// [`TimerCheckpoint::save`] on `disk`.
    pub fn save_on(&self, disk: &Disk, path: &Path) -> Result<()> {
        if disk.is_real() {
            crate::faults::check_fsync(path)?;
        }
        if let Some(dir) = path.parent() {
            disk.create_dir_all_durable(dir)?;
        }
        Ok(disk.atomic_replace(path, &self.encode())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config").join("timercheck");
        assert_eq!(TimerCheckpoint::load(&p).unwrap(), None);
        let c = TimerCheckpoint {
            log_end: 480,
            enqueue_next: 10,
            read_ms: 1_700_000_000_000,
        };
        c.save(&p).unwrap();
        assert_eq!(TimerCheckpoint::load(&p).unwrap(), Some(c));
        let mut raw = std::fs::read(&p).unwrap();
        raw[20] ^= 1;
        std::fs::write(&p, &raw).unwrap();
        let e = TimerCheckpoint::load(&p).unwrap_err().to_string();
        assert!(e.contains("timercheck") && e.contains("CRC"), "{e}");
    }
}
