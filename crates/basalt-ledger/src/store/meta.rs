//! The small metadata files of a ledger directory, replaced atomically (write a
//! temporary file, fsync it, rename it over the old one, fsync the directory):
//!
//! * `checkpoint` — Java properties text with `endIndex=` (Basalt: an index known
//!   to be durable with its index unit when the file was written),
//!   `committedIndex=`, and Basalt's `resetIndex=`/`resetPos=` and
//!   `headerCrcFrom=`;
//! * `currterm` — `currTerm=`, `voteLeader=` (DLedger's keys) and `leaderId=`.

use std::collections::BTreeMap;
use std::path::Path;

use basalt_disk::Disk;

use crate::core::HardState;
use crate::protocol::NodeId;

use super::error::LedgerStoreError;

pub const CHECKPOINT_FILE: &str = "checkpoint";
pub const TERM_FILE: &str = "currterm";

/// Contents of the ledger's `checkpoint` file. Invariant kept by the store: it
/// never claims more (`end_index`) than the log holds durably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerCheckpoint {
    pub end_index: i64,
    pub committed_index: i64,
    /// `(index, position)` of a reset (a truncation that keeps nothing) whose
    /// removals may not all be durable yet: a log that does not begin with
    /// that entry is the reset's leftovers, and recovery removes it
    /// (`resetIndex=`, `resetPos=`; Basalt only).
    pub reset: Option<(i64, i64)>,
    /// The header-CRC rule (`headerCrcFrom=`; Basalt only): every entry at or
    /// past this position was written with its header CRC, so a header there
    /// without one is damage. Entries before it (written by DLedger, or by a
    /// Basalt without header CRCs) are not covered. `None`: no rule.
    pub header_crc_from: Option<i64>,
}

/// Parses Java properties text leniently: `key=value` or `key:value` lines, `#`/`!`
/// comments, surrounding blanks ignored.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let split = line.find(['=', ':']);
        let (k, v) = match split {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, ""),
        };
        map.insert(k.trim().to_string(), v.trim().to_string());
    }
    map
}

/// Writes `contents` to `dir/name` atomically and durably (temp file, fsync,
/// rename, directory fsync: [`Disk::atomic_replace`]). When it fails before the
/// rename (a full disk), the old file stands.
pub fn replace_file(
    disk: &Disk,
    dir: &Path,
    name: &str,
    contents: &[u8],
) -> Result<(), LedgerStoreError> {
    Ok(disk.atomic_replace(&dir.join(name), contents)?)
}

fn read_properties(
    disk: &Disk,
    path: &Path,
) -> Result<Option<BTreeMap<String, String>>, LedgerStoreError> {
    let Some(bytes) = disk.read_file(path)? else {
        return Ok(None);
    };
    let text = String::from_utf8(bytes).map_err(|_| LedgerStoreError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason: "not UTF-8 text".into(),
    })?;
    Ok(Some(parse_properties(&text)))
}

fn number(
    path: &Path,
    map: &BTreeMap<String, String>,
    key: &str,
) -> Result<Option<i64>, LedgerStoreError> {
    match map.get(key) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| LedgerStoreError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            reason: format!("{key}={v:?} is not a number"),
        }),
    }
}

/// Reads the checkpoint; `None` when there is none.
pub fn load_checkpoint(
    disk: &Disk,
    dir: &Path,
) -> Result<Option<LedgerCheckpoint>, LedgerStoreError> {
    let path = dir.join(CHECKPOINT_FILE);
    let Some(map) = read_properties(disk, &path)? else {
        return Ok(None);
    };
    let reset = match (
        number(&path, &map, "resetIndex")?,
        number(&path, &map, "resetPos")?,
    ) {
        (Some(i), Some(p)) => Some((i, p)),
        _ => None,
    };
    Ok(Some(LedgerCheckpoint {
        end_index: number(&path, &map, "endIndex")?.unwrap_or(-1),
        committed_index: number(&path, &map, "committedIndex")?.unwrap_or(-1),
        reset,
        header_crc_from: number(&path, &map, "headerCrcFrom")?.filter(|p| *p >= 0),
    }))
}

