//! A scripted, in-memory broker for client tests: it speaks the broker side
//! of the protocol the client uses (send, pull with long polling,
//! heartbeats and consumer ids, offsets, send-back, locks, admin queries),
//! stores records built with basalt-common, registers with a real
//! basalt-namesrv, records every request, and can be told to fail.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use basalt_common::crc::masked_crc32;
use basalt_common::hash::java_string_hash;
use basalt_common::properties::{self, Properties};
use basalt_common::record::{RecordDraft, RecordView, stamp};
use basalt_namesrv::{NameServer, NameServerHandle, NamesrvConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::*;
use basalt_remoting::protocol::*;
use basalt_remoting::{
    Channel, RemotingClient, RemotingCommand, RemotingServer, RequestProcessor, ServerHandle,
};
use parking_lot::Mutex;
use tokio::sync::watch;

pub const CLUSTER: &str = "DefaultCluster";

/// Waits (bounded) until `cond` holds; panics with `what` otherwise.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub async fn start_namesrv() -> (NameServerHandle, String) {
    let ns = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        broker_expiry: Duration::from_secs(120),
        scan_interval: Duration::from_secs(60),
        ..Default::default()
    })
    .await
    .unwrap();
    let addr = ns.local_addr().to_string();
    (ns, addr)
}

/// What the fake broker has been told to do differently.
#[derive(Default)]
pub struct Script {
    /// Answer the next sends with these codes instead of storing.
    pub fail_sends: VecDeque<i32>,
    /// Answer every send with this code.
    pub fail_all_sends: Option<i32>,
    /// Answer the next pull of (topic, queue) with PULL_OFFSET_MOVED and
    /// this nextBeginOffset.
    pub offset_moved: HashMap<(String, i32), i64>,
    /// Return every message of a pull, ignoring the subscription's tags
    /// (as a broker whose tag hash codes collide would).
    pub no_broker_filter: bool,
    /// Store the next sends, but answer with these codes (FLUSH_DISK_TIMEOUT…).
    pub stored_but: VecDeque<i32>,
    /// Answer CONSUMER_SEND_MSG_BACK with SYSTEM_ERROR.
    pub fail_send_back: bool,
}

#[derive(Default)]
struct Store {
    topics: BTreeMap<String, TopicConfig>,
    /// Physical offset → record.
    log: BTreeMap<i64, Vec<u8>>,
    next_phys: i64,
    /// (topic, queue) → physical offsets in queue order.
    queues: HashMap<(String, i32), Vec<i64>>,
    /// (group, topic, queue) → committed offset.
    offsets: HashMap<(String, String, i32), i64>,
    /// group → client id → (channel, subscriptions).
    consumers: BTreeMap<String, BTreeMap<String, (Channel, Vec<SubscriptionData>)>>,
    /// (group, mq) → client id holding the lock.
    locks: HashMap<(String, String, i32), String>,
    data_version: i64,
}

pub struct BrokerState {
    pub name: String,
    addr: std::sync::OnceLock<String>,
    namesrv: String,
    store: Mutex<Store>,
    pub script: Mutex<Script>,
    /// Every request received, in order.
    pub requests: Mutex<Vec<RemotingCommand>>,
    appended: watch::Sender<u64>,
    client: RemotingClient,
}

pub struct FakeBroker {
    pub state: Arc<BrokerState>,
    server: ServerHandle,
}

