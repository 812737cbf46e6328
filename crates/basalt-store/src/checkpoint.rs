//! StoreCheckpoint (docs/storage-format.md#checkpoint): the store times up to which the CommitLog,
//! the ConsumeQueues and the index are known to be on disk, and the CommitLog
//! offset up to which it is known to be fsynced (its durable point).
//!
//! The file is RocketMQ's 4096-byte layout (five i64 at offsets 0..40, rest
//! zero). Basalt adds, in the unused area, a magic at 40 and a CRC32 of bytes
//! 0..40 at 48, so a damaged checkpoint is detected; and an extension: a second
//! magic at 56, the CommitLog durable offset at 64 and a CRC32 of bytes 0..72
//! at 72. RocketMQ ignores everything past 40, older Basalt everything past
//! 52; a checkpoint without the extension has an unknown durable point. A
//! third extension, the CRC-trailer rule ([`TrailerRule`]), sits at 80..120
//! under its own magic and a CRC32 of bytes 0..116. The file is always
//! replaced atomically.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

use basalt_disk::Disk;
use parking_lot::Mutex;

use crate::error::{Result, StoreError};

const FILE_SIZE: usize = 4096;
const MAGIC: &[u8; 8] = b"BSLTCKPT";
/// Magic of the durable-offset extension (bytes 56..64).
const DURABLE_MAGIC: &[u8; 8] = b"BSLTDURA";
/// The durable offset (i64) and the CRC32 over 0..72 that covers it.
const DURABLE_AT: usize = 64;
const DURABLE_CRC_AT: usize = 72;
/// In memory: the durable point is not known.
const UNKNOWN: i64 = -1;
/// Magic of the CRC-trailer extension (bytes 80..88), then the offset (88),
/// the store host as 16 IPv6 bytes (96, IPv4 mapped) and port (112, u16),
/// and a CRC32 over 0..116 at 116.
const TRAILER_MAGIC: &[u8; 8] = b"BSLTTRLR";
const TRAILER_FROM_AT: usize = 88;
const TRAILER_HOST_AT: usize = 96;
const TRAILER_PORT_AT: usize = 112;
const TRAILER_CRC_AT: usize = 116;

/// What the checkpoint knows of the records the store wrote with the
/// whole-record CRC trailer: every record at or past `from` whose
/// STOREHOST has the IP of `store_host` was appended by this store with
/// `enabledAppendPropCRC` on, so it must end with a trailer. Records a
/// slave copied from its master carry the master's host and are not
/// covered. The record format has no flag for "written with a trailer";
/// without this rule a record whose trailer key took a flipped bit, or whose
/// trailer a torn sector zeroed, reads as one written without it and passes
/// on its body CRC alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrailerRule {
    pub from: i64,
    pub store_host: SocketAddr,
}

/// A decoded checkpoint image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointImage {
    /// physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp,
    /// masterFlushedOffset, confirmPhyOffset (RocketMQ's order).
    pub values: [i64; 5],
    /// The CommitLog offset below which every byte was fsynced when the
    /// checkpoint was written; `None` when the file has no extension.
    pub commit_log_durable_offset: Option<i64>,
    /// The CRC-trailer rule; `None` when the file has no such extension.
    pub crc_trailer: Option<TrailerRule>,
}

fn read_u32(raw: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]])
}

fn read_i64(raw: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&raw[at..at + 8]);
    i64::from_be_bytes(b)
}

/// Decodes a checkpoint image, checking each CRC whose magic is present.
/// Errors give the offset and the reason.
pub fn decode(raw: &[u8]) -> Result<CheckpointImage, (i64, String)> {
    if raw.len() < 40 {
        return Err((
            raw.len() as i64,
            format!("file is {} bytes, expected at least 40", raw.len()),
        ));
    }
    if raw.len() >= 52 && &raw[40..48] == MAGIC {
        let stored = read_u32(raw, 48);
        let computed = crc32fast::hash(&raw[..40]);
        if stored != computed {
            return Err((
                48,
                format!("CRC {stored:#010x} does not match {computed:#010x}"),
            ));
        }
    }
    let mut commit_log_durable_offset = None;
    if raw.len() >= DURABLE_CRC_AT + 4 && &raw[56..64] == DURABLE_MAGIC {
        let stored = read_u32(raw, DURABLE_CRC_AT);
        let computed = crc32fast::hash(&raw[..DURABLE_CRC_AT]);
        if stored != computed {
            return Err((
                DURABLE_CRC_AT as i64,
                format!("durable-offset CRC {stored:#010x} does not match {computed:#010x}"),
            ));
        }
        let offset = read_i64(raw, DURABLE_AT);
        if offset < 0 {
            return Err((
                DURABLE_AT as i64,
                format!("negative CommitLog durable offset {offset}"),
            ));
        }
        commit_log_durable_offset = Some(offset);
    }
    let values = [0, 8, 16, 24, 32].map(|a| read_i64(raw, a));
    Ok(CheckpointImage {
        values,
        commit_log_durable_offset,
        crc_trailer: decode_trailer_rule(raw)?,
    })
}

