//! The core's mirror of the local log: group commit (one sync at a time), the
//! durable index, storage failure, and where the next entry goes.

use crate::config::AckMode;
use crate::entry::place;

use super::{LedgerCommand, LedgerCore, LogRead, Role};

impl LedgerCore {
    /// Group commit: one sync at a time, covering everything written so far.
    pub(crate) fn maybe_sync(&mut self) {
        if self.poisoned || self.sync_in_flight.is_some() || self.end_index <= self.durable_index {
            return;
        }
        self.sync_in_flight = Some(self.end_index);
        self.out.push(LedgerCommand::Sync {
            through: self.end_index,
        });
    }

    pub(super) fn on_synced(&mut self, through: i64, log: &dyn LogRead) {
        if self.poisoned {
            // After a failed write or sync nothing more is acknowledged: a sync
            // that completes later (one already queued when a checkpoint or a
            // term write failed) counts for nothing.
            return;
        }
        if self.sync_in_flight.is_some_and(|s| s == through) {
            self.sync_in_flight = None;
        }
        // A sync never covers more than what is in the log now: a truncation cannot
        // happen while a sync is outstanding (see `EntryHandler`).
        let through = through.min(self.end_index);
        if through > self.durable_index {
            self.durable_index = through;
        }
        debug_assert!(self.durable_index <= self.end_index);
        self.handler_on_synced(log);
    }

    pub(crate) fn on_storage_failed(&mut self, reason: &str) {
        tracing::error!(member = %self.self_id, reason, "ledger store failed; refusing writes");
        self.poisoned = true;
        self.sync_in_flight = None;
        if self.role == Role::Leader {
            let term = self.term;
            self.become_follower(term, None);
        } else if self.role != Role::Follower {
            self.role = Role::Follower;
        }
    }

    /// Position for the next entry of `size` bytes after the current end.
    pub(crate) fn place_next(&self, size: i64) -> Result<i64, crate::entry::EntryError> {
        place(self.end_pos, size, self.cfg.data_file_size)
    }

    /// The term a log index has, looking at this step's appends too.
    pub(crate) fn term_of(&self, log: &dyn LogRead, index: i64) -> Option<i64> {
        if index == self.end_index {
            Some(self.end_term)
        } else if index > self.end_index || index < 0 {
            None
        } else {
            log.term_at(index)
        }
    }

    pub(crate) fn own_watermark(&self) -> i64 {
        match self.cfg.ack_mode {
            AckMode::Durable => self.durable_index,
            AckMode::Memory => self.end_index,
        }
    }

    /// Highest index each member is known to hold, self included (leader only).
    pub(crate) fn all_watermarks(&self) -> Vec<i64> {
        let mut v = vec![self.own_watermark()];
        if let Some(ls) = &self.leader_state {
            v.extend(ls.dispatchers.values().map(|d| d.watermark));
        }
        v
    }
}
