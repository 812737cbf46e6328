//! Making a stopped Basalt store readable by Apache RocketMQ 5 (`basalt
//! store export-rocketmq`, docs/storage-format.md#migrating-to-and-from-rocketmq).
//!
//! What RocketMQ reads differently from what Basalt writes, and what this
//! does about each (store side; the broker's config files are done by
//! `basalt_broker::store_export`):
//!
//! * the `__CRC32#` trailer at the end of a record's properties: a Java
//!   client would show it as a property. The trailer's 20 bytes are
//!   overwritten with 20 property separators (0x02): both Java's and
//!   Basalt's property parsers skip empty segments, so the record reads
//!   as if written without the trailer, while its size, its offset, every
//!   ConsumeQueue unit, index entry, message id and transaction offset
//!   pointing at it stay valid (the body CRC, which RocketMQ checks, covers
//!   only the body);
//! * the checkpoint's Basalt extension (magic, CRCs, durable offset,
//!   CRC-trailer rule): RocketMQ reads only the first 40 bytes but keeps
//!   the rest of the file as it is, so a later Basalt start would find a
//!   stale durable offset and a trailer rule covering records RocketMQ
//!   appended; the file is rewritten with the five longs only;
//! * the timer state (`timerlog/`, `config/timercheck`): Basalt's own
//!   layouts, which RocketMQ would misread (its TimerLog refuses segments
//!   of another size); both are removed and RocketMQ starts its timer
//!   store empty (timer messages are re-read from `rmq_sys_wheel_timer`).
//!
//! The store must be stopped cleanly (no `abort`): the walk refuses
//! anything but valid records up to the end of the log.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use basalt_common::record::{CRC_TRAILER_LEN, RecordHead, RecordView, has_crc_trailer, peek_head};
use basalt_disk::Disk;

use crate::checkpoint::Checkpoint;
use crate::error::{Result, StoreError};
use crate::fs_util;
use crate::mapped_file::parse_file_name;

/// Size of a RocketMQ checkpoint file (RocketMQ maps one OS page).
const JAVA_CHECKPOINT_LEN: usize = 4096;

/// What [`make_rocketmq_readable`] changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StoreExport {
    /// CommitLog files walked.
    pub commit_log_files: usize,
    /// Records found (all checked, CRC included).
    pub records: u64,
    /// Records whose `__CRC32#` trailer was blanked.
    pub trailers_blanked: u64,
    /// End of the valid log (global offset).
    pub log_end: i64,
    /// Basalt-only files and directories removed.
    pub removed: Vec<PathBuf>,
}

impl std::fmt::Display for StoreExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} CommitLog files, {} records up to offset {}, {} CRC trailers blanked",
            self.commit_log_files, self.records, self.log_end, self.trailers_blanked
        )?;
        for p in &self.removed {
            write!(f, "\nremoved {}", p.display())?;
        }
        Ok(())
    }
}

/// Rewrites the store at `root` in place so that RocketMQ 5 opens it (see
/// the module documentation). The caller holds the store's lock and has
/// checked that it was stopped cleanly.
pub fn make_rocketmq_readable(root: &Path) -> Result<StoreExport> {
    let mut report = StoreExport::default();
    blank_trailers(&root.join("commitlog"), &mut report)?;
    write_java_checkpoint(&root.join("checkpoint"))?;
    for p in [
        root.join("timerlog"),
        root.join("config").join("timercheck"),
    ] {
        let removed = if p.is_dir() {
            std::fs::remove_dir_all(&p)
        } else if p.exists() {
            std::fs::remove_file(&p)
        } else {
            continue;
        };
        removed.map_err(|e| StoreError::io(&p, e))?;
        report.removed.push(p);
    }
    fs_util::fsync_dir(root)?;
    if root.join("config").is_dir() {
        fs_util::fsync_dir(&root.join("config"))?;
    }
    Ok(report)
}

