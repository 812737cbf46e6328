//! Stopping a member: every waiting caller gets `Shutdown`, everything written is
//! synced, and a final checkpoint says so.

use tokio::sync::mpsc;

use super::{IoDone, IoJob, LedgerError, Runtime};
use crate::core::LogRead;

impl Runtime {
    pub(super) async fn shutdown(&mut self, done: &mut mpsc::UnboundedReceiver<IoDone>) {
        self.transport.shutdown();
        for (_, (_, _, reply)) in self.appends.drain() {
            let _ = reply.send(Err(LedgerError::Shutdown));
        }
        for (_, reply) in self.written.drain() {
            let _ = reply.send(Err(LedgerError::Shutdown));
        }
        for (_, reply) in self.transfers.drain() {
            let _ = reply.send(Err(LedgerError::Shutdown));
        }
        if self.store.is_poisoned() {
            return;
        }
        // Everything written becomes durable, then the checkpoint says so.
        let end = self.store.end_index();
        let sync = self.store.prepare_sync();
        if !self.submit(IoJob::Sync {
            through: end,
            job: sync,
        }) || !self.drain_io(done).await
        {
            return;
        }
        let checkpoint = self
            .store
            .prepare_checkpoint(end, self.core.committed_index());
        if self.submit(IoJob::Checkpoint { job: checkpoint }) {
            self.drain_io(done).await;
        }
    }
}
