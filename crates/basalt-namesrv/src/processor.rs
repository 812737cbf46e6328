//! [`NamesrvProcessor`]: the NameServer's request handling (docs/protocol.md#nameserver).

use std::collections::HashMap;
use std::sync::Arc;

use basalt_auth::AuthGate;
use basalt_common::crc::masked_crc32;
use basalt_common::time::now_millis;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    AddWritePermOfBrokerResponseHeader, CommandHeader, DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader, GetTopicsByClusterRequestHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, RegisterTopicRequestHeader, UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
use basalt_remoting::protocol::{RegisterBrokerBody, TopicRouteData};
use basalt_remoting::{Channel, HeaderError, RemotingCommand, RequestProcessor};
use parking_lot::{Mutex, RwLock};

use crate::kv_config::{KvConfigManager, ORDER_TOPIC_CONFIG};
use crate::kv_requests;
use crate::route_info::{BrokerAddrKey, BrokerRegistration, RouteInfoManager};

/// Longest broker name a write-permission request may name.
const MAX_BROKER_NAME_LEN: usize = 255;

/// Handles NameServer requests against a shared [`RouteInfoManager`].
///
/// Also remembers which brokers registered over which connection, so a
/// broker whose connection closes is dropped at once (as Java's
/// `BrokerHousekeepingService` does) instead of after its timeout.
pub struct NamesrvProcessor {
    routes: RwLock<RouteInfoManager>,
    /// The connection each broker last registered over.
    broker_channels: Mutex<HashMap<BrokerAddrKey, u64>>,
    kv: Arc<KvConfigManager>,
    /// Routes carry `orderTopicConf` from the ORDER_TOPIC_CONFIG namespace
    /// (Java `orderMessageEnable`, off by default).
    order_message_enable: bool,
    /// Checks each request before it is handled (None: none checked).
    auth: Option<Arc<AuthGate>>,
}

impl NamesrvProcessor {
    /// A processor whose KV config is kept in memory only.
    pub fn new(routes: RouteInfoManager) -> Self {
        Self::with_kv(routes, Arc::new(KvConfigManager::in_memory()), false)
    }

    /// A processor over `kv`; with `order_message_enable`, routes carry
    /// each topic's ORDER_TOPIC_CONFIG value as `orderTopicConf`.
    pub fn with_kv(
        routes: RouteInfoManager,
        kv: Arc<KvConfigManager>,
        order_message_enable: bool,
    ) -> Self {
        Self {
            routes: RwLock::new(routes),
            broker_channels: Mutex::new(HashMap::new()),
            kv,
            order_message_enable,
            auth: None,
        }
    }

    /// The processor with `gate` in front of every request.
    pub fn with_auth(mut self, gate: Option<Arc<AuthGate>>) -> Self {
        self.auth = gate;
        self
    }

    /// The refusal to answer instead of handling `req`, if the gate
    /// refuses it (a NameServer write without a super user's signature).
    fn refused(&self, channel: &Channel, req: &RemotingCommand) -> Option<RemotingCommand> {
        let gate = self.auth.as_ref()?;
        let refusal = gate
            .check_namesrv(Some(channel.remote_addr().ip()), req)
            .err()?;
        Some(error(req, refusal.code, refusal.remark))
    }

    /// The KV config.
    pub fn kv(&self) -> &Arc<KvConfigManager> {
        &self.kv
    }

    /// The route tables (read access for embedding and tests).
    pub fn routes(&self) -> &RwLock<RouteInfoManager> {
        &self.routes
    }

    /// Expires silent brokers; called by the NameServer's timer.
    pub fn scan_expired(&self, now_ms: i64) -> Vec<BrokerAddrKey> {
        self.routes.write().scan_expired(now_ms)
    }