fn decode_trailer_rule(raw: &[u8]) -> Result<Option<TrailerRule>, (i64, String)> {
    if raw.len() < TRAILER_CRC_AT + 4 || &raw[80..88] != TRAILER_MAGIC {
        return Ok(None);
    }
    let stored = read_u32(raw, TRAILER_CRC_AT);
    let computed = crc32fast::hash(&raw[..TRAILER_CRC_AT]);
    if stored != computed {
        return Err((
            TRAILER_CRC_AT as i64,
            format!("CRC-trailer rule CRC {stored:#010x} does not match {computed:#010x}"),
        ));
    }
    let from = read_i64(raw, TRAILER_FROM_AT);
    if from < 0 {
        return Err((
            TRAILER_FROM_AT as i64,
            format!("negative CRC-trailer offset {from}"),
        ));
    }
    let mut ip = [0u8; 16];
    ip.copy_from_slice(&raw[TRAILER_HOST_AT..TRAILER_HOST_AT + 16]);
    let ip = Ipv6Addr::from(ip);
    let ip = ip
        .to_ipv4_mapped()
        .map(IpAddr::V4)
        .unwrap_or(IpAddr::V6(ip));
    let port = u16::from_be_bytes([raw[TRAILER_PORT_AT], raw[TRAILER_PORT_AT + 1]]);
    Ok(Some(TrailerRule {
        from,
        store_host: SocketAddr::new(ip, port),
    }))
}