/// CommitLog files of `dir`, by start offset.
fn log_files(dir: &Path) -> Result<Vec<(i64, PathBuf)>> {
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Ok(files);
    }
    for e in Disk::Real.list_dir(dir)? {
        if let Some(start) = parse_file_name(&e.name) {
            files.push((start, e.path));
        }
    }
    files.sort();
    Ok(files)
}

/// Walks every record, checking it, and blanks the CRC trailers.
fn blank_trailers(dir: &Path, report: &mut StoreExport) -> Result<()> {
    let files = log_files(dir)?;
    let mut ended = false;
    for (start, path) in files {
        let trailers = {
            let map = Disk::Real.map_read_only(&path)?;
            if ended {
                if map.iter().any(|b| *b != 0) {
                    return Err(corrupt(
                        &path,
                        start,
                        "data after the end of the log".into(),
                    ));
                }
                continue;
            }
            report.commit_log_files += 1;
            let (trailers, end, file_ended) = walk_file(&path, start, &map, report)?;
            report.log_end = start + end as i64;
            ended = file_ended;
            trailers
        };
        if trailers.is_empty() {
            continue;
        }
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        let pad = [basalt_common::constants::property::PROPERTY_SEPARATOR; CRC_TRAILER_LEN];
        for at in &trailers {
            file.write_all_at(&pad, *at as u64)
                .map_err(|e| StoreError::io(&path, e))?;
        }
        file.sync_all().map_err(|e| StoreError::io(&path, e))?;
        report.trailers_blanked += trailers.len() as u64;
    }
    Ok(())
}

/// One file's records: the positions of their trailers, where its data
/// ends, and whether the log ends in it (zeros rather than a filler).
fn walk_file(
    path: &Path,
    start: i64,
    map: &[u8],
    report: &mut StoreExport,
) -> Result<(Vec<usize>, usize, bool)> {
    let mut trailers = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= map.len() {
        match peek_head(&map[pos..]) {
            Some(RecordHead::Message { .. }) => {
                let v = RecordView::parse(&map[pos..], true)
                    .map_err(|e| corrupt(path, start + pos as i64, e.to_string()))?;
                if v.physical_offset != start + pos as i64 {
                    return Err(corrupt(
                        path,
                        start + pos as i64,
                        format!("record says it is at offset {}", v.physical_offset),
                    ));
                }
                let size = v.total_size();
                if has_crc_trailer(v.bytes) {
                    trailers.push(pos + size - CRC_TRAILER_LEN);
                }
                report.records += 1;
                pos += size;
            }
            Some(RecordHead::Blank) => return Ok((trailers, map.len(), false)),
            _ => {
                if map[pos..].iter().any(|b| *b != 0) {
                    return Err(corrupt(
                        path,
                        start + pos as i64,
                        "neither a record, a filler nor the zeros that end the log \
                         (run `basalt store check`)"
                            .into(),
                    ));
                }
                return Ok((trailers, pos, true));
            }
        }
    }
    Ok((trailers, pos, true))
}

fn corrupt(path: &Path, offset: i64, reason: String) -> StoreError {
    StoreError::Corrupt {
        what: "CommitLog",
        path: path.to_path_buf(),
        offset,
        reason,
    }
}

/// Replaces the checkpoint with RocketMQ's image: the five longs Basalt
/// read (the three flush times, the two 5.x offsets) and zeros.
fn write_java_checkpoint(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let cp = Checkpoint::load(path)?;
    let mut raw = vec![0u8; JAVA_CHECKPOINT_LEN];
    let values = [
        cp.physic_msg_timestamp(),
        cp.logics_msg_timestamp(),
        cp.index_msg_timestamp(),
        cp.master_flushed_offset(),
        cp.confirm_phy_offset(),
    ];
    for (i, v) in values.iter().enumerate() {
        raw[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
    }
    fs_util::atomic_write(path, &raw)
}
