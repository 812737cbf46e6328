//! `basalt store repair DIR --truncate-at OFFSET` (docs/repair.md): for an
//! operator who chooses to keep the prefix of a store that recovery refused
//! for damage in the middle of its CommitLog.
//!
//! [`StoreRepair::open`] takes the store's lock (so a running broker's store
//! is refused) and refuses ledger-mode roots. [`StoreRepair::plan`] checks
//! that every record below the offset is valid and that the offset is a
//! record boundary, and lists what a cut there removes: CommitLog bytes and
//! files, and ConsumeQueue units pointing at or past it. Nothing is written
//! until [`StoreRepair::apply`]: it zeroes and deletes what the plan lists,
//! fsyncs each file and directory it changed, and writes the checkpoint
//! with the cut as its durable offset. Index entries past the cut stay:
//! lookups check each record's topic and key, and the next start re-indexes
//! from the cut, as after any recovery that cuts the log.

use std::fmt;
use std::path::{Path, PathBuf};

use basalt_disk::{Disk, ReadOnlyMap, SegmentOptions};

use crate::checkpoint::Checkpoint;
use crate::consume_queue::{CqUnit, UNIT_SIZE};
use crate::error::{Result, StoreError};
use crate::fs_util::LockFile;
use crate::mapped_file::parse_file_name;
use crate::recovery::{ScanStop, scan_file};

/// What a repair does to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileCutAction {
    /// Zeroes bytes `from..len` of the file.
    ZeroFrom { from: usize, len: usize },
    /// Deletes the whole file (`len` bytes).
    Delete { len: u64 },
}

/// One file a repair changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCut {
    pub path: PathBuf,
    /// Global (CommitLog) or byte (ConsumeQueue) offset of the file's start.
    pub start: i64,
    pub action: FileCutAction,
}

/// The units a repair removes from one ConsumeQueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueCut {
    pub topic: String,
    pub queue_id: i32,
    /// Queue offset of the first unit removed.
    pub from_queue_offset: i64,
    /// Units removed (valid units up to the queue's end).
    pub units: u64,
    pub files: Vec<FileCut>,
}

/// What a cut at `truncate_at` removes. See the module documentation.
#[derive(Debug, Clone)]
pub struct RepairPlan {
    pub root: PathBuf,
    pub truncate_at: i64,
    /// End of the CommitLog files as found (the cut removes `truncate_at..end`).
    pub files_end: i64,
    /// Valid records kept below the cut.
    pub records_kept: u64,
    pub commit_log: Vec<FileCut>,
    pub queues: Vec<QueueCut>,
    /// The checkpoint's durable offset before the repair (None: unknown or
    /// unreadable).
    pub durable_before: Option<i64>,
}

impl RepairPlan {
    /// Whether the cut removes nothing at all.
    pub fn is_empty(&self) -> bool {
        self.commit_log.is_empty() && self.queues.is_empty()
    }
}

fn write_cut(f: &mut fmt::Formatter<'_>, c: &FileCut, global: bool) -> fmt::Result {
    match &c.action {
        FileCutAction::ZeroFrom { from, len } if global => writeln!(
            f,
            "    {}: zero bytes {from}..{len} (offsets {}..{})",
            c.path.display(),
            c.start + *from as i64,
            c.start + *len as i64
        ),
        FileCutAction::ZeroFrom { from, len } => {
            writeln!(f, "    {}: zero bytes {from}..{len}", c.path.display())
        }
        FileCutAction::Delete { len } if global => writeln!(
            f,
            "    {}: delete ({len} bytes, offsets {}..{})",
            c.path.display(),
            c.start,
            c.start + *len as i64
        ),
        FileCutAction::Delete { len } => {
            writeln!(f, "    {}: delete ({len} bytes)", c.path.display())
        }
    }
}

impl fmt::Display for RepairPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "store       {}", self.root.display())?;
        writeln!(
            f,
            "keep        offsets ..{} ({} valid records)",
            self.truncate_at, self.records_kept
        )?;
        writeln!(
            f,
            "remove      offsets {}..{} of the CommitLog",
            self.truncate_at, self.files_end
        )?;
        for c in &self.commit_log {
            write_cut(f, c, true)?;
        }
        let units: u64 = self.queues.iter().map(|q| q.units).sum();
        writeln!(
            f,
            "consumequeue {units} units in {} queues point at or past the cut",
            self.queues.len()
        )?;
        for q in &self.queues {
            writeln!(
                f,
                "  {}/{}: {} units from queue offset {}",
                q.topic, q.queue_id, q.units, q.from_queue_offset
            )?;
            for c in &q.files {
                write_cut(f, c, false)?;
            }
        }
        let before = match self.durable_before {
            Some(d) => d.to_string(),
            None => "unknown".into(),
        };
        write!(
            f,
            "checkpoint  durable offset {before} -> {}",
            self.truncate_at
        )
    }
}

