//! Executing the core's commands: writes go to the store, syncs and hard-state
//! writes to the I/O thread, messages to the transport, answers to the callers.

use bytes::BytesMut;

use super::{IoJob, LedgerError, Runtime, StampSlot};
use crate::core::{AppendReceipt, ClientId, LedgerAppendError, LedgerCommand, Placement};
use crate::entry::{Entry, EntryKind};
use crate::store::LedgerStoreError;

impl Runtime {
    pub(super) fn execute(&mut self, cmd: LedgerCommand) -> Result<bool, LedgerStoreError> {
        match cmd {
            LedgerCommand::Send(env) => self.transport.send(env),
            LedgerCommand::AppendAsLeader {
                client,
                term,
                entries,
            } => return self.append_as_leader(client, term, entries),
            LedgerCommand::AppendAsFollower { entries } => {
                self.store.append_entries(&entries)?;
                self.prefault();
                return Ok(true);
            }
            LedgerCommand::Truncate {
                next_index,
                next_pos,
            } => {
                self.store.truncate(next_index, next_pos)?;
                return Ok(true);
            }
            LedgerCommand::Reset {
                next_index,
                next_pos,
            } => {
                self.store.reset(next_index, next_pos)?;
                return Ok(true);
            }
            LedgerCommand::Sync { through } => {
                let job = self.store.prepare_sync();
                if !self.submit(IoJob::Sync { through, job }) {
                    return Err(LedgerStoreError::Invalid(
                        "ledger I/O thread is gone".into(),
                    ));
                }
            }
            LedgerCommand::PersistHardState { version, state } => {
                if !self.submit(IoJob::Persist { version, state }) {
                    return Err(LedgerStoreError::Invalid(
                        "ledger I/O thread is gone".into(),
                    ));
                }
            }
            LedgerCommand::CommitAdvanced { committed_index } => {
                self.store.set_committed(committed_index)
            }
            LedgerCommand::AppendResult { client, result } => self.answer_append(client, result),
            LedgerCommand::TransferResult { client, result } => {
                if let Some(reply) = self.transfers.remove(&client) {
                    let result = result.map_err(LedgerError::from);
                    self.replies.push(Box::new(move || {
                        let _ = reply.send(result);
                    }));
                }
            }
        }
        Ok(false)
    }

    /// Writes a leader's append: lets the caller stamp each body with its index and
    /// position, then appends the entries (the no-op has empty bodies).
    fn append_as_leader(
        &mut self,
        client: Option<ClientId>,
        term: i64,
        entries: Vec<Placement>,
    ) -> Result<bool, LedgerStoreError> {
        let mut bodies: Vec<BytesMut> = match client {
            Some(c) => match self.appends.remove(&c) {
                Some((mut bodies, stamp, reply)) => {
                    let mut slots: Vec<StampSlot<'_>> = entries
                        .iter()
                        .zip(bodies.iter_mut())
                        .map(|(p, b)| StampSlot {
                            index: p.index,
                            pos: p.pos,
                            body: &mut b[..],
                        })
                        .collect();
                    stamp(&mut slots);
                    self.written.insert(c, reply);
                    bodies
                }
                None => {
                    return Err(LedgerStoreError::Invalid(format!(
                        "append for unknown client {c}"
                    )));
                }
            },
            None => entries.iter().map(|_| BytesMut::new()).collect(),
        };
        if bodies.len() != entries.len() {
            return Err(LedgerStoreError::Invalid(
                "append body count changed".into(),
            ));
        }
        let batch: Vec<Entry> = entries
            .iter()
            .zip(bodies.drain(..))
            .map(|(p, b)| Entry::new(p.kind, p.index, term, p.pos, b.freeze()))
            .collect();
        self.store.append_entries(&batch)?;
        self.prefault();
        debug_assert!(
            entries
                .iter()
                .all(|p| p.kind == EntryKind::Noop || client.is_some())
        );
        Ok(true)
    }

    /// Queues the answer to an append, sent once the step's status is published.
    fn answer_append(
        &mut self,
        client: ClientId,
        result: Result<AppendReceipt, LedgerAppendError>,
    ) {
        let reply = self
            .written
            .remove(&client)
            .or_else(|| self.appends.remove(&client).map(|a| a.2));
        if let Some(reply) = reply {
            let result = result.map_err(|e| self.map_append_error(e));
            self.replies.push(Box::new(move || {
                let _ = reply.send(result);
            }));
        }
    }

    pub(super) fn prefault(&mut self) {
        if let Some(job) = self.store.prefault_job()
            && self.prefault_tx.send(job).is_err()
        {
            self.store.disable_prefault();
        }
    }

    pub(super) fn map_append_error(&self, e: LedgerAppendError) -> LedgerError {
        match e {
            LedgerAppendError::NotLeader { leader_id } => LedgerError::NotLeader {
                leader_addr: leader_id
                    .as_ref()
                    .and_then(|l| self.config.peers.get(l).cloned()),
                leader_id,
            },
            LedgerAppendError::Transferring => LedgerError::Transferring,
            LedgerAppendError::Busy => LedgerError::Busy,
            LedgerAppendError::TooLarge { body_len, max } => {
                LedgerError::TooLarge { body_len, max }
            }
            LedgerAppendError::Poisoned => LedgerError::Poisoned,
            LedgerAppendError::LeadershipLost => LedgerError::LeadershipLost,
            LedgerAppendError::Timeout => LedgerError::Timeout,
        }
    }
}