impl FakeBroker {
    /// Starts a broker named `name` with `topics` (name, queues) plus TBW102,
    /// and registers it with the NameServer.
    pub async fn start(name: &str, namesrv: &str, topics: &[(&str, i32)]) -> FakeBroker {
        let mut store = Store::default();
        let mut tbw = TopicConfig::new("TBW102", 8);
        tbw.perm = 7;
        store.topics.insert("TBW102".into(), tbw);
        for (t, q) in topics {
            store.topics.insert(t.to_string(), TopicConfig::new(*t, *q));
        }
        let state = Arc::new(BrokerState {
            name: name.to_string(),
            addr: std::sync::OnceLock::new(),
            namesrv: namesrv.to_string(),
            store: Mutex::new(store),
            script: Mutex::new(Script::default()),
            requests: Mutex::new(Vec::new()),
            appended: watch::channel(0).0,
            client: RemotingClient::default(),
        });
        let server = RemotingServer::bind("127.0.0.1:0", Arc::new(Processor(state.clone())))
            .await
            .unwrap();
        state.addr.set(server.local_addr().to_string()).unwrap();
        state.register().await;
        FakeBroker { state, server }
    }

    pub fn addr(&self) -> &str {
        self.state.addr()
    }

    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }

    /// Requests with this code received so far.
    pub fn requests_with(&self, code: i32) -> Vec<RemotingCommand> {
        self.state
            .requests
            .lock()
            .iter()
            .filter(|r| r.code == code)
            .cloned()
            .collect()
    }

    pub fn count(&self, code: i32) -> usize {
        self.state
            .requests
            .lock()
            .iter()
            .filter(|r| r.code == code)
            .count()
    }

    /// Stores a message directly (as if a producer had sent it).
    pub fn put(&self, topic: &str, queue_id: i32, body: &[u8], props: &str) -> i64 {
        self.state.append(
            topic,
            queue_id,
            0,
            body,
            props,
            0,
            "127.0.0.1:1".parse().unwrap(),
            0,
        )
    }

    /// Max offset of a queue.
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.state.max_offset(topic, queue_id)
    }

    /// The committed offset of a group on a queue.
    pub fn consumer_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.state
            .store
            .lock()
            .offsets
            .get(&(group.to_string(), topic.to_string(), queue_id))
            .copied()
    }

    pub fn set_consumer_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        self.state
            .store
            .lock()
            .offsets
            .insert((group.to_string(), topic.to_string(), queue_id), offset);
    }

    /// Client ids registered for a group.
    pub fn consumer_ids(&self, group: &str) -> Vec<String> {
        self.state
            .store
            .lock()
            .consumers
            .get(group)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The channel of a consumer client (to send it requests).
    pub fn consumer_channel(&self, group: &str) -> Option<Channel> {
        self.state
            .store
            .lock()
            .consumers
            .get(group)
            .and_then(|m| m.values().next().map(|(c, _)| c.clone()))
    }

    /// Messages stored in a queue, decoded.
    pub fn messages(
        &self,
        topic: &str,
        queue_id: i32,
    ) -> Vec<basalt_common::record::StoredMessage> {
        let st = self.state.store.lock();
        st.queues
            .get(&(topic.to_string(), queue_id))
            .map(|v| {
                v.iter()
                    .map(|p| RecordView::parse(&st.log[p], true).unwrap().to_message())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl BrokerState {
    pub fn addr(&self) -> &str {
        self.addr.get().map(String::as_str).unwrap_or_default()
    }

    async fn register(&self) {
        let body = {
            let mut st = self.store.lock();
            st.data_version += 1;
            RegisterBrokerBody {
                filter_server_list: vec![],
                topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                    data_version: DataVersion {
                        counter: st.data_version,
                        state_version: 0,
                        timestamp: basalt_common::time::now_millis(),
                    },
                    topic_config_table: st.topics.clone(),
                },
            }
            .to_json()
        };
        let header = RegisterBrokerRequestHeader {
            broker_name: self.name.clone(),
            broker_addr: self.addr().to_string(),
            cluster_name: CLUSTER.into(),
            ha_server_addr: format!("{}-ha", self.addr()),
            broker_id: 0,
            heartbeat_timeout_millis: None,
            enable_acting_master: Some(false),
            compressed: Some(false),
            body_crc32: Some(masked_crc32(&body) as i32),
        };
        let req = RemotingCommand::request(request::REGISTER_BROKER)
            .with_ext(header.to_ext())
            .with_body(body);
        let resp = self
            .client
            .invoke(&self.namesrv, req, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(resp.code, response::SUCCESS);
    }

    fn create_topic(self: &Arc<Self>, topic: &str, queues: i32) -> bool {
        let created = {
            let mut st = self.store.lock();
            if st.topics.contains_key(topic) {
                false
            } else {
                st.topics
                    .insert(topic.to_string(), TopicConfig::new(topic, queues));
                true
            }
        };
        if created {
            let me = self.clone();
            tokio::spawn(async move { me.register().await });
        }
        created
    }

    fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.store
            .lock()
            .queues
            .get(&(topic.to_string(), queue_id))
            .map_or(0, |v| v.len() as i64)
    }

    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        topic: &str,
        queue_id: i32,
        flag: i32,
        body: &[u8],
        props: &str,
        reconsume_times: i32,
        born: SocketAddr,
        sys_flag: i32,
    ) -> i64 {
        let draft = RecordDraft {
            topic,
            queue_id,
            flag,
            sys_flag,
            born_timestamp: basalt_common::time::now_millis(),
            born_host: born,
            store_host: self.addr().parse().unwrap(),
            reconsume_times,
            prepared_transaction_offset: 0,
            body,
            properties: props.as_bytes(),
        };
        let mut rec = Vec::new();
        draft.encode_into(&mut rec).unwrap();
        let phys = {
            let mut st = self.store.lock();
            let phys = st.next_phys;
            let q = st.queues.entry((topic.to_string(), queue_id)).or_default();
            let qo = q.len() as i64;
            q.push(phys);
            stamp(&mut rec, qo, phys, basalt_common::time::now_millis());
            st.next_phys += rec.len() as i64;
            st.log.insert(phys, rec);
            phys
        };
        self.appended.send_modify(|v| *v += 1);
        phys
    }

    fn notify_ids_changed(&self, group: &str) {
        let channels: Vec<Channel> = self
            .store
            .lock()
            .consumers
            .get(group)
            .map(|m| m.values().map(|(c, _)| c.clone()).collect())
            .unwrap_or_default();
        for ch in channels {
            let header = NotifyConsumerIdsChangedRequestHeader {
                consumer_group: group.to_string(),
            };
            let cmd = RemotingCommand::request(request::NOTIFY_CONSUMER_IDS_CHANGED)
                .with_ext(header.to_ext());
            tokio::spawn(async move {
                let _ = ch.send_oneway(cmd).await;
            });
        }
    }
}

struct Processor(Arc<BrokerState>);

fn reply(req: &RemotingCommand, code: i32, remark: Option<&str>) -> RemotingCommand {
    let mut r = RemotingCommand::response(code, remark.map(str::to_string));
    r.opaque = req.opaque;
    r
}

impl RequestProcessor for Processor {
    async fn process(&self, channel: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        self.0.requests.lock().push(req.clone());
        let s = &self.0;
        Some(match req.code {
            request::SEND_MESSAGE | request::SEND_MESSAGE_V2 | request::SEND_BATCH_MESSAGE => {
                send(s, channel, &req)
            }
            request::PULL_MESSAGE | request::LITE_PULL_MESSAGE => pull(s, &req).await,
            request::HEART_BEAT => heartbeat(s, channel, &req),
            request::UNREGISTER_CLIENT => {
                let h: UnregisterClientRequestHeader = req.decode_header().unwrap();
                if let Some(g) = &h.consumer_group {
                    let removed = s
                        .store
                        .lock()
                        .consumers
                        .get_mut(g)
                        .and_then(|m| m.remove(&h.client_id))
                        .is_some();
                    if removed {
                        s.notify_ids_changed(g);
                    }
                }
                reply(&req, response::SUCCESS, None)
            }
            request::GET_CONSUMER_LIST_BY_GROUP => {
                let h: GetConsumerListByGroupRequestHeader = req.decode_header().unwrap();
                let ids: Vec<String> = s
                    .store
                    .lock()
                    .consumers
                    .get(&h.consumer_group)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                if ids.is_empty() {
                    reply(
                        &req,
                        response::SYSTEM_ERROR,
                        Some("no consumer for this group"),
                    )
                } else {
                    let body = serde_json::to_vec(&ConsumerListBody {
                        consumer_id_list: ids,
                    })
                    .unwrap();
                    reply(&req, response::SUCCESS, None).with_body(body)
                }
            }
            request::QUERY_CONSUMER_OFFSET => {
                let h: QueryConsumerOffsetRequestHeader = req.decode_header().unwrap();
                let key = (h.consumer_group, h.topic, h.queue_id);
                match s.store.lock().offsets.get(&key) {
                    Some(o) => offset_reply(&req, *o),
                    None => reply(&req, response::QUERY_NOT_FOUND, Some("Not found")),
                }
            }
            request::UPDATE_CONSUMER_OFFSET => {
                let h: UpdateConsumerOffsetRequestHeader = req.decode_header().unwrap();
                s.store
                    .lock()
                    .offsets
                    .insert((h.consumer_group, h.topic, h.queue_id), h.commit_offset);
                reply(&req, response::SUCCESS, None)
            }
            request::GET_MAX_OFFSET => {
                let h: GetMaxOffsetRequestHeader = req.decode_header().unwrap();
                offset_reply(&req, s.max_offset(&h.topic, h.queue_id))
            }
            request::GET_MIN_OFFSET => offset_reply(&req, 0),
            request::SEARCH_OFFSET_BY_TIMESTAMP => {
                let h: SearchOffsetRequestHeader = req.decode_header().unwrap();
                let st = s.store.lock();
                let offsets = st
                    .queues
                    .get(&(h.topic.clone(), h.queue_id))
                    .cloned()
                    .unwrap_or_default();
                let found = offsets
                    .iter()
                    .position(|p| {
                        RecordView::parse(&st.log[p], false)
                            .unwrap()
                            .store_timestamp
                            >= h.timestamp
                    })
                    .unwrap_or(offsets.len());
                offset_reply(&req, found as i64)
            }
            request::CONSUMER_SEND_MSG_BACK => send_back(s, channel, &req),
            request::LOCK_BATCH_MQ => {
                let body: LockBatchRequestBody =
                    basalt_remoting::fastjson::from_slice(&req.body).unwrap();
                let mut st = s.store.lock();
                let mut ok = Vec::new();
                for mq in body.mq_set {
                    let key = (body.consumer_group.clone(), mq.topic.clone(), mq.queue_id);
                    let holder = st
                        .locks
                        .entry(key)
                        .or_insert_with(|| body.client_id.clone());
                    if *holder == body.client_id {
                        ok.push(mq);
                    }
                }
                let resp =
                    serde_json::to_vec(&LockBatchResponseBody { lock_ok_mq_set: ok }).unwrap();
                reply(&req, response::SUCCESS, None).with_body(resp)
            }
            request::UNLOCK_BATCH_MQ => {
                let body: LockBatchRequestBody =
                    basalt_remoting::fastjson::from_slice(&req.body).unwrap();
                let mut st = s.store.lock();
                for mq in body.mq_set {
                    let key = (body.consumer_group.clone(), mq.topic.clone(), mq.queue_id);
                    if st.locks.get(&key) == Some(&body.client_id) {
                        st.locks.remove(&key);
                    }
                }
                reply(&req, response::SUCCESS, None)
            }
            request::QUERY_MESSAGE => {
                let h: QueryMessageRequestHeader = req.decode_header().unwrap();
                let st = s.store.lock();
                let mut body = Vec::new();
                for rec in st.log.values() {
                    let v = RecordView::parse(rec, false).unwrap();
                    let keys = v
                        .property("KEYS")
                        .map(|k| String::from_utf8_lossy(k).into_owned())
                        .unwrap_or_default();
                    let uniq = v
                        .property("UNIQ_KEY")
                        .map(|k| String::from_utf8_lossy(k).into_owned());
                    // The index holds topic#UNIQ_KEY and topic#key for each key.
                    let hit = keys.split(' ').any(|k| k == h.key)
                        || uniq.as_deref() == Some(h.key.as_str());
                    if v.topic == h.topic.as_bytes() && hit {
                        body.extend_from_slice(rec);
                    }
                }
                if body.is_empty() {
                    reply(&req, response::QUERY_NOT_FOUND, None)
                } else {
                    let mut r = reply(&req, response::SUCCESS, None).with_body(body);
                    r.ext_fields.insert("indexLastUpdateTimestamp", "0");
                    r.ext_fields.insert("indexLastUpdatePhyoffset", "0");
                    r
                }
            }
            request::VIEW_MESSAGE_BY_ID => {
                let h: ViewMessageRequestHeader = req.decode_header().unwrap();
                match s.store.lock().log.get(&h.offset) {
                    Some(rec) => reply(&req, response::SUCCESS, None).with_body(rec.clone()),
                    None => reply(
                        &req,
                        response::SYSTEM_ERROR,
                        Some("no message at that offset"),
                    ),
                }
            }
            request::UPDATE_AND_CREATE_TOPIC => {
                let h: CreateTopicRequestHeader = req.decode_header().unwrap();
                s.create_topic(&h.topic, h.write_queue_nums);
                reply(&req, response::SUCCESS, None)
            }
            request::DELETE_TOPIC_IN_BROKER => {
                let h: DeleteTopicRequestHeader = req.decode_header().unwrap();
                s.store.lock().topics.remove(&h.topic);
                reply(&req, response::SUCCESS, None)
            }
            request::GET_TOPIC_STATS_INFO => {
                let h: GetTopicStatsInfoRequestHeader = req.decode_header().unwrap();
                let queues = s
                    .store
                    .lock()
                    .topics
                    .get(&h.topic)
                    .map(|t| t.write_queue_nums);
                match queues {
                    None => reply(&req, response::TOPIC_NOT_EXIST, Some("no topic")),
                    Some(n) => {
                        let table = TopicStatsTable {
                            offset_table: (0..n)
                                .map(|q| {
                                    (
                                        MessageQueue::new(h.topic.clone(), s.name.clone(), q),
                                        TopicOffset {
                                            last_update_timestamp: 0,
                                            max_offset: s.max_offset(&h.topic, q),
                                            min_offset: 0,
                                        },
                                    )
                                })
                                .collect(),
                        };
                        reply(&req, response::SUCCESS, None).with_body(table.encode())
                    }
                }
            }
            request::GET_CONSUME_STATS => {
                let h: GetConsumeStatsRequestHeader = req.decode_header().unwrap();
                let st = s.store.lock();
                let mut table = Vec::new();
                for ((g, t, q), o) in &st.offsets {
                    if *g == h.consumer_group && h.topic.as_ref().is_none_or(|x| x == t) {
                        let max = st
                            .queues
                            .get(&(t.clone(), *q))
                            .map_or(0, |v| v.len() as i64);
                        table.push((
                            MessageQueue::new(t.clone(), s.name.clone(), *q),
                            OffsetWrapper {
                                broker_offset: max,
                                consumer_offset: *o,
                                last_timestamp: 0,
                                pull_offset: *o,
                            },
                        ));
                    }
                }
                let stats = ConsumeStats {
                    consume_tps: 1.5,
                    offset_table: table,
                };
                reply(&req, response::SUCCESS, None).with_body(stats.encode())
            }
            request::GET_BROKER_RUNTIME_INFO => {
                let mut t = KvTable::default();
                t.table.insert("brokerVersion".into(), "401".into());
                t.table.insert(
                    "msgPutTotalTodayNow".into(),
                    s.store.lock().log.len().to_string(),
                );
                reply(&req, response::SUCCESS, None).with_body(serde_json::to_vec(&t).unwrap())
            }
            request::GET_CONSUMER_CONNECTION_LIST => {
                let group = req
                    .ext_fields
                    .get("consumerGroup")
                    .unwrap_or_default()
                    .to_string();
                let st = s.store.lock();
                let Some(members) = st.consumers.get(&group).filter(|m| !m.is_empty()) else {
                    return Some(reply(
                        &req,
                        response::CONSUMER_NOT_ONLINE,
                        Some("not online"),
                    ));
                };
                let conns: Vec<serde_json::Value> = members
                    .iter()
                    .map(|(id, (ch, _))| {
                        serde_json::json!({
                            "clientAddr": ch.remote_addr().to_string(),
                            "clientId": id,
                            "language": "JAVA",
                            "version": 401,
                        })
                    })
                    .collect();
                let subs: BTreeMap<String, SubscriptionData> = members
                    .values()
                    .flat_map(|(_, s)| s.iter().map(|d| (d.topic.clone(), d.clone())))
                    .collect();
                let body = serde_json::json!({
                    "connectionSet": conns,
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "subscriptionTable": subs,
                });
                reply(&req, response::SUCCESS, None).with_body(serde_json::to_vec(&body).unwrap())
            }
            _ => RemotingCommand::not_supported(&req),
        })
    }

    fn on_channel_closed(&self, channel: &Channel) {
        let mut changed = Vec::new();
        {
            let mut st = self.0.store.lock();
            for (g, members) in st.consumers.iter_mut() {
                let before = members.len();
                members.retain(|_, (c, _)| c != channel);
                if members.len() != before {
                    changed.push(g.clone());
                }
            }
        }
        for g in changed {
            self.0.notify_ids_changed(&g);
        }
    }
}

fn offset_reply(req: &RemotingCommand, offset: i64) -> RemotingCommand {
    let mut r = reply(req, response::SUCCESS, None);
    r.ext_fields.insert("offset", offset.to_string());
    r
}

fn send(s: &Arc<BrokerState>, channel: &Channel, req: &RemotingCommand) -> RemotingCommand {
    {
        let mut script = s.script.lock();
        if let Some(code) = script.fail_all_sends {
            return reply(req, code, Some("scripted failure"));
        }
        if let Some(code) = script.fail_sends.pop_front() {
            return reply(req, code, Some("scripted failure"));
        }
    }
    let h = if req.code == request::SEND_MESSAGE {
        SendMessageRequestHeader::from_ext_v1(&req.ext_fields)
    } else {
        SendMessageRequestHeader::from_ext_v2(&req.ext_fields)
    };
    let h = match h {
        Ok(h) => h,
        Err(e) => return reply(req, response::INVALID_PARAMETER, Some(&e.to_string())),
    };
    let known = s
        .store
        .lock()
        .topics
        .get(&h.topic)
        .map(|t| t.write_queue_nums);
    let queues = match known {
        Some(n) => n,
        None if h.default_topic == "TBW102" => {
            let n = h.default_topic_queue_nums.clamp(1, 8);
            s.create_topic(&h.topic, n);
            n
        }
        None => return reply(req, response::TOPIC_NOT_EXIST, Some("topic not exist")),
    };
    if h.queue_id >= queues {
        return reply(req, response::SYSTEM_ERROR, Some("queue id out of range"));
    }
    let queue_id = if h.queue_id < 0 { 0 } else { h.queue_id };
    let born = channel.remote_addr();
    let props = h.properties.clone().unwrap_or_default();
    let mut ids = Vec::new();
    let mut first_offset = None;
    if req.code == request::SEND_BATCH_MESSAGE {
        for e in basalt_common::batch::decode(&req.body).unwrap() {
            let p = String::from_utf8_lossy(&e.properties).into_owned();
            let qo = s.max_offset(&h.topic, queue_id);
            first_offset.get_or_insert(qo);
            let phys = s.append(&h.topic, queue_id, e.flag, &e.body, &p, 0, born, 0);
            ids.push(basalt_common::msgid::encode(
                s.addr().parse().unwrap(),
                phys,
            ));
        }
    } else {
        let qo = s.max_offset(&h.topic, queue_id);
        first_offset = Some(qo);
        let phys = s.append(
            &h.topic,
            queue_id,
            h.flag,
            &req.body,
            &props,
            h.reconsume_times.unwrap_or(0),
            born,
            h.sys_flag,
        );
        ids.push(basalt_common::msgid::encode(
            s.addr().parse().unwrap(),
            phys,
        ));
    }
    let mut r = reply(req, response::SUCCESS, None);
    r.ext_fields = SendMessageResponseHeader {
        msg_id: ids.join(","),
        queue_id,
        queue_offset: first_offset.unwrap_or(0),
        transaction_id: None,
        batch_uniq_id: None,
    }
    .to_ext();
    r.ext_fields.insert("MSG_REGION", "DefaultRegion");
    r.ext_fields.insert("TRACE_ON", "true");
    if let Some(code) = s.script.lock().stored_but.pop_front() {
        r.code = code;
    }
    r
}

fn tag_matches(sub: &Option<SubscriptionData>, rec: &RecordView<'_>) -> bool {
    let Some(sub) = sub else { return true };
    if sub.code_set.is_empty() {
        return true;
    }
    match rec.property("TAGS") {
        Some(t) => sub
            .code_set
            .contains(&java_string_hash(&String::from_utf8_lossy(t))),
        None => false,
    }
}

async fn pull(s: &Arc<BrokerState>, req: &RemotingCommand) -> RemotingCommand {
    let h: PullMessageRequestHeader = req.decode_header().unwrap();
    if let Some(next) = s
        .script
        .lock()
        .offset_moved
        .remove(&(h.topic.clone(), h.queue_id))
    {
        return pull_reply(
            req,
            response::PULL_OFFSET_MOVED,
            next,
            s.max_offset(&h.topic, h.queue_id),
        );
    }
    if h.sys_flag & 0x1 != 0 {
        s.store.lock().offsets.insert(
            (h.consumer_group.clone(), h.topic.clone(), h.queue_id),
            h.commit_offset,
        );
    }
    let sub: Option<SubscriptionData> = if s.script.lock().no_broker_filter {
        None
    } else if h.sys_flag & 0x4 != 0 {
        let expr = h.subscription.clone().unwrap_or_default();
        Some(subscription_of(&h.topic, &expr))
    } else {
        let st = s.store.lock();
        st.consumers
            .get(&h.consumer_group)
            .and_then(|m| {
                m.values()
                    .flat_map(|(_, subs)| subs.iter())
                    .find(|d| d.topic == h.topic)
            })
            .cloned()
    };
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(h.suspend_timeout_millis.max(0) as u64);
    let mut rx = s.appended.subscribe();
    loop {
        let max = s.max_offset(&h.topic, h.queue_id);
        if h.queue_offset > max {
            return pull_reply(req, response::PULL_OFFSET_MOVED, max, max);
        }
        if h.queue_offset < max {
            let st = s.store.lock();
            let offsets = &st.queues[&(h.topic.clone(), h.queue_id)];
            let mut body = Vec::new();
            let mut n = 0;
            let mut next = h.queue_offset;
            for qo in h.queue_offset..max {
                next = qo + 1;
                let rec = &st.log[&offsets[qo as usize]];
                if tag_matches(&sub, &RecordView::parse(rec, false).unwrap()) {
                    body.extend_from_slice(rec);
                    n += 1;
                    if n >= h.max_msg_nums {
                        break;
                    }
                }
            }
            if body.is_empty() {
                return pull_reply(req, response::PULL_RETRY_IMMEDIATELY, next, max);
            }
            return pull_reply(req, response::SUCCESS, next, max).with_body(body);
        }
        if h.sys_flag & 0x2 == 0 {
            return pull_reply(req, response::PULL_NOT_FOUND, h.queue_offset, max);
        }
        tokio::select! {
            _ = rx.changed() => {}
            _ = tokio::time::sleep_until(deadline) => {
                return pull_reply(req, response::PULL_NOT_FOUND, h.queue_offset, s.max_offset(&h.topic, h.queue_id));
            }
        }
    }
}

fn subscription_of(topic: &str, expr: &str) -> SubscriptionData {
    let mut d = SubscriptionData {
        topic: topic.into(),
        sub_string: expr.into(),
        expression_type: "TAG".into(),
        ..Default::default()
    };
    if expr.trim() != "*" && !expr.trim().is_empty() {
        for t in expr.split("||").map(str::trim).filter(|t| !t.is_empty()) {
            d.tags_set.push(t.into());
            d.code_set.push(java_string_hash(t));
        }
    }
    d
}

fn pull_reply(req: &RemotingCommand, code: i32, next: i64, max: i64) -> RemotingCommand {
    let mut r = reply(req, code, None);
    r.ext_fields = PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: next,
        min_offset: 0,
        max_offset: max,
        ..Default::default()
    }
    .to_ext();
    r
}

fn heartbeat(s: &Arc<BrokerState>, channel: &Channel, req: &RemotingCommand) -> RemotingCommand {
    let data: HeartbeatData = basalt_remoting::fastjson::from_slice(&req.body).unwrap();
    let mut changed = Vec::new();
    for c in &data.consumer_data_set {
        s.create_topic(&format!("%RETRY%{}", c.group_name), 1);
        let mut st = s.store.lock();
        let members = st.consumers.entry(c.group_name.clone()).or_default();
        let is_new = !members.contains_key(&data.client_id);
        members.insert(
            data.client_id.clone(),
            (channel.clone(), c.subscription_data_set.clone()),
        );
        if is_new {
            changed.push(c.group_name.clone());
        }
    }
    for g in changed {
        s.notify_ids_changed(&g);
    }
    reply(req, response::SUCCESS, None)
}

fn send_back(s: &Arc<BrokerState>, channel: &Channel, req: &RemotingCommand) -> RemotingCommand {
    if s.script.lock().fail_send_back {
        return reply(
            req,
            response::SYSTEM_ERROR,
            Some("scripted send-back failure"),
        );
    }
    let h: ConsumerSendMsgBackRequestHeader = req.decode_header().unwrap();
    let rec = match s.store.lock().log.get(&h.offset) {
        Some(r) => r.clone(),
        None => {
            return reply(
                req,
                response::SYSTEM_ERROR,
                Some("no message at that offset"),
            );
        }
    };
    let v = RecordView::parse(&rec, false).unwrap();
    let mut props = Properties::decode(v.properties);
    if props.get("RETRY_TOPIC").is_none() {
        props.set("RETRY_TOPIC", &*v.topic_str());
    }
    if props.get("ORIGIN_MESSAGE_ID").is_none() {
        props.set(
            "ORIGIN_MESSAGE_ID",
            h.origin_msg_id.clone().unwrap_or_default(),
        );
    }
    let reconsume = v.reconsume_times + 1;
    let max = h.max_reconsume_times.unwrap_or(16);
    let topic = if reconsume > max || h.delay_level < 0 {
        format!("%DLQ%{}", h.group)
    } else {
        format!("%RETRY%{}", h.group)
    };
    s.create_topic(&topic, 1);
    let props = String::from_utf8(props.encode()).unwrap();
    let body = v.body.to_vec();
    s.append(
        &topic,
        0,
        v.flag,
        &body,
        &props,
        reconsume,
        channel.remote_addr(),
        0,
    );
    reply(req, response::SUCCESS, None)
}

/// Property value of an encoded property string.
pub fn prop(props: &str, name: &str) -> Option<String> {
    properties::find(props.as_bytes(), name).map(|v| String::from_utf8_lossy(v).into_owned())
}