/// A store root held for repair: its lock is taken for the value's life.
#[derive(Debug)]
pub struct StoreRepair {
    root: PathBuf,
    disk: Disk,
    /// The store's lock (the real disk only: the simulated one has no
    /// other processes).
    _lock: Option<LockFile>,
}

fn refused(root: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::RepairRefused {
        path: root.to_path_buf(),
        reason: reason.into(),
    }
}

impl StoreRepair {
    /// Takes the lock of the store at `root`. Refuses a root without a
    /// `commitlog/`, a ledger-mode root, and a store another process holds.
    pub fn open(root: &Path) -> Result<StoreRepair> {
        Self::open_on(&Disk::Real, root)
    }

    /// [`StoreRepair::open`] of a store on `disk`.
    pub fn open_on(disk: &Disk, root: &Path) -> Result<StoreRepair> {
        if let Some(l) = ledger_dir(disk, root)? {
            return Err(refused(
                root,
                format!(
                    "{} holds a ledger ({}): a ledger-mode store keeps its records in the \
                     ledger, which this tool does not cut",
                    root.display(),
                    l.display()
                ),
            ));
        }
        if !disk.exists(&root.join("commitlog")) {
            return Err(refused(root, "no commitlog/ directory here"));
        }
        if !disk.is_real() {
            return Ok(StoreRepair {
                root: root.to_path_buf(),
                disk: disk.clone(),
                _lock: None,
            });
        }
        let lock = match LockFile::acquire(&root.join("lock")) {
            Ok(l) => l,
            Err(StoreError::Locked { .. }) => {
                return Err(refused(
                    root,
                    "the store is locked by a running process (a broker?); stop it first",
                ));
            }
            Err(e) => return Err(e),
        };
        Ok(StoreRepair {
            root: root.to_path_buf(),
            disk: Disk::Real,
            _lock: Some(lock),
        })
    }

    /// What a cut at `truncate_at` removes; refuses an offset that is not a
    /// record boundary with only valid records below it. Writes nothing.
    pub fn plan(&self, truncate_at: i64) -> Result<RepairPlan> {
        let disk = &self.disk;
        let files = commit_log_files(disk, &self.root.join("commitlog"))?;
        let (records_kept, files_end) = check_prefix(disk, &self.root, &files, truncate_at)?;
        let commit_log = files
            .iter()
            .filter_map(|(start, path, len)| {
                let end = start + *len as i64;
                if *start >= truncate_at {
                    Some(FileCut {
                        path: path.clone(),
                        start: *start,
                        action: FileCutAction::Delete { len: *len as u64 },
                    })
                } else if end > truncate_at {
                    Some(FileCut {
                        path: path.clone(),
                        start: *start,
                        action: FileCutAction::ZeroFrom {
                            from: (truncate_at - start) as usize,
                            len: *len,
                        },
                    })
                } else {
                    None
                }
            })
            .collect();
        let queues = plan_queue_cuts(disk, &self.root.join("consumequeue"), truncate_at)?;
        let durable_before = Checkpoint::load_on(disk, &self.root.join("checkpoint"))
            .ok()
            .and_then(|c| c.commit_log_durable_offset());
        Ok(RepairPlan {
            root: self.root.clone(),
            truncate_at,
            files_end,
            records_kept,
            commit_log,
            queues,
            durable_before,
        })
    }

