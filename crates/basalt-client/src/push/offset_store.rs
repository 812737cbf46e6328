//! Where a push consumer keeps consumed offsets: on the brokers for
//! clustering (Java `RemoteBrokerOffsetStore`), in a local file for
//! broadcasting (`LocalFileOffsetStore`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use basalt_disk::{Disk, DiskError};
use parking_lot::Mutex;

use crate::error::{ClientError, Result};
use crate::instance::ClientInstance;
use crate::message::TopicQueue;

/// The consumed-offset table of one consumer group.
pub(crate) struct OffsetStore {
    group: String,
    instance: Arc<ClientInstance>,
    table: Mutex<HashMap<TopicQueue, i64>>,
    /// Broadcasting: the file offsets live in; `None` keeps them on brokers.
    local: Option<PathBuf>,
    /// Broadcasting: offsets as last loaded from or written to the file.
    file_table: Mutex<BTreeMap<TopicQueue, i64>>,
}

impl OffsetStore {
    pub fn remote(group: &str, instance: Arc<ClientInstance>) -> Self {
        Self {
            group: group.to_string(),
            instance,
            table: Mutex::new(HashMap::new()),
            local: None,
            file_table: Mutex::new(BTreeMap::new()),
        }
    }

    /// A file store at `dir/<clientId>/<group>/offsets.json`, loaded now.
    pub fn local(group: &str, instance: Arc<ClientInstance>, dir: &Path) -> Result<Self> {
        let path = dir
            .join(instance.client_id().replace(['/', '\\'], "_"))
            .join(group)
            .join("offsets.json");
        let loaded = load_file(&path)?;
        Ok(Self {
            group: group.to_string(),
            instance,
            table: Mutex::new(HashMap::new()),
            local: Some(path),
            file_table: Mutex::new(loaded),
        })
    }

    /// Records a consumed offset in memory. With `increase_only`, an offset
    /// below the recorded one is ignored (concurrent consumers finish out of
    /// order).
    pub fn update(&self, mq: &TopicQueue, offset: i64, increase_only: bool) {
        let mut t = self.table.lock();
        match t.get_mut(mq) {
            Some(cur) if increase_only => *cur = (*cur).max(offset),
            Some(cur) => *cur = offset,
            None => {
                t.insert(mq.clone(), offset);
            }
        }
    }

    /// The in-memory offset, if any.
    pub fn read_memory(&self, mq: &TopicQueue) -> Option<i64> {
        self.table.lock().get(mq).copied()
    }

    /// The stored offset (broker or file), also recorded in memory.
    /// `Ok(None)`: nothing stored for this group and queue.
    pub async fn read_store(&self, mq: &TopicQueue) -> Result<Option<i64>> {
        let found = match &self.local {
            Some(_) => self.file_table.lock().get(mq).copied(),
            None => self.instance.query_consumer_offset(&self.group, mq).await?,
        };
        if let Some(o) = found {
            self.update(mq, o, false);
        }
        Ok(found)
    }

    pub fn remove(&self, mq: &TopicQueue) {
        self.table.lock().remove(mq);
    }

    /// Commits one queue's in-memory offset.
    pub async fn persist(&self, mq: &TopicQueue) {
        let Some(offset) = self.read_memory(mq) else {
            return;
        };
        match &self.local {
            Some(_) => {
                self.file_table.lock().insert(mq.clone(), offset);
                self.write_file();
            }
            None => {
                if let Err(e) = self
                    .instance
                    .update_consumer_offset(&self.group, mq, offset, false)
                    .await
                {
                    tracing::warn!(group = %self.group, queue = %mq, offset, error = %e,
                        "committing the consumer offset failed");
                }
            }
        }
    }

