//! Checks every processor applies to the names and numbers a client sends,
//! before any of them reaches a table, a file name or an allocation. Each
//! returns the error response to send back.

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use basalt_remoting::protocol::TopicConfig;

use super::error;
use crate::broker::Broker;

/// A topic a client names for sending or creating: RocketMQ's rules.
pub(crate) fn client_topic(topic: &str) -> Result<(), RemotingCommand> {
    basalt_common::topic::validate_topic(topic)
        .map_err(|e| error(response::SYSTEM_ERROR, e.to_string()))
}

/// A topic a client reads or refers to: a client topic, or a retry or
/// dead-letter topic of a long group name (up to 255 bytes).
pub(crate) fn any_topic(topic: &str) -> Result<(), RemotingCommand> {
    basalt_common::topic::validate_internal_topic(topic)
        .map_err(|e| error(response::SYSTEM_ERROR, e.to_string()))
}

/// A producer or consumer group name.
pub(crate) fn group(group: &str) -> Result<(), RemotingCommand> {
    basalt_common::topic::validate_group(group)
        .map_err(|e| error(response::SYSTEM_ERROR, e.to_string()))
}

/// A queue this broker serves: the topic exists (or, on a slave, arrived
/// through replication) and `queue_id` is one of its queues.
pub(crate) fn served_queue(
    broker: &Broker,
    topic: &str,
    queue_id: i32,
) -> Result<TopicConfig, RemotingCommand> {
    any_topic(topic)?;
    let Some(t) = broker
        .topics
        .get(topic)
        .or_else(|| replicated_topic(broker, topic))
    else {
        return Err(error(
            response::TOPIC_NOT_EXIST,
            format!("topic[{topic}] not exist, apply first please!"),
        ));
    };
    let queues = t.read_queue_nums.max(t.write_queue_nums);
    if queue_id < 0 || queue_id >= queues {
        return Err(error(
            response::SYSTEM_ERROR,
            format!("queueId[{queue_id}] is illegal, topic {topic} has {queues} queues"),
        ));
    }
    Ok(t)
}

/// On a slave, a topic whose messages arrived through replication before the
/// periodic copy of the master's topics.json did: it is served from the
/// queues the store holds, so consumers that fail over to the slave right
/// after the master died still read everything that was acknowledged.
pub(crate) fn replicated_topic(broker: &Broker, topic: &str) -> Option<TopicConfig> {
    if !broker.is_slave() {
        return None;
    }
    let queues = broker.store.consume_queues().topic_queues(topic);
    let n = queues.iter().map(|q| q.queue_id() + 1).max()?;
    Some(TopicConfig::new(topic, n))
}
