//! One reading of everything the exporter and the dashboard show, taken
//! from the broker's parts: topics and their queues, consumer groups and
//! their lag, the store, replication. Reading it touches ConsumeQueue
//! files (lag latency) and walks the store directory (storage size), so it
//! is taken off the async workers ([`take`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use basalt_remoting::protocol::LedgerGroupStatus;
use serde::Serialize;

use crate::broker::Broker;
use crate::replication::Replication;

/// One queue's offsets.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueSnap {
    pub id: i32,
    pub min_offset: i64,
    pub max_offset: i64,
}

/// One topic: its settings, queues and traffic in.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicSnap {
    pub name: String,
    /// A system, retry or dead-letter topic, or one the broker keeps for
    /// its own routing (named after the cluster or the broker).
    pub system: bool,
    pub read_queues: i32,
    pub write_queues: i32,
    pub perm: i32,
    pub queues: Vec<QueueSnap>,
    /// Messages stored (the sum of the queues' max offsets minus min).
    pub stored: i64,
    pub messages_in: u64,
    pub bytes_in: u64,
    /// Messages pulled by every group.
    pub messages_out: u64,
    pub bytes_out: u64,
}

/// One queue's lag for one group.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueLag {
    pub id: i32,
    pub broker_offset: i64,
    pub consumer_offset: i64,
    pub lag: i64,
}

/// One group's progress on one topic.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupTopicSnap {
    pub topic: String,
    /// Messages stored and not yet committed, over the queues.
    pub lag: i64,
    /// Age of the oldest uncommitted message, ms (0 without lag).
    pub lag_latency_ms: i64,
    /// Messages pulled and not yet committed.
    pub inflight: i64,
    pub messages_out: u64,
    pub bytes_out: u64,
    pub queues: Vec<QueueLag>,
}

/// One consumer group.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupSnap {
    pub name: String,
    /// Client ids of connected members.
    pub members: Vec<String>,
    pub consume_type: String,
    pub message_model: String,
    pub topics: Vec<GroupTopicSnap>,
}

/// The store's state.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreSnap {
    pub root: String,
    pub commit_log_min_offset: i64,
    pub commit_log_max_offset: i64,
    pub flushed_offset: i64,
    pub flush_behind_bytes: i64,
    pub dispatch_behind_bytes: i64,
    /// Bytes of the files under the store root.
    pub storage_size_bytes: u64,
    /// Use of the store's disk, 0..=1 (None before the first sample).
    pub disk_used_ratio: Option<f64>,
    pub poisoned: bool,
}

/// A slave connected to this HA master.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HaSlaveSnap {
    pub addr: String,
    pub acked_offset: i64,
    pub lag_bytes: i64,
}

/// This broker's replication.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicationSnap {
    /// The mode: `standalone`, `SYNC_MASTER`, `ASYNC_MASTER`, `SLAVE` or
    /// `ledger`.
    pub mode: String,
    /// On an HA master: its connected slaves.
    pub slaves: Vec<HaSlaveSnap>,
    /// On an HA slave: the master, whether connected, and how far behind.
    pub master_addr: Option<String>,
    pub master_connected: Option<bool>,
    pub slave_lag_bytes: Option<i64>,
    /// In ledger mode: the group as this member sees it.
    pub ledger: Option<LedgerGroupStatus>,
}

/// POP consumption (docs/pop.md): messages popped and not yet acked.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PopSnap {
    /// (group, topic read, in-flight messages), from the revive log's
    /// checkpoints; FIFO batches are counted in `in_flight` only.
    pub by_group: Vec<(String, String, usize)>,
    pub in_flight: usize,
    /// How far the oldest overdue message is past its invisible time, ms.
    pub revive_lag_ms: i64,
}

/// Everything, at one time. See the module documentation.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerSnapshot {
    pub at_ms: i64,
    pub cluster: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub addr: String,
    pub role: String,
    pub writable: bool,
    pub uptime_ms: u64,
    pub topics: Vec<TopicSnap>,
    pub groups: Vec<GroupSnap>,
    /// Connections by producer group.
    pub producers: BTreeMap<String, usize>,
    pub store: StoreSnap,
    pub replication: ReplicationSnap,
    pub subscription_groups: usize,
    pub pop: PopSnap,
}

/// Takes a snapshot on a blocking thread.
pub async fn take(broker: &Arc<Broker>) -> Option<BrokerSnapshot> {
    let b = Arc::clone(broker);
    tokio::task::spawn_blocking(move || collect(&b)).await.ok()
}

