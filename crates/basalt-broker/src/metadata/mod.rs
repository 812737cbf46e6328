//! The broker's metadata tables and the files that keep them in
//! `{root}/config/`: topics ([`topics`]), subscription groups ([`groups`]),
//! consumer offsets ([`offsets`]); [`file`] replaces them atomically,
//! [`meta_writer`] writes them off the async workers, and topics.json has a
//! [`journal`] of changes beside it ([`topic_journal`]).

pub mod file;
pub mod formats;
pub mod groups;
pub mod journal;
pub mod meta_writer;
pub mod offsets;
pub mod request_modes;
pub mod topic_attributes;
pub mod topic_journal;
pub mod topics;
