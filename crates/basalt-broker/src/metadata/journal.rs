//! The append-only journal kept beside a metadata snapshot
//! (`config/topics.json.journal` beside `topics.json`): each change to the
//! table is appended as an entry, so creating a topic costs a small append
//! and one fsync instead of a rewrite of the whole table. The snapshot stays
//! the RocketMQ-readable file; the journal is folded into it (compaction)
//! when it grows past a bound, at start and at shutdown.
//!
//! On disk the journal is a sequence of frames, one per group commit:
//!
//! ```text
//! frame  := len:u32le crc:u32le payload[len]     crc = masked CRC32 of payload
//! payload := entry*                              at least one entry
//! entry  := elen:u32le bytes[elen]
//! ```
//!
//! A batch of changes is one frame, so a crash while one is written leaves
//! at most that last frame incomplete or failing its CRC: a *torn tail*,
//! ignored on read (none of it was acknowledged, since acknowledgements wait
//! for the frame's fsync). A frame that fails its checks and is followed by
//! more bytes was damaged after it was made durable: reading refuses it,
//! naming the file and the frame's offset.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use basalt_common::crc::masked_crc32;
use thiserror::Error;

/// Frame header: length and CRC.
const FRAME_HEADER: usize = 8;
/// The largest frame a journal may hold (a batch of changes, not a table).
pub const MAX_FRAME: usize = 64 << 20;

/// Why a journal could not be read or written.
#[derive(Debug, Error)]
pub enum JournalError {
    #[error("metadata journal {file}: damaged frame at offset {offset}: {reason}")]
    Damaged {
        file: PathBuf,
        offset: u64,
        reason: &'static str,
    },
    #[error("metadata journal {file}: entry at offset {offset} does not decode: {reason}")]
    BadEntry {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("metadata journal {file} at offset {offset}: {source}")]
    Io {
        file: PathBuf,
        offset: u64,
        #[source]
        source: std::io::Error,
    },
}

/// Where and why the decoder stopped at a frame it refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDamage {
    pub offset: u64,
    pub reason: &'static str,
}

/// The entries of a journal's valid prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedJournal<'a> {
    /// Each entry with the offset of the frame that holds it.
    pub entries: Vec<(u64, &'a [u8])>,
    /// Length of the valid prefix; bytes past it are a torn tail.
    pub valid_len: u64,
}

impl DecodedJournal<'_> {
    /// Whether the journal ends in a torn frame.
    pub fn torn(&self, file_len: u64) -> bool {
        self.valid_len < file_len
    }
}