    /// Handles one request synchronously (nothing here waits).
    pub fn handle(&self, channel: Option<&Channel>, req: &RemotingCommand) -> RemotingCommand {
        let result = match req.code {
            request::REGISTER_BROKER => self.register_broker(channel, req),
            request::UNREGISTER_BROKER => self.unregister_broker(req),
            request::GET_ROUTEINFO_BY_TOPIC => self.route_info(req),
            request::GET_BROKER_CLUSTER_INFO => {
                Ok(success(req).with_body(self.routes.read().cluster_info().encode()))
            }
            request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
                let list = self.routes.read().all_topics();
                Ok(success(req).with_body(json(&list)))
            }
            request::GET_TOPICS_BY_CLUSTER => {
                GetTopicsByClusterRequestHeader::from_ext(&req.ext_fields).map(|h| {
                    let list = self.routes.read().topics_by_cluster(&h.cluster);
                    success(req).with_body(json(&list))
                })
            }
            request::DELETE_TOPIC_IN_NAMESRV => {
                DeleteTopicFromNamesrvRequestHeader::from_ext(&req.ext_fields).map(|h| {
                    self.routes
                        .write()
                        .delete_topic(&h.topic, h.cluster_name.as_deref());
                    success(req)
                })
            }
            request::REGISTER_TOPIC_IN_NAMESRV => self.register_topic(req),
            request::WIPE_WRITE_PERM_OF_BROKER => self.write_perm(req, false),
            request::ADD_WRITE_PERM_OF_BROKER => self.write_perm(req, true),
            request::GET_KV_CONFIG => Ok(kv_requests::get(&self.kv, req)),
            request::GET_KVLIST_BY_NAMESPACE => Ok(kv_requests::list(&self.kv, req)),
            request::PUT_KV_CONFIG | request::DELETE_KV_CONFIG => Ok(error(
                req,
                response::SYSTEM_ERROR,
                "KV changes are answered by the async path".into(),
            )),
            _ => Ok(RemotingCommand::not_supported(req)),
        };
        result.unwrap_or_else(|e: HeaderError| error(req, response::SYSTEM_ERROR, e.to_string()))
    }

    fn register_broker(
        &self,
        channel: Option<&Channel>,
        req: &RemotingCommand,
    ) -> Result<RemotingCommand, HeaderError> {
        let h = RegisterBrokerRequestHeader::from_ext(&req.ext_fields)?;
        let crc = h.body_crc32.unwrap_or(0);
        if crc != 0 && crc as u32 != masked_crc32(&req.body) {
            tracing::warn!(broker = %h.broker_addr, "register body CRC mismatch");
            return Ok(error(req, response::SYSTEM_ERROR, "crc32 not match".into()));
        }
        let wrapper = if req.body.is_empty() {
            None
        } else {
            // RocketMQ 5's broker with compressedRegister=true deflates the
            // body but always sends `compressed=false` (its
            // BrokerOuterAPI.registerBrokerAll sets the header to false), so a
            // body that opens with a zlib header is taken as compressed.
            let compressed = h.compressed.unwrap_or(false) || looks_zlib(&req.body);
            match RegisterBrokerBody::decode(&req.body, compressed, req.version) {
                Ok(b) => Some(b),
                Err(e) => {
                    tracing::warn!(broker = %h.broker_addr, error = %e, "bad register body");
                    return Ok(error(
                        req,
                        response::SYSTEM_ERROR,
                        format!("cannot decode the register body: {e}"),
                    ));
                }
            }
        };
        let (topic_config_wrapper, filter_server_list) = match wrapper {
            Some(b) => (Some(b.topic_config_serialize_wrapper), b.filter_server_list),
            None => (None, Vec::new()),
        };
        let key = BrokerAddrKey {
            cluster_name: h.cluster_name.clone(),
            broker_addr: h.broker_addr.clone(),
        };
        let result = self.routes.write().register_broker(
            BrokerRegistration {
                cluster_name: h.cluster_name,
                broker_addr: h.broker_addr,
                broker_name: h.broker_name,
                broker_id: h.broker_id,
                ha_server_addr: h.ha_server_addr,
                heartbeat_timeout_ms: h.heartbeat_timeout_millis,
                enable_acting_master: h.enable_acting_master.unwrap_or(false),
                zone_name: req.ext_fields.get("__ZONE_NAME").map(str::to_string),
                topic_config_wrapper,
                filter_server_list,
            },
            now_millis(),
        );
        if let Some(ch) = channel {
            self.broker_channels.lock().insert(key, ch.id());
        }
        let header = RegisterBrokerResponseHeader {
            ha_server_addr: result.ha_server_addr,
            master_addr: result.master_addr,
        };
        Ok(success(req).with_ext(header.to_ext()))
    }

    fn unregister_broker(&self, req: &RemotingCommand) -> Result<RemotingCommand, HeaderError> {
        let h = UnregisterBrokerRequestHeader::from_ext(&req.ext_fields)?;
        self.routes.write().unregister_broker(
            &h.cluster_name,
            &h.broker_addr,
            &h.broker_name,
            h.broker_id,
        );
        tracing::info!(broker = %h.broker_addr, name = %h.broker_name, "broker unregistered");
        Ok(success(req))
    }

    /// REGISTER_TOPIC_IN_NAMESRV: one topic's queue data from a broker that
    /// just created it. Java answers success even when it ignores the
    /// request; Basalt answers SYSTEM_ERROR then, so a Basalt broker falls
    /// back to a full registration (a Java broker ignores the answer).
    fn register_topic(&self, req: &RemotingCommand) -> Result<RemotingCommand, HeaderError> {
        let h = RegisterTopicRequestHeader::from_ext(&req.ext_fields)?;
        if let Err(e) = basalt_common::topic::validate_topic(&h.topic) {
            return Ok(error(req, response::SYSTEM_ERROR, e.to_string()));
        }
        let route = match TopicRouteData::decode(&req.body) {
            Ok(r) => r,
            Err(e) => {
                let remark = format!("cannot decode the topic route body: {e}");
                return Ok(error(req, response::SYSTEM_ERROR, remark));
            }
        };
        if self
            .routes
            .write()
            .register_topic(&h.topic, &route.queue_datas)
        {
            tracing::debug!(topic = %h.topic, "topic registered");
            Ok(success(req))
        } else {
            let remark = format!(
                "topic {} not registered: no queue data, or a broker group not registered",
                h.topic
            );
            Ok(error(req, response::SYSTEM_ERROR, remark))
        }
    }

    /// WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER: the write bit
    /// of one broker group's queue data in every topic. An unknown group
    /// touches nothing and answers a count of 0, as Java does.
    fn write_perm(
        &self,
        req: &RemotingCommand,
        writable: bool,
    ) -> Result<RemotingCommand, HeaderError> {
        // Both request headers hold only `brokerName`.
        let name = WipeWritePermOfBrokerRequestHeader::from_ext(&req.ext_fields)?.broker_name;
        if name.is_empty() || name.len() > MAX_BROKER_NAME_LEN {
            return Ok(error(
                req,
                response::SYSTEM_ERROR,
                format!("brokerName must be 1 to {MAX_BROKER_NAME_LEN} bytes"),
            ));
        }
        let count = self.routes.write().set_write_perm(&name, writable);
        tracing::info!(broker = %name, writable, topics = count, "write permission of broker changed");
        let ext = if writable {
            AddWritePermOfBrokerResponseHeader {
                add_topic_count: count,
            }
            .to_ext()
        } else {
            WipeWritePermOfBrokerResponseHeader {
                wipe_topic_count: count,
            }
            .to_ext()
        };
        Ok(success(req).with_ext(ext))
    }

    fn route_info(&self, req: &RemotingCommand) -> Result<RemotingCommand, HeaderError> {
        let h = GetRouteInfoRequestHeader::from_ext(&req.ext_fields)?;
        let route = self.routes.read().topic_route(&h.topic);
        Ok(match route {
            Some(mut route) => {
                if self.order_message_enable {
                    route.order_topic_conf = self.kv.get(ORDER_TOPIC_CONFIG, &h.topic);
                }
                let bare = TopicRouteData::bare_keys_for(
                    req.version,
                    h.accept_standard_json_only.unwrap_or(false),
                );
                success(req).with_body(route.encode(bare))
            }
            None => error(
                req,
                response::TOPIC_NOT_EXIST,
                format!(
                    "No topic route info in name server for the topic: {}",
                    h.topic
                ),
            ),
        })
    }
}

