//! The leader's dispatchers: compare, truncate, append pipelining and batching,
//! idle commits.

use super::*;

#[test]
fn dispatcher_compares_at_its_end_first() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1, 1, 1]);
    let (_, cmds) = leader(2, &mut log);
    // The no-op (index 3) is written first; then one COMPARE per follower at 3.
    let reqs = push_requests(&cmds);
    assert_eq!(reqs.len(), 2, "one COMPARE per follower: {reqs:?}");
    for (_, _, r) in &reqs {
        assert_eq!(r.push_type, PushType::Compare);
        assert_eq!(r.first_index(), 3);
    }
}

#[test]
fn dispatcher_follows_compare_rules_then_appends() {
    let (mut c, mut log, rid, _) = leader_comparing(&[1, 1, 1]);
    // Leader log: 0..=2 (term 1), 3 no-op (term 2). Follower is empty.
    let cmds = step(
        &mut c,
        &mut log,
        402,
        push_resp(1, 0, rid, inconsistent(3, 2, -1, -1)),
    );
    // No overlap: TRUNCATE at the leader's begin, carrying entries 0 and 1.
    let reqs = push_requests(&cmds);
    assert_eq!(reqs.len(), 1);
    let (_, trid, t) = &reqs[0];
    assert_eq!(t.push_type, PushType::Truncate);
    assert_eq!(
        t.entries.iter().map(|e| e.index()).collect::<Vec<_>>(),
        vec![0, 1]
    );
    // TRUNCATE ok → APPEND from 1, at most `max_pending_per_peer` (4) in flight.
    let cmds = step(
        &mut c,
        &mut log,
        403,
        push_resp(1, 0, *trid, ok(0, 1, 2, 0)),
    );
    let reqs = push_requests(&cmds);
    let firsts: Vec<i64> = reqs.iter().map(|(_, _, r)| r.first_index()).collect();
    assert_eq!(firsts, vec![1, 2, 3]);
    assert!(reqs.iter().all(|(_, _, r)| r.push_type == PushType::Append));
    assert_eq!(c.peer_watermarks().unwrap()[&id(1)], 0);
}

#[test]
fn dispatcher_walks_down_and_truncates_only_below_a_conflict() {
    let (mut c, mut log, rid, _) = leader_comparing(&[1, 1, 1]);
    // Leader: 0..=2 (term 1), 3 no-op. The follower holds 0..=5 and differs at 3.
    let cmds = step(
        &mut c,
        &mut log,
        402,
        push_resp(1, 0, rid, inconsistent(3, 2, 0, 5)),
    );
    let (_, rid2, r) = push_requests(&cmds).pop().unwrap();
    assert_eq!((r.push_type, r.first_index()), (PushType::Compare, 2));
    // 2 matches, but the follower has more (5): probe min(5, 3) = 3 once first.
    let cmds = step(&mut c, &mut log, 403, push_resp(1, 0, rid2, ok(2, 1, 2, 5)));
    let (_, rid3, r) = push_requests(&cmds).pop().unwrap();
    assert_eq!((r.push_type, r.first_index()), (PushType::Compare, 3));
    // 3 differs: walking down reaches the verified 2 → TRUNCATE at 2, with the
    // leader's entry 3 for the follower's conflict check.
    let cmds = step(
        &mut c,
        &mut log,
        404,
        push_resp(1, 0, rid3, inconsistent(3, 2, 0, 5)),
    );
    let (_, _, r) = push_requests(&cmds).pop().unwrap();
    assert_eq!(r.push_type, PushType::Truncate);
    assert_eq!(
        r.entries.iter().map(|e| e.index()).collect::<Vec<_>>(),
        vec![2, 3]
    );
}

#[test]
fn dispatcher_never_cuts_below_the_water_mark() {
    let (mut c, mut log, rid, _) = leader_comparing(&[1, 1, 1]);
    // The follower confirms 0..=3 durably (the no-op included): water mark 3.
    let cmds = step(&mut c, &mut log, 402, push_resp(1, 0, rid, ok(3, 1, 2, 3)));
    assert_eq!(c.peer_watermarks().unwrap()[&id(1)], 3);
    assert!(
        push_requests(&cmds)
            .iter()
            .all(|(to, _, r)| *to != id(1) || r.push_type == PushType::Append)
    );
}

