//! Typed custom headers: each maps to and from a command's ext fields
//! (docs/protocol.md#ext-fields).
//!
//! Field keys are the Java field names of the RocketMQ header classes. A
//! required field that is missing or does not parse is a [`HeaderError`]
//! naming it; optional fields are `Option`s.

use crate::command::{ExtFields, java_parse_bool};
use crate::error::HeaderError;

mod admin;
mod pop;
mod send;

pub use admin::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
    CloneGroupOffsetRequestHeader, GetKvConfigResponseHeader, GetKvListByNamespaceRequestHeader,
    GetProducerConnectionListRequestHeader, KvConfigKeyRequestHeader, PutKvConfigRequestHeader,
    QueryConsumeQueueRequestHeader, ResetOffsetRequestHeader, ViewBrokerStatsDataRequestHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
pub use pop::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader, NotificationResponseHeader, PollingInfoRequestHeader,
    PollingInfoResponseHeader, PopMessageRequestHeader, PopMessageResponseHeader,
};
pub use send::{SendMessageRequestHeader, SendMessageResponseHeader, batch_flag};

/// A typed view of a command's ext fields.
pub trait CommandHeader: Sized {
    /// Parses the header, naming the first missing or invalid field.
    fn from_ext(ext: &ExtFields) -> Result<Self, HeaderError>;
    /// Flattens the header into ext fields, skipping `None`s as Java skips nulls.
    fn to_ext(&self) -> ExtFields;
}

/// A header field type: how one value is read from and written to ext fields.
pub trait ExtValue: Sized {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError>;
    fn write(&self, ext: &mut ExtFields, key: &'static str);
}

impl ExtValue for String {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        ext.ext_str(key).map(str::to_string)
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        ext.push_unchecked(key, self);
    }
}

impl ExtValue for i32 {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        ext.ext_i32(key)
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        ext.push_i64(key, *self as i64);
    }
}

impl ExtValue for i64 {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        ext.ext_i64(key)
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        ext.push_i64(key, *self);
    }
}

impl ExtValue for bool {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        ext.ext_bool(key)
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        ext.push_unchecked(key, if *self { "true" } else { "false" });
    }
}

impl ExtValue for Option<String> {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        Ok(ext.get(key).map(str::to_string))
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            v.write(ext, key);
        }
    }
}

impl ExtValue for Option<i32> {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        ext.ext_i32_opt(key)
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            v.write(ext, key);
        }
    }
}

impl ExtValue for Option<i64> {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        ext.ext_i64_opt(key)
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            v.write(ext, key);
        }
    }
}

impl ExtValue for Option<bool> {
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
        Ok(ext.get(key).map(java_parse_bool))
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            v.write(ext, key);
        }
    }
}

/// Declares a header struct whose fields map one-to-one to ext-field keys.
macro_rules! header {
    ($(#[$m:meta])* pub struct $name:ident {
        $( $(#[$fm:meta])* $field:ident : $ty:ty = $key:literal ),* $(,)?
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fm])* pub $field: $ty, )*
        }

        impl $crate::header::CommandHeader for $name {
            #[allow(unused_variables)]
            fn from_ext(ext: &$crate::command::ExtFields) -> Result<Self, $crate::error::HeaderError> {
                Ok(Self { $( $field: <$ty as $crate::header::ExtValue>::read(ext, $key)?, )* })
            }
            fn to_ext(&self) -> $crate::command::ExtFields {
                #[allow(unused_mut)]
                let mut ext = $crate::command::ExtFields::with_capacity(
                    [$($key),*].len());
                $( $crate::header::ExtValue::write(&self.$field, &mut ext, $key); )*
                ext
            }
        }
    };
}
pub(crate) use header;

header! {
    /// PULL_MESSAGE (11) / LITE_PULL_MESSAGE (361) request (docs/protocol.md#pull).
    pub struct PullMessageRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        queue_offset: i64 = "queueOffset",
        max_msg_nums: i32 = "maxMsgNums",
        sys_flag: i32 = "sysFlag",
        commit_offset: i64 = "commitOffset",
        suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        subscription: Option<String> = "subscription",
        sub_version: i64 = "subVersion",
        expression_type: Option<String> = "expressionType",
        max_msg_bytes: Option<i32> = "maxMsgBytes",
    }
}

header! {
    /// Pull response header; `nextBeginOffset` must be set on every code.
    pub struct PullMessageResponseHeader {
        suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        next_begin_offset: i64 = "nextBeginOffset",
        min_offset: i64 = "minOffset",
        max_offset: i64 = "maxOffset",
        offset_delta: Option<i64> = "offsetDelta",
        topic_sys_flag: Option<i32> = "topicSysFlag",
        group_sys_flag: Option<i32> = "groupSysFlag",
        forbidden_type: Option<i32> = "forbiddenType",
    }
}

