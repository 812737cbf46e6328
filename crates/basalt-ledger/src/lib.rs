//! Basalt's DLedger: a Raft-style replicated log that knows nothing of the broker.
//!
//! * [`config`] — [`LedgerConfig`], DLedger's settings and defaults;
//! * [`core`] — the I/O-free state machines (election, `EntryDispatcher`,
//!   `EntryHandler`, `QuorumAckChecker`), driven by events, emitting commands;
//! * [`entry`] — the on-disk entry layout shared by everything;
//! * [`protocol`] — the messages members exchange; [`wire`] — their JSON form,
//!   [`wire_bin`] — the binary push Basalt members negotiate;
//! * [`store`] — the mmap ledger store, recovery, zero-copy [`LedgerReader`],
//!   [`check_ledger_dir`];
//! * [`runtime`] — [`Ledger::start`] and [`LedgerHandle`], the API the broker uses;
//! * [`transport`] — TCP (remoting frames) and in-memory transports;
//! * [`sim`] — the deterministic cluster simulator used by the tests.
//!
//! See the crate README for the broker's use of the API and the invariants.

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
pub mod wire_bin;

pub use config::{AckMode, LedgerConfig};
pub use core::{AppendReceipt, Role};
pub use entry::EntryKind;
pub use protocol::NodeId;
pub use runtime::{Ledger, LedgerError, LedgerHandle, LedgerStatus, StampSlot};
pub use store::{
    LedgerCheckReport, LedgerDataFile, LedgerEntry, LedgerFilesView, LedgerReader, ViewedEntry,
    check_ledger_dir, check_ledger_dir_on,
};
