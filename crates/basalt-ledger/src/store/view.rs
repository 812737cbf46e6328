//! [`LedgerFilesView`]: a ledger directory viewed read-only (through
//! [`basalt_disk::Disk::map_read_only`]) for offline tools
//! (`basalt store check` and `dump` in ledger mode). It finds an entry by the
//! position of its body, which is what a ledger-mode broker stores as a
//! record's physical offset, and walks entries in log order. Nothing is
//! modified and no lock is taken.

use std::path::Path;

use basalt_disk::Disk;

use super::checker::{ReadOnlyFiles, crc_rule};
use super::scan::{DataSource, Stop, scan};
use super::{LedgerStoreError, meta};
use crate::entry::{EntryHeader, EntryKind, HEADER_SIZE};

/// A ledger directory's data files, mapped read-only, with the bounds of its
/// valid entries and the commit index its checkpoint records.
pub struct LedgerFilesView {
    data: ReadOnlyFiles,
    /// Position of the first entry (the oldest retained file's start).
    begin_pos: i64,
    /// Position just after the last valid entry.
    end_pos: i64,
    /// `committedIndex` of the checkpoint (-1 without one). The member may
    /// have known a later commit before it stopped.
    checkpoint_committed: i64,
    /// The checkpoint's header-CRC rule (`i64::MAX`: none).
    crc_from: i64,
}

/// One valid entry seen through a [`LedgerFilesView`].
#[derive(Debug, Clone, Copy)]
pub struct ViewedEntry<'a> {
    pub index: i64,
    pub term: i64,
    /// Position of the entry's header.
    pub pos: i64,
    pub kind: EntryKind,
    pub body: &'a [u8],
}

impl ViewedEntry<'_> {
    /// Position of the body: a ledger-mode record's physical offset.
    pub fn body_pos(&self) -> i64 {
        self.pos + HEADER_SIZE as i64
    }
}

impl LedgerFilesView {
    /// Maps `dir`'s data files on the real disk and finds where its valid
    /// entries end.
    pub fn open(dir: &Path) -> Result<LedgerFilesView, LedgerStoreError> {
        LedgerFilesView::open_on(&Disk::Real, dir)
    }

    /// [`LedgerFilesView::open`] on `disk` (real or simulated).
    pub fn open_on(disk: &Disk, dir: &Path) -> Result<LedgerFilesView, LedgerStoreError> {
        let data = ReadOnlyFiles::load(disk, &dir.join("data"))?;
        let begin_pos = data.first_start().unwrap_or(0);
        let checkpoint = meta::load_checkpoint(disk, dir)?;
        let crc_from = crc_rule(checkpoint.as_ref());
        let end_pos = scan(&data, crc_from, begin_pos, None, -1, |_, _| true).end_pos;
        let checkpoint_committed = checkpoint.map(|c| c.committed_index).unwrap_or(-1);
        Ok(LedgerFilesView {
            data,
            begin_pos,
            end_pos,
            checkpoint_committed,
            crc_from,
        })
    }

    pub fn begin_pos(&self) -> i64 {
        self.begin_pos
    }

    pub fn end_pos(&self) -> i64 {
        self.end_pos
    }

    /// The commit index the checkpoint records (-1 without a checkpoint).
    pub fn checkpoint_committed_index(&self) -> i64 {
        self.checkpoint_committed
    }

    /// The valid entry whose body starts at `body_pos`, or why there is none
    /// (no entry header there, a header for another position, a bad body).
    pub fn entry_with_body_at(&self, body_pos: i64) -> Result<ViewedEntry<'_>, String> {
        let pos = body_pos - HEADER_SIZE as i64;
        if pos < self.begin_pos || body_pos > self.end_pos {
            return Err(format!(
                "{body_pos} is outside the ledger's entries ({}..{})",
                self.begin_pos, self.end_pos
            ));
        }
        let head = self
            .data
            .bytes(pos, HEADER_SIZE)
            .ok_or_else(|| format!("no entry header fits before {body_pos}"))?;
        let h = EntryHeader::decode(head).map_err(|e| format!("no entry starts at {pos}: {e}"))?;
        if h.pos != pos {
            return Err(format!("the entry header at {pos} says position {}", h.pos));
        }
        if h.chain_crc == 0 && pos >= self.crc_from {
            return Err(format!(
                "the entry header at {pos} has no CRC, under the rule from {}",
                self.crc_from
            ));
        }
        let body = self
            .data
            .bytes(body_pos, h.body_len as usize)
            .ok_or_else(|| format!("the entry at {pos} runs past its file"))?;
        h.check_body(body)
            .map_err(|e| format!("the entry at {pos} has a bad body: {e}"))?;
        Ok(ViewedEntry {
            index: h.index,
            term: h.term,
            pos,
            kind: h.kind(),
            body,
        })
    }

    /// Calls `f` for each valid entry whose body starts at or after
    /// `from_body_pos`, in log order, until it returns false. Stops at the
    /// end of the valid entries; returns the damage that ended them, if any.
    pub fn for_each_entry(
        &self,
        from_body_pos: i64,
        mut f: impl FnMut(&ViewedEntry<'_>) -> bool,
    ) -> Option<(i64, String)> {
        let s = scan(
            &self.data,
            self.crc_from,
            self.begin_pos,
            None,
            -1,
            |h, body| {
                let e = ViewedEntry {
                    index: h.index,
                    term: h.term,
                    pos: h.pos,
                    kind: h.kind(),
                    body,
                };
                e.body_pos() < from_body_pos || f(&e)
            },
        );
        match s.stop {
            Stop::Damage { pos, reason } => Some((pos, reason)),
            Stop::End => None,
        }
    }
}
