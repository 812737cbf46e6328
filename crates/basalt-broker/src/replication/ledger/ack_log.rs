//! The leader's own record of what it acknowledged (`ledgerAckLogEnable`).
//!
//! Each acknowledged ledger send appends one line to
//! `{storePathRootDir}/ledger-acks.log`, written before the answer leaves
//! the broker:
//!
//! ```text
//! ack TERM FIRST_INDEX LAST_INDEX
//! ```
//!
//! `TERM` is the term the entries were appended and committed in, and
//! `FIRST_INDEX..=LAST_INDEX` the ledger entries the send became. Raft's
//! promise, checked by the fault tests against the members' final ledgers:
//! every acknowledged index holds an entry of the acknowledged term for
//! good. A deposed leader that acknowledged after the new leader's term
//! started to overwrite its tail would leave a line whose indexes hold the
//! new term's entries.
//!
//! The line goes to the page cache with one `write(2)` (no fsync): it
//! survives `kill -9`, which is what the tests do, not a power loss. It is
//! a diagnostic and costs one small write per send, so it is off by default.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use basalt_ledger::AppendReceipt;
use parking_lot::Mutex;

use crate::broker::BrokerError;

/// File name of the log under the store root.
pub const LEDGER_ACK_LOG_FILE: &str = "ledger-acks.log";

/// Appends one line per acknowledged send. Lines are whole: each is one
/// `write` of an `O_APPEND` descriptor, under the lock.
pub struct LedgerAckLog {
    path: PathBuf,
    file: Mutex<File>,
    /// A failed write was reported already (warned once, not per send).
    failed: AtomicBool,
}

impl LedgerAckLog {
    /// Opens (or creates) the log under `root`, appending to what an
    /// earlier run wrote.
    pub fn open(root: &Path) -> Result<LedgerAckLog, BrokerError> {
        let path = root.join(LEDGER_ACK_LOG_FILE);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| BrokerError::Other(format!("{}: {e}", path.display())))?;
        Ok(LedgerAckLog {
            path,
            file: Mutex::new(file),
            failed: AtomicBool::new(false),
        })
    }

    /// Notes that the send `receipt` describes is being acknowledged.
    pub fn record(&self, receipt: &AppendReceipt) {
        debug_assert!(receipt.first_index <= receipt.last_index);
        let line = format_ack_line(receipt);
        // A write of a few bytes to the page cache; the lock is never held
        // across anything slower.
        let r = self.file.lock().write_all(line.as_bytes());
        if let Err(e) = r
            && !self.failed.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(file = %self.path.display(), error = %e, "could not write the ledger ack log; later acks go unrecorded");
        }
    }
}

/// The log's line for one acknowledged send.
pub fn format_ack_line(receipt: &AppendReceipt) -> String {
    format!(
        "ack {} {} {}\n",
        receipt.term, receipt.first_index, receipt.last_index
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_append_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let r = |term, first, last| AppendReceipt {
            term,
            first_index: first,
            last_index: last,
        };
        LedgerAckLog::open(dir.path()).unwrap().record(&r(1, 0, 2));
        let log = LedgerAckLog::open(dir.path()).unwrap();
        log.record(&r(3, 7, 7));
        let text = std::fs::read_to_string(dir.path().join(LEDGER_ACK_LOG_FILE)).unwrap();
        assert_eq!(text, "ack 1 0 2\nack 3 7 7\n");
    }
}