#[test]
fn dispatcher_pipelines_resends_and_recompares() {
    let (mut c, mut log, rid, _) = leader_comparing(&[1]);
    // Follower matches at the leader's end (1: the no-op).
    let cmds = step(&mut c, &mut log, 402, push_resp(1, 0, rid, ok(1, 1, 2, 1)));
    assert!(
        push_requests(&cmds).is_empty(),
        "caught up: nothing to send"
    );
    // Six client entries: four APPENDs go out (the pending window), two wait.
    let mut bodies = BTreeMap::new();
    bodies.insert(
        1,
        (0..6).map(|_| Bytes::from_static(b"x")).collect::<Vec<_>>(),
    );
    let cmds = c.step(
        403,
        Event::ClientAppend {
            client: 1,
            body_lens: vec![1; 6],
        },
        &log,
    );
    apply(&mut log, &cmds, &mut bodies);
    let cmds = c.step(403, Event::Written, &log);
    let to_n1: Vec<(u64, i64)> = push_requests(&cmds)
        .into_iter()
        .filter(|(to, _, _)| *to == id(1))
        .map(|(_, rid, r)| (rid, r.first_index()))
        .collect();
    assert_eq!(
        to_n1.iter().map(|x| x.1).collect::<Vec<_>>(),
        vec![2, 3, 4, 5]
    );
    // The answer for 2 frees a slot: 6 goes out.
    let cmds = step(
        &mut c,
        &mut log,
        404,
        push_resp(1, 0, to_n1[0].0, ok(2, 1, 2, 2)),
    );
    let firsts: Vec<i64> = push_requests(&cmds)
        .into_iter()
        .filter(|(to, _, _)| *to == id(1))
        .map(|(_, _, r)| r.first_index())
        .collect();
    assert_eq!(firsts, vec![6]);
    // No answer for 3 within max_push_timeout: it is resent.
    let cmds = step(&mut c, &mut log, 404 + 101, Event::Tick);
    let firsts: Vec<i64> = push_requests(&cmds)
        .into_iter()
        .filter(|(to, _, r)| *to == id(1) && r.push_type == PushType::Append)
        .map(|(_, _, r)| r.first_index())
        .collect();
    assert_eq!(firsts, vec![3]);
    // INCONSISTENT_STATE for a pending APPEND: back to COMPARE.
    let cmds = step(
        &mut c,
        &mut log,
        510,
        push_resp(1, 0, to_n1[2].0, inconsistent(4, 2, 0, 2)),
    );
    let (_, _, r) = push_requests(&cmds)
        .into_iter()
        .find(|(to, _, _)| *to == id(1))
        .unwrap();
    assert_eq!(r.push_type, PushType::Compare);
}

#[test]
fn dispatcher_sends_commit_when_idle() {
    let (mut c, mut log, rid, _) = leader_comparing(&[1]);
    let _ = step(&mut c, &mut log, 402, push_resp(1, 0, rid, ok(1, 1, 2, 1)));
    let commits_to_n1 = |cmds: &[LedgerCommand]| {
        push_requests(cmds)
            .into_iter()
            .filter(|(to, _, r)| *to == id(1) && r.push_type == PushType::Commit)
            .map(|(_, _, r)| r)
            .collect::<Vec<_>>()
    };
    // Idle: one stand-alone COMMIT per commit_push_interval (100 ms), no more.
    let cmds = step(&mut c, &mut log, 600, Event::Tick);
    let commits = commits_to_n1(&cmds);
    assert_eq!(commits.len(), 1);
    assert!(commits[0].entries.is_empty());
    let cmds = step(&mut c, &mut log, 650, Event::Tick);
    assert!(commits_to_n1(&cmds).is_empty());
    let cmds = step(&mut c, &mut log, 700, Event::Tick);
    assert_eq!(commits_to_n1(&cmds).len(), 1);
}

#[test]
fn batch_push_groups_what_is_written() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1]);
    let mut cfg = config(3, 0);
    cfg.enable_batch_push = true;
    cfg.max_batch_push_size = 200;
    let mut c = LedgerCore::new(
        &cfg,
        CoreInit {
            hard_state: HardState {
                term: 1,
                voted_for: None,
                leader: None,
            },
            committed_index: -1,
            seed: 7,
        },
        &log,
        0,
    );
    // Elect n0 (pre-vote, vote), as `leader` does.
    let cmds = step(&mut c, &mut log, 400, Event::Tick);
    let (pre, _) = vote_requests(&cmds)[0].clone();
    let grant = |rid, pre_vote| {
        msg(
            1,
            0,
            Rpc::Response {
                id: rid,
                body: Response::Vote(VoteResponse {
                    term: 2,
                    result: VoteResult::Accept,
                    pre_vote,
                }),
            },
        )
    };
    let cmds = step(&mut c, &mut log, 400, grant(pre, true));
    let cmds = persisted(&mut c, &mut log, 400, &cmds);
    let (vote, _) = vote_requests(&cmds)[0].clone();
    let cmds = step(&mut c, &mut log, 400, grant(vote, false));
    let (_, rid, _) = push_requests(&cmds)
        .into_iter()
        .find(|(to, _, _)| *to == id(1))
        .unwrap();
    // n1 matches at 1 (the no-op); then six 40-byte entries (88 bytes each) are
    // written at once. A batch closes once it reaches 200 bytes (DLedger adds,
    // then checks): two APPENDs of three entries.
    let _ = step(&mut c, &mut log, 401, push_resp(1, 0, rid, ok(1, 1, 2, 1)));
    let mut bodies = BTreeMap::from([(
        1,
        (0..6)
            .map(|_| Bytes::from_static(&[7u8; 40]))
            .collect::<Vec<_>>(),
    )]);
    let cmds = c.step(
        402,
        Event::ClientAppend {
            client: 1,
            body_lens: vec![40; 6],
        },
        &log,
    );
    apply(&mut log, &cmds, &mut bodies);
    let cmds = c.step(402, Event::Written, &log);
    let sizes: Vec<Vec<i64>> = push_requests(&cmds)
        .into_iter()
        .filter(|(to, _, r)| *to == id(1) && r.push_type == PushType::Append)
        .map(|(_, _, r)| r.entries.iter().map(|e| e.index()).collect())
        .collect();
    assert_eq!(sizes, vec![vec![2, 3, 4], vec![5, 6, 7]]);
}

