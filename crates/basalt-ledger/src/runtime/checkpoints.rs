//! Checkpoints: the runtime records (durable end, committed index) at most once
//! per interval, on the I/O thread, whenever either moved.

use std::time::Duration;

use tokio::time::Instant;

use super::{IoJob, Runtime};

impl Runtime {
    pub(super) fn checkpoint_wanted(&self) -> bool {
        !self.checkpoint_in_flight
            && !self.store.is_poisoned()
            && (self.core.durable_index(), self.core.committed_index()) != self.checkpointed
    }

    pub(super) fn checkpoint(&mut self) {
        let (durable, committed) = (self.core.durable_index(), self.core.committed_index());
        let job = self.store.prepare_checkpoint(durable, committed);
        self.checkpointed = (durable, committed);
        self.next_checkpoint =
            Instant::now() + Duration::from_millis(self.config.checkpoint_interval_ms);
        self.checkpoint_in_flight = self.submit(IoJob::Checkpoint { job });
    }
}
