//! Broker settings with RocketMQ's `broker.conf` names, read from a Java
//! `.properties` file or from TOML. Unknown keys are warned about with the
//! closest known key ([`crate::config_keys`]); a value that does not parse
//! is an error naming the key.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use basalt_common::config::{BrokerRole, FlushDiskType};
use basalt_store::StoreConfig;
use basalt_store::dispatch::DelayLevels;
use basalt_store::timer::TimerConfig;
use thiserror::Error;

/// A configuration problem.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {detail}")]
    Syntax { path: PathBuf, detail: String },
    #[error("invalid value {value:?} for {key}: {reason}")]
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
}

/// Everything a broker is told. Defaults follow RocketMQ's `BrokerConfig`
/// and `MessageStoreConfig`.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub broker_cluster_name: String,
    pub broker_name: String,
    /// 0 = master, > 0 = slave.
    pub broker_id: i64,
    /// The address clients are told to use (`brokerIP1`).
    pub broker_ip1: IpAddr,
    /// The address slaves use for HA (`brokerIP2`).
    pub broker_ip2: IpAddr,
    /// Interface to listen on (Basalt addition; RocketMQ binds all).
    pub listen_addr: IpAddr,
    pub listen_port: u16,
    /// `;`-separated NameServer addresses.
    pub namesrv_addr: Option<String>,
    pub store_path_root_dir: PathBuf,
    pub flush_disk_type: FlushDiskType,
    pub broker_role: BrokerRole,
    pub mapped_file_size_commit_log: usize,
    pub mapped_file_size_consume_queue: usize,
    /// Hours.
    pub file_reserved_time: u64,
    /// Basalt-only `fileReservedTimeMillis`: when above 0, replaces
    /// `fileReservedTime` with a figure in milliseconds (tests and small
    /// disks; RocketMQ's setting is hour-granular).
    pub file_reserved_time_millis: u64,
    /// `cleanResourceInterval`: how often a cleanup round runs (10 s).
    pub clean_resource_interval: Duration,
    pub delete_when: String,
    pub disk_max_used_space_ratio: u32,
    /// Above this disk usage (percent) the oldest CommitLog files are deleted
    /// whether expired or not (`cleanFileForciblyEnable`).
    pub disk_space_clean_forcibly_ratio: u32,
    /// Above this disk usage (percent) sends are refused as "disk full".
    pub disk_space_warning_level_ratio: u32,
    pub clean_file_forcibly_enable: bool,
    pub auto_create_topic_enable: bool,
    pub auto_create_subscription_group: bool,
    /// `enableSingleTopicRegister` (RocketMQ's default false): a created
    /// topic is registered alone with REGISTER_TOPIC_IN_NAMESRV (217);
    /// when false, with a REGISTER_BROKER that carries only that topic
    /// (RocketMQ's `registerIncrementBrokerData`).
    pub enable_single_topic_register: bool,
    /// `enableSplitRegistration` (RocketMQ's default false): a topic table
    /// larger than `splitRegistrationSize` is registered in several
    /// REGISTER_BROKER requests of that many topics each.
    pub enable_split_registration: bool,
    /// `splitRegistrationSize` (800): topics per split registration.
    pub split_registration_size: usize,
    /// `compressedRegister` (RocketMQ's default false): REGISTER_BROKER
    /// bodies in the zlib-compressed form (docs/protocol.md#broker-registration).
    pub compressed_register: bool,
    pub default_topic_queue_nums: i32,
    pub broker_permission: i32,
    pub max_message_size: usize,
    pub sync_flush_timeout: Duration,
    pub flush_interval_commit_log: Duration,
    pub transient_store_pool_enable: bool,
    pub transient_store_pool_size: usize,
    pub warm_mapped_file_enable: bool,
    pub message_index_enable: bool,
    pub check_crc_on_recover: bool,
    pub enabled_append_prop_crc: bool,
    pub register_name_server_period: Duration,
    pub long_polling_enable: bool,
    pub short_polling_time_mills: Duration,
    pub flush_consumer_offset_interval: Duration,
    pub channel_expired_timeout: Duration,
    pub notify_consumer_ids_changed_enable: bool,
    pub region_id: String,
    pub trace_on: bool,
    /// `traceTopicEnable` (RocketMQ's default false): create the message
    /// trace topic, `msgTraceTopicName`, at start with one queue, so
    /// clients' `enableMsgTrace` works without auto-created topics.
    pub trace_topic_enable: bool,
    /// `msgTraceTopicName`: the trace topic `traceTopicEnable` creates.
    pub msg_trace_topic_name: String,
    pub message_delay_level: String,
    pub ha_listen_port: u16,
    /// Whether a master listens for HA slaves (Basalt addition; RocketMQ
    /// always does). Off, the broker runs standalone: no HA port.
    pub ha_enable: bool,
    pub ha_master_address: Option<String>,
    pub ha_send_heartbeat_interval: Duration,
    pub ha_housekeeping_interval: Duration,
    pub ha_transfer_batch_size: usize,
    /// Bytes a slave may lag before SYNC_MASTER answers SLAVE_NOT_AVAILABLE.
    pub ha_max_gap_not_in_sync: i64,
    pub slave_read_enable: bool,
    pub offset_check_in_slave: bool,
    /// Seconds between metadata syncs of a slave from its master.
    pub slave_sync_interval: Duration,
    pub enable_dleger_commit_log: bool,
    pub dleger_group: String,
    /// `n0-127.0.0.1:40911;n1-127.0.0.1:40912`
    pub dleger_peers: String,
    pub dleger_self_id: String,
    /// Ledger heartbeat interval; elections start after three missed ones
    /// (Basalt default 300 ms for fail-over in about a second; DLedger 2 s).
    pub dleger_heartbeat_interval: Duration,
    /// Acknowledge ledger appends once a majority has them in memory rather
    /// than on disk (faster, loses acknowledged messages if a majority crashes).
    pub dleger_ack_in_memory: bool,
    /// Offer Basalt's binary entry push to the other members (`dLegerBinaryPush`,
    /// default true); a member that does not take it gets DLedger's JSON.
    pub dleger_binary_push: bool,
    /// Append a line per acknowledged ledger send to `ledger-acks.log` under
    /// the store root (`ledgerAckLogEnable`, Basalt only, default false): the
    /// term and the entry indexes each acknowledgement was given for, so a
    /// fault test can prove a deposed leader never acknowledged an entry of
    /// its old term that the new term replaced. A diagnostic: one small
    /// write per send.
    pub ledger_ack_log: bool,
    /// Member that should lead whenever it is healthy.
    pub dleger_preferred_leader: String,
    /// Maximum frame size accepted from clients.
    pub max_frame_size: usize,
    /// Client connections open at once (`serverMaxConnections`); more are
    /// closed as soon as they are accepted.
    pub server_max_connections: usize,
    /// Requests of one connection processed at once before it stops being
    /// read (`serverMaxInflightRequestsPerConnection`).
    pub server_max_inflight_per_connection: usize,
    /// Requests processed at once over all connections (`serverMaxInflightRequests`).
    pub server_max_inflight_requests: usize,
    /// Most queues a topic may have (read or write), whoever creates it.
    pub max_queue_nums_per_topic: i32,
    /// Most topics this broker holds; creating more is refused.
    pub max_topic_count: usize,
    /// Most subscription groups this broker holds; creating more is refused.
    pub max_subscription_group_count: usize,
    /// Longest a pull may be held waiting for messages, whatever it asks.
    pub max_long_polling_suspend: Duration,
    /// Whether consumers may filter by message properties (SQL92
    /// selectors). Off by default, as in RocketMQ; `basalt standalone`
    /// turns it on unless told otherwise.
    pub enable_property_filter: bool,
    /// `transactionTimeOut`: a half message younger than this is not checked
    /// back (unless it names its own check time).
    pub transaction_timeout: Duration,
    /// `transactionCheckInterval`: time between two check rounds.
    pub transaction_check_interval: Duration,
    /// `transactionCheckMax`: checks before a half message is given up and
    /// moved to `TRANS_CHECK_MAX_TIME_TOPIC`.
    pub transaction_check_max: i32,
    /// `rejectTransactionMessage`: refuse half messages.
    pub reject_transaction_message: bool,
    /// `storeReplyMessageEnable`: keep reply messages in the reply topic
    /// besides pushing them to the requester.
    pub store_reply_message_enable: bool,
    /// Timer messages (TIMER_DELIVER_MS and friends) are scheduled; off,
    /// they are refused.
    pub timer_wheel_enable: bool,
    /// Longest delay a timer message may ask for, in seconds (3 days).
    pub timer_max_delay_sec: i64,
    /// Width of a timing-wheel slot: timers are delivered at most this
    /// much after their time.
    pub timer_precision_ms: i64,
    /// How often the TimerLog is fsynced and the timer checkpoint written.
    pub timer_flush_interval: Duration,
    /// Bytes per TimerLog segment (rounded down to whole 48-byte entries).
    pub mapped_file_size_timer_log: usize,
    /// The Prometheus exporter and the dashboard.
    pub observe: crate::metrics::settings::ObservabilityConfig,
    /// `enableGrpcServer`: serve the RocketMQ 5 gRPC MessagingService
    /// (crate basalt-grpc, docs/grpc.md).
    pub enable_grpc_server: bool,
    /// `grpcServerPort` (RocketMQ proxy's name): its port; 0 takes any
    /// free port (tests), reported at start.
    pub grpc_server_port: u16,
    /// Authentication and authorization (docs/auth.md).
    pub auth: basalt_auth::AuthSettings,
    /// `tls.*` and `replicationSecret` (docs/tls.md).
    pub security: crate::transport_security::SecuritySettings,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            broker_cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 0,
            broker_ip1: IpAddr::V4(Ipv4Addr::LOCALHOST),
            broker_ip2: IpAddr::V4(Ipv4Addr::LOCALHOST),
            listen_addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            listen_port: 10911,
            namesrv_addr: None,
            store_path_root_dir: default_store_root(),
            flush_disk_type: FlushDiskType::AsyncFlush,
            broker_role: BrokerRole::AsyncMaster,
            mapped_file_size_commit_log: 1024 * 1024 * 1024,
            mapped_file_size_consume_queue: 300_000 * 20,
            file_reserved_time: 72,
            file_reserved_time_millis: 0,
            clean_resource_interval: Duration::from_secs(10),
            delete_when: "04".into(),
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 85,
            disk_space_warning_level_ratio: 90,
            clean_file_forcibly_enable: true,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            enable_single_topic_register: false,
            enable_split_registration: false,
            split_registration_size: 800,
            compressed_register: false,
            default_topic_queue_nums: 8,
            broker_permission: 6,
            max_message_size: 4 * 1024 * 1024,
            sync_flush_timeout: Duration::from_secs(5),
            flush_interval_commit_log: Duration::from_millis(500),
            transient_store_pool_enable: false,
            transient_store_pool_size: 5,
            warm_mapped_file_enable: false,
            message_index_enable: true,
            check_crc_on_recover: true,
            enabled_append_prop_crc: true,
            register_name_server_period: Duration::from_secs(30),
            long_polling_enable: true,
            short_polling_time_mills: Duration::from_millis(1000),
            flush_consumer_offset_interval: Duration::from_secs(5),
            channel_expired_timeout: Duration::from_secs(120),
            notify_consumer_ids_changed_enable: true,
            region_id: "DefaultRegion".into(),
            trace_on: true,
            trace_topic_enable: false,
            msg_trace_topic_name: basalt_common::constants::topic::TRACE_TOPIC.into(),
            message_delay_level: "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
                .into(),
            ha_listen_port: 10912,
            ha_enable: true,
            ha_master_address: None,
            ha_send_heartbeat_interval: Duration::from_secs(5),
            ha_housekeeping_interval: Duration::from_secs(20),
            ha_transfer_batch_size: 32 * 1024,
            ha_max_gap_not_in_sync: 256 * 1024 * 1024,
            slave_read_enable: false,
            offset_check_in_slave: false,
            slave_sync_interval: Duration::from_secs(10),
            enable_dleger_commit_log: false,
            dleger_group: String::new(),
            dleger_peers: String::new(),
            dleger_self_id: String::new(),
            dleger_heartbeat_interval: Duration::from_millis(300),
            dleger_ack_in_memory: false,
            dleger_binary_push: true,
            ledger_ack_log: false,
            dleger_preferred_leader: String::new(),
            max_frame_size: 16 * 1024 * 1024,
            server_max_connections: basalt_remoting::transport::DEFAULT_MAX_CONNECTIONS,
            server_max_inflight_per_connection:
                basalt_remoting::transport::DEFAULT_MAX_INFLIGHT_PER_CONNECTION,
            server_max_inflight_requests: basalt_remoting::transport::DEFAULT_MAX_INFLIGHT_REQUESTS,
            max_queue_nums_per_topic: 1024,
            max_topic_count: 100_000,
            max_subscription_group_count: 100_000,
            max_long_polling_suspend: Duration::from_secs(30),
            enable_property_filter: false,
            transaction_timeout: Duration::from_secs(6),
            transaction_check_interval: Duration::from_secs(30),
            transaction_check_max: 15,
            reject_transaction_message: false,
            store_reply_message_enable: true,
            timer_wheel_enable: true,
            timer_max_delay_sec: 3 * 24 * 3600,
            timer_precision_ms: 1000,
            timer_flush_interval: Duration::from_millis(1000),
            mapped_file_size_timer_log: 100 * 1024 * 1024,
            observe: Default::default(),
            enable_grpc_server: true,
            grpc_server_port: 8081,
            auth: Default::default(),
            security: Default::default(),
        }
    }
}

