//! The shapes of the broker's metadata files, owned here rather than
//! borrowed from the wire types, so that a change to a protocol body can
//! never silently change a file on disk. Each type converts to and from its
//! wire counterpart at the processor boundary; the tests pin every file's
//! exact text with a golden sample (docs/storage-format.md#config-files).
//!
//! Struct fields are declared in alphabetical order: serde writes them in
//! that order, as Java's fastjson does, so the files match RocketMQ's.

mod groups_file;
mod offsets_file;
mod topics_file;

pub use groups_file::{GroupsFile, SubscriptionGroupConfig};
pub use offsets_file::{
    OffsetTable, parse_delay_offsets, parse_offset_table, render_delay_offsets, render_offset_table,
};
pub use topics_file::{TagMode, TopicSettings, TopicsFile};

use basalt_remoting::protocol::DataVersion;
use serde::{Deserialize, Serialize};

/// The version stamp of a metadata table (`dataVersion` in the files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TableVersion {
    #[serde(default)]
    pub counter: i64,
    #[serde(default)]
    pub state_version: i64,
    #[serde(default)]
    pub timestamp: i64,
}

impl TableVersion {
    /// A fresh version stamped `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        TableVersion {
            counter: 0,
            state_version: 0,
            timestamp: now_ms,
        }
    }

    /// Advances the version after a change (`DataVersion.nextVersion`).
    pub fn next_version(&mut self, now_ms: i64) {
        self.timestamp = now_ms;
        self.counter += 1;
    }

    pub fn to_wire(&self) -> DataVersion {
        DataVersion {
            counter: self.counter,
            state_version: self.state_version,
            timestamp: self.timestamp,
        }
    }

    pub fn from_wire(v: &DataVersion) -> Self {
        TableVersion {
            counter: v.counter,
            state_version: v.state_version,
            timestamp: v.timestamp,
        }
    }
}
