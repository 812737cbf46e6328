//! The in-flight table: every popped, not yet acked (nor revived) message,
//! with the pop time of the checkpoint that holds it. It is a view of the
//! revive log: rebuilt by replaying the log, kept current by applying each
//! record this broker writes (docs/pop.md#in-flight-table).

use std::collections::{BTreeSet, HashMap};

use super::records::{Ack, CheckPoint, ReviveRecord};

/// Which message: (group, stored topic, queue id, queue offset).
pub type MsgKey = (String, String, i32, i64);

/// One in-flight message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    pub pop_time: i64,
    pub invisible_ms: i64,
    /// Revive-log offset of the checkpoint that holds it.
    pub ck_log_offset: i64,
}

impl InFlight {
    pub fn deadline(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_ms)
    }
}

/// In-flight messages and their deadlines. Invariant: `due` holds exactly
/// one `(deadline, key)` per entry of `inflight`.
#[derive(Debug, Default)]
pub struct PopState {
    /// Whether the table reflects the revive log (false until a rebuild,
    /// and again after this broker stops taking writes).
    pub loaded: bool,
    inflight: HashMap<MsgKey, InFlight>,
    due: BTreeSet<(i64, MsgKey)>,
    /// Revive-log offset just past the last record applied.
    pub applied_to: i64,
}

impl PopState {
    /// Forgets everything (the broker stopped taking writes).
    pub fn unload(&mut self) {
        *self = PopState::default();
    }

    pub fn len(&self) -> usize {
        self.inflight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inflight.is_empty()
    }

    pub fn get(&self, key: &MsgKey) -> Option<InFlight> {
        self.inflight.get(key).copied()
    }

    /// Applies one record found at revive-log offset `at`.
    pub fn apply(&mut self, rec: &ReviveRecord, at: i64) {
        match rec {
            ReviveRecord::Ck(ck) => self.apply_ck(ck, at),
            ReviveRecord::Ack(a) => self.apply_ack(a),
        }
        self.applied_to = self.applied_to.max(at + 1);
    }

    fn apply_ck(&mut self, ck: &CheckPoint, at: i64) {
        for offset in ck.offsets() {
            let key = (ck.group.clone(), ck.topic.clone(), ck.queue_id, offset);
            let entry = InFlight {
                pop_time: ck.pop_time,
                invisible_ms: ck.invisible_time,
                ck_log_offset: at,
            };
            self.insert(key, entry);
        }
    }

    fn insert(&mut self, key: MsgKey, entry: InFlight) {
        if let Some(old) = self.inflight.insert(key.clone(), entry) {
            self.due.remove(&(old.deadline(), key.clone()));
        }
        self.due.insert((entry.deadline(), key));
    }

    fn apply_ack(&mut self, a: &Ack) {
        for offset in a.offsets() {
            let key = (a.group.clone(), a.topic.clone(), a.queue_id, offset);
            self.remove_if(&key, a.pop_time);
        }
    }

    /// Removes the entry if it is the one popped at `pop_time`.
    pub fn remove_if(&mut self, key: &MsgKey, pop_time: i64) -> bool {
        match self.inflight.get(key) {
            Some(e) if e.pop_time == pop_time => {
                let d = e.deadline();
                self.inflight.remove(key);
                self.due.remove(&(d, key.clone()));
                true
            }
            _ => false,
        }
    }

    /// The earliest deadline, if any.
    pub fn next_deadline(&self) -> Option<i64> {
        self.due.first().map(|(d, _)| *d)
    }

    /// Takes the entries whose deadline is at or before `now` (at most
    /// `limit`): they leave the table, the caller revives them.
    pub fn take_due(&mut self, now: i64, limit: usize) -> Vec<(MsgKey, InFlight)> {
        let mut out = Vec::new();
        while out.len() < limit {
            let Some((d, _)) = self.due.first() else {
                break;
            };
            if *d > now {
                break;
            }
            let Some((_, key)) = self.due.pop_first() else {
                break;
            };
            if let Some(e) = self.inflight.remove(&key) {
                out.push((key, e));
            }
        }
        out
    }

    /// Puts a taken entry back, due again `delay_ms` from now (its revive
    /// failed). Its pop time stays, so its handle still acks it.
    pub fn retry_later(&mut self, key: MsgKey, mut entry: InFlight, delay_ms: i64) {
        let now = basalt_common::time::now_millis();
        entry.invisible_ms = (now + delay_ms - entry.pop_time).max(entry.invisible_ms);
        self.insert(key, entry);
    }

    /// Where a rebuild must start: the oldest checkpoint still holding a
    /// message, or past everything applied.
    pub fn rebuild_point(&self) -> i64 {
        self.inflight
            .values()
            .map(|e| e.ck_log_offset)
            .min()
            .unwrap_or(self.applied_to)
    }

    /// In-flight count per (group, stored topic).
    pub fn per_group_topic(&self) -> HashMap<(String, String), usize> {
        let mut m = HashMap::new();
        for (g, t, _, _) in self.inflight.keys() {
            *m.entry((g.clone(), t.clone())).or_insert(0) += 1;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(pt: i64, offsets: Vec<i64>) -> ReviveRecord {
        ReviveRecord::Ck(CheckPoint {
            start_offset: 0,
            pop_time: pt,
            invisible_time: 100,
            num: offsets.len() as u32,
            queue_id: 0,
            topic: "T".into(),
            group: "G".into(),
            offset_diffs: offsets,
            broker_name: String::new(),
        })
    }

    fn ack(pt: i64, o: i64) -> ReviveRecord {
        ReviveRecord::Ack(Ack {
            ack_offset: o,
            ack_offsets: vec![],
            start_offset: 0,
            group: "G".into(),
            topic: "T".into(),
            queue_id: 0,
            pop_time: pt,
            broker_name: String::new(),
        })
    }

    #[test]
    fn acks_remove_only_their_pop() {
        let mut s = PopState::default();
        s.apply(&ck(1000, vec![0, 1, 2]), 0);
        s.apply(&ack(1000, 1), 1);
        assert_eq!(s.len(), 2);
        // A change of invisible time re-checkpoints offset 2; an ack of the
        // old pop time no longer removes it.
        s.apply(&ck(2000, vec![2]), 2);
        s.apply(&ack(1000, 2), 3);
        assert_eq!(s.len(), 2);
        assert_eq!(s.rebuild_point(), 0);
        let due = s.take_due(1100, 10);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].0.3, 0);
        assert_eq!(s.next_deadline(), Some(2100));
        assert_eq!(s.rebuild_point(), 2);
        assert!(s.remove_if(&("G".into(), "T".into(), 0, 2), 2000));
        assert!(s.is_empty());
        assert_eq!(s.rebuild_point(), 4);
    }
}