/// `~/store`, RocketMQ's default root.
fn default_store_root() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
        .join("store")
}

fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, v, "expected true or false")),
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    v.trim()
        .parse::<T>()
        .map_err(|e| invalid(key, v, &e.to_string()))
}

/// A count that must be at least 1.
fn parse_count(key: &str, v: &str) -> Result<usize, ConfigError> {
    match parse_num::<usize>(key, v)? {
        0 => Err(invalid(key, v, "must be at least 1")),
        n => Ok(n),
    }
}

fn parse_millis(key: &str, v: &str) -> Result<Duration, ConfigError> {
    parse_num::<u64>(key, v).map(Duration::from_millis)
}

fn invalid(key: &str, v: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        value: v.to_string(),
        reason: reason.to_string(),
    }
}

impl BrokerConfig {
    /// Applies one `key = value`. Returns `Ok(false)` for a key Basalt does
    /// not know (the caller warns), an error for a value that does not parse.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let v = value.trim();
        match key {
            "brokerClusterName" => self.broker_cluster_name = v.to_string(),
            "brokerName" => {
                if v.is_empty() {
                    return Err(invalid(key, v, "must not be empty"));
                }
                self.broker_name = v.to_string()
            }
            "brokerId" => self.broker_id = parse_num(key, v)?,
            "brokerIP1" => self.broker_ip1 = parse_num(key, v)?,
            "brokerIP2" => self.broker_ip2 = parse_num(key, v)?,
            "listenAddr" => self.listen_addr = parse_num(key, v)?,
            "listenPort" => {
                self.listen_port = parse_num(key, v)?;
                self.ha_listen_port = self.listen_port.wrapping_add(1);
            }
            "namesrvAddr" => {
                self.namesrv_addr = if v.is_empty() {
                    None
                } else {
                    Some(v.to_string())
                }
            }
            "storePathRootDir" => self.store_path_root_dir = PathBuf::from(v),
            "flushDiskType" => {
                self.flush_disk_type =
                    v.parse()
                        .map_err(|e: basalt_common::config::ParseEnumError| {
                            invalid(key, v, &e.to_string())
                        })?
            }
            "brokerRole" => {
                self.broker_role =
                    v.parse()
                        .map_err(|e: basalt_common::config::ParseEnumError| {
                            invalid(key, v, &e.to_string())
                        })?
            }
            "mappedFileSizeCommitLog" => self.mapped_file_size_commit_log = parse_num(key, v)?,
            "mappedFileSizeConsumeQueue" => {
                self.mapped_file_size_consume_queue = parse_num(key, v)?
            }
            "fileReservedTime" => self.file_reserved_time = parse_num(key, v)?,
            "fileReservedTimeMillis" => self.file_reserved_time_millis = parse_num(key, v)?,
            "cleanResourceInterval" => {
                self.clean_resource_interval = parse_millis(key, v)?;
                if self.clean_resource_interval.is_zero() {
                    return Err(invalid(key, v, "must be above 0"));
                }
            }
            "deleteWhen" => self.delete_when = v.to_string(),
            "diskMaxUsedSpaceRatio" => self.disk_max_used_space_ratio = parse_num(key, v)?,
            "diskSpaceCleanForciblyRatio" => {
                self.disk_space_clean_forcibly_ratio = parse_num(key, v)?
            }
            "diskSpaceWarningLevelRatio" => {
                self.disk_space_warning_level_ratio = parse_num(key, v)?
            }
            "cleanFileForciblyEnable" => self.clean_file_forcibly_enable = parse_bool(key, v)?,
            "autoCreateTopicEnable" => self.auto_create_topic_enable = parse_bool(key, v)?,
            "autoCreateSubscriptionGroup" => {
                self.auto_create_subscription_group = parse_bool(key, v)?
            }
            "enableSingleTopicRegister" => self.enable_single_topic_register = parse_bool(key, v)?,
            "enableSplitRegistration" => self.enable_split_registration = parse_bool(key, v)?,
            "splitRegistrationSize" => {
                self.split_registration_size = parse_num::<usize>(key, v)?.max(1)
            }
            "compressedRegister" => self.compressed_register = parse_bool(key, v)?,
            "defaultTopicQueueNums" => self.default_topic_queue_nums = parse_num(key, v)?,
            "brokerPermission" => self.broker_permission = parse_num(key, v)?,
            "maxMessageSize" => self.max_message_size = parse_num(key, v)?,
            "syncFlushTimeout" => self.sync_flush_timeout = parse_millis(key, v)?,
            "flushIntervalCommitLog" => self.flush_interval_commit_log = parse_millis(key, v)?,
            "transientStorePoolEnable" => self.transient_store_pool_enable = parse_bool(key, v)?,
            "transientStorePoolSize" => self.transient_store_pool_size = parse_num(key, v)?,
            "warmMappedFileEnable" | "warmMapedFileEnable" => {
                self.warm_mapped_file_enable = parse_bool(key, v)?
            }
            "messageIndexEnable" => self.message_index_enable = parse_bool(key, v)?,
            "checkCRCOnRecover" => self.check_crc_on_recover = parse_bool(key, v)?,
            "enabledAppendPropCRC" => self.enabled_append_prop_crc = parse_bool(key, v)?,
            "registerNameServerPeriod" => self.register_name_server_period = parse_millis(key, v)?,
            "longPollingEnable" => self.long_polling_enable = parse_bool(key, v)?,
            "shortPollingTimeMills" => self.short_polling_time_mills = parse_millis(key, v)?,
            "flushConsumerOffsetInterval" => {
                self.flush_consumer_offset_interval = parse_millis(key, v)?
            }
            "channelExpiredTimeout" => self.channel_expired_timeout = parse_millis(key, v)?,
            "notifyConsumerIdsChangedEnable" => {
                self.notify_consumer_ids_changed_enable = parse_bool(key, v)?
            }
            "regionId" => self.region_id = v.to_string(),
            "traceOn" => self.trace_on = parse_bool(key, v)?,
            "traceTopicEnable" => self.trace_topic_enable = parse_bool(key, v)?,
            "msgTraceTopicName" => self.msg_trace_topic_name = v.to_string(),
            "messageDelayLevel" => {
                DelayLevels::parse(v).map_err(|e| invalid(key, v, &e))?;
                self.message_delay_level = v.to_string()
            }
            "haListenPort" => self.ha_listen_port = parse_num(key, v)?,
            "haEnable" => self.ha_enable = parse_bool(key, v)?,
            "haMasterAddress" => {
                self.ha_master_address = if v.is_empty() {
                    None
                } else {
                    Some(v.to_string())
                }
            }
            "haSendHeartbeatInterval" => self.ha_send_heartbeat_interval = parse_millis(key, v)?,
            "haHousekeepingInterval" => self.ha_housekeeping_interval = parse_millis(key, v)?,
            "haTransferBatchSize" => self.ha_transfer_batch_size = parse_num(key, v)?,
            "haMaxGapNotInSync" | "haSlaveFallbehindMax" => {
                self.ha_max_gap_not_in_sync = parse_num(key, v)?
            }
            "slaveReadEnable" => self.slave_read_enable = parse_bool(key, v)?,
            "offsetCheckInSlave" => self.offset_check_in_slave = parse_bool(key, v)?,
            "slaveSyncInterval" => self.slave_sync_interval = parse_millis(key, v)?,
            "enableDLegerCommitLog" => self.enable_dleger_commit_log = parse_bool(key, v)?,
            "dLegerGroup" => self.dleger_group = v.to_string(),
            "dLegerPeers" => self.dleger_peers = v.to_string(),
            "dLegerSelfId" => self.dleger_self_id = v.to_string(),
            "dLegerHeartbeatInterval" => self.dleger_heartbeat_interval = parse_millis(key, v)?,
            "dLegerAckInMemory" => self.dleger_ack_in_memory = parse_bool(key, v)?,
            "dLegerBinaryPush" => self.dleger_binary_push = parse_bool(key, v)?,
            "ledgerAckLogEnable" => self.ledger_ack_log = parse_bool(key, v)?,
            "preferredLeaderId" | "dLegerPreferredLeader" => {
                self.dleger_preferred_leader = v.to_string()
            }
            "maxFrameSize" => self.max_frame_size = parse_num(key, v)?,
            "serverMaxConnections" => self.server_max_connections = parse_count(key, v)?,
            "serverMaxInflightRequestsPerConnection" => {
                self.server_max_inflight_per_connection = parse_count(key, v)?
            }
            "serverMaxInflightRequests" => self.server_max_inflight_requests = parse_count(key, v)?,
            "maxQueueNumsPerTopic" => {
                self.max_queue_nums_per_topic = parse_num(key, v)?;
                let max = basalt_store::names::MAX_QUEUE_ID + 1;
                if !(1..=max).contains(&self.max_queue_nums_per_topic) {
                    return Err(invalid(key, v, &format!("must be in 1..={max}")));
                }
            }
            "maxTopicCount" => self.max_topic_count = parse_num(key, v)?,
            "maxSubscriptionGroupCount" => self.max_subscription_group_count = parse_num(key, v)?,
            "maxLongPollingSuspendMillis" => self.max_long_polling_suspend = parse_millis(key, v)?,
            "enablePropertyFilter" => self.enable_property_filter = parse_bool(key, v)?,
            "transactionTimeOut" => self.transaction_timeout = parse_millis(key, v)?,
            "transactionCheckInterval" => self.transaction_check_interval = parse_millis(key, v)?,
            "transactionCheckMax" => self.transaction_check_max = parse_num(key, v)?,
            "rejectTransactionMessage" => self.reject_transaction_message = parse_bool(key, v)?,
            "storeReplyMessageEnable" => self.store_reply_message_enable = parse_bool(key, v)?,
            "timerWheelEnable" => self.timer_wheel_enable = parse_bool(key, v)?,
            "timerMaxDelaySec" => self.timer_max_delay_sec = parse_num(key, v)?,
            "timerPrecisionMs" => self.timer_precision_ms = parse_num(key, v)?,
            "timerFlushIntervalMs" => self.timer_flush_interval = parse_millis(key, v)?,
            "mappedFileSizeTimerLog" => self.mapped_file_size_timer_log = parse_num(key, v)?,
            "enableGrpcServer" => self.enable_grpc_server = parse_bool(key, v)?,
            "grpcServerPort" => self.grpc_server_port = parse_num(key, v)?,
            _ if self.security.set(key, v)? => {}
            // The value is not quoted back: it may hold a password.
            _ if crate::auth::set_key(&mut self.auth, key, v)? => {}
            _ => return self.observe.set(key, v),
        }
        Ok(true)
    }

    /// Reads a `.properties` file (or TOML when the name ends in `.toml`)
    /// on top of the defaults.
    pub fn load(path: &Path) -> Result<BrokerConfig, ConfigError> {
        let mut cfg = BrokerConfig::default();
        cfg.apply_file(path)?;
        Ok(cfg)
    }

    /// Applies a `.properties` (or `.toml`) file on top of these settings.
    pub fn apply_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let pairs = if path.extension().and_then(|e| e.to_str()) == Some("toml") {
            toml_pairs(&text).map_err(|detail| ConfigError::Syntax {
                path: path.to_path_buf(),
                detail,
            })?
        } else {
            properties_pairs(&text)
        };
        self.apply(&pairs)
    }

    /// Applies pairs in order, warning about unknown keys.
    pub fn apply(&mut self, pairs: &[(String, String)]) -> Result<(), ConfigError> {
        // listenPort moves haListenPort unless haListenPort is given too.
        let explicit_ha = pairs.iter().any(|(k, _)| k == "haListenPort");
        for (k, v) in pairs {
            if !self.set(k, v)?
                && let Some(w) = crate::config_keys::key_warning(k, "configuration")
            {
                tracing::warn!("{w}");
            }
        }
        if explicit_ha && let Some((_, v)) = pairs.iter().rev().find(|(k, _)| k == "haListenPort") {
            self.set("haListenPort", v)?;
        }
        self.validate()
    }

    /// Checks settings that only make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.broker_role == BrokerRole::Slave && self.broker_id == 0 {
            return Err(invalid("brokerId", "0", "a SLAVE needs a brokerId > 0"));
        }
        if self.broker_role != BrokerRole::Slave
            && self.broker_id != 0
            && !self.enable_dleger_commit_log
        {
            return Err(invalid(
                "brokerRole",
                &self.broker_role.to_string(),
                "a master needs brokerId 0",
            ));
        }
        if self.default_topic_queue_nums <= 0
            || self.default_topic_queue_nums > self.max_queue_nums_per_topic
        {
            return Err(invalid(
                "defaultTopicQueueNums",
                &self.default_topic_queue_nums.to_string(),
                &format!("must be in 1..={}", self.max_queue_nums_per_topic),
            ));
        }
        if self.enable_dleger_commit_log
            && (self.dleger_peers.is_empty() || self.dleger_self_id.is_empty())
        {
            return Err(invalid(
                "dLegerPeers",
                &self.dleger_peers,
                "ledger mode needs dLegerPeers and dLegerSelfId",
            ));
        }
        if self.transaction_check_interval.is_zero() {
            return Err(invalid(
                "transactionCheckInterval",
                "0",
                "must be at least 1 ms",
            ));
        }
        if self.transaction_check_max < 1 {
            return Err(invalid(
                "transactionCheckMax",
                &self.transaction_check_max.to_string(),
                "must be at least 1",
            ));
        }
        self.store_config()
            .validate()
            .map_err(|e| invalid("store", "", &e))?;
        self.timer_config()
            .validate()
            .map_err(|e| invalid("timer", "", &e))?;
        Ok(())
    }

    /// The address clients reach this broker at.
    pub fn broker_addr(&self) -> SocketAddr {
        SocketAddr::new(self.broker_ip1, self.listen_port)
    }

    /// The HA address slaves connect to.
    pub fn ha_addr(&self) -> SocketAddr {
        SocketAddr::new(self.broker_ip2, self.ha_listen_port)
    }

    /// The store settings this broker implies.
    pub fn store_config(&self) -> StoreConfig {
        let mut s = StoreConfig::new(&self.store_path_root_dir);
        s.commit_log_file_size = self.mapped_file_size_commit_log;
        s.consume_queue_units_per_file = (self.mapped_file_size_consume_queue / 20).max(1);
        s.flush_disk_type = self.flush_disk_type;
        s.sync_flush_timeout = self.sync_flush_timeout;
        s.flush_interval_commit_log = self.flush_interval_commit_log;
        s.transient_store_pool_enable = self.transient_store_pool_enable;
        s.transient_store_pool_size = self.transient_store_pool_size;
        s.warm_mapped_file = self.warm_mapped_file_enable;
        s.message_index_enable = self.message_index_enable;
        s.check_crc_on_recover = self.check_crc_on_recover;
        s.append_prop_crc = self.enabled_append_prop_crc;
        s.max_message_size = self
            .max_message_size
            .min(self.mapped_file_size_commit_log.saturating_sub(64 * 1024));
        s.file_reserved_time = self.file_reserved_time();
        s.clean_resource_interval = self.clean_resource_interval;
        s.delete_when = self.delete_when.clone();
        s.disk_max_used_space_ratio = self.disk_max_used_space_ratio;
        s.disk_space_clean_forcibly_ratio = self.disk_space_clean_forcibly_ratio;
        s.disk_space_warning_level_ratio = self.disk_space_warning_level_ratio;
        s.clean_file_forcibly_enable = self.clean_file_forcibly_enable;
        s.store_host = self.broker_addr();
        if self.mapped_file_size_commit_log < 16 * 1024 * 1024 {
            // Small test stores: a small index too.
            s.max_hash_slot_num = 4096;
            s.max_index_num = 16384;
        }
        s
    }

    /// The timer store's settings this broker implies.
    pub fn timer_config(&self) -> TimerConfig {
        let entry = basalt_store::timer::ENTRY_SIZE;
        TimerConfig {
            root: self.store_path_root_dir.clone(),
            precision_ms: self.timer_precision_ms,
            max_delay_ms: self.timer_max_delay_sec.saturating_mul(1000),
            segment_size: self.mapped_file_size_timer_log / entry * entry,
            // The real disk (the default), as for the store.
            disk: Default::default(),
        }
    }

    /// How long CommitLog (and, in ledger mode, ledger) files are kept:
    /// `fileReservedTimeMillis` when set, else `fileReservedTime` hours.
    pub fn file_reserved_time(&self) -> Duration {
        if self.file_reserved_time_millis > 0 {
            Duration::from_millis(self.file_reserved_time_millis)
        } else {
            Duration::from_secs(self.file_reserved_time.saturating_mul(3600))
        }
    }

    pub fn delay_levels(&self) -> DelayLevels {
        DelayLevels::parse(&self.message_delay_level).unwrap_or_default()
    }
}

/// `key=value` / `key: value` / `key value` lines; `#` and `!` comments.
pub fn properties_pairs(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with('!') {
            continue;
        }
        let sep = l.find(['=', ':']).or_else(|| l.find(char::is_whitespace));
        match sep {
            Some(i) => out.push((l[..i].trim().to_string(), l[i + 1..].trim().to_string())),
            None => out.push((l.to_string(), String::new())),
        }
    }
    out
}

/// Flattens a TOML document: keys at the top level or in any table.
pub fn toml_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let v: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut out = Vec::new();
    fn walk(t: &toml::Table, out: &mut Vec<(String, String)>) {
        for (k, v) in t {
            match v {
                toml::Value::Table(inner) => walk(inner, out),
                toml::Value::String(s) => out.push((k.clone(), s.clone())),
                other => out.push((k.clone(), other.to_string())),
            }
        }
    }
    walk(&v, &mut out);
    Ok(out)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
