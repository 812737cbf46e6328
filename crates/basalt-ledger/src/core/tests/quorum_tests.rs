//! Commit, waiting appends, appends the leader refuses, leadership transfer.

use super::*;

#[test]
fn commit_needs_a_current_term_entry_and_answers_waiters() {
    let (mut c, mut log, rid, _) = leader_comparing(&[1, 1]);
    // Leader: 0,1 (term 1), 2 no-op (term 2). Own sync done for everything.
    log.synced(2);
    let _ = step(&mut c, &mut log, 402, Event::Synced { through: 2 });
    // n1 holds 0..=1 only: a majority has index 1, but it is of term 1.
    let cmds = step(
        &mut c,
        &mut log,
        403,
        push_resp(1, 0, rid, inconsistent(2, 2, 0, 1)),
    );
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::CommitAdvanced { .. }))
    );
    let (_, rid2, _) = push_requests(&cmds).pop().unwrap();
    let cmds = step(&mut c, &mut log, 404, push_resp(1, 0, rid2, ok(1, 1, 2, 1)));
    assert_eq!(c.committed_index(), -1, "index 1 is of an older term");
    let (_, rid3, r) = push_requests(&cmds).pop().unwrap();
    assert_eq!(r.first_index(), 2);
    // A client append waits for commit.
    let mut bodies = BTreeMap::from([(7, vec![Bytes::from_static(b"abc")])]);
    let cmds = c.step(
        405,
        Event::ClientAppend {
            client: 7,
            body_lens: vec![3],
        },
        &log,
    );
    apply(&mut log, &cmds, &mut bodies);
    let _ = c.step(405, Event::Written, &log);
    // The no-op reaches n1: index 2 (term 2) commits, and with it 0 and 1.
    let cmds = step(&mut c, &mut log, 406, push_resp(1, 0, rid3, ok(2, 1, 2, 2)));
    assert!(
        cmds.iter()
            .any(|c| matches!(c, LedgerCommand::CommitAdvanced { committed_index: 2 }))
    );
    assert!(c.leader_ready());
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::AppendResult { .. }))
    );
    // The client entry (3) is not durable on the leader yet: no commit.
    let rid4 = push_requests(&cmds)
        .into_iter()
        .find(|(_, _, r)| r.first_index() == 3)
        .map(|x| x.1);
    let rid4 = rid4.or_else(|| {
        c.leader_state
            .as_ref()
            .and_then(|ls| ls.dispatchers.get(&id(1)))
            .map(|_| 0)
    });
    let cmds = step(
        &mut c,
        &mut log,
        407,
        push_resp(1, 0, rid4.unwrap_or(0), ok(3, 1, 2, 3)),
    );
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::AppendResult { .. })),
        "leader's own fsync pending"
    );
    log.synced(3);
    let cmds = step(&mut c, &mut log, 408, Event::Synced { through: 3 });
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult {
            client: 7,
            result: Ok(AppendReceipt {
                first_index: 3,
                last_index: 3,
                term: 2
            })
        }
    )));
}

#[test]
fn waiting_append_times_out_and_step_down_abandons_the_rest() {
    let (mut c, mut log, _, _) = leader_comparing(&[1]);
    let mut bodies = BTreeMap::from([
        (1, vec![Bytes::from_static(b"a")]),
        (2, vec![Bytes::from_static(b"b")]),
    ]);
    let cmds = c.step(
        410,
        Event::ClientAppend {
            client: 1,
            body_lens: vec![1],
        },
        &log,
    );
    apply(&mut log, &cmds, &mut bodies);
    let cmds = c.step(
        900,
        Event::ClientAppend {
            client: 2,
            body_lens: vec![1],
        },
        &log,
    );
    apply(&mut log, &cmds, &mut bodies);
    // Keep the leader alive (acks within the lease) but never acknowledge entries.
    let hb_ok = |from| {
        msg(
            from,
            0,
            Rpc::Response {
                id: 0,
                body: Response::Heartbeat(crate::protocol::HeartbeatResponse {
                    term: 2,
                    code: ResponseCode::Success,
                }),
            },
        )
    };
    let _ = step(&mut c, &mut log, 1300, hb_ok(1));
    let cmds = step(&mut c, &mut log, 1411, Event::Tick);
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult {
            client: 1,
            result: Err(LedgerAppendError::Timeout)
        }
    )));
    // A higher term seen: the other waiter learns leadership was lost.
    let cmds = step(
        &mut c,
        &mut log,
        1412,
        push_resp(1, 0, 0, inconsistent(0, 5, 0, 0)),
    );
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult {
            client: 2,
            result: Err(LedgerAppendError::LeadershipLost)
        }
    )));
    assert_eq!(c.role(), Role::Follower);
    assert_eq!(c.term(), 5);
}

