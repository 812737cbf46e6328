//! Scripted runs: one member of a simulated group, over its real store on a
//! simulated disk, takes pushes the test writes (the test plays the network
//! and the other members), with every check of the simulator after each
//! step. For states the seeded runs reach too rarely to rely on.

use std::cmp::Reverse;

use bytes::Bytes;

use super::event_queue::Ev;
use super::{Sim, SimOptions};
use crate::core::{Event, LogRead};
use crate::entry::{Entry, EntryKind, place};
use crate::protocol::{Envelope, HeartbeatRequest, PushRequest, PushType, Request, Rpc};

const FILE: i64 = 4096;

/// A log of entries with these terms, from index 0 and position 0.
fn chain(terms: &[i64]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for (i, &t) in terms.iter().enumerate() {
        let end = out.last().map_or(0, |e| e.header.end_pos());
        let pos = place(end, 52, FILE).unwrap();
        let e = Entry::new(
            EntryKind::Normal,
            i as i64,
            t,
            pos,
            Bytes::from_static(b"body"),
        );
        out.push(e);
    }
    out
}

impl Sim {
    /// Runs member `i`'s queued events (syncs, hard-state writes, `Written`)
    /// in time order; everything else (ticks, messages) is dropped.
    fn run_member(&mut self, i: usize) -> Result<(), String> {
        while let Some(Reverse(s)) = self.queue.pop() {
            self.now_us = self.now_us.max(s.at);
            let mine = match &s.ev {
                Ev::SyncDone { node, .. }
                | Ev::PersistDone { node, .. }
                | Ev::Written { node, .. } => *node == i,
                _ => false,
            };
            if mine {
                self.handle(s.ev)?;
            }
        }
        Ok(())
    }

    /// Member 1 takes `body` from member `from` and runs until idle.
    fn send_to_member_1(&mut self, from: usize, body: Request) -> Result<(), String> {
        self.seq += 1;
        let env = Envelope {
            from: self.nodes[from].id.clone(),
            to: self.nodes[1].id.clone(),
            rpc: Rpc::Request { id: self.seq, body },
        };
        self.step_node(1, Event::Message(env))?;
        self.run_member(1)
    }

    fn lead(&mut self, from: usize, term: i64) -> Result<(), String> {
        let leader_id = self.nodes[from].id.clone();
        self.send_to_member_1(
            from,
            Request::Heartbeat(HeartbeatRequest { term, leader_id }),
        )
    }

    fn push_1(
        &mut self,
        from: usize,
        term: i64,
        t: PushType,
        entries: &[Entry],
    ) -> Result<(), String> {
        let req = PushRequest {
            term,
            leader_id: self.nodes[from].id.clone(),
            push_type: t,
            commit_index: 9,
            entries: entries.to_vec(),
        };
        self.send_to_member_1(from, Request::Push(req))
    }

    fn member_1(&self) -> (i64, i64, i64) {
        let n = &self.nodes[1];
        let store = &n.disk.as_ref().expect("a disk member").store;
        let committed = n.core.as_ref().map_or(-2, |c| c.committed_index());
        (store.begin_index(), store.end_index(), committed)
    }
}

/// Issue 12 over a real store, with the simulator's checks: n1 held 0..=5;
/// n0, leading term 2 with 0..=9 committed, purged before 10 and reset n1
/// there (n1's committed index 9 then lies below its first entry); n2,
/// leading term 3, never purged and TRUNCATEs n1 at 0. n1 starts over, its
/// committed index going back, and commits 0..=9 again: each checked against
/// what the cluster committed, the store and the model agreeing, and a
/// crash and real recovery keeping it all.
#[test]
fn a_reset_below_the_commit_over_a_real_store() -> Result<(), String> {
    let mut opts = SimOptions::for_disk_seed(7);
    opts.data_file_size = FILE;
    if let Some(d) = &mut opts.disk {
        d.fsync_fail_one_in = 0;
        d.flip_one_in = 0;
    }
    let mut sim = Sim::new(opts)?;
    sim.faults_on = false;
    let hist = chain(&[1; 10]);
    let n0 = chain(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2]);
    let n2 = chain(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3]);
    // What the cluster committed (n0 and n2 hold it).
    sim.committed = hist.clone();
    sim.lead(0, 2)?;
    for e in &hist[..=5] {
        sim.push_1(0, 2, PushType::Append, std::slice::from_ref(e))?;
    }
    assert_eq!(sim.member_1(), (0, 5, 5));
    sim.nodes[0].purged_below = 10;
    sim.push_1(0, 2, PushType::Truncate, &n0[10..=11])?;
    sim.push_1(0, 2, PushType::Append, &n0[11..=11])?;
    assert_eq!(
        sim.member_1(),
        (10, 11, 9),
        "committed below the first entry"
    );
    assert_eq!(sim.report.resets_past_purge, 1);

    sim.lead(2, 3)?;
    sim.push_1(2, 3, PushType::Truncate, &n2[0..=1])?;
    assert_eq!(sim.report.resets_below_commit, 1);
    assert_eq!(sim.member_1(), (0, 0, 0));
    for e in &n2[1..] {
        sim.push_1(2, 3, PushType::Append, std::slice::from_ref(e))?;
    }
    assert_eq!(sim.member_1(), (0, 10, 9));
    assert_eq!(sim.nodes[1].checked_committed, 9);
    assert_eq!(sim.nodes[1].log.entries(), &n2[..]);
    sim.check_disks_final()?;
    sim.crash(1)?;
    sim.restart(1)?;
    assert_eq!(sim.nodes[1].log.entries(), &n2[..]);
    sim.check_disks_final()?;
    let (begin, end, _) = sim.member_1();
    assert_eq!((begin, end), (0, 10));
    Ok(())
}