#[test]
fn dispatcher_keeps_appends_within_the_byte_window_with_acks_out_of_order() {
    let mut log = MemLog::new(FILE);
    fill(&mut log, &[1]);
    let mut cfg = config(3, 0);
    cfg.max_pending_per_peer = 100;
    // Entries of one body byte take 49 bytes: two fit in the window.
    cfg.max_push_window_bytes = 98;
    let (mut c, cmds) = leader_with(cfg, 2, &mut log);
    let (_, rid, _) = push_requests(&cmds)
        .into_iter()
        .find(|(to, _, _)| *to == id(1))
        .expect("a COMPARE to n1");
    let _ = step(&mut c, &mut log, 402, push_resp(1, 0, rid, ok(1, 1, 2, 1)));
    let mut bodies = BTreeMap::new();
    bodies.insert(1, (0..6).map(|_| Bytes::from_static(b"x")).collect());
    let cmds = c.step(
        403,
        Event::ClientAppend {
            client: 1,
            body_lens: vec![1; 6],
        },
        &log,
    );
    apply(&mut log, &cmds, &mut bodies);
    let to_n1 = |cmds: &[LedgerCommand]| -> Vec<(u64, i64)> {
        push_requests(cmds)
            .into_iter()
            .filter(|(to, _, r)| *to == id(1) && r.push_type == PushType::Append)
            .map(|(_, rid, r)| (rid, r.first_index()))
            .collect()
    };
    let first = to_n1(&c.step(403, Event::Written, &log));
    assert_eq!(first.iter().map(|x| x.1).collect::<Vec<_>>(), vec![2, 3]);
    // The answer for 3 arrives before the one for 2: it covers both (the follower
    // appends in order), so the window opens for two more.
    let cmds = step(
        &mut c,
        &mut log,
        404,
        push_resp(1, 0, first[1].0, ok(3, 1, 2, 3)),
    );
    let next = to_n1(&cmds);
    assert_eq!(next.iter().map(|x| x.1).collect::<Vec<_>>(), vec![4, 5]);
    assert_eq!(c.peer_watermarks().unwrap()[&id(1)], 3);
    // The late answer for 2 changes nothing.
    let cmds = step(
        &mut c,
        &mut log,
        405,
        push_resp(1, 0, first[0].0, ok(2, 1, 2, 2)),
    );
    assert!(to_n1(&cmds).is_empty(), "{:?}", to_n1(&cmds));
    assert_eq!(c.peer_watermarks().unwrap()[&id(1)], 3);
    // Acknowledged through 5: the last two go out.
    let cmds = step(
        &mut c,
        &mut log,
        406,
        push_resp(1, 0, next[1].0, ok(5, 1, 2, 5)),
    );
    assert_eq!(
        to_n1(&cmds).iter().map(|x| x.1).collect::<Vec<_>>(),
        vec![6, 7]
    );
}

#[test]
fn dispatcher_recompares_a_follower_whose_next_entry_was_deleted() {
    let (mut c, mut log, rid, _) = leader_comparing(&[1]);
    // The follower matches at 1 (the no-op) and takes APPENDs.
    let _ = step(&mut c, &mut log, 402, push_resp(1, 0, rid, ok(1, 1, 2, 1)));
    let mut bodies = BTreeMap::new();
    bodies.insert(1, (0..6).map(|_| Bytes::from_static(b"x")).collect());
    let cmds = c.step(
        403,
        Event::ClientAppend {
            client: 1,
            body_lens: vec![1; 6],
        },
        &log,
    );
    apply(&mut log, &cmds, &mut bodies);
    let _ = c.step(403, Event::Written, &log);
    // It goes away unanswered while retention deletes entries up to 5 here:
    // its next entry (2) is gone, so no APPEND can reach it again.
    log.purge_before(6);
    assert_eq!(log.begin_index(), 6);
    let cmds = step(&mut c, &mut log, 520, Event::Tick);
    let (_, rid, r) = push_requests(&cmds)
        .into_iter()
        .find(|(to, _, _)| *to == id(1))
        .expect("a push to n1");
    assert_eq!(r.push_type, PushType::Compare);
    // Its log (0..=1) does not overlap the kept one: TRUNCATE at the first kept entry.
    let cmds = step(
        &mut c,
        &mut log,
        530,
        push_resp(1, 0, rid, inconsistent(r.first_index(), 2, 0, 1)),
    );
    let (_, _, t) = push_requests(&cmds)
        .into_iter()
        .find(|(to, _, _)| *to == id(1))
        .expect("a TRUNCATE to n1");
    assert_eq!((t.push_type, t.first_index()), (PushType::Truncate, 6));
}
