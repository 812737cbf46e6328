//! Message lookup for the dashboard: by key or unique id (the index), by
//! offset message id, or by queue and offset; each found message with its
//! properties and the start of its body.

use std::collections::BTreeMap;

use basalt_common::properties::Properties;
use basalt_common::record::RecordView;
use basalt_store::MessageStore;
use bytes::Bytes;
use serde::Serialize;

/// Most messages a key lookup returns.
const MAX_FOUND: usize = 32;
/// Body bytes shown.
const PREVIEW: usize = 4096;

/// A message as the dashboard shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commit_log_offset: i64,
    pub msg_id: String,
    pub born_timestamp: i64,
    pub store_timestamp: i64,
    pub born_host: String,
    pub store_host: String,
    pub reconsume_times: i32,
    pub properties: BTreeMap<String, String>,
    pub body_size: usize,
    /// The body's first bytes, as UTF-8 (invalid sequences replaced).
    pub body_preview: String,
    pub body_truncated: bool,
    /// The body is stored compressed; the preview shows compressed bytes.
    pub compressed: bool,
}

/// What to look up.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// `KEYS` or unique key (`UNIQ_KEY`) of `topic`.
    Key { topic: String, key: String },
    /// A broker-assigned offset message id.
    OffsetId(String),
    /// The message at a queue offset.
    QueueOffset {
        topic: String,
        queue_id: i32,
        offset: i64,
    },
}

fn view(rec: &Bytes) -> Option<MessageView> {
    let v = RecordView::parse(rec, false).ok()?;
    let props = Properties::decode(v.properties);
    let shown = v.body.len().min(PREVIEW);
    Some(MessageView {
        topic: v.topic_str().into_owned(),
        queue_id: v.queue_id,
        queue_offset: v.queue_offset,
        commit_log_offset: v.physical_offset,
        msg_id: basalt_common::msgid::encode(v.store_host, v.physical_offset),
        born_timestamp: v.born_timestamp,
        store_timestamp: v.store_timestamp,
        born_host: v.born_host.to_string(),
        store_host: v.store_host.to_string(),
        reconsume_times: v.reconsume_times,
        properties: props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body_size: v.body.len(),
        body_preview: String::from_utf8_lossy(&v.body[..shown]).into_owned(),
        body_truncated: shown < v.body.len(),
        compressed: v.sys_flag & basalt_common::sysflag::COMPRESSED != 0,
    })
}

/// The messages `q` names (none when nothing matches). Reads files.
pub fn find(store: &MessageStore, q: &Lookup) -> Result<Vec<MessageView>, String> {
    let records: Vec<Bytes> = match q {
        Lookup::Key { topic, key } => {
            store
                .query_message(topic, key, MAX_FOUND, 0, i64::MAX)
                .messages
        }
        Lookup::OffsetId(id) => {
            let (_, phys) =
                basalt_common::msgid::decode(id).map_err(|e| format!("bad message id: {e}"))?;
            store.look_message_by_offset(phys).into_iter().collect()
        }
        Lookup::QueueOffset {
            topic,
            queue_id,
            offset,
        } => store
            .commit_log_offset_in_queue(topic, *queue_id, *offset)
            .and_then(|phys| store.look_message_by_offset(phys))
            .into_iter()
            .collect(),
    };
    Ok(records.iter().filter_map(view).collect())
}
