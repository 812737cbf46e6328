//! Unit tests of the core state machines, written as "given these events, these
//! commands come out".
//!
//! This file holds the shared fixtures; the cases live in one module per part of
//! the core: `election_tests`, `dispatcher_tests` (leader side), `quorum_tests`
//! (commit, waiting appends, transfers) and `handler_tests` (follower side).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;
use crate::entry::{Entry, EntryKind, place};
use crate::protocol::{
    HeartbeatRequest, PushRequest, PushResponse, PushType, Request, Response, ResponseCode, Rpc,
    VoteRequest, VoteResponse, VoteResult,
};
use crate::sim::MemLog;

mod dispatcher_tests;
mod election_tests;
mod handler_tests;
mod quorum_tests;

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
            LedgerCommand::Reset {
                next_index,
                next_pos,
            } => {
                log.reset(*next_index, *next_pos);
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
    leader_with(config(3, 0), term, log)
}

/// `leader` with a configuration of the test's own (member n0 of three).
fn leader_with(cfg: LedgerConfig, term: i64, log: &mut MemLog) -> (LedgerCore, Vec<LedgerCommand>) {
    let init = CoreInit {
        hard_state: HardState {
            term: term - 1,
            voted_for: None,
            leader: None,
        },
        committed_index: -1,
        seed: 7,
    };
    let mut c = LedgerCore::new(&cfg, init, log, 0);
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
