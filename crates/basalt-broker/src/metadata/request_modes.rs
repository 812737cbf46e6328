//! [`RequestModes`]: how each (topic, group) consumes when the client lets
//! the broker assign its queues (RocketMQ's MessageRequestModeManager,
//! `config/messageRequestMode.json`): PULL or POP, and for POP how many
//! following consumers' queues each one shares.

use std::collections::BTreeMap;
use std::path::Path;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use super::file::ConfigFile;

/// A SET_MESSAGE_REQUEST_MODE body (SetMessageRequestModeRequestBody), as
/// the table keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMode {
    pub topic: String,
    pub consumer_group: String,
    /// `PULL` or `POP`.
    #[serde(default = "pull")]
    pub mode: String,
    /// POP only: each consumer also pops the queues of the next N consumers
    /// of the group; 0 or less: every consumer pops every queue.
    #[serde(default)]
    pub pop_share_queue_num: i32,
}

fn pull() -> String {
    PULL.to_string()
}

pub const PULL: &str = "PULL";
pub const POP: &str = "POP";

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    /// topic -> group -> mode, as Java persists it.
    #[serde(default)]
    message_request_mode_map: BTreeMap<String, BTreeMap<String, RequestMode>>,
}

/// The table. Invariant: what the file holds is what was last set (a set
/// is answered after its save).
pub struct RequestModes {
    file: ConfigFile,
    table: RwLock<BTreeMap<String, BTreeMap<String, RequestMode>>>,
}

impl std::fmt::Debug for RequestModes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestModes")
            .field("file", &self.file.path())
            .finish()
    }
}

impl RequestModes {
    pub fn load(root: &Path) -> Self {
        let file = ConfigFile::new(root, "messageRequestMode.json");
        let wire: Wire = file
            .load(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
            .unwrap_or_default();
        RequestModes {
            file,
            table: RwLock::new(wire.message_request_mode_map),
        }
    }

    /// The mode set for `topic` and `group`, if any.
    pub fn get(&self, topic: &str, group: &str) -> Option<RequestMode> {
        self.table.read().get(topic)?.get(group).cloned()
    }

    /// Sets a mode and saves the table (blocking: call off the workers).
    pub fn set(&self, mode: RequestMode) -> basalt_store::Result<()> {
        self.file.save_latest(|| {
            let mut t = self.table.write();
            t.entry(mode.topic.clone())
                .or_default()
                .insert(mode.consumer_group.clone(), mode);
            serde_json::to_string_pretty(&Wire {
                message_request_mode_map: t.clone(),
            })
            .ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_mode_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let m = RequestModes::load(dir.path());
        assert_eq!(m.get("T", "g"), None);
        let mode = RequestMode {
            topic: "T".into(),
            consumer_group: "g".into(),
            mode: POP.into(),
            pop_share_queue_num: 2,
        };
        m.set(mode.clone()).unwrap();
        assert_eq!(RequestModes::load(dir.path()).get("T", "g"), Some(mode));
    }
}