pub fn store_checkpoint(
    disk: &Disk,
    dir: &Path,
    c: LedgerCheckpoint,
) -> Result<(), LedgerStoreError> {
    let mut text = format!(
        "endIndex={}\ncommittedIndex={}\n",
        c.end_index, c.committed_index
    );
    if let Some((i, p)) = c.reset {
        text.push_str(&format!("resetIndex={i}\nresetPos={p}\n"));
    }
    if let Some(p) = c.header_crc_from {
        text.push_str(&format!("headerCrcFrom={p}\n"));
    }
    replace_file(disk, dir, CHECKPOINT_FILE, text.as_bytes())
}

/// Removes the checkpoint (it then claims nothing durable; the next start scans
/// the whole log). Needs no free space, unlike a rewrite.
pub fn remove_checkpoint(disk: &Disk, dir: &Path) -> Result<(), LedgerStoreError> {
    if disk.remove_file(&dir.join(CHECKPOINT_FILE))? {
        disk.sync_dir(dir)?;
    }
    Ok(())
}

/// Reads the term file; the default state when there is none.
pub fn load_hard_state(disk: &Disk, dir: &Path) -> Result<HardState, LedgerStoreError> {
    let path = dir.join(TERM_FILE);
    let Some(map) = read_properties(disk, &path)? else {
        return Ok(HardState::default());
    };
    let id = |key: &str| {
        map.get(key)
            .filter(|v| !v.is_empty())
            .map(|v| NodeId::new(v))
    };
    Ok(HardState {
        term: number(&path, &map, "currTerm")?.unwrap_or(0),
        voted_for: id("voteLeader"),
        leader: id("leaderId"),
    })
}

pub fn store_hard_state(disk: &Disk, dir: &Path, s: &HardState) -> Result<(), LedgerStoreError> {
    let text = format!(
        "currTerm={}\nvoteLeader={}\nleaderId={}\n",
        s.term,
        s.voted_for.as_ref().map(|v| v.as_str()).unwrap_or(""),
        s.leader.as_ref().map(|v| v.as_str()).unwrap_or("")
    );
    replace_file(disk, dir, TERM_FILE, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const REAL: &Disk = &Disk::Real;

    #[test]
    fn properties_are_parsed_leniently() {
        let m = parse_properties("#c\n endIndex = 5\ncommittedIndex:3\n\n!x\nflag\n");
        assert_eq!(m["endIndex"], "5");
        assert_eq!(m["committedIndex"], "3");
        assert_eq!(m["flag"], "");
    }

    #[test]
    fn checkpoint_and_term_round_trip_atomically() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load_checkpoint(REAL, dir.path()).unwrap(), None);
        let c = LedgerCheckpoint {
            end_index: 10,
            committed_index: 7,
            reset: None,
            header_crc_from: None,
        };
        store_checkpoint(REAL, dir.path(), c).unwrap();
        assert_eq!(load_checkpoint(REAL, dir.path()).unwrap(), Some(c));
        // A leftover temporary file from a crash does not matter.
        fs::write(dir.path().join("checkpoint.tmp"), b"garbage").unwrap();
        assert_eq!(load_checkpoint(REAL, dir.path()).unwrap(), Some(c));
        let c2 = LedgerCheckpoint {
            end_index: 11,
            committed_index: 11,
            reset: Some((40, 4096)),
            header_crc_from: Some(0),
        };
        store_checkpoint(REAL, dir.path(), c2).unwrap();
        assert_eq!(load_checkpoint(REAL, dir.path()).unwrap(), Some(c2));
        assert!(!dir.path().join("checkpoint.tmp").exists());

        assert_eq!(
            load_hard_state(REAL, dir.path()).unwrap(),
            HardState::default()
        );
        let s = HardState {
            term: 4,
            voted_for: Some(NodeId::new("n1")),
            leader: None,
        };
        store_hard_state(REAL, dir.path(), &s).unwrap();
        assert_eq!(load_hard_state(REAL, dir.path()).unwrap(), s);
        let text = fs::read_to_string(dir.path().join(TERM_FILE)).unwrap();
        assert!(text.contains("currTerm=4") && text.contains("voteLeader=n1"));
    }

    #[test]
    fn bad_numbers_are_reported_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(CHECKPOINT_FILE), "endIndex=abc\n").unwrap();
        let e = load_checkpoint(REAL, dir.path()).unwrap_err().to_string();
        assert!(e.contains("checkpoint") && e.contains("endIndex"), "{e}");
    }
}
