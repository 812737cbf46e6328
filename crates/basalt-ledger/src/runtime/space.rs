//! What the runtime does about a full disk: it checks for room before the core
//! counts on a write (a leader's append is refused with
//! [`super::LedgerError::NoSpace`], a follower drops a push it has no room for, as a
//! lossy network would), and writes a term/vote file again until there is room
//! for it. None of this poisons the store.

use std::time::Duration;

use tokio::time::Instant;

use super::{IoJob, Runtime};
use crate::core::{Event, HardState, LogRead, Role};
use crate::protocol::{Envelope, PushType, Request, Rpc};
use crate::store::LedgerStoreError;

impl Runtime {
    /// Room for a leader's append of these bodies: the files it writes are made
    /// and their blocks allocated before the core assigns indexes, so a full disk
    /// refuses the append (the caller gets [`super::LedgerError::NoSpace`]) instead of
    /// failing a write the core already counts on, which would poison the store.
    pub(super) fn room_for_append(&mut self, body_lens: &[u32]) -> Result<(), String> {
        if self.core.role() != Role::Leader || self.store.is_poisoned() || body_lens.is_empty() {
            return Ok(());
        }
        match self.store.ensure_room_for_bodies(body_lens) {
            Err(e) if e.is_no_space() => {
                tracing::warn!(member = %self.config.self_id, error = %e, "append refused: disk full");
                Err(e.to_string())
            }
            // Any other failure shows again, and is handled, when the append writes.
            _ => Ok(()),
        }
    }

    /// Steps a message from a peer. A push whose entries this member would write
    /// (APPEND continuing its log, or TRUNCATE, which ends with writing its entry)
    /// is dropped when the disk has no room for them, as if the network had lost
    /// it: the leader sends it again later, and nothing is poisoned.
    pub(super) fn on_message(&mut self, env: Envelope) {
        if let Rpc::Request {
            body: Request::Push(req),
            ..
        } = &env.rpc
            && let (Some(first), Some(last)) = (req.entries.first(), req.entries.last())
            && !self.store.is_poisoned()
            && ((req.push_type == PushType::Append && first.index() == self.store.end_index() + 1)
                || req.push_type == PushType::Truncate)
        {
            let end = last.header.end_pos();
            let from = if req.push_type == PushType::Append {
                self.store.end_pos().min(first.pos())
            } else {
                first.pos()
            };
            if let Err(e) = self
                .store
                .ensure_room(from, end, first.index(), last.index())
                && e.is_no_space()
            {
                tracing::warn!(member = %self.config.self_id, error = %e,
                    "disk full: entries from the leader are dropped until space is freed");
                return;
            }
        }
        self.step_deferred(Event::Message(env));
    }

    /// A term/vote write failed for lack of space: the old file stands, votes and
    /// messages wait for this one, which is written again in a second.
    pub(super) fn persist_later(&mut self, e: LedgerStoreError, version: u64, state: HardState) {
        tracing::warn!(member = %self.config.self_id, error = %e,
            "disk full: the term/vote file is written again in 1 s");
        self.persist_retry = Some((Instant::now() + Duration::from_secs(1), version, state));
    }

    /// A checkpoint write failed for lack of space: the old one stands (it claims
    /// less, which is safe); the next is tried at the next interval.
    pub(super) fn checkpoint_later(&mut self, e: LedgerStoreError) {
        tracing::warn!(member = %self.config.self_id, error = %e,
            "disk full: the ledger checkpoint keeps its last content");
        self.checkpointed = (i64::MIN, i64::MIN);
    }

    /// Writes again a hard state whose write failed for lack of space, when due.
    pub(super) fn retry_persist(&mut self) {
        if let Some((at, version, state)) = self.persist_retry.take() {
            if Instant::now() < at {
                self.persist_retry = Some((at, version, state));
            } else if !self.submit(IoJob::Persist { version, state }) {
                self.storage_failed(LedgerStoreError::Invalid(
                    "ledger I/O thread is gone".into(),
                ));
            }
        }
    }
}
