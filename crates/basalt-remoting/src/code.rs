//! Request and response codes (docs/protocol.md#request-codes,
//! docs/protocol.md#response-codes; `RequestCode` / `ResponseCode`).

/// Request codes. Values are those of RocketMQ's `RequestCode`.
pub mod request {
    pub const SEND_MESSAGE: i32 = 10;
    pub const PULL_MESSAGE: i32 = 11;
    pub const QUERY_MESSAGE: i32 = 12;
    pub const QUERY_BROKER_OFFSET: i32 = 13;
    pub const QUERY_CONSUMER_OFFSET: i32 = 14;
    pub const UPDATE_CONSUMER_OFFSET: i32 = 15;
    pub const UPDATE_AND_CREATE_TOPIC: i32 = 17;
    pub const UPDATE_AND_CREATE_TOPIC_LIST: i32 = 18;
    pub const GET_ALL_TOPIC_CONFIG: i32 = 21;
    pub const GET_TOPIC_CONFIG_LIST: i32 = 22;
    pub const GET_TOPIC_NAME_LIST: i32 = 23;
    pub const UPDATE_BROKER_CONFIG: i32 = 25;
    pub const GET_BROKER_CONFIG: i32 = 26;
    pub const GET_BROKER_RUNTIME_INFO: i32 = 28;
    pub const SEARCH_OFFSET_BY_TIMESTAMP: i32 = 29;
    pub const GET_MAX_OFFSET: i32 = 30;
    pub const GET_MIN_OFFSET: i32 = 31;
    pub const GET_EARLIEST_MSG_STORETIME: i32 = 32;
    pub const VIEW_MESSAGE_BY_ID: i32 = 33;
    pub const HEART_BEAT: i32 = 34;
    pub const UNREGISTER_CLIENT: i32 = 35;
    pub const CONSUMER_SEND_MSG_BACK: i32 = 36;
    pub const END_TRANSACTION: i32 = 37;
    pub const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
    pub const CHECK_TRANSACTION_STATE: i32 = 39;
    pub const NOTIFY_CONSUMER_IDS_CHANGED: i32 = 40;
    pub const LOCK_BATCH_MQ: i32 = 41;
    pub const UNLOCK_BATCH_MQ: i32 = 42;
    pub const GET_ALL_CONSUMER_OFFSET: i32 = 43;
    pub const GET_ALL_DELAY_OFFSET: i32 = 45;
    pub const CHECK_CLIENT_CONFIG: i32 = 46;
    pub const GET_CLIENT_CONFIG: i32 = 47;
    pub const PUT_KV_CONFIG: i32 = 100;
    pub const GET_KV_CONFIG: i32 = 101;
    pub const DELETE_KV_CONFIG: i32 = 102;
    pub const REGISTER_BROKER: i32 = 103;
    pub const UNREGISTER_BROKER: i32 = 104;
    pub const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub const GET_BROKER_CLUSTER_INFO: i32 = 106;
    pub const UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: i32 = 200;
    pub const GET_ALL_SUBSCRIPTIONGROUP_CONFIG: i32 = 201;
    pub const GET_TOPIC_STATS_INFO: i32 = 202;
    pub const GET_CONSUMER_CONNECTION_LIST: i32 = 203;
    pub const GET_PRODUCER_CONNECTION_LIST: i32 = 204;
    pub const WIPE_WRITE_PERM_OF_BROKER: i32 = 205;
    pub const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: i32 = 206;
    pub const DELETE_SUBSCRIPTIONGROUP: i32 = 207;
    pub const GET_CONSUME_STATS: i32 = 208;
    pub const DELETE_TOPIC_IN_BROKER: i32 = 215;
    pub const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
    pub const REGISTER_TOPIC_IN_NAMESRV: i32 = 217;
    pub const GET_KVLIST_BY_NAMESPACE: i32 = 219;
    pub const RESET_CONSUMER_CLIENT_OFFSET: i32 = 220;
    pub const GET_CONSUMER_STATUS_FROM_CLIENT: i32 = 221;
    pub const INVOKE_BROKER_TO_RESET_OFFSET: i32 = 222;
    pub const INVOKE_BROKER_TO_GET_CONSUMER_STATUS: i32 = 223;
    pub const GET_TOPICS_BY_CLUSTER: i32 = 224;
    pub const QUERY_TOPIC_CONSUME_BY_WHO: i32 = 300;
    pub const GET_SYSTEM_TOPIC_LIST_FROM_NS: i32 = 304;
    pub const GET_SYSTEM_TOPIC_LIST_FROM_BROKER: i32 = 305;
    pub const CLEAN_EXPIRED_CONSUMEQUEUE: i32 = 306;
    pub const GET_CONSUMER_RUNNING_INFO: i32 = 307;
    pub const CLONE_GROUP_OFFSET: i32 = 314;
    pub const VIEW_BROKER_STATS_DATA: i32 = 315;
    pub const CONSUME_MESSAGE_DIRECTLY: i32 = 309;
    pub const SEND_MESSAGE_V2: i32 = 310;
    pub const SEND_BATCH_MESSAGE: i32 = 320;
    pub const QUERY_CONSUME_QUEUE: i32 = 321;
    pub const QUERY_DATA_VERSION: i32 = 322;
    pub const SEND_REPLY_MESSAGE: i32 = 324;
    pub const SEND_REPLY_MESSAGE_V2: i32 = 325;
    pub const PUSH_REPLY_MESSAGE_TO_CLIENT: i32 = 326;
    pub const ADD_WRITE_PERM_OF_BROKER: i32 = 327;
    pub const GET_TOPIC_CONFIG: i32 = 351;
    pub const GET_SUBSCRIPTIONGROUP_CONFIG: i32 = 352;
    pub const LITE_PULL_MESSAGE: i32 = 361;
    pub const QUERY_ASSIGNMENT: i32 = 400;
    pub const SET_MESSAGE_REQUEST_MODE: i32 = 401;
    /// RocketMQ 5 POP consumption (docs/pop.md#remoting). These codes do not
    /// fit the binary header's i16: POP clients use JSON headers.
    pub const POP_MESSAGE: i32 = 200050;
    pub const ACK_MESSAGE: i32 = 200051;
    pub const PEEK_MESSAGE: i32 = 200052;
    pub const CHANGE_MESSAGE_INVISIBLETIME: i32 = 200053;
    pub const NOTIFICATION: i32 = 200054;
    pub const POLLING_INFO: i32 = 200055;
    pub const BATCH_ACK_MESSAGE: i32 = 200151;
    pub const BROKER_HEARTBEAT: i32 = 904;
    /// Basalt's own: the unresolved transactional (half) messages of a
    /// broker, for `basalt admin transactions`. RocketMQ has no such code;
    /// like every code it must fit the binary header's i16.
    pub const LIST_TRANSACTIONS: i32 = 30001;
    /// Basalt's own: a ledger-mode broker's view of its DLedger group
    /// (members, role, term, leader, commit index, followers' match index
    /// and lag), for `basalt admin ledger status`.
    pub const LEDGER_STATUS: i32 = 30002;
    /// Basalt's own: asks a ledger leader to hand leadership to the member
    /// named in the `transfereeId` ext field (`basalt admin ledger transfer`).
    pub const LEDGER_TRANSFER: i32 = 30003;
    /// Basalt's own: a broker's POP consumption (messages popped and not
    /// acked per group and topic, revive lag), for `basalt admin pop`.
    pub const POP_STATUS: i32 = 30004;
    /// Basalt's own: the ACL 2.0 users (with passwords) and ACLs of a
    /// broker, for its slaves and ledger followers to copy (docs/auth.md).
    /// Answered only to a request signed by a super user of the answering
    /// broker, whatever its authentication switch says.
    pub const AUTH_METADATA_SYNC: i32 = 30005;
}

