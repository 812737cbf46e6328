//! Headers of RocketMQ 5's POP consumption (docs/pop.md#remoting):
//! POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION,
//! POLLING_INFO. Field keys are the Java header classes' field names.

use super::header;

header! {
    /// POP_MESSAGE (200050) request. `queueId` -1 pops every queue;
    /// `invisibleTime` and `pollTime` are milliseconds; `initMode` 0 starts
    /// a new group at the queue's start, 1 at its end.
    pub struct PopMessageRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        max_msg_nums: i32 = "maxMsgNums",
        invisible_time: i64 = "invisibleTime",
        poll_time: i64 = "pollTime",
        born_time: i64 = "bornTime",
        init_mode: i32 = "initMode",
        exp_type: Option<String> = "expType",
        exp: Option<String> = "exp",
        order: Option<bool> = "order",
        attempt_id: Option<String> = "attemptId",
    }
}

header! {
    /// POP_MESSAGE response. The client derives each message's `POP_CK`
    /// from `startOffsetInfo` and `msgOffsetInfo` (ExtraInfoUtil formats).
    pub struct PopMessageResponseHeader {
        pop_time: i64 = "popTime",
        invisible_time: i64 = "invisibleTime",
        revive_qid: i32 = "reviveQid",
        rest_num: i64 = "restNum",
        start_offset_info: Option<String> = "startOffsetInfo",
        msg_offset_info: Option<String> = "msgOffsetInfo",
        order_count_info: Option<String> = "orderCountInfo",
    }
}

header! {
    /// ACK_MESSAGE (200051) request: `extraInfo` is the message's `POP_CK`.
    pub struct AckMessageRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        extra_info: String = "extraInfo",
        offset: i64 = "offset",
    }
}

header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053) request.
    pub struct ChangeInvisibleTimeRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        extra_info: String = "extraInfo",
        offset: i64 = "offset",
        invisible_time: i64 = "invisibleTime",
    }
}

header! {
    /// CHANGE_MESSAGE_INVISIBLETIME response: the new checkpoint's times.
    pub struct ChangeInvisibleTimeResponseHeader {
        pop_time: i64 = "popTime",
        invisible_time: i64 = "invisibleTime",
        revive_qid: i32 = "reviveQid",
    }
}

header! {
    /// NOTIFICATION (200054) request: is there anything to pop?
    pub struct NotificationRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
        poll_time: i64 = "pollTime",
        born_time: i64 = "bornTime",
        order: Option<bool> = "order",
        attempt_id: Option<String> = "attemptId",
    }
}

header! {
    /// NOTIFICATION response.
    pub struct NotificationResponseHeader {
        has_msg: bool = "hasMsg",
    }
}

header! {
    /// POLLING_INFO (200055) request.
    pub struct PollingInfoRequestHeader {
        consumer_group: String = "consumerGroup",
        topic: String = "topic",
        queue_id: i32 = "queueId",
    }
}

header! {
    /// POLLING_INFO response: pops held on the queue now.
    pub struct PollingInfoResponseHeader {
        polling_num: i32 = "pollingNum",
    }
}
