//! The Basalt message model and the RocketMQ byte formats every other crate shares.
//!
//! Everything here is pure: no I/O, no clocks other than [`time::now_millis`].
//! The formats are described in `docs/protocol.md` and `docs/storage-format.md`:
//!
//! * [`record`] — the stored CommitLog record (V1 and V2 magic, IPv4/IPv6 hosts),
//!   encoded once by the store and sent unchanged in pull responses;
//! * [`properties`] — the `name\x01value\x02` property string;
//! * [`batch`] — the batch body a producer sends with `SEND_BATCH_MESSAGE`;
//! * [`msgid`] — the "offset msgId" (store host + physical offset);
//! * [`hash`] and [`crc`] — Java `String.hashCode` and RocketMQ's masked CRC32.

pub mod batch;
pub mod config;
pub mod constants;
pub mod crc;
pub mod error;
pub mod hash;
pub mod histogram;
pub mod msgid;
pub mod properties;
pub mod record;
pub mod sysflag;
pub mod time;
pub mod topic;

pub use error::CodecError;
