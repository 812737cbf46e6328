//! The runtime task's loop: it waits on I/O completions, peer messages, handle
//! requests and the core's next deadline, steps the core for each, and answers
//! callers once the step's status is published.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::ledger_handle::Control;
use super::{IoDone, LedgerError, Runtime};
use crate::core::Event;
use crate::protocol::Envelope;
use crate::store::LedgerStoreError;

impl Runtime {
    pub(super) async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<Envelope>,
        mut control: mpsc::Receiver<Control>,
        mut done: mpsc::UnboundedReceiver<IoDone>,
    ) {
        loop {
            let deadline = self.core.next_deadline();
            let wake = if deadline == u64::MAX {
                self.start + Duration::from_secs(3600 * 24)
            } else {
                self.start + Duration::from_millis(deadline)
            };
            let checkpoint_due = self.checkpoint_wanted();
            let wake = if checkpoint_due {
                wake.min(self.next_checkpoint)
            } else {
                wake
            };
            let wake = match &self.persist_retry {
                Some((at, _, _)) => wake.min(*at),
                None => wake,
            };
            tokio::select! {
                biased;
                Some(d) = done.recv() => {
                    self.io_pending -= 1;
                    self.on_io_done(d);
                }
                Some(env) = inbox.recv() => {
                    // Take what else is queued as well: one push round for the burst.
                    self.on_message(env);
                    for _ in 0..256 {
                        match inbox.try_recv() {
                            Ok(env) => self.on_message(env),
                            Err(_) => break,
                        }
                    }
                    self.flush_steps();
                }
                c = control.recv() => match c {
                    Some(Control::Shutdown { reply }) => {
                        self.shutdown(&mut done).await;
                        let _ = reply.send(());
                        return;
                    }
                    Some(c) => {
                        self.on_control(c);
                        for _ in 0..256 {
                            match control.try_recv() {
                                Ok(Control::Shutdown { reply }) => {
                                    self.flush_steps();
                                    self.shutdown(&mut done).await;
                                    let _ = reply.send(());
                                    return;
                                }
                                Ok(c) => self.on_control(c),
                                Err(_) => break,
                            }
                        }
                        self.flush_steps();
                    }
                    None => {
                        self.shutdown(&mut done).await;
                        return;
                    }
                },
                _ = tokio::time::sleep_until(wake) => {
                    if deadline != u64::MAX && Instant::now() >= self.start + Duration::from_millis(deadline) {
                        self.step(Event::Tick);
                    }
                    if self.checkpoint_wanted() && Instant::now() >= self.next_checkpoint {
                        self.checkpoint();
                    }
                    self.retry_persist();
                }
            }
        }
    }

    pub(super) fn on_control(&mut self, c: Control) {
        match c {
            Control::Append {
                bodies,
                stamp,
                reply,
            } => {
                let lens: Vec<u32> = bodies.iter().map(|b| b.len() as u32).collect();
                if let Err(why) = self.room_for_append(&lens) {
                    let _ = reply.send(Err(LedgerError::NoSpace(why)));
                    return;
                }
                let client = self.next_client;
                self.next_client += 1;
                self.appends.insert(client, (bodies, stamp, reply));
                self.step_deferred(Event::ClientAppend {
                    client,
                    body_lens: lens,
                });
            }
            Control::Transfer { to, reply } => {
                let client = self.next_client;
                self.next_client += 1;
                self.transfers.insert(client, reply);
                self.step_deferred(Event::TransferLeadership { client, to });
            }
            Control::Purge { before_pos, reply } => {
                // The writer detaches the files; unlinking them (and syncing
                // the directories) happens on a blocking thread.
                match self.store.prepare_purge(before_pos) {
                    Ok(job) => {
                        tokio::task::spawn_blocking(move || {
                            let _ = reply.send(job.run().map_err(LedgerError::from));
                        });
                    }
                    Err(e) => {
                        let _ = reply.send(Err(LedgerError::from(e)));
                    }
                }
                self.publish();
            }
            Control::Shutdown { .. } => {}
        }
    }

    pub(super) fn on_io_done(&mut self, d: IoDone) {
        match d {
            IoDone::Synced { through, result } => match result {
                Ok(()) => self.step(Event::Synced { through }),
                Err(e) => self.storage_failed(e),
            },
            IoDone::Persisted {
                version,
                state,
                result,
            } => match result {
                Ok(()) => self.step(Event::Persisted { version }),
                Err(e) if e.is_no_space() => self.persist_later(e, version, state),
                Err(e) => self.storage_failed(e),
            },
            IoDone::Checkpointed { result } => {
                self.checkpoint_in_flight = false;
                match result {
                    Ok(()) => {}
                    Err(e) if e.is_no_space() => self.checkpoint_later(e),
                    Err(e) => self.storage_failed(e),
                }
            }
        }
    }

    pub(super) fn storage_failed(&mut self, e: LedgerStoreError) {
        tracing::error!(member = %self.config.self_id, error = %e, "ledger I/O failed; poisoning the store");
        self.store.poison();
        self.step(Event::StorageFailed {
            reason: e.to_string(),
        });
    }

    /// Steps the core with `ev` and executes the commands, including the follow-up
    /// `Written` / `StorageFailed` events.
    pub(super) fn step(&mut self, ev: Event) {
        self.step_deferred(ev);
        self.flush_steps();
    }

    /// Steps the core with `ev` and executes its commands, but leaves the
    /// follow-up events to [`Runtime::flush_steps`]: one `Written` (one push round)
    /// covers a burst of appends.
    pub(super) fn step_deferred(&mut self, ev: Event) {
        let now = self.now_ms();
        let cmds = self.core.step(now, ev, &self.store);
        for cmd in cmds {
            match self.execute(cmd) {
                Ok(w) => self.wrote |= w,
                Err(e) => {
                    tracing::error!(member = %self.config.self_id, error = %e, "ledger write failed; poisoning the store");
                    self.store.poison();
                    self.failed.push(e.to_string());
                }
            }
        }
    }

    /// Feeds the pending `StorageFailed`/`Written` events, then publishes the
    /// status and sends the answers (status first: a caller whose append resolved
    /// sees a status that includes it).
    pub(super) fn flush_steps(&mut self) {
        loop {
            let ev = if let Some(reason) = self.failed.pop() {
                Event::StorageFailed { reason }
            } else if std::mem::take(&mut self.wrote) {
                Event::Written
            } else {
                break;
            };
            self.step_deferred(ev);
        }
        self.publish();
        for r in self.replies.drain(..) {
            r();
        }
    }
}
