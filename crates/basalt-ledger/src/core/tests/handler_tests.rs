//! The follower's handler: ordering, fsync before answers, the truncation
//! barrier, follower commit, refusals and storage failure.

use super::*;

#[test]
fn handler_appends_in_order_and_answers_after_fsync() {
    let mut log = MemLog::new(FILE);
    let mut f = follower(1, 2, &mut log);
    let mut lead = MemLog::new(FILE);
    fill(&mut lead, &[2, 2, 2]);
    let e = |i| lead.entry(i).unwrap().unwrap();
    // Index 1 arrives first: it waits for 0.
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 11, 2, PushType::Append, -1, vec![e(1)]),
    );
    assert!(push_responses(&cmds).is_empty());
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::AppendAsFollower { .. }))
    );
    // Index 0 arrives: both are written, one sync covers them, no answer yet.
    let cmds = step(
        &mut f,
        &mut log,
        21,
        push(0, 1, 10, 2, PushType::Append, 0, vec![e(0)]),
    );
    let appended: Vec<i64> = cmds
        .iter()
        .filter_map(|c| match c {
            LedgerCommand::AppendAsFollower { entries } => Some(entries[0].index()),
            _ => None,
        })
        .collect();
    assert_eq!(appended, vec![0, 1]);
    assert!(
        push_responses(&cmds).is_empty(),
        "nothing is acknowledged before the fsync"
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, LedgerCommand::Sync { through: 1 }))
    );
    // The sync completes: both answered, and the leader's commit index (0) applies.
    let cmds = synced(&mut f, &mut log, 22, &cmds);
    let answered: Vec<(u64, ResponseCode)> = push_responses(&cmds)
        .into_iter()
        .map(|(i, r)| (i, r.code))
        .collect();
    assert_eq!(
        answered,
        vec![(10, ResponseCode::Success), (11, ResponseCode::Success)]
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, LedgerCommand::CommitAdvanced { committed_index: 0 }))
    );
}

#[test]
fn handler_repeated_stale_and_gap_requests() {
    let mut log = MemLog::new(FILE);
    let mut f = follower(1, 2, &mut log);
    let mut lead = MemLog::new(FILE);
    fill(&mut lead, &[2, 2, 2, 2]);
    let e = |i| lead.entry(i).unwrap().unwrap();
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 10, 2, PushType::Append, -1, vec![e(0)]),
    );
    let _ = synced(&mut f, &mut log, 20, &cmds);
    // Stale resend of 0: identical → SUCCESS at once (already durable).
    let cmds = step(
        &mut f,
        &mut log,
        21,
        push(0, 1, 12, 2, PushType::Append, -1, vec![e(0)]),
    );
    assert_eq!(push_responses(&cmds)[0].1.code, ResponseCode::Success);
    // Stale but different entry at 0 → INCONSISTENT_STATE.
    let other = Entry::new(EntryKind::Normal, 0, 1, 0, Bytes::from_static(b"body"));
    let cmds = step(
        &mut f,
        &mut log,
        22,
        push(0, 1, 13, 2, PushType::Append, -1, vec![other]),
    );
    assert_eq!(
        push_responses(&cmds)[0].1.code,
        ResponseCode::InconsistentState
    );
    // A gap (3 while the end is 0) waits; the same first index again → REPEATED_PUSH.
    let cmds = step(
        &mut f,
        &mut log,
        23,
        push(0, 1, 14, 2, PushType::Append, -1, vec![e(3)]),
    );
    assert!(push_responses(&cmds).is_empty());
    let cmds = step(
        &mut f,
        &mut log,
        24,
        push(0, 1, 15, 2, PushType::Append, -1, vec![e(3)]),
    );
    assert_eq!(
        push_responses(&cmds)[0],
        (
            15,
            PushResponse {
                term: 2,
                code: ResponseCode::RepeatedPush,
                index: 3,
                count: 1,
                begin_index: 0,
                end_index: 0
            }
        )
    );
    // After follower_push_wait the gap is reported: the leader re-COMPAREs.
    let cmds = step(&mut f, &mut log, 23 + 101, Event::Tick);
    assert_eq!(push_responses(&cmds), vec![(14, inconsistent(3, 2, 0, 0))]);
}

