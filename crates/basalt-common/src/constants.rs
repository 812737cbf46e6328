//! Well-known property keys, reserved topics and permission bits
//! (docs/protocol.md#well-known-properties, docs/protocol.md#permissions).

/// Property keys RocketMQ clients and brokers give meaning to.
pub mod property {
    pub const KEYS: &str = "KEYS";
    pub const TAGS: &str = "TAGS";
    pub const WAIT: &str = "WAIT";
    pub const DELAY: &str = "DELAY";
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    pub const REAL_QID: &str = "REAL_QID";
    pub const TRAN_MSG: &str = "TRAN_MSG";
    pub const PGROUP: &str = "PGROUP";
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    pub const MSG_REGION: &str = "MSG_REGION";
    pub const TRACE_ON: &str = "TRACE_ON";
    pub const CLUSTER: &str = "CLUSTER";
    pub const TRANSACTION_ID: &str = "__transactionId__";
    /// Seconds before a half message's first check (instead of the broker's
    /// `transactionTimeOut`).
    pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
    /// Queue offset of the half message an immunity copy stands for.
    pub const TRANSACTION_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
    /// How many times the broker has checked a half message back.
    pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
    /// Request-reply: the id matching a reply to its request.
    pub const CORRELATION_ID: &str = "CORRELATION_ID";
    /// Request-reply: the client id of the requester.
    pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
    /// Request-reply: how long the requester waits, in milliseconds.
    pub const MESSAGE_TTL: &str = "TTL";
    /// `reply` marks a reply message.
    pub const MESSAGE_TYPE: &str = "MSG_TYPE";
    /// Request-reply: when the broker pushed the reply.
    pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
    pub const CRC32: &str = "__CRC32#";
    /// Absolute delivery time in ms (RocketMQ 5 timer messages).
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// Delay in seconds from arrival at the broker.
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// Delay in milliseconds from arrival at the broker.
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    /// Absolute delivery time in ms as Alibaba Cloud's clients set it
    /// (`setStartDeliverTime`).
    pub const START_DELIVER_TIME: &str = "__STARTDELIVERTIME";
    /// The delivery time the broker decided on, rounded to the timer
    /// precision; set on a timer message when it enters the timer topic.
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    /// When the timer message entered the broker's timer store.
    pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
    /// When the broker delivered the timer message to its real topic.
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    /// RocketMQ 5's "cancel this timer" marker (not supported by Basalt).
    pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
    /// Basalt: on a delivered copy of a timer message, the CommitLog offset
    /// of the timer message it was made from (exactly-once delivery).
    pub const TIMER_ORIGIN: &str = "BSLT_TIMER_ORIGIN";
    /// Keys with this prefix are never persisted.
    pub const TRANSIENT_PREFIX: &str = "__RMQ.TRANSIENT.";

    /// Separator between a property name and its value.
    pub const NAME_VALUE_SEPARATOR: u8 = 0x01;
    /// Terminator after each name/value pair.
    pub const PROPERTY_SEPARATOR: u8 = 0x02;
    /// Separator between keys in the `KEYS` property.
    pub const KEY_SEPARATOR: char = ' ';
}

/// Reserved topic names and prefixes.
pub mod topic {
    /// Auto-create template topic.
    pub const AUTO_CREATE_TOPIC: &str = "TBW102";
    pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
    pub const SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
    pub const BENCHMARK_TOPIC: &str = "BenchmarkTest";
    pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
    pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
    pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
    pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
    pub const TRANS_CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
    pub const SCHEDULE_TOPIC_V2: &str = "SCHEDULE_TOPIC_XXXX_V2";
    /// Timer messages wait here (queue 0) until their delivery time.
    pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
    /// Topics whose names start with this are the system's.
    pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
    pub const RETRY_GROUP_PREFIX: &str = "%RETRY%";
    pub const DLQ_GROUP_PREFIX: &str = "%DLQ%";
    /// Suffix of a cluster's reply topic, `<cluster>_REPLY_TOPIC`.
    pub const REPLY_TOPIC_SUFFIX: &str = "_REPLY_TOPIC";
}

/// Reserved group names.
pub mod group {
    /// The group whose offsets on the half and op topics record how far the
    /// transaction check has read.
    pub const TRANSACTION_CHECK: &str = "CID_RMQ_SYS_TRANS";
}

/// Topic permission bits (`PermName`).
pub mod perm {
    pub const PRIORITY: i32 = 8;
    pub const READ: i32 = 4;
    pub const WRITE: i32 = 2;
    pub const INHERIT: i32 = 1;

    pub fn is_readable(perm: i32) -> bool {
        perm & READ == READ
    }
    pub fn is_writeable(perm: i32) -> bool {
        perm & WRITE == WRITE
    }
    pub fn is_inherited(perm: i32) -> bool {
        perm & INHERIT == INHERIT
    }
}

/// The `MQVersion.Version` ordinal Basalt reports: V4_9_4, the first version
/// whose clients receive standard (quoted-key) route JSON.
pub const MQ_VERSION: i32 = 401;

/// Largest body a producer may send by default (`maxMessageSize`, 4 MiB).
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;
