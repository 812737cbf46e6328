//! Unit tests of the core state machines, written as "given these events, these
//! commands come out".

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;
use crate::entry::{Entry, EntryKind, place};
use crate::protocol::{
    HeartbeatRequest, PushRequest, PushResponse, PushType, Request, Response, ResponseCode, Rpc,
    VoteRequest, VoteResponse, VoteResult,
};
use crate::sim::MemLog;

const FILE: i64 = 4096;

fn ids(n: usize) -> Vec<NodeId> {
    (0..n).map(|i| NodeId::new(&format!("n{i}"))).collect()
}

fn config(n: usize, me: usize) -> LedgerConfig {
    let peers: BTreeMap<NodeId, String> = ids(n)
        .into_iter()
        .enumerate()
        .map(|(i, id)| (id, format!("127.0.0.1:{}", 20000 + i)))
        .collect();
    let mut c = LedgerConfig::new("g", format!("n{me}"), peers, "/nonexistent");
    c.heartbeat_interval_ms = 100;
    c.max_heartbeat_leak = 3;
    c.min_vote_interval_ms = 150;
    c.max_vote_interval_ms = 300;
    c.max_pending_per_peer = 4;
    c.max_push_timeout_ms = 100;
    c.compare_timeout_ms = 300;
    c.commit_push_interval_ms = 100;
    c.follower_push_wait_ms = 100;
    c.max_wait_ack_ms = 1000;
    c.leadership_transfer_timeout_ms = 500;
    c.data_file_size = FILE;
    // One entry per APPEND unless a test turns batching on.
    c.enable_batch_push = false;
    c
}

fn core(n: usize, me: usize, term: i64, log: &MemLog) -> LedgerCore {
    let init = CoreInit {
        hard_state: HardState {
            term,
            voted_for: None,
            leader: None,
        },
        committed_index: -1,
        seed: 7,
    };
    LedgerCore::new(&config(n, me), init, log, 0)
}

/// Appends entries with these terms to `log`.
fn fill(log: &mut MemLog, terms: &[i64]) {
    for &t in terms {
        let e = next_entry(log, t, b"body");
        log.append(&[e]).unwrap();
    }
}

fn next_entry(log: &MemLog, term: i64, body: &'static [u8]) -> Entry {
    let index = log.end_index() + 1;
    let size = 48 + body.len() as i64;
    let pos = place(log.end_pos(), size, FILE).unwrap();
    Entry::new(
        EntryKind::Normal,
        index,
        term,
        pos,
        Bytes::from_static(body),
    )
}

fn id(i: usize) -> NodeId {
    NodeId::new(&format!("n{i}"))
}

fn msg(from: usize, to: usize, rpc: Rpc) -> Event {
    Event::Message(Envelope {
        from: id(from),
        to: id(to),
        rpc,
    })
}

fn push(
    from: usize,
    to: usize,
    rid: u64,
    term: i64,
    t: PushType,
    commit: i64,
    entries: Vec<Entry>,
) -> Event {
    msg(
        from,
        to,
        Rpc::Request {
            id: rid,
            body: Request::Push(PushRequest {
                term,
                leader_id: id(from),
                push_type: t,
                commit_index: commit,
                entries,
            }),
        },
    )
}

fn push_resp(from: usize, to: usize, rid: u64, resp: PushResponse) -> Event {
    msg(
        from,
        to,
        Rpc::Response {
            id: rid,
            body: Response::Push(resp),
        },
    )
}