#[test]
fn handler_compare_and_truncate_barrier() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1, 1, 1, 1]);
    log.synced(3);
    let mut f = follower(1, 2, &mut log);
    // Leader log: 0,1 (term 1), then 2,3 of term 2.
    let mut lead = MemLog::new(FILE);
    fill(&mut lead, &[1, 1, 2, 2]);
    let le = |i| lead.entry(i).unwrap().unwrap();
    // COMPARE 2: differs → INCONSISTENT_STATE at once.
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 20, 2, PushType::Compare, -1, vec![le(2)]),
    );
    assert_eq!(push_responses(&cmds), vec![(20, inconsistent(2, 2, 0, 3))]);
    // COMPARE 1: identical → SUCCESS (durable already).
    let cmds = step(
        &mut f,
        &mut log,
        21,
        push(0, 1, 21, 2, PushType::Compare, -1, vec![le(1)]),
    );
    assert_eq!(push_responses(&cmds), vec![(21, ok(1, 1, 2, 3))]);
    // TRUNCATE at 1 with the leader's 2, which conflicts: cut after 1, sync, answer
    // after the sync.
    let cmds = step(
        &mut f,
        &mut log,
        22,
        push(0, 1, 22, 2, PushType::Truncate, 1, vec![le(1), le(2)]),
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, LedgerCommand::Truncate { next_index: 2, .. }))
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, LedgerCommand::Sync { through: 1 }))
    );
    // Entry 1 was durable already: the answer may go at once.
    assert_eq!(push_responses(&cmds), vec![(22, ok(1, 1, 2, 1))]);
    // An APPEND during the barrier waits: nothing is written before the truncation
    // is durable.
    let cmds2 = step(
        &mut f,
        &mut log,
        23,
        push(0, 1, 23, 2, PushType::Append, 1, vec![le(2)]),
    );
    assert!(
        !cmds2
            .iter()
            .any(|c| matches!(c, LedgerCommand::AppendAsFollower { .. }))
    );
    let cmds = synced(&mut f, &mut log, 24, &cmds);
    assert!(cmds.iter().any(
        |c| matches!(c, LedgerCommand::AppendAsFollower { entries } if entries[0].index() == 2)
    ));
    // The leader's commit index (1) applies: it is matched and durable.
    assert_eq!(f.committed_index(), 1);
}

#[test]
fn handler_refuses_a_truncate_decided_on_stale_information() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[2, 2, 2]);
    log.synced(2);
    let mut f = follower(1, 2, &mut log);
    let lead = log.clone();
    let le = |i| lead.entry(i).unwrap().unwrap();
    // TRUNCATE at 0, but the follower's 1 is the leader's 1: nothing is cut.
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 30, 2, PushType::Truncate, -1, vec![le(0), le(1)]),
    );
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::Truncate { .. }))
    );
    assert_eq!(
        push_responses(&cmds)[0].1.code,
        ResponseCode::InconsistentState
    );
    assert_eq!(log.end_index(), 2);
}

#[test]
fn handler_rejects_appends_on_an_unverified_log() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1, 1]);
    let mut f = follower(1, 2, &mut log);
    let mut lead = MemLog::new(FILE);
    fill(&mut lead, &[1, 1, 2]);
    // The follower's log was never compared with this leader: APPEND of 2 refused.
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(
            0,
            1,
            40,
            2,
            PushType::Append,
            -1,
            vec![lead.entry(2).unwrap().unwrap()],
        ),
    );
    assert_eq!(push_responses(&cmds), vec![(40, inconsistent(2, 2, 0, 1))]);
}

#[test]
fn follower_commit_rules() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[2, 2, 2]);
    let mut f = follower(1, 2, &mut log);
    let lead = log.clone();
    let le = |i| lead.entry(i).unwrap().unwrap();
    // Verified through 1 by a COMPARE.
    let _ = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 50, 2, PushType::Compare, -1, vec![le(1)]),
    );
    // COMMIT −1 is ignored; COMMIT 9 is clamped to what is verified (1).
    let _ = step(
        &mut f,
        &mut log,
        21,
        push(0, 1, 51, 2, PushType::Commit, -1, vec![]),
    );
    assert_eq!(f.committed_index(), -1);
    let _ = step(
        &mut f,
        &mut log,
        22,
        push(0, 1, 52, 2, PushType::Commit, 9, vec![]),
    );
    assert_eq!(f.committed_index(), 1);
    // Verified through 2: the remembered commit index applies up to 2.
    let _ = step(
        &mut f,
        &mut log,
        23,
        push(0, 1, 53, 2, PushType::Compare, -1, vec![le(2)]),
    );
    assert_eq!(f.committed_index(), 2);
    // A COMMIT of an older term changes nothing, and the index never goes back.
    let _ = step(
        &mut f,
        &mut log,
        24,
        push(0, 1, 54, 1, PushType::Commit, 100, vec![]),
    );
    let _ = step(
        &mut f,
        &mut log,
        25,
        push(0, 1, 55, 2, PushType::Commit, 0, vec![]),
    );
    assert_eq!(f.committed_index(), 2);
}