    /// Commits the offsets of `mqs` (the queues this consumer holds) and
    /// forgets those of queues it no longer holds.
    pub async fn persist_all(&self, mqs: &BTreeSet<TopicQueue>) {
        let entries: Vec<(TopicQueue, i64)> = {
            let mut t = self.table.lock();
            t.retain(|mq, _| mqs.contains(mq));
            t.iter().map(|(m, o)| (m.clone(), *o)).collect()
        };
        if entries.is_empty() {
            return;
        }
        if self.local.is_some() {
            {
                let mut f = self.file_table.lock();
                for (mq, o) in entries {
                    f.insert(mq, o);
                }
            }
            self.write_file();
            return;
        }
        let mut set = tokio::task::JoinSet::new();
        for (mq, offset) in entries {
            let instance = self.instance.clone();
            let group = self.group.clone();
            set.spawn(async move {
                let r = instance
                    .update_consumer_offset(&group, &mq, offset, false)
                    .await;
                (mq, offset, r)
            });
        }
        while let Some(joined) = set.join_next().await {
            if let Ok((mq, offset, Err(e))) = joined {
                tracing::warn!(group = %self.group, queue = %mq, offset, error = %e,
                    "committing the consumer offset failed");
            }
        }
    }

    fn write_file(&self) {
        let Some(path) = &self.local else { return };
        let snapshot = self.file_table.lock().clone();
        if let Err(e) = write_file(path, &snapshot) {
            tracing::error!(error = %e, "cannot write the local offset file");
        }
    }
}

/// `{"offsetTable":{<mq json>:offset,...}}` as fastjson writes
/// `OffsetSerializeWrapper` (object keys).
pub(crate) fn encode_file(table: &BTreeMap<TopicQueue, i64>) -> Vec<u8> {
    let mut out = b"{\"offsetTable\":{".to_vec();
    for (i, (mq, o)) in table.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&serde_json::to_vec(mq).unwrap_or_default());
        out.push(b':');
        out.extend_from_slice(o.to_string().as_bytes());
    }
    out.extend_from_slice(b"}}");
    out
}

fn load_file(path: &Path) -> Result<BTreeMap<TopicQueue, i64>> {
    let io_err = |source| ClientError::OffsetFile {
        path: path.display().to_string(),
        source,
    };
    let text = match Disk::Real.read_file(path) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(BTreeMap::new()),
        Err(e) => return Err(io_err(into_io(e))),
    };
    decode_file(&text).map_err(|e| io_err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Parses an offset file (`OffsetSerializeWrapper`, MessageQueue object keys).
pub(crate) fn decode_file(text: &[u8]) -> std::result::Result<BTreeMap<TopicQueue, i64>, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wrapper {
        #[serde(
            default,
            deserialize_with = "basalt_remoting::fastjson::mq_map::deserialize"
        )]
        offset_table: Vec<(TopicQueue, i64)>,
    }
    let w: Wrapper = basalt_remoting::fastjson::from_slice(text).map_err(|e| e.to_string())?;
    Ok(w.offset_table.into_iter().collect())
}

/// The I/O error under a disk error (the offset file's error names the path).
fn into_io(e: DiskError) -> std::io::Error {
    match e {
        DiskError::Io { source, .. } | DiskError::NoSpace { source, .. } => source,
    }
}

/// Replaces the file atomically with the I/O layer's helper: temp file
/// (`offsets.json.tmp`), fsync, rename, fsync of the directory, which is
/// itself created durably.
fn write_file(path: &Path, table: &BTreeMap<TopicQueue, i64>) -> Result<()> {
    let io_err = |e| ClientError::OffsetFile {
        path: path.display().to_string(),
        source: into_io(e),
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    Disk::Real.create_dir_all_durable(dir).map_err(io_err)?;
    Disk::Real
        .atomic_replace(path, &encode_file(table))
        .map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trips_in_fastjson_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g").join("offsets.json");
        let mut t = BTreeMap::new();
        t.insert(TopicQueue::new("T", "broker-a", 0), 17);
        t.insert(TopicQueue::new("T", "broker-a", 1), 4);
        write_file(&path, &t).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:17,"#
        ));
        assert_eq!(load_file(&path).unwrap(), t);
        assert!(
            load_file(&dir.path().join("absent.json"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn increase_only_updates_never_go_back() {
        let inst = ClientInstance::new(crate::ClientConfig::new("127.0.0.1:1"));
        let store = OffsetStore::remote("G", inst);
        let mq = TopicQueue::new("T", "b", 0);
        store.update(&mq, 10, true);
        store.update(&mq, 7, true);
        assert_eq!(store.read_memory(&mq), Some(10));
        store.update(&mq, 7, false);
        assert_eq!(store.read_memory(&mq), Some(7));
    }
}
