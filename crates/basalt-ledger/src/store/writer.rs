//! The writer's operations on [`LedgerStore`]: append, truncate, prefault,
//! and the preparation of syncs and checkpoints (run elsewhere, see
//! [`super::SyncJob`]), plus the [`LogRead`] view the core reads the log through.
//!
//! The writer keeps the log contiguous, never rewrites a committed entry, keeps
//! the tail cache contiguous with the log end, and never lets the checkpoint
//! claim more than the log holds (a truncation below it lowers it first).

use std::path::Path;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{
    CheckpointJob, LedgerCheckpoint, LedgerReader, LedgerStore, LedgerStoreError, PREFAULT_AHEAD,
    PREFAULT_CHUNK, PrefaultJob, SyncJob, TAIL_CACHE_BYTES, UNIT, read_unit,
};
use crate::core::LogRead;
use crate::entry::{BLANK_MAGIC, Entry, EntryHeader, HEADER_SIZE, IndexUnit, place};

/// A blank `[-1][rest]`: "skip `rest` bytes".
fn blank(rest: i32) -> [u8; 8] {
    let mut blank = [0u8; 8];
    blank[0..4].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
    blank[4..8].copy_from_slice(&rest.to_be_bytes());
    blank
}

impl LedgerStore {
    /// A reader sharing this store.
    pub fn reader(&self) -> LedgerReader {
        LedgerReader {
            shared: self.shared.clone(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.opts.dir
    }

    pub fn is_poisoned(&self) -> bool {
        self.shared.poisoned.load(Ordering::Acquire)
    }

    /// Refuses every write from now on (after a failed write or sync).
    pub fn poison(&self) {
        self.shared.poisoned.store(true, Ordering::Release);
    }

    pub(super) fn check_writable(&self) -> Result<(), LedgerStoreError> {
        if self.is_poisoned() {
            Err(LedgerStoreError::Poisoned)
        } else {
            Ok(())
        }
    }

    pub(super) fn publish_files(&self) {
        *self.shared.data.write() = self.data.files().to_vec().into();
        *self.shared.index.write() = self.index.files().to_vec().into();
    }

    /// Appends entries whose headers are final (index, term, position, CRC).
    pub fn append(&mut self, entries: &[(EntryHeader, &[u8])]) -> Result<(), LedgerStoreError> {
        self.check_writable()?;
        self.check_reset_settled()?;
        if let (Some((first, _)), Some((last, _))) = (entries.first(), entries.last()) {
            // Every byte below is written into reserved blocks, or nothing is.
            let end = last.pos + last.size as i64;
            let from = self.end_pos.min(first.pos);
            if from >= self.data.files().first().map(|f| f.start()).unwrap_or(from) {
                self.ensure_room(from, end, first.index, last.index)?;
            }
        }
        // The tail cache must stay contiguous with the log end.
        if self
            .tail
            .back()
            .is_some_and(|e| e.index() != self.end_index)
        {
            self.tail.clear();
            self.tail_bytes = 0;
        }
        let mut files_changed = false;
        for (h, body) in entries {
            let pos = self.place_checked(h, body)?;
            files_changed |= self.write_entry(h, body, pos)?;
        }
        if files_changed {
            self.publish_files();
        }
        Ok(())
    }

    /// Where entry `h` goes, refusing it unless it follows the log end, its body
    /// matches the header and the header's position is where the store puts it.
    fn place_checked(&self, h: &EntryHeader, body: &[u8]) -> Result<i64, LedgerStoreError> {
        if self.end_index >= 0 && h.index != self.end_index + 1 {
            return Err(LedgerStoreError::Invalid(format!(
                "append of index {} after {}",
                h.index, self.end_index
            )));
        }
        if body.len() != h.body_len as usize {
            return Err(LedgerStoreError::Invalid(format!(
                "body length {} != header {}",
                body.len(),
                h.body_len
            )));
        }
        let pos = place(self.end_pos, h.size as i64, self.opts.data_file_size)
            .map_err(|e| LedgerStoreError::Invalid(e.to_string()))?;
        if pos != h.pos {
            return Err(LedgerStoreError::Invalid(format!(
                "entry {} placed at {} but the store puts it at {pos}",
                h.index, h.pos
            )));
        }
        Ok(pos)
    }

    /// Writes entry `h` at `pos` (closing the current file with a blank first if
    /// `pos` is in the next one) and its index unit, and moves the log end past
    /// it. Returns whether a file was created.
    fn write_entry(
        &mut self,
        h: &EntryHeader,
        body: &[u8],
        pos: i64,
    ) -> Result<bool, LedgerStoreError> {
        let size = h.size as i64;
        let mut files_changed = false;
        if std::mem::take(&mut self.reset.leading_blank) {
            // The first entry after a reset: its file starts with a blank up
            // to the reset's position.
            let (f, created) = self.data.ensure(self.end_pos)?;
            files_changed |= created;
            self.data_dirty.dir |= created;
            if self.end_pos > f.start() {
                f.ensure_reserved()?;
                // SAFETY: a file of an empty log: nothing in it is published.
                unsafe { f.write(0, &blank((self.end_pos - f.start()) as i32)) };
                self.data_dirty.mark(f.start(), f.start() + 8);
            }
        }
        if pos != self.end_pos {
            // Close the current file with a blank.
            let (f, created) = self.data.ensure(self.end_pos)?;
            files_changed |= created;
            let off = (self.end_pos - f.start()) as usize;
            // SAFETY: the single writer (`&mut self`) writes at its log end,
            // past everything published to readers, into reserved blocks
            // (`ensure_room` ran for the batch).
            unsafe { f.write(off, &blank((f.end() - self.end_pos) as i32)) };
            self.data_dirty.mark(self.end_pos, self.end_pos + 8);
        }
        let (f, created) = self.data.ensure(pos)?;
        files_changed |= created;
        self.data_dirty.dir |= created;
        let off = (pos - f.start()) as usize;
        debug_assert!(pos >= self.shared.committed_pos.load(Ordering::Acquire));
        // SAFETY: as above: `pos` is at or past the log end, unpublished.
        // The header goes out with its own CRC, whoever made it (a DLedger
        // leader's JSON push carries none): the header-CRC rule holds.
        unsafe {
            f.write(off, &h.sealed().encode());
            f.write(off + HEADER_SIZE, body);
        }
        self.data_dirty.mark(pos, pos + size);

        let unit_pos = h.index * UNIT;
        let (uf, created) = self.index.ensure(unit_pos)?;
        files_changed |= created;
        self.index_dirty.dir |= created;
        // SAFETY: the unit of an entry past the log end: unpublished, and
        // written by the single writer only.
        unsafe { uf.write((unit_pos - uf.start()) as usize, &IndexUnit::of(h).encode()) };
        self.index_dirty.mark(unit_pos, unit_pos + UNIT);

        if self.end_index < 0 {
            self.begin_index = h.index;
            self.shared.begin_index.store(h.index, Ordering::Release);
            self.shared.begin_pos.store(pos, Ordering::Release);
            if self.shared.committed_index.load(Ordering::Acquire) < 0 {
                self.shared.committed_pos.store(pos, Ordering::Release);
            }
        }
        self.end_index = h.index;
        self.end_term = h.term;
        self.end_pos = pos + size;
        Ok(files_changed)
    }

    /// Appends whole entries (the leader's after stamping, or the leader's received
    /// by a follower) and keeps them in the tail cache.
    pub fn append_entries(&mut self, entries: &[Entry]) -> Result<(), LedgerStoreError> {
        let v: Vec<(EntryHeader, &[u8])> =
            entries.iter().map(|e| (e.header, &e.body[..])).collect();
        self.append(&v)?;
        for e in entries {
            self.tail_bytes += e.body.len() + HEADER_SIZE;
            self.tail.push_back(Entry {
                header: e.header.sealed(),
                body: e.body.clone(),
            });
        }
        while self.tail_bytes > TAIL_CACHE_BYTES
            && let Some(e) = self.tail.pop_front()
        {
            self.tail_bytes -= e.body.len() + HEADER_SIZE;
        }
        Ok(())
    }

    fn cached(&self, index: i64) -> Option<&Entry> {
        let first = self.tail.front()?.index();
        if index < first {
            return None;
        }
        self.tail.get((index - first) as usize)
    }

    fn drop_tail_from(&mut self, index: i64) {
        while self.tail.back().is_some_and(|e| e.index() >= index) {
            if let Some(e) = self.tail.pop_back() {
                self.tail_bytes -= e.body.len() + HEADER_SIZE;
            }
        }
    }

    fn unit_end_pos(&self, index: i64) -> Option<i64> {
        read_unit(&self.index, index).map(|u| u.pos + u.size as i64)
    }

    /// Removes every entry from `next_index` on; the next entry goes to `next_pos`
    /// (see `LedgerCommand::Truncate`). Never called for committed entries.
    pub fn truncate(&mut self, next_index: i64, next_pos: i64) -> Result<(), LedgerStoreError> {
        self.truncate_as(next_index, next_pos, true)
    }

    /// Removes every entry, whatever the log holds; the next entry is
    /// `next_index` at `next_pos` (see `LedgerCommand::Reset`). At or below
    /// the committed index only when the log holds no committed entry; the
    /// committed index readers see then goes back to `next_index - 1`.
    pub fn reset(&mut self, next_index: i64, next_pos: i64) -> Result<(), LedgerStoreError> {
        self.truncate_as(next_index, next_pos, false)
    }

    fn truncate_as(
        &mut self,
        next_index: i64,
        next_pos: i64,
        may_keep: bool,
    ) -> Result<(), LedgerStoreError> {
        self.check_writable()?;
        let committed = self.shared.committed_index.load(Ordering::Acquire);
        // A reset may start over at or below the committed index when the log
        // holds no committed entry (a follower reset past a purge, whose log
        // starts after its committed index): it removes nothing committed.
        let holds_committed = self.end_index >= 0 && self.begin_index <= committed;
        assert!(
            next_index > committed || (!may_keep && !holds_committed),
            "truncating committed entry {next_index} (committed {committed}, log {}..={})",
            self.begin_index,
            self.end_index
        );
        self.drop_tail_from(next_index);
        // Cut pages are gone: fault them in again from the new end.
        self.prefaulted_until = self.prefaulted_until.min(next_pos);
        let prev = next_index - 1;
        let keep_prefix = may_keep
            && self.end_index >= 0
            && prev >= self.begin_index
            && prev <= self.end_index
            && self.unit_end_pos(prev) == Some(next_pos);
        if keep_prefix {
            self.cut_after(prev, next_pos)?;
        } else {
            self.start_over_at(next_index, next_pos)?;
        }
        self.publish_files();
        Ok(())
    }

    /// Truncation keeping entries `..=prev`, which end at `next_pos`.
    fn cut_after(&mut self, prev: i64, next_pos: i64) -> Result<(), LedgerStoreError> {
        let next_index = prev + 1;
        if let Some(f) = self.data.find(next_pos).cloned() {
            self.data_dirty.fsync.push(f);
        }
        // SAFETY: only uncommitted entries are truncated (asserted by the
        // caller), so nothing from `next_pos` or unit `next_index` on is
        // published to readers.
        self.data_dirty.dir |= unsafe { self.data.cut(next_pos) }?;
        if let Some(f) = self.index.find(next_index * UNIT).cloned() {
            self.index_dirty.fsync.push(f);
        }
        // SAFETY: as above.
        self.index_dirty.dir |= unsafe { self.index.cut(next_index * UNIT) }?;
        self.end_index = prev;
        self.end_term = read_unit(&self.index, prev).map(|u| u.term).unwrap_or(-1);
        self.end_pos = next_pos;
        Ok(())
    }

    /// The next chunk of data pages to fault in, when the writer comes within
    /// `PREFAULT_AHEAD` of what was faulted (creating the next data file ahead of
    /// time if the chunk reaches into it).
    pub fn prefault_job(&mut self) -> Option<PrefaultJob> {
        if !self.prefault_enabled
            || self.is_poisoned()
            || self.check_reset_settled().is_err()
            || self.end_pos + PREFAULT_AHEAD <= self.prefaulted_until
        {
            return None;
        }
        let from = self.prefaulted_until.max(self.end_pos);
        let to = from + PREFAULT_CHUNK;
        let mut created = false;
        let mut failed = false;
        for pos in [from, to - 1] {
            match self
                .data
                .ensure(pos)
                .and_then(|(f, c)| f.ensure_reserved().map(|_| c))
            {
                Ok(c) => created |= c,
                Err(e) => {
                    // Skip this chunk (the writer reserves what it writes on its
                    // own): a full disk costs one warning per chunk, not per append.
                    tracing::warn!(error = %e, "cannot create the next data file ahead of time");
                    failed = true;
                    break;
                }
            }
        }
        if created {
            self.data_dirty.dir = true;
            self.publish_files();
        }
        self.prefaulted_until = to;
        if failed {
            return None;
        }
        Some(PrefaultJob {
            ranges: self.data.ranges(from, to),
        })
    }

    /// Stops prefaulting (the kernel does not support it).
    pub fn disable_prefault(&mut self) {
        self.prefault_enabled = false;
    }

    /// Everything written since the last call, to be synced by [`SyncJob::run`].
    /// Index units are synced by checkpoints (recovery rebuilds newer ones).
    pub fn prepare_sync(&mut self) -> SyncJob {
        let mut job = SyncJob {
            disk: self.disk.clone(),
            ..SyncJob::default()
        };
        job.reset = self.take_reset();
        self.data_dirty.take(&self.data, &mut job);
        // Punched or deleted index files must reach the disk with the truncation.
        job.fsync.append(&mut self.index_dirty.fsync);
        if self.index_dirty.dir {
            self.index_dirty.dir = false;
            job.dirs.push(self.index.dir().to_path_buf());
        }
        job
    }

    /// A checkpoint claiming the entries up to `min(durable_index,
    /// committed_index)` (durable as reported by completed syncs, and
    /// committed) and `committed_index`; syncs the index units first.
    pub fn prepare_checkpoint(
        &mut self,
        durable_index: i64,
        committed_index: i64,
    ) -> CheckpointJob {
        let mut sync = SyncJob {
            disk: self.disk.clone(),
            ..SyncJob::default()
        };
        self.index_dirty.take(&self.index, &mut sync);
        self.checkpoint_prepared();
        // Only committed entries are claimed: no truncation ever removes one,
        // so the checkpoint never claims what a cut (whose pages and names
        // may reach the disk in any order) takes away.
        let end = durable_index.min(committed_index).min(self.end_index);
        // Entries before the first one (purged, or removed by a reset) are
        // claimed by nobody.
        let end = if end < self.begin_index { -1 } else { end };
        CheckpointJob {
            sync,
            dir: self.opts.dir.clone(),
            checkpoint: LedgerCheckpoint {
                end_index: end,
                committed_index,
                reset: None,
                header_crc_from: Some(self.header_crc_from),
            },
        }
    }

    /// Publishes the committed index to readers.
    pub fn set_committed(&mut self, index: i64) {
        if index < 0 || index > self.end_index {
            return;
        }
        if let Some(end) = self.unit_end_pos(index) {
            // Position first: a reader that sees the index also sees its bytes.
            self.shared.committed_pos.store(end, Ordering::Release);
            self.shared.committed_index.store(index, Ordering::Release);
        }
    }
}

impl LogRead for LedgerStore {
    fn begin_index(&self) -> i64 {
        if self.end_index < 0 {
            -1
        } else {
            self.begin_index
        }
    }

    fn end_index(&self) -> i64 {
        self.end_index
    }

    fn end_pos(&self) -> i64 {
        self.end_pos
    }

    fn term_at(&self, index: i64) -> Option<i64> {
        if index < self.begin_index || index > self.end_index || index < 0 {
            return None;
        }
        if let Some(e) = self.cached(index) {
            return Some(e.term());
        }
        read_unit(&self.index, index).map(|u| u.term)
    }

    fn entry(&self, index: i64) -> Result<Option<Entry>, String> {
        if index < self.begin_index || index > self.end_index || index < 0 {
            return Ok(None);
        }
        if let Some(e) = self.cached(index) {
            return Ok(Some(e.clone()));
        }
        let unit =
            read_unit(&self.index, index).ok_or_else(|| format!("no index unit for {index}"))?;
        let hb = self
            .data
            .read(unit.pos, HEADER_SIZE)
            .ok_or_else(|| format!("entry {index} at {} is outside the data files", unit.pos))?;
        let h =
            EntryHeader::decode(&hb).map_err(|e| format!("entry {index} at {}: {e}", unit.pos))?;
        if !unit.matches(&h) {
            return Err(format!(
                "entry {index} at {} does not match its index unit",
                unit.pos
            ));
        }
        let body = self
            .body_of(index, unit.pos + HEADER_SIZE as i64, h.body_len as usize)
            .ok_or_else(|| format!("body of {index} is outside the data files"))?;
        h.check_body(&body)
            .map_err(|e| format!("entry {index} at {}: {e}", unit.pos))?;
        Ok(Some(Entry { header: h, body }))
    }
}

impl LedgerStore {
    /// The body of entry `index` at `pos`: a committed one shares the mapping
    /// (committed bytes are never rewritten, so a push of a catching-up follower
    /// goes from the mapping to the socket); an uncommitted one, which a
    /// truncation may still rewrite, is copied.
    fn body_of(&self, index: i64, pos: i64, len: usize) -> Option<Bytes> {
        if index > self.shared.committed_index.load(Ordering::Acquire) {
            return self.data.read(pos, len).map(Bytes::from);
        }
        let file = self.data.find(pos)?;
        let off = (pos - file.start()) as usize;
        if off + len > file.size() as usize {
            return None;
        }
        Some(Bytes::from_owner(super::SegmentSlice {
            file: file.clone(),
            off,
            len,
        }))
    }
}