#[test]
fn push_from_an_older_term_is_refused_with_the_current_term() {
    let mut log = MemLog::new(FILE);
    let mut f = follower(1, 3, &mut log);
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(2, 1, 60, 2, PushType::Commit, 5, vec![]),
    );
    let r = &push_responses(&cmds)[0].1;
    assert_eq!((r.code, r.term), (ResponseCode::ExpiredTerm, 3));
}

#[test]
fn no_campaign_while_a_truncation_is_not_durable() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1, 1, 1]);
    log.synced(2);
    let mut f = follower(1, 2, &mut log);
    let mut lead = MemLog::new(FILE);
    fill(&mut lead, &[1, 2, 2]);
    let le = |i| lead.entry(i).unwrap().unwrap();
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 70, 2, PushType::Truncate, -1, vec![le(0), le(1)]),
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, LedgerCommand::Truncate { next_index: 1, .. }))
    );
    // The leader goes silent; the election timeout passes while the barrier sync
    // is still running: no campaign (a leader would append its no-op).
    let cmds2 = step(&mut f, &mut log, 2000, Event::Tick);
    assert_eq!(f.role(), Role::Follower);
    assert!(vote_requests(&cmds2).is_empty());
    // Once the truncation is durable the member campaigns.
    let _ = synced(&mut f, &mut log, 2001, &cmds);
    let cmds = step(&mut f, &mut log, 2100, Event::Tick);
    assert_eq!(f.role(), Role::PreCandidate);
    assert!(!vote_requests(&cmds).is_empty());
}

#[test]
fn storage_failure_poisons_the_member() {
    let (mut c, mut log, _, _) = leader_comparing(&[1]);
    let cmds = step(
        &mut c,
        &mut log,
        402,
        Event::StorageFailed {
            reason: "fsync: EIO".into(),
        },
    );
    assert!(c.is_poisoned());
    assert_eq!(c.role(), Role::Follower, "a poisoned leader steps down");
    assert!(!cmds.iter().any(|c| matches!(c, LedgerCommand::Sync { .. })));
    let cmds = step(
        &mut c,
        &mut log,
        403,
        Event::ClientAppend {
            client: 1,
            body_lens: vec![1],
        },
    );
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult {
            client: 1,
            result: Err(LedgerAppendError::Poisoned)
        }
    )));
    // It never campaigns again, and refuses pushes with DISK_ERROR.
    for t in 1..20 {
        let cmds = step(&mut c, &mut log, 403 + t * 500, Event::Tick);
        assert!(vote_requests(&cmds).is_empty());
    }
    let cmds = step(
        &mut c,
        &mut log,
        20_000,
        push(2, 0, 9, 3, PushType::Commit, 0, vec![]),
    );
    assert_eq!(push_responses(&cmds)[0].1.code, ResponseCode::DiskError);
}

/// Regression (ledger power-loss simulator, seed 1): a sync already under
/// way when another write of the member failed still moved its durable
/// index and answered the push it covered.
#[test]
fn a_sync_completing_after_a_storage_failure_acknowledges_nothing() {
    let mut log = MemLog::new(FILE);
    let mut f = follower(1, 2, &mut log);
    let mut lead = MemLog::new(FILE);
    fill(&mut lead, &[2]);
    let e0 = lead.entry(0).unwrap().unwrap();
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 10, 2, PushType::Append, -1, vec![e0]),
    );
    assert!(cmds.iter().any(|c| matches!(c, LedgerCommand::Sync { .. })));
    let _ = step(
        &mut f,
        &mut log,
        21,
        Event::StorageFailed {
            reason: "checkpoint: EIO".into(),
        },
    );
    let after = synced(&mut f, &mut log, 22, &cmds);
    assert_eq!(f.durable_index(), -1);
    assert!(
        push_responses(&after)
            .iter()
            .all(|(_, r)| r.code != ResponseCode::Success),
        "a poisoned member acknowledged a push"
    );
}

