//! The small metadata files of a ledger directory, replaced atomically (write a
//! temporary file, fsync it, rename it over the old one, fsync the directory):
//!
//! * `checkpoint` — Java properties text with `endIndex=` (Basalt: an index known
//!   to be durable with its index unit when the file was written) and
//!   `committedIndex=`;
//! * `currterm` — `currTerm=`, `voteLeader=` (DLedger's keys) and `leaderId=`.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::core::HardState;
use crate::protocol::NodeId;

use super::error::{LedgerStoreError, io_err};
use super::mapped::sync_dir;

pub const CHECKPOINT_FILE: &str = "checkpoint";
pub const TERM_FILE: &str = "currterm";

/// Contents of the ledger's `checkpoint` file. Invariant kept by the store: it
/// never claims more (`end_index`) than the log holds durably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerCheckpoint {
    pub end_index: i64,
    pub committed_index: i64,
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

/// Writes `contents` to `dir/name` atomically and durably. When it fails before
/// the rename (a full disk), the old file stands and the temporary one is removed.
pub fn replace_file(dir: &Path, name: &str, contents: &[u8]) -> Result<(), LedgerStoreError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    let written = (|| {
        if super::faults::disk_full(&tmp) {
            return Err(io_err(
                &tmp,
                "write",
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        let mut f = File::create(&tmp).map_err(|e| io_err(&tmp, "create", e))?;
        f.write_all(contents)
            .map_err(|e| io_err(&tmp, "write", e))?;
        f.sync_all().map_err(|e| io_err(&tmp, "fsync", e))
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, &dst).map_err(|e| io_err(&dst, "rename", e))?;
    sync_dir(dir)
}

fn read_properties(path: &Path) -> Result<Option<BTreeMap<String, String>>, LedgerStoreError> {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| LedgerStoreError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                reason: "not UTF-8 text".into(),
            })?;
            Ok(Some(parse_properties(&text)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, "read", e)),
    }
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
pub fn load_checkpoint(dir: &Path) -> Result<Option<LedgerCheckpoint>, LedgerStoreError> {
    let path = dir.join(CHECKPOINT_FILE);
    let Some(map) = read_properties(&path)? else {
        return Ok(None);
    };
    Ok(Some(LedgerCheckpoint {
        end_index: number(&path, &map, "endIndex")?.unwrap_or(-1),
        committed_index: number(&path, &map, "committedIndex")?.unwrap_or(-1),
    }))
}

pub fn store_checkpoint(dir: &Path, c: LedgerCheckpoint) -> Result<(), LedgerStoreError> {
    let text = format!(
        "endIndex={}\ncommittedIndex={}\n",
        c.end_index, c.committed_index
    );
    replace_file(dir, CHECKPOINT_FILE, text.as_bytes())
}

/// Removes the checkpoint (it then claims nothing durable; the next start scans
/// the whole log). Needs no free space, unlike a rewrite.
pub fn remove_checkpoint(dir: &Path) -> Result<(), LedgerStoreError> {
    let path = dir.join(CHECKPOINT_FILE);
    match fs::remove_file(&path) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(&path, "remove", e)),
    }
}

/// Reads the term file; the default state when there is none.
pub fn load_hard_state(dir: &Path) -> Result<HardState, LedgerStoreError> {
    let path = dir.join(TERM_FILE);
    let Some(map) = read_properties(&path)? else {
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

pub fn store_hard_state(dir: &Path, s: &HardState) -> Result<(), LedgerStoreError> {
    let text = format!(
        "currTerm={}\nvoteLeader={}\nleaderId={}\n",
        s.term,
        s.voted_for.as_ref().map(|v| v.as_str()).unwrap_or(""),
        s.leader.as_ref().map(|v| v.as_str()).unwrap_or("")
    );
    replace_file(dir, TERM_FILE, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(load_checkpoint(dir.path()).unwrap(), None);
        let c = LedgerCheckpoint {
            end_index: 10,
            committed_index: 7,
        };
        store_checkpoint(dir.path(), c).unwrap();
        assert_eq!(load_checkpoint(dir.path()).unwrap(), Some(c));
        // A leftover temporary file from a crash does not matter.
        fs::write(dir.path().join("checkpoint.tmp"), b"garbage").unwrap();
        assert_eq!(load_checkpoint(dir.path()).unwrap(), Some(c));
        let c2 = LedgerCheckpoint {
            end_index: 11,
            committed_index: 11,
        };
        store_checkpoint(dir.path(), c2).unwrap();
        assert_eq!(load_checkpoint(dir.path()).unwrap(), Some(c2));
        assert!(!dir.path().join("checkpoint.tmp").exists());

        assert_eq!(load_hard_state(dir.path()).unwrap(), HardState::default());
        let s = HardState {
            term: 4,
            voted_for: Some(NodeId::new("n1")),
            leader: None,
        };
        store_hard_state(dir.path(), &s).unwrap();
        assert_eq!(load_hard_state(dir.path()).unwrap(), s);
        let text = fs::read_to_string(dir.path().join(TERM_FILE)).unwrap();
        assert!(text.contains("currTerm=4") && text.contains("voteLeader=n1"));
    }

    #[test]
    fn bad_numbers_are_reported_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(CHECKPOINT_FILE), "endIndex=abc\n").unwrap();
        let e = load_checkpoint(dir.path()).unwrap_err().to_string();
        assert!(e.contains("checkpoint") && e.contains("endIndex"), "{e}");
    }
}
