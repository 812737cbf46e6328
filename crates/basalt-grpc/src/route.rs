//! QueryRoute and QueryAssignment. The access point is this broker: every
//! queue of a route names it, at its gRPC address, as RocketMQ's proxy
//! names itself. Queues are listed as the proxy lists them (read-only,
//! write-only, then read-write, numbered from 0).

use basalt_common::constants::perm;

use crate::pb::{self, Code, MessageType, Permission};
use crate::service::Messaging;
use crate::status::{self, status};

/// The message types a topic accepts, from its `message.type` attribute
/// (RocketMQ 5's topic attribute). MIXED, and a topic without the
/// attribute, take all four: the SDKs refuse a route whose queues accept
/// no type (UNSPECIFIED), and the send path is where types are checked.
fn accepted_types(attrs: &std::collections::BTreeMap<String, String>) -> Vec<i32> {
    let t = attrs.get("message.type").map(|s| s.to_ascii_uppercase());
    let types = match t.as_deref() {
        Some("NORMAL") => vec![MessageType::Normal],
        Some("FIFO") => vec![MessageType::Fifo],
        Some("DELAY") => vec![MessageType::Delay],
        Some("TRANSACTION") => vec![MessageType::Transaction],
        _ => vec![
            MessageType::Normal,
            MessageType::Fifo,
            MessageType::Delay,
            MessageType::Transaction,
        ],
    };
    types.into_iter().map(|t| t as i32).collect()
}

fn permission(p: i32) -> Permission {
    match (perm::is_readable(p), perm::is_writeable(p)) {
        (true, true) => Permission::ReadWrite,
        (true, false) => Permission::Read,
        (false, true) => Permission::Write,
        (false, false) => Permission::None,
    }
}

/// The queue ids and permissions the route lists for queue counts `read`
/// and `write` under topic permission `p`.
fn route_queues(read: i32, write: i32, p: i32) -> Vec<Permission> {
    let (r, w, rw, n) = match (perm::is_readable(p), perm::is_writeable(p)) {
        (true, true) => {
            let rw = read.min(write);
            (read - rw, write - rw, rw, 0)
        }
        (true, false) => (read, 0, 0, 0),
        (false, true) => (0, write, 0, 0),
        (false, false) => (0, 0, 0, read.max(write).max(1)),
    };
    let mut out = Vec::new();
    out.extend(std::iter::repeat_n(Permission::Read, r.max(0) as usize));
    out.extend(std::iter::repeat_n(Permission::Write, w.max(0) as usize));
    out.extend(std::iter::repeat_n(
        Permission::ReadWrite,
        rw.max(0) as usize,
    ));
    out.extend(std::iter::repeat_n(Permission::None, n.max(0) as usize));
    out
}

impl Messaging {
    /// This broker as a route names it.
    fn broker_entry(&self) -> pb::Broker {
        pb::Broker {
            name: self.broker.config().broker_name.clone(),
            id: 0,
            endpoints: Some(self.endpoints()),
        }
    }

    /// QueryRoute: the topic's queues on this broker.
    pub fn query_route(&self, req: pb::QueryRouteRequest) -> pb::QueryRouteResponse {
        let failed = |s| pb::QueryRouteResponse {
            status: Some(s),
            message_queues: Vec::new(),
        };
        let Some(topic) = req.topic else {
            return failed(status(Code::IllegalTopic, "topic is required"));
        };
        if let Err(e) = basalt_common::topic::validate_topic(&topic.name) {
            return failed(status(Code::IllegalTopic, e.to_string()));
        }
        let Some(cfg) = self.broker.topics().get(&topic.name) else {
            return failed(status(
                Code::TopicNotFound,
                format!("topic {} not found", topic.name),
            ));
        };
        let p = cfg.perm & self.broker_permission();
        let types = accepted_types(&cfg.attributes);
        let broker = self.broker_entry();
        let queues = route_queues(cfg.read_queue_nums, cfg.write_queue_nums, p)
            .into_iter()
            .enumerate()
            .map(|(id, perm)| pb::MessageQueue {
                topic: Some(topic.clone()),
                id: id as i32,
                permission: perm as i32,
                broker: Some(broker.clone()),
                accept_message_types: types.clone(),
            })
            .collect();
        pb::QueryRouteResponse {
            status: Some(status::ok()),
            message_queues: queues,
        }
    }

    /// QueryAssignment: what a consumer of the group receives from. A POP
    /// consumer takes from every queue at once (queue id -1); a FIFO group
    /// gets each readable queue.
    pub fn query_assignment(
        &self,
        req: pb::QueryAssignmentRequest,
        fifo: bool,
    ) -> pb::QueryAssignmentResponse {
        let failed = |s| pb::QueryAssignmentResponse {
            status: Some(s),
            assignments: Vec::new(),
        };
        let Some(topic) = req.topic else {
            return failed(status(Code::IllegalTopic, "topic is required"));
        };
        if let Err(e) = basalt_common::topic::validate_topic(&topic.name) {
            return failed(status(Code::IllegalTopic, e.to_string()));
        }
        let group = req.group.map(|g| g.name).unwrap_or_default();
        if let Err(e) = basalt_common::topic::validate_group(&group) {
            return failed(status(Code::IllegalConsumerGroup, e.to_string()));
        }
        let Some(cfg) = self.broker.topics().get(&topic.name) else {
            return failed(status(
                Code::TopicNotFound,
                format!("topic {} not found", topic.name),
            ));
        };
        let p = cfg.perm & self.broker_permission();
        if !perm::is_readable(p) || cfg.read_queue_nums <= 0 {
            return failed(status(Code::Forbidden, "no readable queue"));
        }
        let broker = self.broker_entry();
        let mq = |id: i32| pb::Assignment {
            message_queue: Some(pb::MessageQueue {
                topic: Some(topic.clone()),
                id,
                permission: permission(p) as i32,
                broker: Some(broker.clone()),
                accept_message_types: Vec::new(),
            }),
        };
        let assignments = if fifo {
            (0..cfg.read_queue_nums).map(mq).collect()
        } else {
            vec![mq(-1)]
        };
        pb::QueryAssignmentResponse {
            status: Some(status::ok()),
            assignments,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_as_the_proxy_lists_them() {
        let rw = perm::READ | perm::WRITE;
        assert_eq!(route_queues(4, 4, rw), vec![Permission::ReadWrite; 4]);
        let q = route_queues(6, 4, rw);
        assert_eq!(&q[..2], &[Permission::Read, Permission::Read]);
        assert_eq!(q.len(), 6);
        assert_eq!(route_queues(4, 4, perm::READ), vec![Permission::Read; 4]);
        assert_eq!(route_queues(4, 4, 0), vec![Permission::None; 4]);
    }
}
