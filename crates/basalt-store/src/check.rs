//! Offline tools for operators: `basalt store check` validates every record
//! and ConsumeQueue unit of a store directory; `basalt store dump` lists
//! records. Both map files read-only ([`Disk::map_read_only`]) and take no
//! lock, so they can look at a store a broker is using (its newest bytes may
//! then be in flux). They read through [`Disk`], so they run on the
//! simulated disk of the power-loss tests as well.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use basalt_common::record::{RecordHead, RecordView};
use basalt_disk::{Disk, ReadOnlyMap};

use crate::consume_queue::{CqUnit, UNIT_SIZE};
use crate::error::Result;
use crate::mapped_file::parse_file_name;
use crate::record_check::RecordCheck;
use crate::recovery::{ScanStop, find_valid_record_in, scan_file, valid_record_at};

/// One CommitLog file mapped read-only.
struct LogFile {
    path: PathBuf,
    start: i64,
    map: ReadOnlyMap,
}

/// The CommitLog files of a store, read-only.
struct ReadOnlyLog {
    files: Vec<LogFile>,
    file_size: usize,
}

impl ReadOnlyLog {
    fn open(disk: &Disk, dir: &Path, file_size: Option<usize>) -> Result<ReadOnlyLog> {
        let mut files = Vec::new();
        if disk.exists(dir) {
            for e in disk.list_dir(dir)? {
                let Some(start) = parse_file_name(&e.name) else {
                    continue;
                };
                let map = disk.map_read_only(&e.path)?;
                files.push(LogFile {
                    path: e.path,
                    start,
                    map,
                });
            }
        }
        files.sort_by_key(|f| f.start);
        let file_size = file_size
            .or_else(|| files.iter().map(|f| f.map.len()).max())
            .unwrap_or(0);
        Ok(ReadOnlyLog { files, file_size })
    }

    fn record_at(&self, offset: i64) -> Option<RecordView<'_>> {
        if self.file_size == 0 {
            return None;
        }
        let f = self
            .files
            .iter()
            .find(|f| f.start <= offset && offset < f.start + f.map.len() as i64)?;
        RecordView::parse(&f.map[(offset - f.start) as usize..], true).ok()
    }
}

/// Where [`check_store_over`] finds the record a ConsumeQueue unit points
/// at: the store's own CommitLog, or in ledger mode the ledger's entries.
pub trait RecordLookup {
    /// Units pointing below this point at expired data and are not checked.
    fn min_offset(&self) -> i64;
    /// End of the valid records.
    fn end_offset(&self) -> i64;
    /// The valid record at `offset`, or why there is none.
    fn record_at(&self, offset: i64) -> std::result::Result<RecordView<'_>, String>;
}

/// The CommitLog as [`check_store`] validated it.
struct CheckedLog<'a> {
    log: &'a ReadOnlyLog,
    min_offset: i64,
    end_offset: i64,
}

impl RecordLookup for CheckedLog<'_> {
    fn min_offset(&self) -> i64 {
        self.min_offset
    }
    fn end_offset(&self) -> i64 {
        self.end_offset
    }
    fn record_at(&self, offset: i64) -> std::result::Result<RecordView<'_>, String> {
        self.log
            .record_at(offset)
            .ok_or_else(|| format!("no valid record starts at {offset}"))
    }
}

/// Figures of one topic.
#[derive(Debug, Clone, Default)]
pub struct TopicSummary {
    pub records: u64,
    pub bytes: u64,
    pub queues: BTreeSet<i32>,
}

/// What `check` found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub root: PathBuf,
    pub commit_log_files: usize,
    pub file_size: usize,
    pub min_offset: i64,
    /// End of the valid log.
    pub end_offset: i64,
    pub records: u64,
    pub bytes: u64,
    pub topics: BTreeMap<String, TopicSummary>,
    /// First place where the log stops being valid, with the reason, when
    /// that is not just the never-written zero tail.
    pub first_bad: Option<(i64, PathBuf, String)>,
    /// A valid record found after the first bad one: damage in the middle.
    pub valid_after_bad: Option<i64>,
    /// Files whose start does not follow the previous file.
    pub layout_errors: Vec<String>,
    /// What the ConsumeQueue units were checked against.
    pub queues_checked_against: String,
    pub consume_queues: usize,
    pub consume_queue_units: u64,
    /// Units that do not match the record they point at (first 20 shown).
    pub consume_queue_errors: Vec<String>,
    pub consume_queue_error_count: u64,
    /// Valid records that no ConsumeQueue can hold (offset, reason): the
    /// broker passes over them. Not corruption, but worth a look.
    pub unplaceable: Vec<(i64, String)>,
}