    /// Carries out `plan` (made by [`StoreRepair::plan`] on this root).
    pub fn apply(&self, plan: &RepairPlan) -> Result<()> {
        assert_eq!(
            plan.root, self.root,
            "a plan applies to the root it was made for"
        );
        let disk = &self.disk;
        apply_cuts(disk, &plan.commit_log)?;
        for q in &plan.queues {
            apply_cuts(disk, &q.files)?;
        }
        let ck_path = self.root.join("checkpoint");
        let checkpoint = match Checkpoint::load_on(disk, &ck_path) {
            Ok(c) => c,
            Err(StoreError::Corrupt { .. }) => {
                disk.remove_file(&ck_path)?;
                Checkpoint::load_on(disk, &ck_path)?
            }
            Err(e) => return Err(e),
        };
        // Every byte kept below the cut is now fsynced (apply_cuts synced
        // the file it cut; the files before it were complete before).
        checkpoint.reset_commit_log_durable_offset(Some(plan.truncate_at));
        checkpoint.flush()?;
        tracing::warn!(root = %self.root.display(), truncate_at = plan.truncate_at,
            "store repaired: the log was cut");
        Ok(())
    }
}

/// The `dledger-*` directory of a root, if any.
fn ledger_dir(disk: &Disk, root: &Path) -> Result<Option<PathBuf>> {
    if !disk.exists(root) {
        return Err(refused(root, "no such directory"));
    }
    Ok(disk
        .list_dir(root)?
        .into_iter()
        .find(|e| e.is_dir && e.name.starts_with("dledger-"))
        .map(|e| e.path))
}

/// `(start, path, length)` of the numbered files of `dir`, by start.
fn numbered_files(disk: &Disk, dir: &Path) -> Result<Vec<(i64, PathBuf, usize)>> {
    let mut files = Vec::new();
    for e in disk.list_dir(dir)? {
        let Some(start) = parse_file_name(&e.name) else {
            continue;
        };
        let len = disk.file_len(&e.path)?.unwrap_or(0) as usize;
        files.push((start, e.path, len));
    }
    files.sort_by_key(|f| f.0);
    Ok(files)
}

fn commit_log_files(disk: &Disk, dir: &Path) -> Result<Vec<(i64, PathBuf, usize)>> {
    let files = numbered_files(disk, dir)?;
    for w in files.windows(2) {
        if w[0].0 + w[0].2 as i64 != w[1].0 {
            return Err(StoreError::Layout {
                path: w[1].1.clone(),
                reason: format!("does not follow {} (a gap or overlap)", w[0].1.display()),
            });
        }
    }
    Ok(files)
}

fn map_read_only(disk: &Disk, path: &Path) -> Result<ReadOnlyMap> {
    Ok(disk.map_read_only(path)?)
}

/// Checks that every record below `truncate_at` is valid (CRC included) and
/// that `truncate_at` is where one ends (or a file starts). Returns the
/// records below it and the end of the files.
fn check_prefix(
    disk: &Disk,
    root: &Path,
    files: &[(i64, PathBuf, usize)],
    truncate_at: i64,
) -> Result<(u64, i64)> {
    let (Some(first), Some(last)) = (files.first(), files.last()) else {
        return Err(refused(root, "the CommitLog has no files"));
    };
    let files_end = last.0 + last.2 as i64;
    if truncate_at <= first.0 || truncate_at > files_end {
        return Err(refused(
            root,
            format!(
                "offset {truncate_at} is not inside the CommitLog ({}..{files_end}]: \
                 a cut must keep at least one record",
                first.0
            ),
        ));
    }
    let mut records = 0u64;
    let check = &crate::check::record_check_of(disk, root);
    for (start, path, len) in files.iter().filter(|f| f.0 < truncate_at) {
        let map = map_read_only(disk, path)?;
        let upto = ((truncate_at - start) as usize).min(*len);
        let stop = scan_file(&map[..upto], *start, 0, check, |_| {
            records += 1;
            Ok(())
        })?;
        let bad = |pos: usize, reason: String| {
            refused(
                root,
                format!(
                    "the log is not valid below {truncate_at}: {reason} at offset {} ({} file offset {pos}); \
                     choose an offset at or below it",
                    start + pos as i64,
                    path.display()
                ),
            )
        };
        match stop {
            ScanStop::EndOfFile => {}
            ScanStop::Zeros { pos } => return Err(bad(pos, "zeros".into())),
            ScanStop::Invalid { pos, reason } if upto < *len => {
                return Err(bad(
                    pos,
                    format!("{reason} (is {truncate_at} the end of a record?)"),
                ));
            }
            ScanStop::Invalid { pos, reason } => return Err(bad(pos, reason)),
        }
    }
    Ok((records, files_end))
}

