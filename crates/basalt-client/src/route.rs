//! What a client derives from a topic route: the queues a producer may write
//! (`TopicPublishInfo`) and the queues a consumer may read.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};

use basalt_common::constants::perm;
use basalt_remoting::protocol::TopicRouteData;

use crate::message::TopicQueue;

/// Broker id of a master in `BrokerData.brokerAddrs`.
pub const MASTER_ID: i64 = 0;

/// One writable queue and the master that serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PublishQueue {
    pub mq: TopicQueue,
    pub addr: String,
}

/// The writable queues of a topic, in Java's order (broker groups sorted by
/// name, then queue id), with the round-robin cursor producers share
/// (`TopicPublishInfo`). Immutable apart from the cursor; a route change
/// replaces the whole value.
#[derive(Debug)]
pub(crate) struct TopicPublishInfo {
    pub queues: Vec<PublishQueue>,
    cursor: AtomicU32,
}

impl TopicPublishInfo {
    /// Java's `topicRouteData2TopicPublishInfo`: with an `orderTopicConf`,
    /// exactly the queues it lists; otherwise every queue of every writable
    /// QueueData whose broker group has a master.
    pub fn from_route(topic: &str, route: &TopicRouteData) -> Self {
        let master = |name: &str| -> Option<String> {
            route
                .broker_datas
                .iter()
                .find(|b| b.broker_name == name)
                .and_then(|b| b.broker_addrs.get(&MASTER_ID).cloned())
        };
        let mut queues = Vec::new();
        match route.order_topic_conf.as_deref().filter(|c| !c.is_empty()) {
            Some(conf) => {
                for item in conf.split(';') {
                    let Some((name, nums)) = item.split_once(':') else {
                        continue;
                    };
                    let Ok(nums) = nums.trim().parse::<i32>() else {
                        continue;
                    };
                    let Some(addr) = master(name) else { continue };
                    for q in 0..nums {
                        queues.push(PublishQueue {
                            mq: TopicQueue::new(topic, name, q),
                            addr: addr.clone(),
                        });
                    }
                }
            }
            None => {
                let mut qds: Vec<_> = route.queue_datas.iter().collect();
                qds.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
                for qd in qds {
                    if !perm::is_writeable(qd.perm) {
                        continue;
                    }
                    let Some(addr) = master(&qd.broker_name) else {
                        continue;
                    };
                    for q in 0..qd.write_queue_nums.max(0) {
                        queues.push(PublishQueue {
                            mq: TopicQueue::new(topic, qd.broker_name.clone(), q),
                            addr: addr.clone(),
                        });
                    }
                }
            }
        }
        Self {
            queues,
            cursor: AtomicU32::new(crate::util::random_u32() >> 1),
        }
    }

    /// Whether there is any queue to send to.
    pub fn ok(&self) -> bool {
        !self.queues.is_empty()
    }

    fn next(&self) -> &PublishQueue {
        let i = self.cursor.fetch_add(1, Ordering::Relaxed) as usize;
        &self.queues[i % self.queues.len()]
    }

    /// Round-robin selection that avoids `last_broker` (the broker that just
    /// failed) when another one has a queue (`selectOneMessageQueue`).
    /// `None` only when there are no queues.
    pub fn select(&self, last_broker: Option<&str>) -> Option<&PublishQueue> {
        if self.queues.is_empty() {
            return None;
        }
        if let Some(last) = last_broker {
            for _ in 0..self.queues.len() {
                let q = self.next();
                if q.mq.broker_name != last {
                    return Some(q);
                }
            }
        }
        Some(self.next())
    }

    /// The master address of a broker group in this route, if it has one.
    pub fn addr_of(&self, broker_name: &str) -> Option<&str> {
        self.queues
            .iter()
            .find(|q| q.mq.broker_name == broker_name)
            .map(|q| q.addr.as_str())
    }
}