#[test]
fn appends_are_refused_by_followers_and_during_transfer() {
    let mut log = MemLog::new(FILE);
    let mut f = follower(1, 2, &mut log);
    let cmds = step(
        &mut f,
        &mut log,
        20,
        Event::ClientAppend {
            client: 3,
            body_lens: vec![1],
        },
    );
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult { client: 3, result: Err(LedgerAppendError::NotLeader { leader_id: Some(l) }) } if *l == id(0)
    )));
    let (mut c, mut log, _, _) = leader_comparing(&[1]);
    let _ = step(
        &mut c,
        &mut log,
        402,
        Event::TransferLeadership {
            client: 9,
            to: id(1),
        },
    );
    assert_eq!(c.transferee(), Some(&id(1)));
    let cmds = step(
        &mut c,
        &mut log,
        403,
        Event::ClientAppend {
            client: 4,
            body_lens: vec![1],
        },
    );
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult {
            client: 4,
            result: Err(LedgerAppendError::Transferring)
        }
    )));
}

#[test]
fn transfer_tells_an_up_to_date_transferee_to_elect_itself() {
    let (mut c, mut log, rid, _) = leader_comparing(&[1]);
    let _ = step(
        &mut c,
        &mut log,
        402,
        Event::TransferLeadership {
            client: 9,
            to: id(1),
        },
    );
    // n1 is not caught up yet: nothing sent.
    let cmds = step(&mut c, &mut log, 403, Event::Tick);
    assert!(!sends(&cmds).iter().any(|e| matches!(
        e.rpc,
        Rpc::Request {
            body: Request::Transfer(_),
            ..
        }
    )));
    // n1 confirms the whole log (the no-op at 1) durably.
    let cmds = step(&mut c, &mut log, 404, push_resp(1, 0, rid, ok(1, 1, 2, 1)));
    let take = sends(&cmds).iter().find_map(|e| match &e.rpc {
        Rpc::Request {
            body: Request::Transfer(t),
            ..
        } => Some((e.to.clone(), t.clone())),
        _ => None,
    });
    let (to, t) = take.expect("take-leadership request");
    assert_eq!(to, id(1));
    assert_eq!(t.transferee_id, id(1));
    assert_eq!(t.take_leadership_ledger_index, 1);
    // The transferee's vote request (higher term) makes the leader step down: done.
    let vote = msg(
        1,
        0,
        Rpc::Request {
            id: 77,
            body: Request::Vote(VoteRequest {
                term: 3,
                candidate: id(1),
                ledger_end_term: 2,
                ledger_end_index: 1,
                pre_vote: false,
            }),
        },
    );
    let cmds = step(&mut c, &mut log, 405, vote);
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::TransferResult {
            client: 9,
            result: Ok(())
        }
    )));
    assert_eq!(c.role(), Role::Follower);
}

/// The take-leadership requests among `cmds`, with their receivers.
fn take_requests(cmds: &[LedgerCommand]) -> Vec<(NodeId, crate::protocol::TransferRequest)> {
    sends(cmds)
        .into_iter()
        .filter_map(|e| match &e.rpc {
            Rpc::Request {
                body: Request::Transfer(t),
                ..
            } => Some((e.to.clone(), t.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_leader_hands_over_to_its_preferred_leader_once_it_is_caught_up() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1]);
    let mut cfg = config(3, 0);
    cfg.preferred_leader = Some(id(1));
    let (mut c, cmds) = leader_with(cfg, 2, &mut log);
    let (_, rid, _) = push_requests(&cmds)
        .into_iter()
        .find(|(to, _, _)| *to == id(1))
        .expect("a COMPARE to n1");
    // n1 has not confirmed anything: no transfer.
    let cmds = step(&mut c, &mut log, 650, Event::Tick);
    assert!(take_requests(&cmds).is_empty());
    assert_eq!(c.transferee(), None);
    // n1 confirms the whole log (the no-op at 1) durably and answered within
    // two heartbeats: once the first lease of the term is over, the leader
    // hands over by itself.
    let mut cmds = step(&mut c, &mut log, 660, push_resp(1, 0, rid, ok(1, 1, 2, 1)));
    cmds.extend(step(&mut c, &mut log, 710, Event::Tick));
    let take = take_requests(&cmds);
    assert_eq!(take.len(), 1, "one take-leadership request: {cmds:?}");
    assert_eq!(take[0].0, id(1));
    assert_eq!(take[0].1.transferee_id, id(1));
    assert_eq!(take[0].1.term, 2);
    assert_eq!(c.transferee(), Some(&id(1)));
    // While it hands over, the leader refuses appends.
    let cmds = step(
        &mut c,
        &mut log,
        711,
        Event::ClientAppend {
            client: 3,
            body_lens: vec![4],
        },
    );
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult {
            client: 3,
            result: Err(LedgerAppendError::Transferring)
        }
    )));
}

