//! Room on the disk for what the writer is about to write: the files it needs
//! exist and have their blocks allocated before a byte goes into a mapping (see
//! [`super::mapped`]), so a full disk refuses an append instead of failing it
//! halfway or killing the process.

use super::{HEADER_SIZE, LedgerStore, LedgerStoreError, UNIT};
use crate::entry::place;

impl LedgerStore {
    /// Makes sure the data files holding `[from_pos, end_pos)` and the index files
    /// holding the units of `first_index..=last_index` exist with their blocks
    /// allocated, so that writing there cannot fail. On a full disk this fails
    /// ([`LedgerStoreError::is_no_space`]) before anything is written: the caller refuses
    /// the append and the store stays writable.
    pub fn ensure_room(
        &mut self,
        from_pos: i64,
        end_pos: i64,
        first_index: i64,
        last_index: i64,
    ) -> Result<(), LedgerStoreError> {
        self.check_reset_settled()?;
        let mut created = false;
        for (list, dirty, from, to) in [
            (&mut self.data, &mut self.data_dirty, from_pos, end_pos),
            (
                &mut self.index,
                &mut self.index_dirty,
                first_index * UNIT,
                (last_index + 1) * UNIT,
            ),
        ] {
            let mut pos = from;
            while pos < to {
                let (f, c) = list.ensure(pos)?;
                dirty.dir |= c;
                created |= c;
                f.ensure_reserved()?;
                pos = f.end();
            }
        }
        if created {
            self.publish_files();
        }
        Ok(())
    }

    /// Room for appending entries of these body lengths as the next ones, placed
    /// as the leader places them (see [`LedgerStore::ensure_room`]). Lengths that
    /// do not fit a data file are left to the caller to refuse.
    pub fn ensure_room_for_bodies(&mut self, body_lens: &[u32]) -> Result<(), LedgerStoreError> {
        let mut end = self.end_pos;
        for len in body_lens {
            let size = HEADER_SIZE as i64 + *len as i64;
            match place(end, size, self.opts.data_file_size) {
                Ok(pos) => end = pos + size,
                Err(_) => return Ok(()),
            }
        }
        let first = self.end_index + 1;
        self.ensure_room(self.end_pos, end, first, first + body_lens.len() as i64 - 1)
    }
}
