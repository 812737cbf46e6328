//! Election: durable votes, vote rules, pre-vote, a new leader's first steps.

use super::*;

#[test]
fn vote_is_answered_only_after_it_is_durable() {
    let mut log = MemLog::new(FILE);
    let mut c = core(3, 1, 1, &log);
    let req = msg(
        0,
        1,
        Rpc::Request {
            id: 9,
            body: Request::Vote(VoteRequest {
                term: 2,
                candidate: id(0),
                ledger_end_term: -1,
                ledger_end_index: -1,
                pre_vote: false,
            }),
        },
    );
    let cmds = step(&mut c, &mut log, 5, req);
    assert!(
        sends(&cmds).is_empty(),
        "no answer before the vote is durable"
    );
    let persist = cmds.iter().find_map(|c| match c {
        LedgerCommand::PersistHardState { state, .. } => Some(state.clone()),
        _ => None,
    });
    assert_eq!(
        persist,
        Some(HardState {
            term: 2,
            voted_for: Some(id(0)),
            leader: None
        })
    );
    let cmds = persisted(&mut c, &mut log, 6, &cmds);
    let s = sends(&cmds);
    assert_eq!(s.len(), 1);
    assert!(matches!(
        &s[0].rpc,
        Rpc::Response {
            id: 9,
            body: Response::Vote(VoteResponse {
                term: 2,
                result: VoteResult::Accept,
                pre_vote: false
            })
        }
    ));
}

#[test]
fn vote_refused_to_a_less_up_to_date_log_and_twice_per_term() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1, 1, 2]);
    let mut c = core(3, 1, 2, &log);
    let vote = |rid, cand, end_term, end_index| {
        msg(
            cand,
            1,
            Rpc::Request {
                id: rid,
                body: Request::Vote(VoteRequest {
                    term: 3,
                    candidate: id(cand),
                    ledger_end_term: end_term,
                    ledger_end_index: end_index,
                    pre_vote: false,
                }),
            },
        )
    };
    let result = |cmds: &[LedgerCommand]| {
        sends(cmds).iter().find_map(|e| match &e.rpc {
            Rpc::Response {
                body: Response::Vote(v),
                ..
            } => Some(v.result),
            _ => None,
        })
    };
    // Older last term.
    let cmds = step(&mut c, &mut log, 5, vote(1, 0, 1, 10));
    let cmds = [cmds.clone(), persisted(&mut c, &mut log, 5, &cmds)].concat();
    assert_eq!(result(&cmds), Some(VoteResult::RejectExpiredLedgerTerm));
    // Same last term, shorter.
    let cmds = step(&mut c, &mut log, 6, vote(2, 0, 2, 1));
    assert_eq!(result(&cmds), Some(VoteResult::RejectSmallLedgerEndIndex));
    // Up to date: granted.
    let cmds = step(&mut c, &mut log, 7, vote(3, 0, 2, 2));
    let cmds = persisted(&mut c, &mut log, 7, &cmds);
    assert_eq!(result(&cmds), Some(VoteResult::Accept));
    // Another candidate in the same term: refused.
    let cmds = step(&mut c, &mut log, 8, vote(4, 2, 5, 50));
    assert_eq!(result(&cmds), Some(VoteResult::RejectAlreadyVoted));
}

#[test]
fn pre_vote_changes_nothing_and_is_refused_while_a_leader_is_alive() {
    let mut log = MemLog::new(FILE);
    let mut c = follower(1, 3, &mut log);
    let pre = msg(
        2,
        1,
        Rpc::Request {
            id: 4,
            body: Request::Vote(VoteRequest {
                term: 4,
                candidate: id(2),
                ledger_end_term: 9,
                ledger_end_index: 99,
                pre_vote: true,
            }),
        },
    );
    let cmds = step(&mut c, &mut log, 20, pre.clone());
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::PersistHardState { .. }))
    );
    assert!(sends(&cmds).iter().any(|e| matches!(
        &e.rpc,
        Rpc::Response {
            body: Response::Vote(VoteResponse {
                result: VoteResult::RejectAlreadyHasLeader,
                ..
            }),
            ..
        }
    )));
    assert_eq!(c.term(), 3);
    // Once the leader has been silent for the lease, the pre-vote is granted —
    // still without any state change.
    let cmds = step(&mut c, &mut log, 20 + 301, pre);
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::PersistHardState { .. }))
    );
    assert!(sends(&cmds).iter().any(|e| matches!(
        &e.rpc,
        Rpc::Response {
            body: Response::Vote(VoteResponse {
                result: VoteResult::Accept,
                pre_vote: true,
                ..
            }),
            ..
        }
    )));
    assert_eq!(c.term(), 3);
}

#[test]
fn isolated_member_keeps_its_term_while_pre_votes_fail() {
    let mut log = MemLog::new(FILE);
    let mut c = follower(1, 3, &mut log);
    // Nobody answers for a long time: rounds of pre-votes, never a new term.
    for k in 1..20 {
        let cmds = step(&mut c, &mut log, k * 400, Event::Tick);
        for (_, v) in vote_requests(&cmds) {
            assert!(v.pre_vote, "only pre-votes while no majority answers");
            assert_eq!(v.term, 4);
        }
    }
    assert_eq!(c.term(), 3);
    assert_eq!(c.role(), Role::PreCandidate);
}

#[test]
fn new_leader_appends_a_noop_and_heartbeats() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1, 1]);
    let (c, cmds) = leader(2, &mut log);
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendAsLeader { client: None, term: 2, entries } if entries.len() == 1 && entries[0].kind == EntryKind::Noop && entries[0].index == 2
    )));
    let hb = sends(&cmds)
        .iter()
        .filter(|e| {
            matches!(
                e.rpc,
                Rpc::Request {
                    body: Request::Heartbeat(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(hb, 2);
    assert!(!c.leader_ready(), "ready only once the no-op commits");
}

#[test]
fn leader_without_quorum_steps_down() {
    let mut log = MemLog::new(FILE);
    let (mut c, _) = leader(2, &mut log);
    let cmds = step(&mut c, &mut log, 400 + 301, Event::Tick);
    assert_eq!(c.role(), Role::Follower);
    assert!(c.leader_id().is_none());
    let _ = cmds;
}

/// Regression (ledger power-loss simulator, seed 1): a member whose store
/// had failed a sync still granted votes.
#[test]
fn a_poisoned_member_grants_no_vote() {
    let mut log = MemLog::new(FILE);
    let mut c = core(3, 1, 1, &log);
    let _ = step(
        &mut c,
        &mut log,
        5,
        Event::StorageFailed {
            reason: "fsync: EIO".into(),
        },
    );
    for (t, pre_vote) in [(6, true), (7, false)] {
        let req = msg(
            0,
            1,
            Rpc::Request {
                id: t,
                body: Request::Vote(VoteRequest {
                    term: 2,
                    candidate: id(0),
                    ledger_end_term: -1,
                    ledger_end_index: -1,
                    pre_vote,
                }),
            },
        );
        let cmds = step(&mut c, &mut log, t, req);
        let cmds = persisted(&mut c, &mut log, t, &cmds);
        let granted = sends(&cmds).iter().any(|e| {
            matches!(
                &e.rpc,
                Rpc::Response {
                    body: Response::Vote(VoteResponse {
                        result: VoteResult::Accept,
                        ..
                    }),
                    ..
                }
            )
        });
        assert!(
            !granted,
            "a poisoned member granted a vote (pre-vote: {pre_vote})"
        );
    }
}