/// Encodes one frame holding `entries`.
pub fn encode_frame<E: AsRef<[u8]>>(entries: &[E]) -> Vec<u8> {
    let payload_len: usize = entries.iter().map(|e| 4 + e.as_ref().len()).sum();
    let mut out = Vec::with_capacity(FRAME_HEADER + payload_len);
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for e in entries {
        out.extend_from_slice(&(e.as_ref().len() as u32).to_le_bytes());
        out.extend_from_slice(e.as_ref());
    }
    let crc = masked_crc32(&out[FRAME_HEADER..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Splits a journal's bytes into entries. See the module documentation for
/// what counts as a torn tail and what is refused.
pub fn decode_journal(bytes: &[u8]) -> Result<DecodedJournal<'_>, FrameDamage> {
    let mut entries = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        match check_frame(rest) {
            Ok(payload) => {
                split_entries(payload, at as u64, &mut entries)?;
                at += FRAME_HEADER + payload.len();
            }
            Err(reason) => {
                if is_tail(rest) {
                    break;
                }
                return Err(FrameDamage {
                    offset: at as u64,
                    reason,
                });
            }
        }
    }
    Ok(DecodedJournal {
        entries,
        valid_len: at as u64,
    })
}

/// The payload of the frame at the start of `rest`, if its checks pass.
fn check_frame(rest: &[u8]) -> Result<&[u8], &'static str> {
    if rest.len() < FRAME_HEADER {
        return Err("frame header cut short");
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    if len == 0 {
        return Err("empty frame");
    }
    if len > MAX_FRAME {
        return Err("frame longer than the largest allowed");
    }
    let payload = rest
        .get(FRAME_HEADER..FRAME_HEADER + len)
        .ok_or("frame runs past the end of the file")?;
    if masked_crc32(payload) != crc {
        return Err("CRC mismatch");
    }
    Ok(payload)
}

/// Whether a frame that failed its checks can be the torn last write: it
/// reaches (or runs past) the end of the file, or everything from it on is
/// zero (space the file system allocated but never got the data for).
fn is_tail(rest: &[u8]) -> bool {
    if rest.len() < FRAME_HEADER || rest.iter().all(|&b| b == 0) {
        return true;
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    len <= MAX_FRAME && FRAME_HEADER + len >= rest.len()
}

fn split_entries<'a>(
    mut payload: &'a [u8],
    frame_offset: u64,
    out: &mut Vec<(u64, &'a [u8])>,
) -> Result<(), FrameDamage> {
    let damaged = |reason| FrameDamage {
        offset: frame_offset,
        reason,
    };
    while !payload.is_empty() {
        let head = payload.get(..4).ok_or(damaged("entry length cut short"))?;
        let n = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let body = payload
            .get(4..4 + n)
            .ok_or(damaged("entry runs past its frame"))?;
        out.push((frame_offset, body));
        payload = &payload[4 + n..];
    }
    Ok(())
}

/// An open journal file. Owns the file's append position; invariant: every
/// byte below `len` is a valid frame that has been fsynced (or was read back
/// at open), so appending at `len` overwrites only a torn tail.
#[derive(Debug)]
pub struct JournalFile {
    path: PathBuf,
    file: File,
    len: u64,
}

impl JournalFile {
    /// Opens (creating if missing) the journal at `path` and returns it with
    /// the entries it holds. A torn tail is dropped on the next append; a
    /// damaged frame before the tail is an error.
    /// Each entry comes with the offset of its frame.
    #[allow(clippy::type_complexity)]
    pub fn open(path: &Path) -> Result<(Self, Vec<(u64, Vec<u8>)>), JournalError> {
        let io = |offset, source| JournalError::Io {
            file: path.to_path_buf(),
            offset,
            source,
        };
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io(0, e))?;
        if let (false, Some(dir)) = (existed, path.parent()) {
            basalt_store::fs_util::fsync_dir(dir)
                .map_err(|e| io(0, std::io::Error::other(e.to_string())))?;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| io(0, e))?;
        let decoded = decode_journal(&bytes).map_err(|d| JournalError::Damaged {
            file: path.to_path_buf(),
            offset: d.offset,
            reason: d.reason,
        })?;
        if decoded.torn(bytes.len() as u64) {
            tracing::warn!(
                file = %path.display(),
                valid = decoded.valid_len,
                len = bytes.len(),
                "metadata journal ends in a torn frame; ignoring it"
            );
        }
        let entries = decoded
            .entries
            .iter()
            .map(|(o, e)| (*o, e.to_vec()))
            .collect();
        let len = decoded.valid_len;
        Ok((
            JournalFile {
                path: path.to_path_buf(),
                file,
                len,
            },
            entries,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of valid frames.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends one frame holding `entries` and fsyncs it. On error the
    /// append position is unchanged: the next append overwrites what this
    /// one may have left.
    pub fn append<E: AsRef<[u8]>>(&mut self, entries: &[E]) -> Result<(), JournalError> {
        let frame = encode_frame(entries);
        let at = self.len;
        let io = |source| JournalError::Io {
            file: self.path.clone(),
            offset: at,
            source,
        };
        self.file.write_all_at(&frame, at).map_err(io)?;
        // A tail left by a torn or failed write past the new end would read
        // as damage once a later frame follows it: cut it off.
        let end = at + frame.len() as u64;
        if self.file.metadata().map_err(io)?.len() > end {
            self.file.set_len(end).map_err(io)?;
        }
        self.file.sync_data().map_err(io)?;
        self.len = end;
        Ok(())
    }

    /// Empties the journal (its entries are in the snapshot now) and fsyncs.
    /// Does nothing to an empty file, so a start on a full disk writes nothing.
    pub fn clear(&mut self) -> Result<(), JournalError> {
        let on_disk = self.file.metadata().map(|m| m.len()).unwrap_or(1);
        if self.len == 0 && on_disk == 0 {
            return Ok(());
        }
        let io = |source| JournalError::Io {
            file: self.path.clone(),
            offset: 0,
            source,
        };
        self.file.set_len(0).map_err(io)?;
        self.file.sync_all().map_err(io)?;
        self.len = 0;
        Ok(())
    }
}

/// Bodies for the cargo-fuzz target `metadata_journal`
/// (crates/basalt-broker/fuzz) and for the proptest smoke run below.
pub mod fuzzing {
    use super::*;

    /// Decodes arbitrary bytes as a journal: never panics; a valid prefix's
    /// entries re-encode (one frame each) to a journal that decodes to the
    /// same entries; a refused frame lies inside the input.
    pub fn journal_decode(data: &[u8]) {
        match decode_journal(data) {
            Ok(d) => {
                assert!(d.valid_len as usize <= data.len());
                let bodies: Vec<&[u8]> = d.entries.iter().map(|(_, e)| *e).collect();
                let again: Vec<u8> = bodies.iter().flat_map(|e| encode_frame(&[e])).collect();
                let back = decode_journal(&again).expect("re-encoded journal decodes");
                let back: Vec<&[u8]> = back.entries.iter().map(|(_, e)| *e).collect();
                assert_eq!(back, bodies);
            }
            Err(d) => assert!((d.offset as usize) < data.len()),
        }
    }
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