header! {
    /// QUERY_CONSUMER_OFFSET (14) request.
    pub struct QueryConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound",
    }
}

header! {
    /// A response carrying one `offset` (QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET,
    /// GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP).
    pub struct OffsetResponseHeader {
        offset: i64 = "offset",
    }
}

pub type QueryConsumerOffsetResponseHeader = OffsetResponseHeader;
pub type GetMaxOffsetResponseHeader = OffsetResponseHeader;
pub type GetMinOffsetResponseHeader = OffsetResponseHeader;
pub type SearchOffsetResponseHeader = OffsetResponseHeader;

header! {
    /// UPDATE_CONSUMER_OFFSET (15) request.
    pub struct UpdateConsumerOffsetRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        commit_offset: i64 = "commitOffset",
    }
}

header! {
    /// GET_MAX_OFFSET (30) request; `committed` defaults to true (5.x).
    pub struct GetMaxOffsetRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
        committed: Option<bool> = "committed",
    }
}

header! {
    /// GET_MIN_OFFSET (31) request.
    pub struct GetMinOffsetRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
    }
}

header! {
    /// GET_EARLIEST_MSG_STORETIME (32) request.
    pub struct GetEarliestMsgStoretimeRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
    }
}

header! {
    /// GET_EARLIEST_MSG_STORETIME response.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        timestamp: i64 = "timestamp",
    }
}

header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29) request; `boundaryType` is "LOWER"
    /// (default) or "UPPER", any case.
    pub struct SearchOffsetRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
        timestamp: i64 = "timestamp",
        boundary_type: Option<String> = "boundaryType",
    }
}

header! {
    /// UNREGISTER_CLIENT (35) request.
    pub struct UnregisterClientRequestHeader {
        client_id: String = "clientID",
        producer_group: Option<String> = "producerGroup",
        consumer_group: Option<String> = "consumerGroup",
    }
}

header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38) request.
    pub struct GetConsumerListByGroupRequestHeader {
        consumer_group: String = "consumerGroup",
    }
}

header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker → consumer, oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        consumer_group: String = "consumerGroup",
    }
}

header! {
    /// CONSUMER_SEND_MSG_BACK (36) request (docs/protocol.md#send-back); `offset` is the
    /// CommitLog physical offset.
    pub struct ConsumerSendMsgBackRequestHeader {
        offset: i64 = "offset",
        group: String = "group",
        delay_level: i32 = "delayLevel",
        origin_msg_id: Option<String> = "originMsgId",
        origin_topic: Option<String> = "originTopic",
        unit_mode: Option<bool> = "unitMode",
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
    }
}

header! {
    /// QUERY_MESSAGE (12) request: lookup by key through the index.
    pub struct QueryMessageRequestHeader {
        topic: String = "topic",
        key: String = "key",
        max_num: i32 = "maxNum",
        begin_timestamp: i64 = "beginTimestamp",
        end_timestamp: i64 = "endTimestamp",
    }
}

header! {
    /// QUERY_MESSAGE response.
    pub struct QueryMessageResponseHeader {
        index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset",
    }
}

header! {
    /// VIEW_MESSAGE_BY_ID (33) request: `offset` is a CommitLog offset.
    pub struct ViewMessageRequestHeader {
        offset: i64 = "offset",
        topic: Option<String> = "topic",
    }
}

header! {
    /// GET_ROUTEINFO_BY_TOPIC (105) request.
    pub struct GetRouteInfoRequestHeader {
        topic: String = "topic",
        accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
    }
}

header! {
    /// REGISTER_BROKER (103) request (docs/protocol.md#broker-registration).
    /// `bodyCrc32` 0 or absent
    /// means "no check".
    pub struct RegisterBrokerRequestHeader {
        broker_name: String = "brokerName",
        broker_addr: String = "brokerAddr",
        cluster_name: String = "clusterName",
        ha_server_addr: String = "haServerAddr",
        broker_id: i64 = "brokerId",
        heartbeat_timeout_millis: Option<i64> = "heartbeatTimeoutMillis",
        enable_acting_master: Option<bool> = "enableActingMaster",
        compressed: Option<bool> = "compressed",
        body_crc32: Option<i32> = "bodyCrc32",
    }
}

header! {
    /// REGISTER_BROKER response: for a slave, its master's addresses.
    pub struct RegisterBrokerResponseHeader {
        ha_server_addr: Option<String> = "haServerAddr",
        master_addr: Option<String> = "masterAddr",
    }
}

header! {
    /// UNREGISTER_BROKER (104) request.
    pub struct UnregisterBrokerRequestHeader {
        broker_name: String = "brokerName",
        broker_addr: String = "brokerAddr",
        cluster_name: String = "clusterName",
        broker_id: i64 = "brokerId",
    }
}

