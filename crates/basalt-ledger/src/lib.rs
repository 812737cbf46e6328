//! Basalt's DLedger: a Raft-style replicated log that knows nothing of the broker.
//!
//! * [`core`] — the I/O-free state machines (election, `EntryDispatcher`,
//!   `EntryHandler`, `QuorumAckChecker`), driven by events, emitting commands;
//! * [`entry`] — the on-disk entry layout shared by everything;
//! * [`protocol`] — the messages peers exchange.

pub mod config;
pub mod core;
pub mod entry;
#[doc(hidden)]
pub mod fuzzing;
pub mod protocol;
pub mod runtime;
pub mod sim;
pub mod store;
pub mod transport;
pub mod wire;

pub use config::{AckMode, LedgerConfig};
pub use core::{AppendReceipt, Role};
pub use entry::EntryKind;
pub use protocol::NodeId;
pub use runtime::{Ledger, LedgerError, LedgerHandle, LedgerStatus, StampSlot};
pub use store::{LedgerCheckReport, LedgerEntry, LedgerReader, check_ledger_dir};