#[test]
fn a_preferred_leader_keeps_leading() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1]);
    let mut cfg = config(3, 0);
    cfg.preferred_leader = Some(id(0));
    let (mut c, cmds) = leader_with(cfg, 2, &mut log);
    let (_, rid, _) = push_requests(&cmds)
        .into_iter()
        .find(|(to, _, _)| *to == id(1))
        .expect("a COMPARE to n1");
    let mut cmds = step(&mut c, &mut log, 660, push_resp(1, 0, rid, ok(1, 1, 2, 1)));
    cmds.extend(step(&mut c, &mut log, 710, Event::Tick));
    assert!(take_requests(&cmds).is_empty());
    assert_eq!(c.role(), Role::Leader);
}

#[test]
fn transferee_elects_itself_without_pre_vote() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[2]);
    let mut f = follower(1, 2, &mut log);
    let req = msg(
        0,
        1,
        Rpc::Request {
            id: 5,
            body: Request::Transfer(crate::protocol::TransferRequest {
                term: 2,
                transfer_id: id(0),
                transferee_id: id(1),
                take_leadership_ledger_index: 0,
            }),
        },
    );
    let cmds = step(&mut f, &mut log, 30, req);
    assert_eq!(f.role(), Role::Candidate);
    assert_eq!(f.term(), 3);
    let cmds = persisted(&mut f, &mut log, 31, &cmds);
    let votes = vote_requests(&cmds);
    assert_eq!(votes.len(), 2);
    assert!(votes.iter().all(|(_, v)| !v.pre_vote && v.term == 3));
}

#[test]
fn oversized_appends_are_refused_before_anything_is_written() {
    let (mut c, mut log, _, _) = leader_comparing(&[1]);
    let end = c.end_index();
    // Data files of 4096 bytes hold bodies of at most 4096 - 48 - 8.
    let cmds = step(
        &mut c,
        &mut log,
        402,
        Event::ClientAppend {
            client: 5,
            body_lens: vec![10, 4041],
        },
    );
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult {
            client: 5,
            result: Err(LedgerAppendError::TooLarge {
                body_len: 4041,
                max: 4040
            })
        }
    )));
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::AppendAsLeader { .. }))
    );
    assert_eq!(c.end_index(), end);
}

/// Two followers' durable acknowledgements answer an append before the
/// leader's own sync reaches it (a majority holds it durably: Raft's commit);
/// the leader's own committed index, which it dispatches and sends, waits
/// for its sync, so on every member the committed prefix is durable locally.
#[test]
fn two_followers_acknowledge_an_append_before_the_leaders_own_sync() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1]);
    let (mut c, cmds) = leader(2, &mut log);
    let compare_to = |to| {
        push_requests(&cmds)
            .into_iter()
            .find(|(t, _, _)| *t == id(to))
            .map(|(_, rid, _)| rid)
            .expect("a COMPARE")
    };
    let (r1, r2) = (compare_to(1), compare_to(2));
    log.synced(1);
    let _ = step(&mut c, &mut log, 402, Event::Synced { through: 1 });
    // The no-op (1) commits on n1's confirmation.
    let cmds1 = step(&mut c, &mut log, 403, push_resp(1, 0, r1, ok(1, 1, 2, 1)));
    assert_eq!(c.committed_index(), 1);
    let cmds2 = step(&mut c, &mut log, 403, push_resp(2, 0, r2, ok(1, 1, 2, 1)));
    // A client append at 2, written but not synced on the leader.
    let mut bodies = BTreeMap::from([(7, vec![Bytes::from_static(b"abc")])]);
    let cmds = c.step(
        404,
        Event::ClientAppend {
            client: 7,
            body_lens: vec![3],
        },
        &log,
    );
    apply(&mut log, &cmds, &mut bodies);
    let mut pushes = c.step(404, Event::Written, &log);
    pushes.extend(cmds1);
    pushes.extend(cmds2);
    let append_to = |to| {
        push_requests(&pushes)
            .into_iter()
            .find(|(t, _, r)| *t == id(to) && r.first_index() == 2)
            .map(|(_, rid, _)| rid)
            .expect("an APPEND of 2")
    };
    let (a1, a2) = (append_to(1), append_to(2));
    let cmds = step(&mut c, &mut log, 405, push_resp(1, 0, a1, ok(2, 1, 2, 2)));
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::AppendResult { .. })),
        "one follower and no leader sync are not a majority"
    );
    let cmds = step(&mut c, &mut log, 406, push_resp(2, 0, a2, ok(2, 1, 2, 2)));
    assert!(cmds.iter().any(|c| matches!(
        c,
        LedgerCommand::AppendResult {
            client: 7,
            result: Ok(AppendReceipt {
                first_index: 2,
                last_index: 2,
                term: 2
            })
        }
    )));
    assert_eq!(c.committed_index(), 1, "not past the leader's durable end");
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::CommitAdvanced { .. }))
    );
    log.synced(2);
    let cmds = step(&mut c, &mut log, 407, Event::Synced { through: 2 });
    assert!(
        cmds.iter()
            .any(|c| matches!(c, LedgerCommand::CommitAdvanced { committed_index: 2 }))
    );
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, LedgerCommand::AppendResult { .. })),
        "answered once"
    );
}