impl RequestProcessor for NamesrvProcessor {
    async fn process(&self, channel: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        if let Some(refusal) = self.refused(channel, &req) {
            return Some(refusal);
        }
        match req.code {
            // These write kvConfig.json, off the async workers.
            request::PUT_KV_CONFIG | request::DELETE_KV_CONFIG => {
                Some(kv_requests::change(&self.kv, &req).await)
            }
            _ => Some(self.handle(Some(channel), &req)),
        }
    }

    fn on_channel_closed(&self, channel: &Channel) {
        // Only brokers whose latest registration came over this connection:
        // one that has already re-registered elsewhere stays.
        let mut keys = Vec::new();
        self.broker_channels.lock().retain(|key, id| {
            if *id == channel.id() {
                keys.push(key.clone());
                false
            } else {
                true
            }
        });
        if keys.is_empty() {
            return;
        }
        let mut routes = self.routes.write();
        for key in keys {
            tracing::info!(broker = %key.broker_addr, "broker connection closed; removing its routes");
            routes.remove_broker(&key);
        }
    }
}

fn success(req: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(req)
}

fn error(req: &RemotingCommand, code: i32, remark: String) -> RemotingCommand {
    let mut resp = RemotingCommand::response(code, Some(remark));
    resp.opaque = req.opaque;
    resp
}

fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// Whether `body` opens with a zlib stream header (RFC 1950: deflate, the
/// check bits make the first two bytes a multiple of 31). A JSON body opens
/// with `{`, which never passes.
fn looks_zlib(body: &[u8]) -> bool {
    match body {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => false,
    }
}