fn sends(cmds: &[LedgerCommand]) -> Vec<&Envelope> {
    cmds.iter()
        .filter_map(|c| match c {
            LedgerCommand::Send(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn push_requests(cmds: &[LedgerCommand]) -> Vec<(NodeId, u64, PushRequest)> {
    sends(cmds)
        .into_iter()
        .filter_map(|e| match &e.rpc {
            Rpc::Request {
                id,
                body: Request::Push(p),
            } => Some((e.to.clone(), *id, p.clone())),
            _ => None,
        })
        .collect()
}

fn push_responses(cmds: &[LedgerCommand]) -> Vec<(u64, PushResponse)> {
    sends(cmds)
        .into_iter()
        .filter_map(|e| match &e.rpc {
            Rpc::Response {
                id,
                body: Response::Push(p),
            } => Some((*id, p.clone())),
            _ => None,
        })
        .collect()
}

/// Executes the log commands of a step against `log` (what a runtime does).
fn apply(log: &mut MemLog, cmds: &[LedgerCommand], bodies: &mut BTreeMap<ClientId, Vec<Bytes>>) {
    for c in cmds {
        match c {
            LedgerCommand::AppendAsLeader {
                client,
                term,
                entries,
            } => {
                let b = client.and_then(|c| bodies.remove(&c));
                let built: Vec<Entry> = entries
                    .iter()
                    .enumerate()
                    .map(|(k, p)| {
                        let body = b.as_ref().map(|v| v[k].clone()).unwrap_or_default();
                        Entry::new(p.kind, p.index, *term, p.pos, body)
                    })
                    .collect();
                log.append(&built).unwrap();
            }
            LedgerCommand::AppendAsFollower { entries } => log.append(entries).unwrap(),
            LedgerCommand::Truncate {
                next_index,
                next_pos,
            } => {
                log.truncate(*next_index, *next_pos);
            }
            _ => {}
        }
    }
}

/// Steps `core` with `ev`, applies the log commands, and completes the `Written`
/// follow-up; returns all commands.
fn step(core: &mut LedgerCore, log: &mut MemLog, now: u64, ev: Event) -> Vec<LedgerCommand> {
    let mut bodies = BTreeMap::new();
    let mut cmds = core.step(now, ev, log);
    apply(log, &cmds, &mut bodies);
    if cmds.iter().any(|c| {
        matches!(
            c,
            LedgerCommand::AppendAsLeader { .. }
                | LedgerCommand::AppendAsFollower { .. }
                | LedgerCommand::Truncate { .. }
        )
    }) {
        let more = core.step(now, Event::Written, log);
        apply(log, &more, &mut bodies);
        cmds.extend(more);
    }
    cmds
}

/// Completes a sync the way the runtime would.
fn synced(
    core: &mut LedgerCore,
    log: &mut MemLog,
    now: u64,
    cmds: &[LedgerCommand],
) -> Vec<LedgerCommand> {
    let through = cmds.iter().rev().find_map(|c| match c {
        LedgerCommand::Sync { through } => Some(*through),
        _ => None,
    });
    match through {
        Some(t) => {
            log.synced(t);
            step(core, log, now, Event::Synced { through: t })
        }
        None => Vec::new(),
    }
}

fn persisted(
    core: &mut LedgerCore,
    log: &mut MemLog,
    now: u64,
    cmds: &[LedgerCommand],
) -> Vec<LedgerCommand> {
    let version = cmds.iter().rev().find_map(|c| match c {
        LedgerCommand::PersistHardState { version, .. } => Some(*version),
        _ => None,
    });
    match version {
        Some(v) => step(core, log, now, Event::Persisted { version: v }),
        None => Vec::new(),
    }
}

/// A follower of n0 in `term` with `log`: the heartbeat that made it one is
/// answered and its state persisted.
fn follower(me: usize, term: i64, log: &mut MemLog) -> LedgerCore {
    let mut c = core(3, me, term - 1, log);
    let hb = msg(
        0,
        me,
        Rpc::Request {
            id: 1,
            body: Request::Heartbeat(HeartbeatRequest {
                term,
                leader_id: id(0),
            }),
        },
    );
    let cmds = step(&mut c, log, 10, hb);
    persisted(&mut c, log, 10, &cmds);
    assert_eq!(c.role(), Role::Follower);
    assert_eq!(c.leader_id(), Some(&id(0)));
    c
}

/// Makes n0 (of 3) leader of term `term` over `log`; returns it with the commands
/// of its first leader step.
fn leader(term: i64, log: &mut MemLog) -> (LedgerCore, Vec<LedgerCommand>) {
    let mut c = core(3, 0, term - 1, log);
    let mut now = 0;
    // Election timeout → pre-vote.
    now += 400;
    let cmds = step(&mut c, log, now, Event::Tick);
    assert_eq!(c.role(), Role::PreCandidate);
    let (pre_id, _) = vote_requests(&cmds)[0].clone();
    let grant = |rid, term, pre| {
        msg(
            1,
            0,
            Rpc::Response {
                id: rid,
                body: Response::Vote(VoteResponse {
                    term,
                    result: VoteResult::Accept,
                    pre_vote: pre,
                }),
            },
        )
    };
    let cmds = step(&mut c, log, now, grant(pre_id, term, true));
    assert_eq!(c.role(), Role::Candidate);
    assert_eq!(c.term(), term);
    // Vote requests wait for the durable self-vote.
    assert!(vote_requests(&cmds).is_empty());
    let cmds = persisted(&mut c, log, now, &cmds);
    let (vote_id, _) = vote_requests(&cmds)[0].clone();
    let cmds = step(&mut c, log, now, grant(vote_id, term, false));
    assert_eq!(c.role(), Role::Leader);
    (c, cmds)
}

fn vote_requests(cmds: &[LedgerCommand]) -> Vec<(u64, VoteRequest)> {
    sends(cmds)
        .into_iter()
        .filter_map(|e| match &e.rpc {
            Rpc::Request {
                id,
                body: Request::Vote(v),
            } => Some((*id, v.clone())),
            _ => None,
        })
        .collect()
}

fn ok(index: i64, count: i32, term: i64, end: i64) -> PushResponse {
    PushResponse {
        term,
        code: ResponseCode::Success,
        index,
        count,
        begin_index: 0,
        end_index: end,
    }
}

fn inconsistent(index: i64, term: i64, begin: i64, end: i64) -> PushResponse {
    PushResponse {
        term,
        code: ResponseCode::InconsistentState,
        index,
        count: 1,
        begin_index: begin,
        end_index: end,
    }
}

// ---- election ---------------------------------------------------------------------

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

// ---- dispatcher (leader side) ---------------------------------------------------------

/// A leader of term 2 whose log holds `terms` plus its no-op, and the id of the
/// COMPARE it sent to n1 (at its end, the no-op).
fn leader_comparing(terms: &[i64]) -> (LedgerCore, MemLog, u64, PushRequest) {
    let mut log = MemLog::new(FILE);
    fill(&mut log, terms);
    let (c, cmds) = leader(2, &mut log);
    let (_, rid, req) = push_requests(&cmds)
        .into_iter()
        .find(|(to, _, _)| *to == id(1))
        .expect("a COMPARE to n1");
    assert_eq!(req.push_type, PushType::Compare);
    assert_eq!(req.first_index(), log.end_index());
    (c, log, rid, req)
}

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

// ---- quorum ------------------------------------------------------------------------------

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

// ---- handler (follower side) --------------------------------------------------------------

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