/// Response codes. Values are those of RocketMQ's `ResponseCode` /
/// `RemotingSysResponseCode`.
pub mod response {
    pub const SUCCESS: i32 = 0;
    pub const SYSTEM_ERROR: i32 = 1;
    pub const SYSTEM_BUSY: i32 = 2;
    pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub const TRANSACTION_FAILED: i32 = 4;
    pub const FLUSH_DISK_TIMEOUT: i32 = 10;
    pub const SLAVE_NOT_AVAILABLE: i32 = 11;
    pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
    pub const MESSAGE_ILLEGAL: i32 = 13;
    pub const SERVICE_NOT_AVAILABLE: i32 = 14;
    pub const VERSION_NOT_SUPPORTED: i32 = 15;
    pub const NO_PERMISSION: i32 = 16;
    pub const TOPIC_NOT_EXIST: i32 = 17;
    pub const TOPIC_EXIST_ALREADY: i32 = 18;
    pub const PULL_NOT_FOUND: i32 = 19;
    pub const PULL_RETRY_IMMEDIATELY: i32 = 20;
    pub const PULL_OFFSET_MOVED: i32 = 21;
    pub const QUERY_NOT_FOUND: i32 = 22;
    pub const SUBSCRIPTION_PARSE_FAILED: i32 = 23;
    pub const SUBSCRIPTION_NOT_EXIST: i32 = 24;
    pub const SUBSCRIPTION_NOT_LATEST: i32 = 25;
    pub const SUBSCRIPTION_GROUP_NOT_EXIST: i32 = 26;
    pub const FILTER_DATA_NOT_EXIST: i32 = 27;
    pub const FILTER_DATA_NOT_LATEST: i32 = 28;
    pub const INVALID_PARAMETER: i32 = 29;
    pub const TRANSACTION_SHOULD_COMMIT: i32 = 200;
    pub const TRANSACTION_SHOULD_ROLLBACK: i32 = 201;
    pub const TRANSACTION_STATE_UNKNOW: i32 = 202;
    pub const TRANSACTION_STATE_GROUP_WRONG: i32 = 203;
    pub const NO_BUYER_ID: i32 = 204;
    pub const NOT_IN_CURRENT_UNIT: i32 = 205;
    pub const CONSUMER_NOT_ONLINE: i32 = 206;
    pub const CONSUME_MSG_TIMEOUT: i32 = 207;
    pub const NO_MESSAGE: i32 = 208;
    pub const POLLING_FULL: i32 = 209;
    pub const POLLING_TIMEOUT: i32 = 210;
    pub const FLOW_CONTROL: i32 = 215;
    pub const NOT_LEADER_FOR_QUEUE: i32 = 501;
    pub const ILLEGAL_OPERATION: i32 = 604;
    pub const GO_AWAY: i32 = 1500;
}

/// `MQVersion.Version` ordinals the protocol branches on (docs/protocol.md#conventions).
pub mod version {
    /// rocketmq-client-go always reports this.
    pub const V4_5_2: i32 = 317;
    /// From this version on, route bodies use quoted map keys.
    pub const V4_9_4: i32 = 401;
    /// From this version on, a compressed REGISTER_BROKER body carries the
    /// topic-queue-mapping section.
    pub const V5_0_0: i32 = 413;
}

#[cfg(test)]
mod tests {
    use crate::codec::{decode_frame, encode_frame};
    use crate::command::{RemotingCommand, SerializeType};

    /// Basalt's own request codes go out in the binary (ROCKETMQ) header
    /// too, whose code field is an i16.
    #[test]
    fn basalt_codes_fit_the_binary_header() {
        let mut cmd = RemotingCommand::request(super::request::LIST_TRANSACTIONS);
        cmd.serialize_type = SerializeType::Rocketmq;
        let frame = encode_frame(&cmd).expect("encodes in the binary header");
        let back = decode_frame(frame.freeze().slice(4..)).expect("decodes");
        assert_eq!(back.code, super::request::LIST_TRANSACTIONS);
        assert_eq!(back.serialize_type, SerializeType::Rocketmq);
    }
}
