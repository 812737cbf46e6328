//! Store health: once an fsync fails, the store is poisoned for writes.
//!
//! After a failed fsync the kernel may have dropped the dirty pages it could
//! not write, so "retry the fsync" can report success for data that is gone.
//! The only safe answer is to stop acknowledging writes until an operator
//! restarts the broker (recovery then re-validates what is really on disk).

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::error::StoreError;

/// Shared by every component that fsyncs.
#[derive(Debug, Default)]
pub struct Health {
    poisoned: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the first failure; later writes are refused.
    pub fn poison(&self, err: &StoreError) {
        let mut r = self.reason.lock();
        if r.is_none() {
            tracing::error!(error = %err, "fsync failed: the store refuses writes from now on");
            *r = Some(err.to_string());
        }
        self.poisoned.store(true, Ordering::SeqCst);
    }

    #[inline]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// `Err(Poisoned)` if the store is poisoned.
    pub fn check(&self) -> Result<(), StoreError> {
        if self.is_poisoned() {
            return Err(StoreError::Poisoned {
                reason: self.reason.lock().clone().unwrap_or_default(),
            });
        }
        Ok(())
    }
}