fn encode_trailer_rule(raw: &mut [u8], rule: &TrailerRule) {
    raw[80..88].copy_from_slice(TRAILER_MAGIC);
    raw[TRAILER_FROM_AT..TRAILER_FROM_AT + 8].copy_from_slice(&rule.from.to_be_bytes());
    let ip = match rule.store_host.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    raw[TRAILER_HOST_AT..TRAILER_HOST_AT + 16].copy_from_slice(&ip.octets());
    raw[TRAILER_PORT_AT..TRAILER_PORT_AT + 2]
        .copy_from_slice(&rule.store_host.port().to_be_bytes());
    let crc = crc32fast::hash(&raw[..TRAILER_CRC_AT]);
    raw[TRAILER_CRC_AT..TRAILER_CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// The checkpoint values. See the module documentation. The durable offset
/// never claims more than was fsynced: the flush service raises it only
/// after the CommitLog fsync it reports has returned.
#[derive(Debug)]
pub struct Checkpoint {
    disk: Disk,
    path: PathBuf,
    physic_msg_timestamp: AtomicI64,
    logics_msg_timestamp: AtomicI64,
    index_msg_timestamp: AtomicI64,
    master_flushed_offset: AtomicI64,
    confirm_phy_offset: AtomicI64,
    /// [`UNKNOWN`] or the CommitLog durable offset.
    commit_log_durable_offset: AtomicI64,
    /// The CRC-trailer rule (set at open, read by each write).
    crc_trailer: Mutex<Option<TrailerRule>>,
}

impl Checkpoint {
    /// Reads the checkpoint at `path`, or starts with zeros (and an unknown
    /// durable point) if there is none. A checkpoint whose CRC does not
    /// match is an error naming the file.
    pub fn load(path: &Path) -> Result<Checkpoint> {
        Self::load_on(&Disk::Real, path)
    }

    /// [`Checkpoint::load`] from `disk`; flushes go to the same disk.
    pub fn load_on(disk: &Disk, path: &Path) -> Result<Checkpoint> {
        let cp = Checkpoint {
            disk: disk.clone(),
            path: path.to_path_buf(),
            physic_msg_timestamp: AtomicI64::new(0),
            logics_msg_timestamp: AtomicI64::new(0),
            index_msg_timestamp: AtomicI64::new(0),
            master_flushed_offset: AtomicI64::new(0),
            confirm_phy_offset: AtomicI64::new(0),
            commit_log_durable_offset: AtomicI64::new(UNKNOWN),
            crc_trailer: Mutex::new(None),
        };
        let Some(raw) = disk.read_file(path)? else {
            return Ok(cp);
        };
        let image = decode(&raw).map_err(|(offset, reason)| StoreError::Corrupt {
            what: "checkpoint",
            path: path.to_path_buf(),
            offset,
            reason,
        })?;
        let v = image.values;
        cp.physic_msg_timestamp.store(v[0], Ordering::Release);
        cp.logics_msg_timestamp.store(v[1], Ordering::Release);
        cp.index_msg_timestamp.store(v[2], Ordering::Release);
        cp.master_flushed_offset.store(v[3], Ordering::Release);
        cp.confirm_phy_offset.store(v[4], Ordering::Release);
        if let Some(d) = image.commit_log_durable_offset {
            cp.commit_log_durable_offset.store(d, Ordering::Release);
        }
        *cp.crc_trailer.lock() = image.crc_trailer;
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
    /// The CommitLog offset below which everything is known to be fsynced,
    /// if known.
    pub fn commit_log_durable_offset(&self) -> Option<i64> {
        let v = self.commit_log_durable_offset.load(Ordering::Acquire);
        (v >= 0).then_some(v)
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
    /// Raises the durable offset to `fsynced` (never lowers it). Call only
    /// once the fsync covering `[0, fsynced)` has returned.
    pub fn advance_commit_log_durable_offset(&self, fsynced: i64) {
        debug_assert!(fsynced >= 0);
        self.commit_log_durable_offset
            .fetch_max(fsynced, Ordering::AcqRel);
    }
    /// Replaces the durable offset (recovery and repair, which cut the log:
    /// the durable point then is the cut end, or unknown with `None`).
    pub fn reset_commit_log_durable_offset(&self, v: Option<i64>) {
        assert!(v.is_none_or(|o| o >= 0), "negative durable offset {v:?}");
        self.commit_log_durable_offset
            .store(v.unwrap_or(UNKNOWN), Ordering::Release);
    }

    /// The CRC-trailer rule (see [`TrailerRule`]), if any.
    pub fn crc_trailer(&self) -> Option<TrailerRule> {
        *self.crc_trailer.lock()
    }

    /// Replaces the CRC-trailer rule. The store sets it at open, before its
    /// first append, and writes the checkpoint before appending.
    pub fn set_crc_trailer(&self, rule: Option<TrailerRule>) {
        assert!(
            rule.is_none_or(|r| r.from >= 0),
            "negative trailer offset {rule:?}"
        );
        *self.crc_trailer.lock() = rule;
    }

    /// The store time from which an abnormal recovery must re-dispatch: the
    /// oldest of the three timestamps (0 if any is unknown).
    pub fn min_timestamp(&self) -> i64 {
        self.physic_msg_timestamp()
            .min(self.logics_msg_timestamp())
            .min(self.index_msg_timestamp())
            .max(0)
    }

    /// The on-disk image (with the extension only when the durable point
    /// is known).
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
        if let Some(d) = self.commit_log_durable_offset() {
            raw[56..64].copy_from_slice(DURABLE_MAGIC);
            raw[DURABLE_AT..DURABLE_AT + 8].copy_from_slice(&d.to_be_bytes());
            let crc = crc32fast::hash(&raw[..DURABLE_CRC_AT]);
            raw[DURABLE_CRC_AT..DURABLE_CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        }
        if let Some(rule) = self.crc_trailer() {
            encode_trailer_rule(&mut raw, &rule);
        }
        raw
    }

    /// Writes the checkpoint atomically (temp file, fsync, rename, fsync dir).
    pub fn flush(&self) -> Result<()> {
        Ok(self.disk.atomic_replace(&self.path, &self.encode())?)
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
        assert_eq!(cp.commit_log_durable_offset(), None);
    }

    #[test]
    fn durable_offset_round_trips_under_its_crc() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let cp = Checkpoint::load(&p).unwrap();
        assert_eq!(cp.commit_log_durable_offset(), None);
        cp.set_physic_msg_timestamp(300);
        cp.advance_commit_log_durable_offset(4096);
        cp.advance_commit_log_durable_offset(1000);
        assert_eq!(
            cp.commit_log_durable_offset(),
            Some(4096),
            "never lowered by a flush"
        );
        cp.flush().unwrap();
        let again = Checkpoint::load(&p).unwrap();
        assert_eq!(again.commit_log_durable_offset(), Some(4096));
        assert_eq!(again.physic_msg_timestamp(), 300);

        let raw = std::fs::read(&p).unwrap();
        assert_eq!(&raw[56..64], DURABLE_MAGIC);
        // A flipped bit in the offset, or in a RocketMQ field it also
        // covers, is caught by the extension's CRC.
        for at in [DURABLE_AT + 7, DURABLE_CRC_AT, 50] {
            let mut bad = raw.clone();
            bad[at] ^= 1;
            let e = decode(&bad).unwrap_err();
            assert!(e.0 == DURABLE_CRC_AT as i64 || e.0 == 48, "{e:?}");
        }
        let mut bad = raw.clone();
        bad[3] ^= 1;
        assert_eq!(decode(&bad).unwrap_err().0, 48);

        // Reset to unknown: the image is the old format again.
        again.reset_commit_log_durable_offset(None);
        let old = again.encode();
        assert!(old[52..].iter().all(|b| *b == 0));
        assert_eq!(decode(&old).unwrap().commit_log_durable_offset, None);
    }

    #[test]
    fn crc_trailer_rule_round_trips_under_its_crc() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoint");
        let cp = Checkpoint::load(&p).unwrap();
        assert_eq!(cp.crc_trailer(), None);
        for host in ["10.1.2.3:10911", "[fe80::1]:7"] {
            let rule = TrailerRule {
                from: 8192,
                store_host: host.parse().unwrap(),
            };
            cp.set_crc_trailer(Some(rule));
            cp.advance_commit_log_durable_offset(4096);
            cp.flush().unwrap();
            let again = Checkpoint::load(&p).unwrap();
            assert_eq!(again.crc_trailer(), Some(rule));
            assert_eq!(again.commit_log_durable_offset(), Some(4096));
            let raw = std::fs::read(&p).unwrap();
            for at in [TRAILER_FROM_AT + 3, TRAILER_HOST_AT + 15, TRAILER_CRC_AT] {
                let mut bad = raw.clone();
                bad[at] ^= 4;
                assert_eq!(decode(&bad).unwrap_err().0, TRAILER_CRC_AT as i64);
            }
        }
        // Without the rule (and without a durable offset) the image is
        // RocketMQ's plus the first Basalt CRC.
        cp.set_crc_trailer(None);
        cp.reset_commit_log_durable_offset(None);
        let old = cp.encode();
        assert!(old[52..].iter().all(|b| *b == 0));
        assert_eq!(decode(&old).unwrap().crc_trailer, None);
    }

    #[test]
    fn older_basalt_checkpoint_loads_with_unknown_durable_point() {
        // What Basalt wrote before the extension: magic and CRC over 0..40.
        let mut raw = vec![0u8; 4096];
        raw[0..8].copy_from_slice(&11i64.to_be_bytes());
        raw[8..16].copy_from_slice(&12i64.to_be_bytes());
        raw[16..24].copy_from_slice(&13i64.to_be_bytes());
        raw[40..48].copy_from_slice(MAGIC);
        let crc = crc32fast::hash(&raw[..40]);
        raw[48..52].copy_from_slice(&crc.to_be_bytes());
        let image = decode(&raw).unwrap();
        assert_eq!(image.values[..3], [11, 12, 13]);
        assert_eq!(image.commit_log_durable_offset, None);
        // And the new image still passes the old reader's check (magic at
        // 40, CRC of 0..40 at 48), so older Basalt reads it.
        let dir = tempfile::tempdir().unwrap();
        let cp = Checkpoint::load(&dir.path().join("checkpoint")).unwrap();
        cp.set_physic_msg_timestamp(11);
        cp.advance_commit_log_durable_offset(77);
        let new = cp.encode();
        assert_eq!(&new[40..48], MAGIC);
        assert_eq!(read_u32(&new, 48), crc32fast::hash(&new[..40]));
    }
}