/// Takes a snapshot on this thread (it may read files).
pub fn collect(b: &Broker) -> BrokerSnapshot {
    let now = basalt_common::time::now_millis();
    let outs = b.stats.items.group_get_totals();
    let topics = topics(b, &outs);
    let groups = groups(b, &outs, now);
    let mut producers = BTreeMap::new();
    for g in b.clients.producer_group_names() {
        producers.insert(g.clone(), b.clients.producer_members(&g).len());
    }
    BrokerSnapshot {
        at_ms: now,
        cluster: b.config.broker_cluster_name.clone(),
        broker_name: b.config.broker_name.clone(),
        broker_id: b.replication.registered_id(b.config.broker_id),
        addr: b.broker_addr(),
        role: b.replication.role(b.config.broker_role).to_string(),
        writable: b.is_writable(),
        uptime_ms: b.uptime().as_millis() as u64,
        topics,
        groups,
        producers,
        store: store(b),
        replication: replication(b),
        subscription_groups: b.groups.len(),
        pop: pop(b),
    }
}

fn pop(b: &Broker) -> PopSnap {
    let p = b.pop_service();
    let mut by_group: Vec<(String, String, usize)> = p
        .in_flight_by_group()
        .into_iter()
        .map(|((g, t), n)| (g, t, n))
        .collect();
    by_group.sort();
    PopSnap {
        by_group,
        in_flight: p.in_flight(),
        revive_lag_ms: p.revive_lag_ms(),
    }
}

fn topics(b: &Broker, outs: &[(String, String, u64, u64)]) -> Vec<TopicSnap> {
    let ins: HashMap<String, _> = b.stats.metrics.topics_in().into_iter().collect();
    let mut out_by_topic: HashMap<&str, (u64, u64)> = HashMap::new();
    for (_, t, n, bytes) in outs {
        let e = out_by_topic.entry(t.as_str()).or_default();
        e.0 += n;
        e.1 += bytes;
    }
    let mut names = b.topics.topic_names();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let t = b.topics.get(&name)?;
            let queues: Vec<QueueSnap> = (0..t.read_queue_nums.max(t.write_queue_nums))
                .map(|q| QueueSnap {
                    id: q,
                    min_offset: b.store.min_offset_in_queue(&name, q),
                    max_offset: b.store.max_offset_in_queue(&name, q),
                })
                .collect();
            let stored = queues.iter().map(|q| q.max_offset - q.min_offset).sum();
            let (messages_in, bytes_in) = ins.get(&name).map_or((0, 0), |c| (c.messages, c.bytes));
            let (messages_out, bytes_out) =
                out_by_topic.get(name.as_str()).copied().unwrap_or((0, 0));
            Some(TopicSnap {
                system: is_internal_topic(b, &name),
                read_queues: t.read_queue_nums,
                write_queues: t.write_queue_nums,
                perm: t.perm,
                queues,
                stored,
                messages_in,
                bytes_in,
                messages_out,
                bytes_out,
                name,
            })
        })
        .collect()
}

fn is_internal_topic(b: &Broker, name: &str) -> bool {
    let c = &b.config;
    basalt_common::topic::is_system_topic(name)
        || name.starts_with("%RETRY%")
        || name.starts_with("%DLQ%")
        || name.starts_with("rmq_sys_")
        || name == c.broker_cluster_name
        || name == c.broker_name
        || name == format!("{}_REPLY_TOPIC", c.broker_cluster_name)
}

/// Every group with committed offsets or connected members, with its lag
/// on every topic it has offsets on or subscribes to.
fn groups(b: &Broker, outs: &[(String, String, u64, u64)], now: i64) -> Vec<GroupSnap> {
    let mut by_group: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in b.offsets.snapshot().into_keys() {
        if let Some((topic, group)) = key.split_once('@') {
            by_group
                .entry(group.to_string())
                .or_default()
                .push(topic.to_string());
        }
    }
    for g in b.clients.consumer_group_names() {
        let topics = by_group.entry(g.clone()).or_default();
        if let Some(cg) = b.clients.consumer_group(&g) {
            topics.extend(cg.subscriptions.keys().cloned());
        }
    }
    by_group
        .into_iter()
        .map(|(name, mut topics)| {
            topics.sort();
            topics.dedup();
            let cg = b.clients.consumer_group(&name);
            let topics = topics
                .into_iter()
                .filter(|t| b.topics.contains(t))
                .map(|t| group_topic(b, &name, t, outs, now))
                .collect();
            GroupSnap {
                members: cg.as_ref().map(|g| g.client_ids()).unwrap_or_default(),
                consume_type: cg
                    .as_ref()
                    .map(|g| g.consume_type.name().to_string())
                    .unwrap_or_default(),
                message_model: cg
                    .as_ref()
                    .map(|g| g.message_model.name().to_string())
                    .unwrap_or_default(),
                topics,
                name,
            }
        })
        .collect()
}

