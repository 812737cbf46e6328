//! [`TopicQueues`]: one topic's queue data in the NameServer's route table.

use basalt_remoting::protocol::QueueData;

/// One topic's queue data, at most one entry per broker name, sorted by
/// broker name. A topic lives on a handful of broker groups, so a Vec
/// allocated to its exact length (about 40 bytes a group) replaces a
/// `BTreeMap<String, QueueData>`, whose first node costs some 700 bytes:
/// with tens of thousands of topics that was most of the table.
#[derive(Debug, Default, Clone)]
pub(crate) struct TopicQueues(Vec<QueueData>);

impl TopicQueues {
    fn position(&self, broker_name: &str) -> Result<usize, usize> {
        self.0
            .binary_search_by(|q| q.broker_name.as_str().cmp(broker_name))
    }

    pub(crate) fn get(&self, broker_name: &str) -> Option<&QueueData> {
        self.position(broker_name).ok().map(|i| &self.0[i])
    }

    pub(crate) fn get_mut(&mut self, broker_name: &str) -> Option<&mut QueueData> {
        self.position(broker_name).ok().map(|i| &mut self.0[i])
    }

    /// Adds `qd`, or replaces the entry of its broker name.
    pub(crate) fn insert(&mut self, qd: QueueData) {
        match self.position(&qd.broker_name) {
            Ok(i) => self.0[i] = qd,
            Err(i) => {
                self.0.reserve_exact(1);
                self.0.insert(i, qd);
            }
        }
    }

    pub(crate) fn remove(&mut self, broker_name: &str) {
        if let Ok(i) = self.position(broker_name) {
            self.0.remove(i);
        }
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&QueueData) -> bool) {
        self.0.retain(|q| keep(q));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries in broker-name order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &QueueData> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qd(name: &str, n: i32) -> QueueData {
        QueueData {
            broker_name: name.into(),
            perm: 6,
            read_queue_nums: n,
            topic_sys_flag: 0,
            write_queue_nums: n,
        }
    }

    #[test]
    fn one_entry_per_broker_name_in_order() {
        let mut t = TopicQueues::default();
        t.insert(qd("b", 1));
        t.insert(qd("a", 2));
        t.insert(qd("c", 3));
        t.insert(qd("b", 4));
        let names: Vec<_> = t
            .iter()
            .map(|q| (q.broker_name.as_str(), q.write_queue_nums))
            .collect();
        assert_eq!(names, [("a", 2), ("b", 4), ("c", 3)]);
        assert_eq!(t.get("b").map(|q| q.read_queue_nums), Some(4));
        t.remove("b");
        t.remove("zz");
        assert!(t.get("b").is_none());
        t.retain(|q| q.broker_name != "a");
        assert_eq!(t.iter().count(), 1);
        t.get_mut("c").unwrap().perm = 4;
        assert_eq!(t.get("c").unwrap().perm, 4);
        t.remove("c");
        assert!(t.is_empty());
    }
}