header! {
    /// UPDATE_AND_CREATE_TOPIC (17) request (`CreateTopicRequestHeader`).
    pub struct CreateTopicRequestHeader {
        topic: String = "topic",
        default_topic: Option<String> = "defaultTopic",
        read_queue_nums: i32 = "readQueueNums",
        write_queue_nums: i32 = "writeQueueNums",
        perm: i32 = "perm",
        topic_filter_type: Option<String> = "topicFilterType",
        topic_sys_flag: Option<i32> = "topicSysFlag",
        order: Option<bool> = "order",
        attributes: Option<String> = "attributes",
        force: Option<bool> = "force",
    }
}

pub type UpdateAndCreateTopicRequestHeader = CreateTopicRequestHeader;

header! {
    /// DELETE_TOPIC_IN_BROKER (215) request.
    pub struct DeleteTopicRequestHeader {
        topic: String = "topic",
    }
}

header! {
    /// DELETE_TOPIC_IN_NAMESRV (216) request; `clusterName` (5.x) limits the
    /// deletion to one cluster's brokers.
    pub struct DeleteTopicFromNamesrvRequestHeader {
        topic: String = "topic",
        cluster_name: Option<String> = "clusterName",
    }
}

header! {
    /// REGISTER_TOPIC_IN_NAMESRV (217) request: one topic's queue data in
    /// the body (a `TopicRouteData` with `queueDatas`), sent by a broker
    /// for a topic it just created instead of its whole topic table.
    pub struct RegisterTopicRequestHeader {
        topic: String = "topic",
    }
}

header! {
    /// GET_TOPICS_BY_CLUSTER (224) request.
    pub struct GetTopicsByClusterRequestHeader {
        cluster: String = "cluster",
    }
}

header! {
    /// GET_TOPIC_STATS_INFO (202) request.
    pub struct GetTopicStatsInfoRequestHeader {
        topic: String = "topic",
    }
}

header! {
    /// GET_CONSUME_STATS (208) request.
    pub struct GetConsumeStatsRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: Option<String> = "topic",
    }
}

header! {
    /// END_TRANSACTION (37) request (docs/protocol.md#transactions). `commitOrRollback` is
    /// 0 (unknown), 8 (commit) or 12 (rollback).
    pub struct EndTransactionRequestHeader {
        topic: Option<String> = "topic",
        producer_group: String = "producerGroup",
        tran_state_table_offset: i64 = "tranStateTableOffset",
        commit_log_offset: i64 = "commitLogOffset",
        commit_or_rollback: i32 = "commitOrRollback",
        from_transaction_check: Option<bool> = "fromTransactionCheck",
        msg_id: String = "msgId",
        transaction_id: Option<String> = "transactionId",
    }
}

header! {
    /// CHECK_TRANSACTION_STATE (39), broker → producer, oneway.
    pub struct CheckTransactionStateRequestHeader {
        topic: Option<String> = "topic",
        tran_state_table_offset: i64 = "tranStateTableOffset",
        commit_log_offset: i64 = "commitLogOffset",
        msg_id: Option<String> = "msgId",
        transaction_id: Option<String> = "transactionId",
        offset_msg_id: Option<String> = "offsetMsgId",
    }
}

header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker → requester: a reply's
    /// send header plus where and when the broker took it. The body is the
    /// reply's body.
    pub struct ReplyMessageRequestHeader {
        producer_group: String = "producerGroup",
        topic: String = "topic",
        default_topic: String = "defaultTopic",
        default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        queue_id: i32 = "queueId",
        sys_flag: i32 = "sysFlag",
        born_timestamp: i64 = "bornTimestamp",
        flag: i32 = "flag",
        properties: Option<String> = "properties",
        reconsume_times: Option<i32> = "reconsumeTimes",
        unit_mode: Option<bool> = "unitMode",
        /// `ip:port` of the replier's connection.
        born_host: String = "bornHost",
        /// `ip:port` of this broker.
        store_host: String = "storeHost",
        store_timestamp: i64 = "storeTimestamp",
    }
}

header! {
    /// LIST_TRANSACTIONS (Basalt): at most `max` unresolved half messages.
    pub struct ListTransactionsRequestHeader {
        max: Option<i32> = "max",
    }
}

header! {
    /// LEDGER_TRANSFER (Basalt): the member that should lead next.
    pub struct LedgerTransferRequestHeader {
        transferee_id: String = "transfereeId",
    }
}

header! {
    /// GET_CONSUMER_RUNNING_INFO (307), broker → consumer.
    pub struct GetConsumerRunningInfoRequestHeader {
        consumer_group: String = "consumerGroup",
        client_id: String = "clientId",
        jstack_enable: Option<bool> = "jstackEnable",
    }
}

#[cfg(test)]
mod tests;