impl CheckReport {
    /// No corruption anywhere (a torn tail counts as corruption here: the
    /// broker would cut it on start).
    pub fn is_ok(&self) -> bool {
        self.first_bad.is_none()
            && self.layout_errors.is_empty()
            && self.consume_queue_error_count == 0
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "store       {}", self.root.display())?;
        writeln!(
            f,
            "commitlog   {} files of {} bytes, offsets {}..{}",
            self.commit_log_files, self.file_size, self.min_offset, self.end_offset
        )?;
        writeln!(f, "records     {} ({} bytes)", self.records, self.bytes)?;
        writeln!(f, "topics      {}", self.topics.len())?;
        for (name, t) in &self.topics {
            writeln!(
                f,
                "  {name:<40} {:>10} records {:>12} bytes  queues {:?}",
                t.records, t.bytes, t.queues
            )?;
        }
        writeln!(
            f,
            "consumequeue {} queues, {} units, {} mismatches (checked against {})",
            self.consume_queues,
            self.consume_queue_units,
            self.consume_queue_error_count,
            self.queues_checked_against
        )?;
        for e in &self.consume_queue_errors {
            writeln!(f, "  {e}")?;
        }
        if !self.unplaceable.is_empty() {
            writeln!(
                f,
                "unplaceable {} records no queue can hold (passed over by dispatch):",
                self.unplaceable.len()
            )?;
            for (off, why) in self.unplaceable.iter().take(20) {
                writeln!(f, "  offset {off}: {why}")?;
            }
        }
        for e in &self.layout_errors {
            writeln!(f, "layout error: {e}")?;
        }
        match &self.first_bad {
            None => writeln!(f, "first bad   none")?,
            Some((off, path, reason)) => {
                writeln!(
                    f,
                    "first bad   offset {off} in {}: {reason}",
                    path.display()
                )?;
                match self.valid_after_bad {
                    Some(v) => writeln!(
                        f,
                        "            valid records follow at offset {v}: the log is damaged in the middle"
                    )?,
                    None => writeln!(
                        f,
                        "            nothing valid follows: a torn tail the broker cuts on start"
                    )?,
                }
            }
        }
        write!(
            f,
            "result      {}",
            if self.is_ok() { "OK" } else { "CORRUPT" }
        )
    }
}

/// Validates every record of `root/commitlog` and every unit of
/// `root/consumequeue`. `file_size` overrides the CommitLog file size (by
/// default the size of the files found).
pub fn check_store(root: &Path, file_size: Option<usize>) -> Result<CheckReport> {
    check_store_over(root, file_size, None)
}

/// [`check_store`] of a store on `disk`.
pub fn check_store_on(disk: &Disk, root: &Path, file_size: Option<usize>) -> Result<CheckReport> {
    check_store_over_on(disk, root, file_size, None)
}

/// As [`check_store`], but the ConsumeQueue units are checked against
/// `records` (named `what`) when given: a ledger-mode store keeps its
/// records in the ledger, and its CommitLog stays empty.
pub fn check_store_over(
    root: &Path,
    file_size: Option<usize>,
    records: Option<(&dyn RecordLookup, &str)>,
) -> Result<CheckReport> {
    check_store_over_on(&Disk::Real, root, file_size, records)
}

fn check_store_over_on(
    disk: &Disk,
    root: &Path,
    file_size: Option<usize>,
    records: Option<(&dyn RecordLookup, &str)>,
) -> Result<CheckReport> {
    let log = ReadOnlyLog::open(disk, &root.join("commitlog"), file_size)?;
    let mut r = CheckReport {
        root: root.to_path_buf(),
        commit_log_files: log.files.len(),
        file_size: log.file_size,
        min_offset: log.files.first().map(|f| f.start).unwrap_or(0),
        ..Default::default()
    };
    r.layout_errors = layout_errors(&log);
    scan_records(&log, &record_check_of(disk, root), &mut r)?;
    let own = CheckedLog {
        log: &log,
        min_offset: r.min_offset,
        end_offset: r.end_offset,
    };
    let (records, what) = records.unwrap_or((&own, "the commitlog"));
    r.queues_checked_against = what.to_string();
    check_consume_queues(disk, &root.join("consumequeue"), records, &mut r)?;
    Ok(r)
}

