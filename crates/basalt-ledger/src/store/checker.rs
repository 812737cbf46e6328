//! The offline check for operators ([`check_ledger_dir`], behind `basalt store
//! check`): read-only views of a ledger directory through [`basalt_disk`] (real
//! or simulated disk), every entry scanned, nothing modified. Also [`scan_bytes`], the scanner over plain bytes for fuzzing.

use std::path::{Path, PathBuf};

use basalt_disk::{Disk, ReadOnlyMap};

use super::scan::{DataSource, Stop, scan};
use super::{LedgerCheckpoint, LedgerStoreError, UNIT, meta};
use crate::core::HardState;
use crate::entry::{EntryKind, INDEX_UNIT_SIZE, IndexUnit};

/// Scans `bytes` as consecutive data files of `file_size` bytes starting at
/// position 0; returns where the valid entries end and how many there are. For
/// fuzzing the scanner.
pub fn scan_bytes(bytes: &[u8], file_size: i64) -> (i64, u64) {
    struct Mem<'a>(&'a [u8], i64);
    impl DataSource for Mem<'_> {
        fn file_of(&self, pos: i64) -> Option<(PathBuf, i64, i64)> {
            if pos < 0 || pos >= self.end() {
                return None;
            }
            let start = pos - pos % self.1;
            Some((PathBuf::from("mem"), start, start + self.1))
        }
        fn bytes(&self, pos: i64, len: usize) -> Option<&[u8]> {
            let (_, _, end) = self.file_of(pos)?;
            if pos + len as i64 > end {
                return None;
            }
            self.0.get(pos as usize..pos as usize + len)
        }
        fn end(&self) -> i64 {
            (self.0.len() as i64 / self.1) * self.1
        }
    }
    let src = Mem(bytes, file_size.max(1));
    let mut n = 0u64;
    let s = scan(&src, i64::MAX, 0, None, -1, |_, _| {
        n += 1;
        true
    });
    (s.end_pos, n)
}

/// What [`check_ledger_dir`] found: counts, the log's bounds and terms, and the
/// first damage, if any. A snapshot; owns nothing on disk.
#[derive(Debug, Clone, Default)]
pub struct LedgerCheckReport {
    pub data_files: usize,
    pub index_files: usize,
    pub entries: u64,
    pub noop_entries: u64,
    /// Bytes of valid entries (headers included).
    pub bytes: u64,
    pub first_index: i64,
    pub last_index: i64,
    /// Position just after the last valid entry.
    pub end_pos: i64,
    /// `(term, first index of the term, entries)` in log order.
    pub terms: Vec<(i64, i64, u64)>,
    /// The first thing that is not a valid entry, blank or zero tail.
    pub first_bad: Option<BadSpot>,
    /// Index units that do not describe their entry.
    pub index_mismatches: u64,
    pub checkpoint: Option<LedgerCheckpoint>,
    pub hard_state: Option<HardState>,
    /// Data and index files after a gap in the names: creations or removals a
    /// power loss kept out of order, an unsynced tail the next start removes.
    pub stray_files: Vec<PathBuf>,
}

impl LedgerCheckReport {
    /// No damage found. (After a crash, a torn unsynced tail shows up as damage at
    /// the end of the log; the next start cuts it.)
    pub fn is_ok(&self) -> bool {
        self.first_bad.is_none()
    }
}

impl std::fmt::Display for LedgerCheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "data files:       {}", self.data_files)?;
        writeln!(f, "index files:      {}", self.index_files)?;
        writeln!(
            f,
            "entries:          {} ({} no-op), {} bytes",
            self.entries, self.noop_entries, self.bytes
        )?;
        writeln!(
            f,
            "indexes:          {}..={}",
            self.first_index, self.last_index
        )?;
        writeln!(f, "end position:     {}", self.end_pos)?;
        for (term, first, n) in &self.terms {
            writeln!(f, "term {term:>10}:  {n} entries from index {first}")?;
        }
        writeln!(f, "index mismatches: {}", self.index_mismatches)?;
        for p in &self.stray_files {
            writeln!(
                f,
                "after a gap:      {p:?} (unsynced; the next start removes it)"
            )?;
        }
        if let Some(c) = &self.checkpoint {
            writeln!(
                f,
                "checkpoint:       endIndex={} committedIndex={}",
                c.end_index, c.committed_index
            )?;
        }
        if let Some(h) = &self.hard_state {
            writeln!(
                f,
                "term file:        term={} votedFor={:?} leader={:?}",
                h.term, h.voted_for, h.leader
            )?;
        }
        match &self.first_bad {
            None => write!(f, "damage:           none"),
            Some(b) => write!(
                f,
                "damage:           {:?} at offset {}: {}",
                b.path, b.offset, b.reason
            ),
        }
    }
}

/// A damaged spot: file, offset in the file, what is wrong. When no file holds
/// the spot, the data directory is named with the log position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSpot {
    pub path: PathBuf,
    pub offset: u64,
    pub reason: String,
}

/// The files of one directory of a ledger, mapped read-only through
/// [`Disk::map_read_only`] (a shared mapping on the real disk, a copy of the
/// page cache on the simulated one): the contiguous run from the first file,
/// equally sized (loading fails otherwise). Files after a gap in the names are
/// strays, as recovery sees them.
pub(super) struct ReadOnlyFiles {
    files: Vec<(PathBuf, i64, ReadOnlyMap)>,
    file_size: i64,
    /// Files after a gap in the names, not part of the view.
    strays: Vec<PathBuf>,
}

