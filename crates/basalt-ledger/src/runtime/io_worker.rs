//! The member's I/O thread (syncs, hard-state writes and checkpoints, run in
//! submission order) and its page-prefault thread, and how the runtime task
//! submits jobs to them and waits for them.

use tokio::sync::mpsc;

use super::{LedgerError, Runtime};
use crate::config::LedgerConfig;
use crate::core::HardState;
use crate::store::{CheckpointJob, LedgerStoreError, PrefaultJob, SyncJob, meta};

/// Work for the I/O thread.
pub(super) enum IoJob {
    Sync { through: i64, job: SyncJob },
    Persist { version: u64, state: HardState },
    Checkpoint { job: CheckpointJob },
}

/// What the I/O thread reports back to the runtime task, one per job.
pub(super) enum IoDone {
    Synced {
        through: i64,
        result: Result<(), LedgerStoreError>,
    },
    Persisted {
        version: u64,
        /// The state written, to write again after a failure for lack of space.
        state: HardState,
        result: Result<(), LedgerStoreError>,
    },
    Checkpointed {
        result: Result<(), LedgerStoreError>,
    },
}

/// The job and completion channels of a member's I/O threads.
pub(super) type IoChannels = (
    std::sync::mpsc::Sender<IoJob>,
    mpsc::UnboundedReceiver<IoDone>,
    std::sync::mpsc::Sender<PrefaultJob>,
);

/// Spawns the page-prefault thread and the I/O thread of `config`'s member.
pub(super) fn spawn_io_threads(config: &LedgerConfig) -> Result<IoChannels, LedgerError> {
    let (io_tx, io_rx) = std::sync::mpsc::channel::<IoJob>();
    let (done_tx, done_rx) = mpsc::unbounded_channel::<IoDone>();
    let (prefault_tx, prefault_rx) = std::sync::mpsc::channel::<crate::store::PrefaultJob>();
    std::thread::Builder::new()
        .name(format!("ledger-prefault-{}", config.self_id))
        .spawn(move || {
            for job in prefault_rx {
                if !job.run() {
                    tracing::info!("page prefaulting unsupported by the kernel; disabled");
                    return;
                }
            }
        })
        .map_err(LedgerError::Io)?;
    let dir = config.data_dir.clone();
    std::thread::Builder::new()
        .name(format!("ledger-io-{}", config.self_id))
        .spawn(move || io_thread(dir, io_rx, done_tx))
        .map_err(LedgerError::Io)?;
    Ok((io_tx, done_rx, prefault_tx))
}

fn io_thread(
    dir: std::path::PathBuf,
    jobs: std::sync::mpsc::Receiver<IoJob>,
    done: mpsc::UnboundedSender<IoDone>,
) {
    for job in jobs {
        let d = match job {
            IoJob::Sync { through, job } => IoDone::Synced {
                through,
                result: job.run(),
            },
            IoJob::Persist { version, state } => IoDone::Persisted {
                version,
                result: meta::store_hard_state(&basalt_disk::Disk::Real, &dir, &state),
                state,
            },
            IoJob::Checkpoint { job } => IoDone::Checkpointed { result: job.run() },
        };
        if done.send(d).is_err() {
            return;
        }
    }
}

impl Runtime {
    pub(super) fn submit(&mut self, job: IoJob) -> bool {
        if self.io_tx.send(job).is_ok() {
            self.io_pending += 1;
            true
        } else {
            false
        }
    }

    /// Waits for every submitted I/O job; false if one failed.
    pub(super) async fn drain_io(&mut self, done: &mut mpsc::UnboundedReceiver<IoDone>) -> bool {
        let mut ok = true;
        while self.io_pending > 0 {
            let Some(d) = done.recv().await else {
                return false;
            };
            self.io_pending -= 1;
            let failed = match d {
                IoDone::Synced { result, .. }
                | IoDone::Persisted { result, .. }
                | IoDone::Checkpointed { result } => result.err(),
            };
            if let Some(e) = failed {
                tracing::error!(member = %self.config.self_id, error = %e, "ledger I/O failed during shutdown");
                self.store.poison();
                ok = false;
            }
        }
        ok
    }
}
