//! An in-memory ledger log with a model of what survives a crash.
//!
//! It follows the same contract as the mmap store: entries must be placed by
//! [`crate::entry::place`], a truncation keeps a prefix or drops everything, and
//! only what a completed sync covered is sure to survive a crash. Of the unsynced
//! tail, a crash keeps a random prefix (a torn write that recovery cut at the first
//! bad entry). A truncation that was not synced yet may be undone by a crash, in
//! part or in whole.

use crate::core::LogRead;
use crate::entry::{Entry, place};

#[derive(Debug, Clone)]
struct PendingTruncate {
    old_first: i64,
    old_start_pos: i64,
    /// The durable entries before the truncation.
    old: Vec<Entry>,
    /// How many of them the truncation kept.
    keep: usize,
}

/// The simulated log of one member. See the module documentation.
#[derive(Debug, Clone)]
pub struct MemLog {
    file_size: i64,
    /// Index of `entries[0]` (meaningless when empty).
    first: i64,
    entries: Vec<Entry>,
    /// Where the log starts when it is empty (0, or the position of a reset).
    start_pos: i64,
    end_pos: i64,
    /// `entries[..durable_len]` survive any crash.
    durable_len: usize,
    pending_truncate: Option<PendingTruncate>,
    unsynced_truncation: bool,
    /// A purge that did not finish may have removed the entries before this
    /// index (its unlinks reach the disk in any order until synced): the
    /// next crash may bring back a log starting anywhere up to it.
    purge_floor: Option<i64>,
}

impl MemLog {
    pub fn new(file_size: i64) -> MemLog {
        MemLog {
            file_size,
            first: 0,
            entries: Vec::new(),
            start_pos: 0,
            end_pos: 0,
            durable_len: 0,
            pending_truncate: None,
            unsynced_truncation: false,
            purge_floor: None,
        }
    }

    /// The index set by [`MemLog::purge_interrupted`], until the next crash.
    pub fn purge_floor(&self) -> Option<i64> {
        self.purge_floor
    }

    /// A purge up to `index` was started and did not finish: until the next
    /// crash, the log may have lost its entries before `index`.
    pub fn purge_interrupted(&mut self, index: i64) {
        self.purge_floor = Some(self.purge_floor.unwrap_or(index).max(index));
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entries a crash cannot take away.
    pub fn durable_entries(&self) -> &[Entry] {
        &self.entries[..self.durable_len]
    }

    /// Drops the entries before `index`, keeping at least the last one (what
    /// retention does on a member; for tests).
    pub fn purge_before(&mut self, index: i64) {
        let n = ((index - self.first).max(0) as usize).min(self.entries.len().saturating_sub(1));
        self.entries.drain(..n);
        self.first += n as i64;
        self.durable_len = self.durable_len.saturating_sub(n);
    }

    /// Index of the first entry (valid when not empty).
    pub fn first_index(&self) -> i64 {
        self.first
    }

    /// Whether a truncation was made that no completed sync covers yet (removed
    /// bytes may still be on the disk, synced or not).
    pub fn truncation_pending(&self) -> bool {
        self.unsynced_truncation
    }

    /// Appends entries at the end; checks indexes and positions.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), String> {
        for e in entries {
            let expected_index = if self.entries.is_empty() {
                e.index()
            } else {
                self.first + self.entries.len() as i64
            };
            if e.index() != expected_index {
                return Err(format!(
                    "append index {} != expected {expected_index}",
                    e.index()
                ));
            }
            let pos = place(self.end_pos, e.size(), self.file_size).map_err(|x| x.to_string())?;
            if pos != e.pos() {
                return Err(format!(
                    "append of index {} at pos {} but the log places it at {pos}",
                    e.index(),
                    e.pos()
                ));
            }
            if self.entries.is_empty() {
                self.first = e.index();
            }
            self.entries.push(e.clone());
            self.end_pos = e.header.end_pos();
        }
        Ok(())
    }

    /// Drops entries from `next_index` on (see `LedgerCommand::Truncate`). Returns the
    /// entries removed.
    pub fn truncate(&mut self, next_index: i64, next_pos: i64) -> Vec<Entry> {
        self.truncate_as(next_index, next_pos, true)
    }

    /// Drops every entry (see `LedgerCommand::Reset`); the log restarts empty at
    /// `next_index`/`next_pos`. Returns the entries removed.
    pub fn reset(&mut self, next_index: i64, next_pos: i64) -> Vec<Entry> {
        self.truncate_as(next_index, next_pos, false)
    }