/// Files that are not the common size or do not follow each other.
fn layout_errors(log: &ReadOnlyLog) -> Vec<String> {
    let mut errors = Vec::new();
    let mut prev_end: Option<i64> = None;
    for f in &log.files {
        if f.map.len() != log.file_size {
            errors.push(format!(
                "{} is {} bytes, expected {}",
                f.path.display(),
                f.map.len(),
                log.file_size
            ));
        }
        if let Some(p) = prev_end
            && p != f.start
        {
            errors.push(format!(
                "{} starts at {} but the previous file ends at {p}",
                f.path.display(),
                f.start
            ));
        }
        prev_end = Some(f.start + log.file_size as i64);
    }

    errors
}

/// The checks recovery would apply to the store at `root`: CRCs, and the
/// CRC-trailer rule of its checkpoint (none if the checkpoint is unreadable:
/// the check reports that separately through recovery).
pub(crate) fn record_check_of(disk: &Disk, root: &Path) -> RecordCheck {
    let trailer = crate::checkpoint::Checkpoint::load_on(disk, &root.join("checkpoint"))
        .ok()
        .and_then(|c| c.crc_trailer());
    RecordCheck { crc: true, trailer }
}

/// Validates every record of the log, in order, up to the first place it
/// stops being valid, and records what it found in `r`.
fn scan_records(log: &ReadOnlyLog, check: &RecordCheck, r: &mut CheckReport) -> Result<()> {
    r.end_offset = r.min_offset;
    'files: for (i, f) in log.files.iter().enumerate() {
        let stop = scan_file(&f.map, f.start, 0, check, |v| {
            r.records += 1;
            r.bytes += v.total_size() as u64;
            let t = r.topics.entry(v.topic_str().into_owned()).or_default();
            t.records += 1;
            t.bytes += v.total_size() as u64;
            t.queues.insert(v.queue_id);
            r.end_offset = v.physical_offset + v.total_size() as i64;
            if basalt_common::sysflag::is_consumable(v.sys_flag)
                && let Err(why) =
                    crate::dispatch::DispatchRequest::from_record(v, &Default::default())
            {
                r.unplaceable.push((v.physical_offset, why.to_string()));
            }
            Ok(())
        })?;
        let (pos, reason) = match stop {
            ScanStop::EndOfFile => {
                r.end_offset = f.start + f.map.len() as i64;
                continue;
            }
            ScanStop::Zeros { pos } => (pos, None),
            ScanStop::Invalid { pos, reason } => (pos, Some(reason)),
        };
        r.end_offset = f.start + pos as i64;
        let after = find_valid_record_in(&f.map, f.start, pos + 1, f.map.len()).or_else(|| {
            log.files[i + 1..]
                .iter()
                .find(|g| valid_record_at(&g.map, g.start, 0))
                .map(|g| g.start)
        });
        if reason.is_some() || after.is_some() {
            r.first_bad = Some((
                f.start + pos as i64,
                f.path.clone(),
                reason.unwrap_or_else(|| "zeros where a record should be".into()),
            ));
            r.valid_after_bad = after;
        }
        break 'files;
    }

    Ok(())
}

fn check_consume_queues(
    disk: &Disk,
    dir: &Path,
    records: &dyn RecordLookup,
    r: &mut CheckReport,
) -> Result<()> {
    if !disk.exists(dir) {
        return Ok(());
    }
    for t in disk.list_dir(dir)?.into_iter().filter(|t| t.is_dir) {
        for q in disk.list_dir(&t.path)? {
            let Some(qid) = q.name.parse::<i32>().ok().filter(|_| q.is_dir) else {
                continue;
            };
            r.consume_queues += 1;
            check_queue(disk, &q.path, &t.name, qid, records, r)?;
        }
    }
    Ok(())
}

