//! Client-facing bodies: heartbeat (docs/protocol.md#heartbeat), consumer list,
//! queue locks (docs/protocol.md#queue-locks).

use serde::{Deserialize, Serialize};

use super::java_enum;

java_enum! {
    /// `ConsumeType`.
    pub enum ConsumeType {
        /// Pull / lite-pull consumers.
        ConsumeActively = "CONSUME_ACTIVELY",
        /// Push consumers.
        #[default]
        ConsumePassively = "CONSUME_PASSIVELY",
        ConsumePop = "CONSUME_POP",
    }
}

java_enum! {
    /// `MessageModel`.
    pub enum MessageModel {
        Broadcasting = "BROADCASTING",
        #[default]
        Clustering = "CLUSTERING",
    }
}

java_enum! {
    /// `ConsumeFromWhere`.
    pub enum ConsumeFromWhere {
        #[default]
        ConsumeFromLastOffset = "CONSUME_FROM_LAST_OFFSET",
        ConsumeFromLastOffsetAndFromMinWhenBootFirst = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        ConsumeFromMinOffset = "CONSUME_FROM_MIN_OFFSET",
        ConsumeFromMaxOffset = "CONSUME_FROM_MAX_OFFSET",
        ConsumeFromFirstOffset = "CONSUME_FROM_FIRST_OFFSET",
        ConsumeFromTimestamp = "CONSUME_FROM_TIMESTAMP",
    }
}

/// One topic subscription of a consumer group (`SubscriptionData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    #[serde(default)]
    pub class_filter_mode: bool,
    /// Java `String.hashCode` of each tag.
    #[serde(default)]
    pub code_set: Vec<i32>,
    /// "TAG" or "SQL92"; "TAG" when absent (an explicit null reads as
    /// empty, which the broker also treats as TAG, as Java does).
    #[serde(default = "tag")]
    pub expression_type: String,
    #[serde(default)]
    pub sub_string: String,
    #[serde(default)]
    pub sub_version: i64,
    #[serde(default)]
    pub tags_set: Vec<String>,
    #[serde(default)]
    pub topic: String,
}

fn tag() -> String {
    "TAG".into()
}

/// One consumer group a client runs (`ConsumerData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    #[serde(default)]
    pub consume_from_where: ConsumeFromWhere,
    #[serde(default)]
    pub consume_type: ConsumeType,
    #[serde(default)]
    pub group_name: String,
    #[serde(default)]
    pub message_model: MessageModel,
    #[serde(default)]
    pub subscription_data_set: Vec<SubscriptionData>,
    #[serde(default)]
    pub unit_mode: bool,
}

/// One producer group a client runs (`ProducerData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    #[serde(default)]
    pub group_name: String,
}

/// HEART_BEAT's body (`HeartbeatData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatData {
    #[serde(rename = "clientID", default)]
    pub client_id: String,
    #[serde(default)]
    pub consumer_data_set: Vec<ConsumerData>,
    /// 5.x heartbeat V2; absent from 4.x clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_fingerprint: Option<i32>,
    #[serde(default)]
    pub producer_data_set: Vec<ProducerData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_sub: Option<bool>,
}

/// CHECK_CLIENT_CONFIG's body (`CheckClientRequestBody`): a consumer asks
/// whether the broker can serve one of its subscriptions (sent at start for
/// every subscription that is not TAG).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckClientRequestBody {
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub group: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_data: Option<SubscriptionData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// GET_CONSUMER_LIST_BY_GROUP's response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerListBody {
    #[serde(default)]
    pub consumer_id_list: Vec<String>,
}

/// One queue of a topic on one broker group (`MessageQueue`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    #[serde(default)]
    pub broker_name: String,
    #[serde(default)]
    pub queue_id: i32,
    #[serde(default)]
    pub topic: String,
}

impl MessageQueue {
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        Self {
            broker_name: broker_name.into(),
            queue_id,
            topic: topic.into(),
        }
    }
}

/// LOCK_BATCH_MQ's request body (`LockBatchRequestBody`); UNLOCK_BATCH_MQ's
/// body has the same shape.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    #[serde(default)]
    pub client_id: String,
    #[serde(default)]
    pub consumer_group: String,
    #[serde(default)]
    pub mq_set: Vec<MessageQueue>,
    #[serde(default)]
    pub only_this_broker: bool,
}

pub type UnlockBatchRequestBody = LockBatchRequestBody;

/// LOCK_BATCH_MQ's response body: the queues now locked by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet", default)]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}
