//! Headers of the operators' requests (docs/protocol.md#operations):
//! draining a broker, resetting offsets, producer connections.

use super::header;

header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205) request, to a NameServer.
    pub struct WipeWritePermOfBrokerRequestHeader {
        broker_name: String = "brokerName",
    }
}

header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205) response: topics whose queue data
    /// lost the write bit.
    pub struct WipeWritePermOfBrokerResponseHeader {
        wipe_topic_count: i32 = "wipeTopicCount",
    }
}

header! {
    /// ADD_WRITE_PERM_OF_BROKER (327) request, to a NameServer.
    pub struct AddWritePermOfBrokerRequestHeader {
        broker_name: String = "brokerName",
    }
}

header! {
    /// ADD_WRITE_PERM_OF_BROKER (327) response: topics made writable.
    pub struct AddWritePermOfBrokerResponseHeader {
        add_topic_count: i32 = "addTopicCount",
    }
}

header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222) request (tool → broker) and
    /// RESET_CONSUMER_CLIENT_OFFSET (220) request (broker → consumer).
    /// `timestamp` -1 means the max offset. `queueId` / `offset` are the
    /// 5.x single-queue form, which Basalt refuses.
    pub struct ResetOffsetRequestHeader {
        topic: String = "topic",
        group: String = "group",
        timestamp: i64 = "timestamp",
        is_force: bool = "isForce",
        queue_id: Option<i32> = "queueId",
        offset: Option<i64> = "offset",
    }
}

header! {
    /// GET_PRODUCER_CONNECTION_LIST (204) request.
    pub struct GetProducerConnectionListRequestHeader {
        producer_group: String = "producerGroup",
    }
}

header! {
    /// PUT_KV_CONFIG (100) request, to a NameServer.
    pub struct PutKvConfigRequestHeader {
        namespace: String = "namespace",
        key: String = "key",
        value: String = "value",
    }
}

header! {
    /// GET_KV_CONFIG (101) and DELETE_KV_CONFIG (102) requests, to a
    /// NameServer (Java's two classes hold the same fields).
    pub struct KvConfigKeyRequestHeader {
        namespace: String = "namespace",
        key: String = "key",
    }
}

header! {
    /// GET_KV_CONFIG (101) response.
    pub struct GetKvConfigResponseHeader {
        value: Option<String> = "value",
    }
}

header! {
    /// GET_KVLIST_BY_NAMESPACE (219) request, to a NameServer.
    pub struct GetKvListByNamespaceRequestHeader {
        namespace: String = "namespace",
    }
}

header! {
    /// CLONE_GROUP_OFFSET (314) request: copy `srcGroup`'s offsets on
    /// `topic` (or, without one, on every topic it has) to `destGroup`.
    pub struct CloneGroupOffsetRequestHeader {
        src_group: String = "srcGroup",
        dest_group: String = "destGroup",
        topic: Option<String> = "topic",
        offline: bool = "offline",
    }
}

header! {
    /// QUERY_CONSUME_QUEUE (321) request: `count` ConsumeQueue units of
    /// one queue from `index`, evaluated against `consumerGroup`'s
    /// subscription.
    pub struct QueryConsumeQueueRequestHeader {
        topic: String = "topic",
        queue_id: i32 = "queueId",
        index: i64 = "index",
        count: i32 = "count",
        consumer_group: String = "consumerGroup",
    }
}

header! {
    /// VIEW_BROKER_STATS_DATA (315) request: one of the broker's stats
    /// items, by stats name (`TOPIC_PUT_NUMS`, ...) and key (a topic,
    /// `topic@group`, or the cluster name).
    pub struct ViewBrokerStatsDataRequestHeader {
        stats_name: String = "statsName",
        stats_key: String = "statsKey",
    }
}