/// Regression (ledger power-loss simulator with purges, seed 33): a follower
/// that fell behind the leader's first kept entry got a TRUNCATE at it and
/// kept its own entries before it because their end position fitted, though
/// nothing had verified them (the leader no longer had them to compare); it
/// then committed its own divergent entry at an index the cluster had
/// committed differently. An unverified prefix is now dropped: the follower
/// starts over at the leader's first kept entry.
#[test]
fn a_truncate_at_the_leaders_first_kept_entry_drops_an_unverified_prefix() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1, 1, 1, 1]);
    log.synced(3);
    let mut f = follower(1, 2, &mut log);
    // The leader's log differs from index 2 on and was purged before 3.
    let mut lead = MemLog::new(FILE);
    fill(&mut lead, &[1, 1, 2, 2]);
    lead.purge_before(3);
    let e3 = lead.entry(3).unwrap().unwrap();
    assert_eq!(
        log.entry(2).unwrap().unwrap().header.end_pos(),
        e3.pos(),
        "the follower's prefix ends where the leader's entry 3 starts"
    );
    let cmds = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 50, 2, PushType::Truncate, 3, vec![e3.clone()]),
    );
    assert!(
        cmds.iter().any(|c| matches!(c, LedgerCommand::Reset { next_index: 3, next_pos } if *next_pos == e3.pos())),
        "{cmds:?}"
    );
    assert_eq!(log.end_index(), -1, "nothing unverified is kept");
    let cmds = synced(&mut f, &mut log, 21, &cmds);
    assert!(cmds.iter().any(
        |c| matches!(c, LedgerCommand::AppendAsFollower { entries } if entries[0].index() == 3)
    ));
    assert_eq!(log.entry(2).unwrap(), None);
}

/// The entries of the push responses of `cmds`, as (request id, code, index).
fn answers(cmds: &[LedgerCommand]) -> Vec<(u64, ResponseCode, i64)> {
    push_responses(cmds)
        .into_iter()
        .map(|(i, r)| (i, r.code, r.index))
        .collect()
}

/// n1 after a reset past a purge, over the cluster's history `hist` (0..=9
/// of term 1, committed): it held 0..=5 and had committed 5; n0, leading
/// term 2, wrote 10 and 11 (never committed) and purged before 10, so n1
/// fell behind its first kept entry and was reset to it. Its log is
/// 10..=11 of term 2, its committed index 9, below its first entry.
fn reset_past_a_purge(hist: &MemLog) -> (LedgerCore, MemLog) {
    let h = |i| hist.entry(i).unwrap().unwrap();
    let mut log = MemLog::new(FILE);
    log.append(&(0..=5).map(h).collect::<Vec<_>>()).unwrap();
    log.synced(5);
    let mut f = follower(1, 2, &mut log);
    let compare = push(0, 1, 50, 2, PushType::Compare, 5, vec![h(5)]);
    let _ = step(&mut f, &mut log, 20, compare);
    assert_eq!(f.committed_index(), 5);
    let mut n0 = hist.clone();
    fill(&mut n0, &[2, 2]);
    n0.purge_before(10);
    let e = |i| n0.entry(i).unwrap().unwrap();
    let truncate = push(0, 1, 51, 2, PushType::Truncate, 9, vec![e(10), e(11)]);
    let cmds = step(&mut f, &mut log, 30, truncate);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, LedgerCommand::Reset { next_index: 10, .. })),
        "{cmds:?}"
    );
    // The barrier's sync, then the sync of entry 10: only then the answer.
    let cmds = synced(&mut f, &mut log, 31, &cmds);
    let cmds = synced(&mut f, &mut log, 32, &cmds);
    assert_eq!(answers(&cmds), vec![(51, ResponseCode::Success, 10)]);
    let cmds = step(
        &mut f,
        &mut log,
        33,
        push(0, 1, 52, 2, PushType::Append, 9, vec![e(11)]),
    );
    let _ = synced(&mut f, &mut log, 34, &cmds);
    assert_eq!((log.first_index(), log.end_index()), (10, 11));
    assert_eq!(f.committed_index(), 9, "committed below the first entry");
    (f, log)
}

/// `f` hears from `leader`, leading `term`, and persists the new term.
fn hear_leader(f: &mut LedgerCore, log: &mut MemLog, leader: usize, term: i64, now: u64) {
    let hb = msg(
        leader,
        1,
        Rpc::Request {
            id: 2,
            body: Request::Heartbeat(HeartbeatRequest {
                term,
                leader_id: id(leader),
            }),
        },
    );
    let cmds = step(f, log, now, hb);
    persisted(f, log, now, &cmds);
    assert_eq!(f.leader_id(), Some(&id(leader)));
}