    fn truncate_as(&mut self, next_index: i64, next_pos: i64, may_keep: bool) -> Vec<Entry> {
        let durable_before = self.durable_len;
        self.unsynced_truncation = true;
        let keep_prefix = may_keep
            && !self.entries.is_empty()
            && next_index > self.first
            && next_index - 1 <= self.end_index()
            && self.entries[(next_index - 1 - self.first) as usize]
                .header
                .end_pos()
                == next_pos;
        let (removed, keep) = if keep_prefix {
            let k = (next_index - self.first) as usize;
            let removed = self.entries.split_off(k);
            self.end_pos = next_pos;
            (removed, k)
        } else {
            let removed = std::mem::take(&mut self.entries);
            self.first = next_index;
            self.start_pos = next_pos;
            self.end_pos = next_pos;
            (removed, 0)
        };
        if durable_before > keep {
            let (old_first, old_start_pos, old) = match &self.pending_truncate {
                // A second truncation before any sync: the oldest durable state is
                // still what a crash may bring back.
                Some(p) => (p.old_first, p.old_start_pos, p.old.clone()),
                None => {
                    let mut old: Vec<Entry> = self.entries[..keep.min(self.entries.len())].to_vec();
                    old.extend(removed.iter().take(durable_before - keep).cloned());
                    let first = if keep_prefix {
                        self.first
                    } else {
                        removed.first().map(|e| e.index()).unwrap_or(self.first)
                    };
                    let start = old.first().map(|e| e.pos()).unwrap_or(self.start_pos);
                    (first, start, old)
                }
            };
            let keep_now = match &self.pending_truncate {
                Some(p) => p.keep.min(keep),
                None => keep,
            };
            self.pending_truncate = Some(PendingTruncate {
                old_first,
                old_start_pos,
                old,
                keep: keep_now,
            });
        }
        self.durable_len = self.durable_len.min(keep);
        removed
    }

    /// A sync that started after every truncation completed, covering `..=through`.
    pub fn synced(&mut self, through: i64) {
        if !self.entries.is_empty() && through >= self.first {
            let n = ((through - self.first + 1) as usize).min(self.entries.len());
            self.durable_len = self.durable_len.max(n);
        }
        self.pending_truncate = None;
        self.unsynced_truncation = false;
    }

    /// A crash: keeps the durable entries and, of the rest, what `pick(lo, hi)`
    /// chooses (a count in `lo..=hi`). Everything left is durable afterwards (the
    /// store syncs what it recovers). Returns the lowest index that may have changed.
    pub fn crash(&mut self, mut pick: impl FnMut(usize, usize) -> usize) -> i64 {
        if let Some(p) = self.pending_truncate.take() {
            let n = pick(p.keep, p.old.len());
            self.first = p.old_first;
            self.start_pos = p.old_start_pos;
            self.entries = p.old[..n].to_vec();
        } else {
            let n = pick(self.durable_len, self.entries.len());
            self.entries.truncate(n);
        }
        self.end_pos = self
            .entries
            .last()
            .map(|e| e.header.end_pos())
            .unwrap_or(self.start_pos);
        self.unsynced_truncation = false;
        self.durable_len = self.entries.len();
        self.first
    }
}

impl MemLog {
    /// What a crash may leave: the candidate entries (the log, or the durable
    /// state before an unsynced truncation), how many of them must survive, and
    /// the index of the first.
    fn crash_candidates(&self) -> (&[Entry], usize, i64) {
        match &self.pending_truncate {
            Some(p) => (&p.old, p.keep, p.old_first),
            None => (&self.entries, self.durable_len, self.first),
        }
    }

    /// Byte position where what must survive a crash ends: damage past it is a
    /// torn unsynced tail.
    pub fn durable_end_pos(&self) -> i64 {
        let (cands, lo, _) = self.crash_candidates();
        match lo.checked_sub(1).and_then(|k| cands.get(k)) {
            Some(e) => e.header.end_pos(),
            None => match &self.pending_truncate {
                Some(p) => p.old_start_pos,
                None => self.start_pos,
            },
        }
    }

