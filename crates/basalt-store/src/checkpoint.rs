//! StoreCheckpoint (docs/storage-format.md#checkpoint): the store times up to which the CommitLog,
//! the ConsumeQueues and the index are known to be on disk.
//!
//! The file is RocketMQ's 4096-byte layout (five i64 at offsets 0..40, rest
//! zero). Basalt adds, in the unused area, a magic at 40 and a CRC32 of bytes
//! 0..40 at 48, so a damaged checkpoint is detected; RocketMQ ignores those
//! bytes. The file is always replaced atomically.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

use crate::error::{Result, StoreError};
use crate::fs_util;

const FILE_SIZE: usize = 4096;
const MAGIC: &[u8; 8] = b"BSLTCKPT";

/// Decodes a checkpoint image into its five values, checking the CRC when
/// the Basalt magic is present. Errors give the offset and the reason.
pub fn decode(raw: &[u8]) -> Result<[i64; 5], (i64, String)> {
    if raw.len() < 40 {
        return Err((
            raw.len() as i64,
            format!("file is {} bytes, expected at least 40", raw.len()),
        ));
    }
    if raw.len() >= 52 && &raw[40..48] == MAGIC {
        let stored = u32::from_be_bytes([raw[48], raw[49], raw[50], raw[51]]);
        let computed = crc32fast::hash(&raw[..40]);
        if stored != computed {
            return Err((
                48,
                format!("CRC {stored:#010x} does not match {computed:#010x}"),
            ));
        }
    }
    let be = |a: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&raw[a..a + 8]);
        i64::from_be_bytes(b)
    };
    Ok([be(0), be(8), be(16), be(24), be(32)])
}

/// The checkpoint values. See the module documentation.

#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    physic_msg_timestamp: AtomicI64,
    logics_msg_timestamp: AtomicI64,
    index_msg_timestamp: AtomicI64,
    master_flushed_offset: AtomicI64,
    confirm_phy_offset: AtomicI64,
}

impl Checkpoint {
    /// Reads the checkpoint at `path`, or starts with zeros if there is none.
    /// A checkpoint whose CRC does not match is an error naming the file.
    pub fn load(path: &Path) -> Result<Checkpoint> {
        let cp = Checkpoint {
            path: path.to_path_buf(),
            physic_msg_timestamp: AtomicI64::new(0),
            logics_msg_timestamp: AtomicI64::new(0),
            index_msg_timestamp: AtomicI64::new(0),
            master_flushed_offset: AtomicI64::new(0),
            confirm_phy_offset: AtomicI64::new(0),
        };
        let raw = match std::fs::read(path) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cp),
            Err(e) => return Err(StoreError::io(path, e)),
        };
        let v = decode(&raw).map_err(|(offset, reason)| StoreError::Corrupt {
            what: "checkpoint",
            path: path.to_path_buf(),
            offset,
            reason,
        })?;
        cp.physic_msg_timestamp.store(v[0], Ordering::Release);
        cp.logics_msg_timestamp.store(v[1], Ordering::Release);
        cp.index_msg_timestamp.store(v[2], Ordering::Release);
        cp.master_flushed_offset.store(v[3], Ordering::Release);
        cp.confirm_phy_offset.store(v[4], Ordering::Release);
        Ok(cp)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn physic_msg_timestamp(&self) -> i64 {
        self.physic_msg_timestamp.load(Ordering::Acquire)
    }
    pub fn logics_msg_timestamp(&self) -> i64 {
        self.logics_msg_timestamp.load(Ordering::Acquire)
    }
    pub fn index_msg_timestamp(&self) -> i64 {
        self.index_msg_timestamp.load(Ordering::Acquire)
    }
    pub fn master_flushed_offset(&self) -> i64 {
        self.master_flushed_offset.load(Ordering::Acquire)
    }
    pub fn confirm_phy_offset(&self) -> i64 {
        self.confirm_phy_offset.load(Ordering::Acquire)
    }
    pub fn set_physic_msg_timestamp(&self, v: i64) {
        self.physic_msg_timestamp.fetch_max(v, Ordering::AcqRel);
    }
    pub fn set_logics_msg_timestamp(&self, v: i64) {
        self.logics_msg_timestamp.fetch_max(v, Ordering::AcqRel);
    }
    pub fn set_index_msg_timestamp(&self, v: i64) {
        self.index_msg_timestamp.fetch_max(v, Ordering::AcqRel);
    }
    pub fn set_master_flushed_offset(&self, v: i64) {
        self.master_flushed_offset.store(v, Ordering::Release);
    }
    pub fn set_confirm_phy_offset(&self, v: i64) {
        self.confirm_phy_offset.store(v, Ordering::Release);
    }

    /// The store time from which an abnormal recovery must re-dispatch: the
    /// oldest of the three timestamps (0 if any is unknown).
    pub fn min_timestamp(&self) -> i64 {
        self.physic_msg_timestamp()
            .min(self.logics_msg_timestamp())
            .min(self.index_msg_timestamp())
            .max(0)
    }

    /// The on-disk image.
    pub fn encode(&self) -> Vec<u8> {
        let mut raw = vec![0u8; FILE_SIZE];
        raw[0..8].copy_from_slice(&self.physic_msg_timestamp().to_be_bytes());
        raw[8..16].copy_from_slice(&self.logics_msg_timestamp().to_be_bytes());
        raw[16..24].copy_from_slice(&self.index_msg_timestamp().to_be_bytes());
        raw[24..32].copy_from_slice(&self.master_flushed_offset().to_be_bytes());
        raw[32..40].copy_from_slice(&self.confirm_phy_offset().to_be_bytes());
        raw[40..48].copy_from_slice(MAGIC);
        let crc = crc32fast::hash(&raw[..40]);
        raw[48..52].copy_from_slice(&crc.to_be_bytes());
        raw
    }

    /// Writes the checkpoint atomically (temp file, fsync, rename, fsync dir).
    pub fn flush(&self) -> Result<()> {
        crate::faults::check_fsync(&self.path)?;
        fs_util::atomic_write(&self.path, &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_crc_check() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let cp = Checkpoint::load(&p).unwrap();
        assert_eq!(cp.min_timestamp(), 0);
        cp.set_physic_msg_timestamp(300);
        cp.set_logics_msg_timestamp(200);
        cp.set_index_msg_timestamp(250);
        cp.flush().unwrap();
        let again = Checkpoint::load(&p).unwrap();
        assert_eq!(again.physic_msg_timestamp(), 300);
        assert_eq!(again.min_timestamp(), 200);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 4096);

        let mut raw = std::fs::read(&p).unwrap();
        raw[3] ^= 1;
        std::fs::write(&p, raw).unwrap();
        assert!(matches!(
            Checkpoint::load(&p),
            Err(StoreError::Corrupt { .. })
        ));
    }

    #[test]
    fn reads_rocketmq_checkpoint_without_crc() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let mut raw = vec![0u8; 4096];
        raw[0..8].copy_from_slice(&5i64.to_be_bytes());
        raw[8..16].copy_from_slice(&6i64.to_be_bytes());
        raw[16..24].copy_from_slice(&7i64.to_be_bytes());
        std::fs::write(&p, raw).unwrap();
        let cp = Checkpoint::load(&p).unwrap();
        assert_eq!(cp.min_timestamp(), 5);
    }
}