/// Checks the units of one queue directory, file by file, up to the first
/// unused unit.
fn check_queue(
    disk: &Disk,
    dir: &Path,
    topic: &str,
    qid: i32,
    records: &dyn RecordLookup,
    r: &mut CheckReport,
) -> Result<()> {
    let mut files: Vec<(i64, PathBuf)> = disk
        .list_dir(dir)?
        .into_iter()
        .filter_map(|e| parse_file_name(&e.name).map(|s| (s, e.path)))
        .collect();
    files.sort();
    for (start, path) in files {
        let bytes = disk.map_read_only(&path)?;
        for (k, c) in bytes.chunks_exact(UNIT_SIZE).enumerate() {
            let u = CqUnit::decode(c);
            if !u.is_valid() {
                return Ok(());
            }
            if u.is_filler() {
                continue;
            }
            r.consume_queue_units += 1;
            let qoff = (start / UNIT_SIZE as i64) + k as i64;
            if let Some(why) = unit_mismatch(&u, topic, qid, qoff, records) {
                r.consume_queue_error_count += 1;
                if r.consume_queue_errors.len() < 20 {
                    r.consume_queue_errors.push(format!(
                        "{topic}/{qid} unit {qoff} ({} at byte {}): {why}",
                        path.display(),
                        k * UNIT_SIZE
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Why unit `qoff` of `topic`/`qid` does not describe the record it points
/// at; None when it does, or when it points at expired data.
fn unit_mismatch(
    u: &CqUnit,
    topic: &str,
    qid: i32,
    qoff: i64,
    records: &dyn RecordLookup,
) -> Option<String> {
    if u.physical_offset < records.min_offset() {
        return None; // expired data
    }
    if u.physical_offset + u.size as i64 > records.end_offset() {
        return Some(format!(
            "points past the log end ({} + {})",
            u.physical_offset, u.size
        ));
    }
    let v = match records.record_at(u.physical_offset) {
        Ok(v) => v,
        Err(why) => return Some(format!("points at {}: {why}", u.physical_offset)),
    };
    let matches = v.topic == topic.as_bytes()
        && v.queue_id == qid
        && v.queue_offset == qoff
        && v.total_size() as i32 == u.size;
    (!matches).then(|| {
        format!(
            "points at a record of {}/{} offset {} size {} (unit size {})",
            v.topic_str(),
            v.queue_id,
            v.queue_offset,
            v.total_size(),
            u.size
        )
    })
}

/// One listed record.
#[derive(Debug, Clone)]
pub struct DumpLine {
    pub offset: i64,
    pub size: usize,
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub store_timestamp: i64,
    pub tags: Option<String>,
    pub keys: Option<String>,
    pub body_size: usize,
}

impl DumpLine {
    /// The line for record `v`, `size` bytes long.
    pub fn of(v: &RecordView<'_>, size: usize) -> DumpLine {
        let text = |k: &str| {
            v.property(k)
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        DumpLine {
            offset: v.physical_offset,
            size,
            topic: v.topic_str().into_owned(),
            queue_id: v.queue_id,
            queue_offset: v.queue_offset,
            store_timestamp: v.store_timestamp,
            tags: text("TAGS"),
            keys: text("KEYS"),
            body_size: v.body.len(),
        }
    }
}

impl fmt::Display for DumpLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>14} {:>7} {:<24} q{:<3} #{:<10} tags={:<12} keys={:<20} body={}",
            self.offset,
            self.size,
            self.topic,
            self.queue_id,
            self.queue_offset,
            self.tags.as_deref().unwrap_or("-"),
            self.keys.as_deref().unwrap_or("-"),
            self.body_size
        )
    }
}

/// Lists records from `from` (default: the oldest), at most `limit`, calling
/// `emit` for each; stops at the end of the valid log. Returns how many.
pub fn dump_store(
    root: &Path,
    file_size: Option<usize>,
    from: Option<i64>,
    limit: usize,
    mut emit: impl FnMut(&DumpLine),
) -> Result<usize> {
    let log = ReadOnlyLog::open(&Disk::Real, &root.join("commitlog"), file_size)?;
    let mut n = 0usize;
    for f in &log.files {
        let end = f.start + f.map.len() as i64;
        let start_pos = match from {
            Some(o) if o >= end => continue,
            Some(o) if o > f.start => (o - f.start) as usize,
            _ => 0,
        };
        let mut pos = start_pos;
        while n < limit && pos + 8 <= f.map.len() {
            match basalt_common::record::peek_head(&f.map[pos..]) {
                Some(RecordHead::Message { total_size }) => {
                    let Ok(v) = RecordView::parse(&f.map[pos..], false) else {
                        return Ok(n);
                    };
                    emit(&DumpLine::of(&v, total_size));
                    n += 1;
                    pos += total_size;
                }
                Some(RecordHead::Blank) => break,
                _ => return Ok(n),
            }
        }
        if n >= limit {
            break;
        }
    }
    Ok(n)
}
