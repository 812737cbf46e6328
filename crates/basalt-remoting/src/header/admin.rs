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