/// Regression (issue 12; ledger power-loss soak, seed 1567 at an
/// intermediate state): a follower reset past a purge keeps its committed
/// index, which then lies below its new first entry. A later leader that
/// still holds the purged entries finds no match (the follower's entries
/// differ from its own, and it holds nothing before them) and TRUNCATEs at
/// its own first entry, below that committed index: the follower's core
/// asserted (`rewrite from 0 below the committed index 9`). It now starts
/// over there, its committed index going back to its (empty) log end, and
/// takes the committed entries again: they are identical on every member
/// that holds them, and what it dispatched is the broker's own index.
#[test]
fn a_follower_reset_past_a_purge_takes_a_truncate_below_its_committed_index() {
    let mut hist = MemLog::new(FILE);
    fill(&mut hist, &[1; 10]);
    let (mut f, mut log) = reset_past_a_purge(&hist);
    // n2 leads term 3: it never purged, and its entry 10 is its own no-op.
    // Its COMPAREs at 10 and 9 fail (n1's 10 differs, n1 has no 9), so it
    // TRUNCATEs at its first entry.
    let mut n2 = hist.clone();
    fill(&mut n2, &[3]);
    let l = |i| n2.entry(i).unwrap().unwrap();
    hear_leader(&mut f, &mut log, 2, 3, 39);
    for (rid, i) in [(58, 10), (59, 9)] {
        let cmds = step(
            &mut f,
            &mut log,
            39,
            push(2, 1, rid, 3, PushType::Compare, 9, vec![l(i)]),
        );
        assert_eq!(
            answers(&cmds),
            vec![(rid, ResponseCode::InconsistentState, i)]
        );
    }
    let truncate = push(2, 1, 60, 3, PushType::Truncate, 9, vec![l(0), l(1)]);
    let cmds = step(&mut f, &mut log, 40, truncate);
    let reset_at_0 = |c: &LedgerCommand| {
        matches!(
            c,
            LedgerCommand::Reset {
                next_index: 0,
                next_pos: 0
            }
        )
    };
    assert!(cmds.iter().any(reset_at_0), "{cmds:?}");
    assert_eq!(f.committed_index(), -1, "the commit follows the empty log");
    assert_eq!(log.end_index(), -1);
    let cmds = synced(&mut f, &mut log, 41, &cmds);
    assert!(answers(&cmds).is_empty());
    let cmds = synced(&mut f, &mut log, 42, &cmds);
    assert_eq!(answers(&cmds), vec![(60, ResponseCode::Success, 0)]);
    // The leader's APPENDs bring back the committed entries and its own.
    let mut commits = Vec::new();
    for i in 1..=10 {
        let rid = 60 + i as u64;
        let append = push(2, 1, rid, 3, PushType::Append, 9, vec![l(i)]);
        let cmds = step(&mut f, &mut log, 50, append);
        let cmds = [cmds.clone(), synced(&mut f, &mut log, 50, &cmds)].concat();
        assert_eq!(answers(&cmds), vec![(rid, ResponseCode::Success, i)]);
        commits.extend(cmds.iter().filter_map(|c| match c {
            LedgerCommand::CommitAdvanced { committed_index } => Some(*committed_index),
            _ => None,
        }));
    }
    assert_eq!((log.first_index(), log.end_index()), (0, 10));
    for i in 0..=10 {
        assert_eq!(log.entry(i).unwrap(), Some(l(i)), "entry {i}");
    }
    assert_eq!(f.committed_index(), 9);
    assert_eq!(commits.last(), Some(&9), "{commits:?}");
}

/// A TRUNCATE below committed entries the follower still holds (a
/// duplicate, late or stale push: a leader comparing from its end finds
/// the committed ones, which every member holds identically) cuts nothing:
/// the follower answers INCONSISTENT_STATE and the leader compares again.
#[test]
fn a_truncate_below_committed_entries_the_follower_holds_cuts_nothing() {
    let mut hist = MemLog::new(FILE);
    fill(&mut hist, &[1; 10]);
    let h = |i| hist.entry(i).unwrap().unwrap();
    let mut log = hist.clone();
    log.synced(9);
    log.purge_before(5);
    let mut f = follower(1, 2, &mut log);
    let _ = step(
        &mut f,
        &mut log,
        20,
        push(0, 1, 50, 2, PushType::Compare, 9, vec![h(9)]),
    );
    assert_eq!(f.committed_index(), 9);
    let cmds = step(
        &mut f,
        &mut log,
        21,
        push(0, 1, 51, 2, PushType::Truncate, 9, vec![h(0), h(1)]),
    );
    assert_eq!(
        answers(&cmds),
        vec![(51, ResponseCode::InconsistentState, 0)]
    );
    assert!(
        !cmds.iter().any(|c| matches!(
            c,
            LedgerCommand::Reset { .. } | LedgerCommand::Truncate { .. }
        )),
        "{cmds:?}"
    );
    assert_eq!((log.first_index(), log.end_index()), (5, 9));
    assert_eq!(f.committed_index(), 9);
}
