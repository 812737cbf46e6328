//! What the gRPC MessagingService (crate `basalt-grpc`) reads of a running
//! broker beyond the public accessors: live settings and a group's retry
//! and order settings. Read-only; everything it changes goes through the
//! request processors or the POP interface.

use crate::broker::Broker;

/// A consumer group's settings a 5.x client is told at its settings sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupView {
    /// `retryMaxTimes`: redeliveries before the DLQ.
    pub retry_max_times: i32,
    /// `consumeMessageOrderly`: a FIFO group.
    pub orderly: bool,
}

impl Broker {
    /// The broker's permission now (`brokerPermission`, changeable live).
    pub fn live_broker_permission(&self) -> i32 {
        self.live.broker_permission()
    }

    /// The largest message body taken now (`maxMessageSize`, live).
    pub fn live_max_message_size(&self) -> usize {
        self.live.max_message_size()
    }

    /// A subscription group's settings, when it exists.
    pub fn group_view(&self, group: &str) -> Option<GroupView> {
        self.groups.get(group).map(|g| GroupView {
            retry_max_times: g.retry_max_times,
            orderly: g.consume_message_orderly,
        })
    }
}
