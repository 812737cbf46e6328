//! The broker's metadata tables and the files that keep them in
//! `{root}/config/`: topics ([`topics`]), subscription groups ([`groups`]),
//! consumer offsets ([`offsets`]); [`file`] writes them atomically, off the
//! async workers.

pub mod file;
pub mod formats;
pub mod groups;
pub mod offsets;
pub mod topics;