/// Java's `topicRouteData2TopicSubscribeInfo`: every queue of every readable
/// QueueData.
pub(crate) fn subscribe_queues(topic: &str, route: &TopicRouteData) -> BTreeSet<TopicQueue> {
    let mut set = BTreeSet::new();
    for qd in &route.queue_datas {
        if perm::is_readable(qd.perm) {
            for q in 0..qd.read_queue_nums.max(0) {
                set.insert(TopicQueue::new(topic, qd.broker_name.clone(), q));
            }
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_remoting::protocol::{BrokerData, QueueData};

    fn route() -> TopicRouteData {
        let mut a = BrokerData::new("c", "broker-b");
        a.broker_addrs.insert(0, "10.0.0.2:10911".into());
        let mut b = BrokerData::new("c", "broker-a");
        b.broker_addrs.insert(0, "10.0.0.1:10911".into());
        b.broker_addrs.insert(1, "10.0.0.3:10911".into());
        let mut slave_only = BrokerData::new("c", "broker-c");
        slave_only.broker_addrs.insert(1, "10.0.0.4:10911".into());
        let qd = |name: &str, perm: i32, r: i32, w: i32| QueueData {
            broker_name: name.into(),
            perm,
            read_queue_nums: r,
            topic_sys_flag: 0,
            write_queue_nums: w,
        };
        TopicRouteData {
            broker_datas: vec![a, b, slave_only],
            queue_datas: vec![
                qd("broker-b", 6, 2, 2),
                qd("broker-a", 6, 3, 2),
                qd("broker-c", 6, 2, 2),
                qd("broker-d", 4, 1, 1),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn publish_queues_are_writable_with_a_master_sorted_by_broker() {
        let info = TopicPublishInfo::from_route("T", &route());
        let got: Vec<(String, i32, String)> = info
            .queues
            .iter()
            .map(|q| (q.mq.broker_name.clone(), q.mq.queue_id, q.addr.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("broker-a".into(), 0, "10.0.0.1:10911".into()),
                ("broker-a".into(), 1, "10.0.0.1:10911".into()),
                ("broker-b".into(), 0, "10.0.0.2:10911".into()),
                ("broker-b".into(), 1, "10.0.0.2:10911".into()),
            ]
        );
    }

    #[test]
    fn select_round_robins_and_avoids_the_failed_broker() {
        let info = TopicPublishInfo::from_route("T", &route());
        let mut seen = std::collections::BTreeMap::new();
        for _ in 0..8 {
            let q = info.select(None).unwrap();
            *seen
                .entry((q.mq.broker_name.clone(), q.mq.queue_id))
                .or_insert(0) += 1;
        }
        assert_eq!(seen.len(), 4);
        assert!(seen.values().all(|n| *n == 2));
        for _ in 0..10 {
            assert_eq!(
                info.select(Some("broker-a")).unwrap().mq.broker_name,
                "broker-b"
            );
        }
    }

    #[test]
    fn select_falls_back_when_only_the_failed_broker_is_left() {
        let mut r = route();
        r.queue_datas.retain(|q| q.broker_name == "broker-a");
        let info = TopicPublishInfo::from_route("T", &r);
        assert_eq!(
            info.select(Some("broker-a")).unwrap().mq.broker_name,
            "broker-a"
        );
    }

    #[test]
    fn order_topic_conf_lists_the_queues() {
        let mut r = route();
        r.order_topic_conf = Some("broker-b:3;broker-a:1;broker-x:2".into());
        let info = TopicPublishInfo::from_route("T", &r);
        let got: Vec<(String, i32)> = info
            .queues
            .iter()
            .map(|q| (q.mq.broker_name.clone(), q.mq.queue_id))
            .collect();
        assert_eq!(
            got,
            [
                ("broker-b".into(), 0),
                ("broker-b".into(), 1),
                ("broker-b".into(), 2),
                ("broker-a".into(), 0)
            ]
        );
    }

    #[test]
    fn subscribe_queues_are_the_readable_ones() {
        let set = subscribe_queues("T", &route());
        assert_eq!(set.len(), 2 + 3 + 2 + 1);
        assert!(set.contains(&TopicQueue::new("T", "broker-d", 0)));
    }
}