impl ReadOnlyFiles {
    pub(super) fn load(disk: &Disk, dir: &Path) -> Result<ReadOnlyFiles, LedgerStoreError> {
        let mut names = Vec::new();
        if disk.exists(dir) {
            for e in disk.list_dir(dir)? {
                if let (20, Ok(start), false) = (e.name.len(), e.name.parse::<i64>(), e.is_dir) {
                    names.push((start, e.path));
                }
            }
        }
        names.sort();
        let mut files = Vec::new();
        let mut file_size = 0;
        let mut prev: Option<i64> = None;
        let mut strays = Vec::new();
        for (start, path) in names {
            let map = disk.map_read_only(&path)?;
            let len = map.len() as i64;
            if file_size == 0 {
                file_size = len;
            }
            if len != file_size {
                return Err(LedgerStoreError::Corrupt {
                    path,
                    offset: 0,
                    reason: format!("file is {len} bytes, others {file_size}"),
                });
            }
            if !strays.is_empty() || prev.is_some_and(|p| start != p + file_size) {
                // A creation or removal a power loss kept out of order: an
                // unsynced tail, which recovery removes.
                strays.push(path);
                continue;
            }
            prev = Some(start);
            if len == 0 {
                continue;
            }
            files.push((path, start, map));
        }
        Ok(ReadOnlyFiles {
            files,
            file_size,
            strays,
        })
    }

    /// Start of the first file, if there is one.
    pub(super) fn first_start(&self) -> Option<i64> {
        self.files.first().map(|f| f.1)
    }

    pub(super) fn find(&self, pos: i64) -> Option<&(PathBuf, i64, ReadOnlyMap)> {
        let first = self.files.first()?.1;
        if pos < first || self.file_size == 0 {
            return None;
        }
        self.files.get(((pos - first) / self.file_size) as usize)
    }
}

impl DataSource for ReadOnlyFiles {
    fn file_of(&self, pos: i64) -> Option<(PathBuf, i64, i64)> {
        self.find(pos)
            .map(|(p, s, _)| (p.clone(), *s, *s + self.file_size))
    }

    fn bytes(&self, pos: i64, len: usize) -> Option<&[u8]> {
        let (_, start, map) = self.find(pos)?;
        let off = (pos - start) as usize;
        map.get(off..off + len)
    }

    fn end(&self) -> i64 {
        self.files
            .last()
            .map(|(_, s, _)| s + self.file_size)
            .unwrap_or(0)
    }
}

/// Where the checkpoint's header-CRC rule starts (`i64::MAX`: no rule).
pub(super) fn crc_rule(checkpoint: Option<&LedgerCheckpoint>) -> i64 {
    checkpoint
        .and_then(|c| c.header_crc_from)
        .unwrap_or(i64::MAX)
}

/// Checks a ledger directory without modifying it: every entry of every data file
/// (magic, size, position, index continuity, term order, header and body CRC,
/// the header-CRC rule) and its index
/// unit. For the operator tool `basalt store check` ([`check_ledger_dir_on`] on
/// the real disk).
pub fn check_ledger_dir(dir: &Path) -> Result<LedgerCheckReport, LedgerStoreError> {
    check_ledger_dir_on(&Disk::Real, dir)
}

/// [`check_ledger_dir`] on `disk` (the simulator checks its members' simulated
/// directories with it after every restart).
pub fn check_ledger_dir_on(disk: &Disk, dir: &Path) -> Result<LedgerCheckReport, LedgerStoreError> {
    let data = ReadOnlyFiles::load(disk, &dir.join("data"))?;
    let index = ReadOnlyFiles::load(disk, &dir.join("index"))?;
    let mut r = LedgerCheckReport {
        data_files: data.files.len(),
        index_files: index.files.len(),
        first_index: -1,
        last_index: -1,
        checkpoint: meta::load_checkpoint(disk, dir)?,
        stray_files: data.strays.iter().chain(&index.strays).cloned().collect(),
        hard_state: if disk.exists(&dir.join(meta::TERM_FILE)) {
            Some(meta::load_hard_state(disk, dir)?)
        } else {
            None
        },
        ..LedgerCheckReport::default()
    };
    let start = data.files.first().map(|f| f.1).unwrap_or(0);
    let mut terms: Vec<(i64, i64, u64)> = Vec::new();
    let mut mismatches = 0u64;
    let mut entries = 0u64;
    let mut noops = 0u64;
    let mut bytes = 0u64;
    let crc_from = crc_rule(r.checkpoint.as_ref());
    let s = scan(&data, crc_from, start, None, -1, |h, _| {
        entries += 1;
        bytes += h.size as u64;
        if h.kind() == EntryKind::Noop {
            noops += 1;
        }
        match terms.last_mut() {
            Some(t) if t.0 == h.term => t.2 += 1,
            _ => terms.push((h.term, h.index, 1)),
        }
        let unit = index
            .bytes(h.index * UNIT, INDEX_UNIT_SIZE)
            .and_then(IndexUnit::decode);
        if unit != Some(IndexUnit::of(h)) {
            mismatches += 1;
        }
        true
    });
    r.entries = entries;
    r.noop_entries = noops;
    r.bytes = bytes;
    r.terms = terms;
    r.index_mismatches = mismatches;
    r.first_index = s.first.map(|h| h.index).unwrap_or(-1);
    r.last_index = s.last.map(|h| h.index).unwrap_or(-1);
    // Right after the last entry, as recovery puts the end (a blank closing
    // its file belongs to an entry that is not there).
    r.end_pos = s.last.map(|h| h.end_pos()).unwrap_or(s.end_pos);
    if let Stop::Damage { pos, reason } = s.stop {
        let (path, offset) = match data.find(pos) {
            Some((p, st, _)) => (p.clone(), (pos - st) as u64),
            None => (dir.join("data"), pos as u64),
        };
        r.first_bad = Some(BadSpot {
            path,
            offset,
            reason,
        });
    }
    Ok(r)
}