    /// A crash whose outcome the real store decided: `recovered` is the log a
    /// real [`crate::store::LedgerStore`] recovered, `end_pos` where its next
    /// entry goes. It must be a prefix of what [`MemLog::crash`] allows (every
    /// durable entry, then some of the unsynced ones, each intact); then the
    /// model becomes it. Returns the lowest index that may have changed.
    pub fn crash_to(&mut self, recovered: &[Entry], end_pos: i64) -> Result<i64, String> {
        let floor = self.purge_floor.take();
        let (mut cands, mut lo, mut first) = self.crash_candidates();
        // An unfinished purge removed some of the oldest files: the log then
        // starts later, at most at the purge's new first entry.
        if let (Some(floor), Some(r)) = (floor, recovered.first()) {
            let k = r.index() - first;
            if k > 0 && r.index() <= floor && (k as usize) < cands.len() {
                cands = &cands[k as usize..];
                lo = lo.saturating_sub(k as usize);
                first = r.index();
            }
        }
        // With nothing that must survive (a reset not yet synced), the removal
        // of the old files may have reached the disk for some and not others:
        // any run of the old entries may come back.
        let skip = match recovered.first() {
            Some(r) if lo == 0 && !cands.is_empty() => (r.index() - first).max(0) as usize,
            _ => 0,
        };
        if let Some(r) = recovered.first()
            && !cands.is_empty()
            && r.index() != first + skip as i64
        {
            return Err(format!(
                "recovered log starts at index {} but the log started at {first}",
                r.index()
            ));
        }
        for (k, e) in cands.iter().enumerate().take(lo) {
            if recovered.get(k) != Some(e) {
                return Err(format!(
                    "durable entry {} (term {}) is missing or changed after recovery: {}",
                    e.index(),
                    e.term(),
                    match recovered.get(k) {
                        None => "missing".to_string(),
                        Some(r) => format!("found index {} term {}", r.index(), r.term()),
                    }
                ));
            }
        }
        if skip + recovered.len() > cands.len() {
            return Err(format!(
                "recovery kept entries up to {}, more than the {} ever written",
                first + (skip + recovered.len()) as i64 - 1,
                cands.len()
            ));
        }
        for (k, r) in recovered.iter().enumerate().skip(lo) {
            if *r != cands[skip + k] {
                return Err(format!(
                    "recovered unsynced entry {} differs from what was written: {:?} != {:?}",
                    r.index(),
                    r.header,
                    cands[skip + k].header
                ));
            }
        }
        let start_pos = match &self.pending_truncate {
            Some(p) => p.old_start_pos,
            None => self.start_pos,
        };
        self.first = recovered.first().map(|e| e.index()).unwrap_or(first);
        self.entries = recovered.to_vec();
        self.start_pos = if self.entries.is_empty() {
            end_pos
        } else {
            start_pos
        };
        self.end_pos = end_pos;
        self.pending_truncate = None;
        self.unsynced_truncation = false;
        self.durable_len = self.entries.len();
        Ok(self.first)
    }
}

impl LogRead for MemLog {
    fn begin_index(&self) -> i64 {
        if self.entries.is_empty() {
            -1
        } else {
            self.first
        }
    }

    fn end_index(&self) -> i64 {
        if self.entries.is_empty() {
            -1
        } else {
            self.first + self.entries.len() as i64 - 1
        }
    }

    fn end_pos(&self) -> i64 {
        self.end_pos
    }

    fn term_at(&self, index: i64) -> Option<i64> {
        self.get(index).map(|e| e.term())
    }

    fn entry(&self, index: i64) -> Result<Option<Entry>, String> {
        Ok(self.get(index).cloned())
    }
}

impl MemLog {
    fn get(&self, index: i64) -> Option<&Entry> {
        if self.entries.is_empty() || index < self.first {
            return None;
        }
        self.entries.get((index - self.first) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::EntryKind;
    use bytes::Bytes;

    fn entry(log: &MemLog, index: i64, term: i64, body: &'static [u8]) -> Entry {
        let size = 48 + body.len() as i64;
        let pos = place(log.end_pos(), size, 200).unwrap();
        Entry::new(
            EntryKind::Normal,
            index,
            term,
            pos,
            Bytes::from_static(body),
        )
    }

    #[test]
    fn append_truncate_sync_crash() {
        let mut log = MemLog::new(200);
        for i in 0..4 {
            let e = entry(&log, i, 1, b"0123456789");
            log.append(&[e]).unwrap();
        }
        // 58-byte entries, 200-byte files: three fit in the first file, the fourth rolls.
        assert_eq!(log.entry(3).unwrap().unwrap().pos(), 200);
        log.synced(1);
        assert_eq!(log.durable_entries().len(), 2);
        let end1 = log.entry(0).unwrap().unwrap().header.end_pos();
        let removed = log.truncate(1, end1);
        assert_eq!(removed.len(), 3);
        assert_eq!(log.end_index(), 0);
        // Crash before the truncation is synced: index 1 may come back.
        let mut copy = log.clone();
        copy.crash(|_, hi| hi);
        assert_eq!(copy.end_index(), 1);
        log.synced(0);
        log.crash(|_, hi| hi);
        assert_eq!(log.end_index(), 0);
    }

    #[test]
    fn reset_drops_everything() {
        let mut log = MemLog::new(200);
        let e = entry(&log, 0, 1, b"x");
        log.append(&[e]).unwrap();
        log.truncate(5, 400);
        assert_eq!(log.end_index(), -1);
        assert_eq!(log.end_pos(), 400);
        let e = Entry::new(EntryKind::Normal, 5, 2, 400, Bytes::from_static(b"y"));
        log.append(&[e]).unwrap();
        assert_eq!(log.begin_index(), 5);
    }
}
