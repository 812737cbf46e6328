//! The core's boundary with the runtime: what goes into a step ([`Event`], read
//! access to the log through [`LogRead`]) and what comes out ([`LedgerCommand`]).

use crate::entry::{Entry, EntryKind};
use crate::protocol::{Envelope, NodeId};

use super::{AppendReceipt, HardState, LedgerAppendError, TransferError};

/// Identifies a caller's request (append or transfer) across the runtime boundary.
pub type ClientId = u64;

/// Read access to the local log, as of the end of the previous step.
pub trait LogRead {
    /// First index held, −1 when the log is empty.
    fn begin_index(&self) -> i64;
    /// Last index held, −1 when the log is empty.
    fn end_index(&self) -> i64;
    /// Byte position just after the last entry (where the next one would go before
    /// a file roll).
    fn end_pos(&self) -> i64;
    /// Term of the entry at `index`, `None` when not held.
    fn term_at(&self, index: i64) -> Option<i64>;
    /// The entry at `index` (`Ok(None)` when not held). `Err` means the stored entry
    /// is unreadable (bad CRC, I/O error).
    fn entry(&self, index: i64) -> Result<Option<Entry>, String>;
}

/// Where one entry of a leader append goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub index: i64,
    pub pos: i64,
    pub kind: EntryKind,
    pub body_len: u32,
}

/// Inputs of the core.
#[derive(Debug, Clone)]
pub enum Event {
    /// Time passed (the runtime calls this at [`LedgerCore::next_deadline`](super::LedgerCore::next_deadline)).
    Tick,
    /// A message from a peer.
    Message(Envelope),
    /// A caller wants to append entries with these body lengths.
    ClientAppend {
        client: ClientId,
        body_lens: Vec<u32>,
    },
    /// A caller asks the leader to hand leadership to `to`.
    TransferLeadership { client: ClientId, to: NodeId },
    /// The append/truncate commands of the previous step were executed.
    Written,
    /// The `Sync` command finished: entries up to `through` are durable.
    Synced { through: i64 },
    /// The `PersistHardState` command with this version finished.
    Persisted { version: u64 },
    /// Writing, syncing or persisting failed: the store refuses writes from now on.
    StorageFailed { reason: String },
}

/// Outputs of the ledger core; the runtime executes them in the order given.
#[derive(Debug, Clone)]
pub enum LedgerCommand {
    /// Send a message.
    Send(Envelope),
    /// Append entries as leader at these exact positions; the runtime supplies the
    /// bodies of `client` (or an empty no-op body) and may let the caller rewrite
    /// each body with its index and position first.
    AppendAsLeader {
        client: Option<ClientId>,
        term: i64,
        entries: Vec<Placement>,
    },
    /// Append entries received from the leader (positions already checked).
    AppendAsFollower { entries: Vec<Entry> },
    /// Remove every entry from `next_index` on; the next entry goes to `next_pos`.
    /// When `next_index - 1` is not held or does not end at `next_pos`, the whole log
    /// is dropped and restarts at `next_index`/`next_pos`.
    Truncate { next_index: i64, next_pos: i64 },
    /// Drop the whole log, whatever it holds: it restarts empty at
    /// `next_index`/`next_pos` (a follower whose entries before the leader's
    /// next one are not known to agree with the leader's, e.g. one that fell
    /// behind the leader's first kept entry). Never drops what the member
    /// committed unless the leader no longer holds it either.
    Reset { next_index: i64, next_pos: i64 },
    /// Make entries `..=through` durable (group commit).
    Sync { through: i64 },
    /// Persist term/vote/leader atomically and durably.
    PersistHardState { version: u64, state: HardState },
    /// The committed index advanced (apply / dispatch up to here).
    CommitAdvanced { committed_index: i64 },
    /// Answer to `ClientAppend`.
    AppendResult {
        client: ClientId,
        result: Result<AppendReceipt, LedgerAppendError>,
    },
    /// Answer to `TransferLeadership`.
    TransferResult {
        client: ClientId,
        result: Result<(), TransferError>,
    },
}