/// The ConsumeQueue units at or past `truncate_at`, queue by queue.
fn plan_queue_cuts(disk: &Disk, cq_root: &Path, truncate_at: i64) -> Result<Vec<QueueCut>> {
    let mut cuts = Vec::new();
    if !disk.exists(cq_root) {
        return Ok(cuts);
    }
    let mut topics: Vec<_> = disk
        .list_dir(cq_root)?
        .into_iter()
        .filter(|e| e.is_dir)
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for t in topics {
        let mut qdirs: Vec<(i32, PathBuf)> = disk
            .list_dir(&t.path)?
            .into_iter()
            .filter(|e| e.is_dir)
            .filter_map(|e| Some((e.name.parse::<i32>().ok()?, e.path)))
            .collect();
        qdirs.sort();
        for (queue_id, dir) in qdirs {
            if let Some(cut) = plan_one_queue(disk, &t.name, queue_id, &dir, truncate_at)? {
                cuts.push(cut);
            }
        }
    }
    Ok(cuts)
}

/// Units of one queue pointing at or past `truncate_at`. Units are in
/// CommitLog order, so they are a suffix of the queue.
fn plan_one_queue(
    disk: &Disk,
    topic: &str,
    queue_id: i32,
    dir: &Path,
    truncate_at: i64,
) -> Result<Option<QueueCut>> {
    let files = numbered_files(disk, dir)?;
    let mut cut: Option<QueueCut> = None;
    for (start, path, len) in files {
        if let Some(c) = &mut cut {
            // Everything after the first file cut goes.
            c.units += count_valid_units(&map_read_only(disk, &path)?, 0);
            c.files.push(FileCut {
                path,
                start,
                action: FileCutAction::Delete { len: len as u64 },
            });
            continue;
        }
        let map = map_read_only(disk, &path)?;
        let first_past = map.chunks_exact(UNIT_SIZE).position(|b| {
            let u = CqUnit::decode(b);
            u.is_valid() && !u.is_filler() && u.physical_offset >= truncate_at
        });
        let Some(idx) = first_past else { continue };
        let from = idx * UNIT_SIZE;
        cut = Some(QueueCut {
            topic: topic.to_string(),
            queue_id,
            from_queue_offset: (start + from as i64) / UNIT_SIZE as i64,
            units: count_valid_units(&map, from),
            files: vec![FileCut {
                path,
                start,
                action: FileCutAction::ZeroFrom { from, len },
            }],
        });
    }
    Ok(cut)
}

/// Valid units from byte `from` up to the first invalid one.
fn count_valid_units(raw: &[u8], from: usize) -> u64 {
    raw[from.min(raw.len())..]
        .chunks_exact(UNIT_SIZE)
        .take_while(|b| CqUnit::decode(b).is_valid())
        .count() as u64
}

/// Zeroes and deletes what `cuts` list, fsyncing each file zeroed and the
/// directory after each file deleted. Deletions go newest first, each made
/// durable before the next, so a crash during the repair leaves a shorter
/// log, never a gap in it.
fn apply_cuts(disk: &Disk, cuts: &[FileCut]) -> Result<()> {
    for c in cuts {
        if let FileCutAction::ZeroFrom { from, len } = &c.action {
            zero_range(disk, &c.path, *from, *len)?;
        }
    }
    for c in cuts.iter().rev() {
        if let FileCutAction::Delete { .. } = &c.action {
            disk.remove_file(&c.path)?;
            if let Some(d) = c.path.parent() {
                disk.sync_dir(d)?;
            }
        }
    }
    Ok(())
}

/// Writes zeros over `from..len` of `path` and fsyncs that range.
fn zero_range(disk: &Disk, path: &Path, from: usize, len: usize) -> Result<()> {
    if disk.is_real() {
        crate::faults::check_fsync(path)?;
    }
    let mut seg = disk.open_segment(
        path,
        SegmentOptions {
            keep_fd: true,
            random_access: false,
        },
    )?;
    let to = len.min(seg.len());
    let from = from.min(to);
    let zeros = vec![0u8; 1 << 20];
    // Only where the file holds data: holes read as zeros already, and
    // writing into one through the mapping would need a block the disk may
    // not have (SIGBUS on a full disk).
    for (start, end) in seg.data_ranges(from) {
        let (mut at, end) = (start.max(from), end.min(to));
        while at < end {
            let n = (end - at).min(zeros.len());
            seg.write(at, &zeros[..n]);
            at += n;
        }
    }
    Ok(seg.sync_range(from, to)?)
}