fn group_topic(
    b: &Broker,
    group: &str,
    topic: String,
    outs: &[(String, String, u64, u64)],
    now: i64,
) -> GroupTopicSnap {
    let queue_count = b.topics.get(&topic).map_or(0, |t| t.read_queue_nums);
    let pulled = b.stats.metrics.pulled(group, &topic);
    let mut queues = Vec::with_capacity(queue_count.max(0) as usize);
    let (mut inflight, mut oldest) = (0i64, None::<i64>);
    for q in 0..queue_count {
        let broker_offset = b.store.max_offset_in_queue(&topic, q);
        let committed = b.offsets.query(group, &topic, q);
        let consumer_offset = committed.unwrap_or(-1);
        let from = committed
            .unwrap_or_else(|| b.store.min_offset_in_queue(&topic, q))
            .max(0);
        let lag = (broker_offset - from).max(0);
        if lag > 0
            && let Some(ts) = b.store.message_store_timestamp(&topic, q, from)
        {
            oldest = Some(oldest.map_or(ts, |o: i64| o.min(ts)));
        }
        if let Some(next) = pulled.get(&q) {
            inflight += (next - from).max(0);
        }
        queues.push(QueueLag {
            id: q,
            broker_offset,
            consumer_offset,
            lag,
        });
    }
    let (messages_out, bytes_out) = outs
        .iter()
        .find(|(g, t, _, _)| g == group && *t == topic)
        .map_or((0, 0), |(_, _, n, bytes)| (*n, *bytes));
    GroupTopicSnap {
        lag: queues.iter().map(|q| q.lag).sum(),
        lag_latency_ms: oldest.map_or(0, |ts| (now - ts).max(0)),
        inflight,
        messages_out,
        bytes_out,
        queues,
        topic,
    }
}

fn store(b: &Broker) -> StoreSnap {
    let st = b.store.stats();
    let cl = b.store.commit_log();
    let flush_behind = if b.store.has_external_log() {
        0
    } else {
        (cl.max_offset() - cl.flushed_offset()).max(0)
    };
    StoreSnap {
        root: b.config.store_path_root_dir.display().to_string(),
        commit_log_min_offset: st.commit_log_min_offset,
        commit_log_max_offset: st.commit_log_max_offset,
        flushed_offset: st.commit_log_flushed_offset,
        flush_behind_bytes: flush_behind,
        dispatch_behind_bytes: st.dispatch_behind_bytes,
        storage_size_bytes: cached_dir_size(&b.config.store_path_root_dir),
        disk_used_ratio: cl.disk().used_percent().map(|p| f64::from(p) / 100.0),
        poisoned: st.poisoned,
    }
}

/// How long a measured store size is reused: the walk stats every file of
/// the store (two per queue with many topics), too much for every sample.
const DIR_SIZE_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// The last store size measured, by directory: `(dir, when, bytes)`.
static DIR_SIZE_CACHE: parking_lot::Mutex<Option<(std::path::PathBuf, std::time::Instant, u64)>> =
    parking_lot::Mutex::new(None);

/// [`dir_size`], measured at most once per [`DIR_SIZE_TTL`] per directory
/// (the lock is not held during the walk).
fn cached_dir_size(dir: &Path) -> u64 {
    if let Some((d, at, bytes)) = DIR_SIZE_CACHE.lock().as_ref()
        && d == dir
        && at.elapsed() < DIR_SIZE_TTL
    {
        return *bytes;
    }
    let bytes = dir_size(dir);
    *DIR_SIZE_CACHE.lock() = Some((dir.to_path_buf(), std::time::Instant::now(), bytes));
    bytes
}

/// Disk space taken by the files under `dir` (allocated blocks, so the
/// preallocated tails of mapped files do not count; unreadable entries
/// count 0).
fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += allocated(&m),
                Err(_) => {}
            }
        }
    }
    total
}

#[cfg(unix)]
fn allocated(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.blocks() * 512
}

#[cfg(not(unix))]
fn allocated(m: &std::fs::Metadata) -> u64 {
    m.len()
}

fn replication(b: &Broker) -> ReplicationSnap {
    let mut r = ReplicationSnap {
        mode: b.replication.name().to_string(),
        slaves: Vec::new(),
        master_addr: None,
        master_connected: None,
        slave_lag_bytes: None,
        ledger: None,
    };
    let max = b.store.commit_log().max_offset();
    match b.replication.as_ref() {
        Replication::Standalone => {}
        Replication::HaMaster { ha, .. } => {
            r.slaves = ha
                .connections()
                .iter()
                .map(|c| {
                    let acked = c.acked.load(Ordering::Acquire);
                    HaSlaveSnap {
                        addr: c.addr.to_string(),
                        acked_offset: acked,
                        lag_bytes: (max - acked.max(0)).max(0),
                    }
                })
                .collect();
        }
        Replication::HaSlave(s) => {
            let master = s.master_offset.load(Ordering::Acquire);
            r.master_addr = s.master();
            r.master_connected = Some(s.is_connected());
            r.slave_lag_bytes = Some((master - max).max(0));
        }
        Replication::Ledger(l) => r.ledger = Some(l.group_status()),
    }
    r
}
