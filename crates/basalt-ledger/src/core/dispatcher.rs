//! `EntryDispatcher`: the leader's per-follower push state machine
//! (COMPARE → TRUNCATE → APPEND, DLedger's `EntryDispatcher`).
//!
//! ```text
//!   COMPARE ──(match at follower end)──────────────► APPEND ──► (COMMIT when idle)
//!      │  └─(match below follower end / no overlap)─► TRUNCATE ─(ok)─┘
//!      ▲                                                  │(fail/timeout)
//!      └──────────── INCONSISTENT_STATE ◄─────────────────┘
//! ```
//!
//! `doCompare` rules, with the follower's answer (`begin`, `end`) and the leader's
//! log `[B, E]`:
//! * SUCCESS and `compareIndex == end` → APPEND from `compareIndex + 1`;
//!   SUCCESS below `end` → TRUNCATE at `compareIndex`;
//! * no overlap (`end < B` or `begin > E`) → TRUNCATE at `B`;
//! * `compareIndex < begin` → TRUNCATE at `B`;
//! * in APPEND, a follower whose next needed entry is below `B` (deleted by
//!   retention while it was away, same leader) goes back to COMPARE;
//! * `compareIndex > end` → compare again at `end`;
//! * otherwise compare again at `compareIndex − 1`; below `B` → TRUNCATE at `B`.
//!
//! Basalt refines the match point so that a TRUNCATE only cuts entries that differ
//! from the leader's: the follower's water mark of this term and every COMPARE that
//! succeeded in this round are known matches (the match point is never below them),
//! and when a COMPARE succeeds below the follower's end, the follower's end is
//! probed once before cutting (APPENDs of this term may have landed after the
//! COMPARE was sent).
//!
//! Invariants:
//! * `watermark` is the highest index the follower has told this leader, in this
//!   term, that it holds durably and identically (every SUCCESS for entries
//!   `[index, index + count)` proves that); it never decreases within a term.
//! * In APPEND, every index in `(watermark, write_index)` belongs to a pending
//!   request (so the request holding `watermark + 1` can always be resent).
//! * At most `max_pending_per_peer` APPEND requests are in flight, holding at most
//!   `max_push_window_bytes` of entries between them (the pipelining window; the
//!   first request is always allowed, however large); a COMPARE or TRUNCATE is
//!   alone in flight and resent after `compare_timeout`. `pending_bytes` is the sum
//!   of the pending requests' `bytes`.

use std::collections::BTreeMap;

use crate::entry::Entry;
use crate::protocol::{
    NodeId, PushRequest, PushResponse, PushType, Request, RequestId, ResponseCode,
};

use super::{CoreTimings, LogRead};

/// The push state of a dispatcher (`PushEntryRequest.Type` minus COMMIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchState {
    Compare,
    Truncate,
    Append,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Inflight {
    pub(crate) id: RequestId,
    pub(crate) sent_at: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingAppend {
    pub(crate) count: i64,
    pub(crate) sent_at: u64,
    /// Entry bytes (headers and bodies) of the request.
    pub(crate) bytes: u64,
}

/// Catch-up bandwidth limit (DLedger `Quota`): bytes per one-second window.
#[derive(Debug, Clone, Default)]
pub(crate) struct Quota {
    window_start: u64,
    used: u64,
}

impl Quota {
    /// Counts `bytes`; returns the end of the window when the limit is reached.
    fn sample(&mut self, now: u64, bytes: u64, limit: u64) -> Option<u64> {
        if now >= self.window_start + 1000 {
            self.window_start = now;
            self.used = 0;
        }
        self.used += bytes;
        (self.used >= limit).then_some(self.window_start + 1000)
    }
}

/// What a dispatcher needs from the core for one call.
pub(crate) struct DispatchCtx<'a> {
    pub(crate) log: &'a dyn LogRead,
    pub(crate) now: u64,
    pub(crate) term: i64,
    pub(crate) leader_id: &'a NodeId,
    pub(crate) commit_index: i64,
    /// The leader's log end as of this step (may be ahead of `log` by this step's
    /// own appends).
    pub(crate) end_index: i64,
    pub(crate) end_pos: i64,
    pub(crate) cfg: &'a CoreTimings,
    pub(crate) next_id: &'a mut RequestId,
    /// Requests to send: (to, id, body).
    pub(crate) sends: &'a mut Vec<(NodeId, RequestId, Request)>,
    /// Set when the local log could not be read.
    pub(crate) read_failure: &'a mut Option<String>,
}

impl DispatchCtx<'_> {
    fn push(&mut self, to: &NodeId, push_type: PushType, entries: Vec<Entry>) -> RequestId {
        let id = *self.next_id;
        *self.next_id += 1;
        let req = PushRequest {
            term: self.term,
            leader_id: self.leader_id.clone(),
            push_type,
            commit_index: self.commit_index,
            entries,
        };
        self.sends.push((to.clone(), id, Request::Push(req)));
        id
    }

    fn read(&mut self, index: i64) -> Option<Entry> {
        match self.log.entry(index) {
            Ok(Some(e)) => Some(e),
            Ok(None) => None,
            Err(e) => {
                *self.read_failure = Some(format!("reading entry {index}: {e}"));
                None
            }
        }
    }
}

/// The leader's push state for one follower. See the module documentation.
#[derive(Debug)]
pub struct EntryDispatcher {
    pub(crate) peer: NodeId,
    pub(crate) state: DispatchState,
    pub(crate) compare_index: i64,
    pub(crate) truncate_index: i64,
    pub(crate) write_index: i64,
    pub(crate) watermark: i64,
    pub(crate) inflight: Option<Inflight>,
    pub(crate) pending: BTreeMap<i64, PendingAppend>,
    /// Sum of `pending`'s `bytes`.
    pub(crate) pending_bytes: u64,
    /// Last time anything was pushed (`lastPushCommitTimeMs`).
    pub(crate) last_push: u64,
    pub(crate) last_leak_check: u64,
    pub(crate) quota: Quota,
    pub(crate) throttled_until: u64,
    /// Everything readable was pushed at the last pump (COMMIT pushes are due).
    pub(crate) caught_up: bool,
    /// Highest index a COMPARE of this round found identical on the follower.
    pub(crate) known_match: i64,
    /// This round already compared at the follower's end.
    pub(crate) probed: bool,
}

impl EntryDispatcher {
    /// A dispatcher for a new term: starts by comparing.
    pub fn new(peer: NodeId, now: u64) -> EntryDispatcher {
        EntryDispatcher {
            peer,
            state: DispatchState::Compare,
            compare_index: -1,
            truncate_index: -1,
            write_index: -1,
            watermark: -1,
            inflight: None,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            last_push: now,
            last_leak_check: now,
            quota: Quota::default(),
            throttled_until: 0,
            caught_up: false,
            known_match: -1,
            probed: false,
        }
    }

    pub fn state(&self) -> DispatchState {
        self.state
    }

    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// When this dispatcher next needs a tick.
    pub(crate) fn next_deadline(&self, cfg: &CoreTimings) -> u64 {
        match self.state {
            DispatchState::Compare | DispatchState::Truncate => self
                .inflight
                .map(|f| f.sent_at + cfg.compare_timeout)
                .unwrap_or(u64::MAX),
            DispatchState::Append => {
                let mut d = if self.caught_up {
                    self.last_push + cfg.commit_push_interval
                } else {
                    u64::MAX
                };
                if let Some((_, p)) = self.pending_holding(self.watermark + 1) {
                    d = d.min(p.sent_at + cfg.max_push_timeout);
                }
                if self.throttled_until > 0 {
                    d = d.min(self.throttled_until);
                }
                d
            }
        }
    }

    /// The pending request holding `index`, if any.
    fn pending_holding(&self, index: i64) -> Option<(i64, PendingAppend)> {
        self.pending
            .range(..=index)
            .next_back()
            .filter(|(first, p)| **first + p.count > index)
            .map(|(f, p)| (*f, *p))
    }

    fn enter_append(&mut self, index: i64) {
        self.state = DispatchState::Append;
        self.compare_index = -1;
        self.known_match = -1;
        self.probed = false;
        self.inflight = None;
        self.clear_pending();
        self.watermark = self.watermark.max(index);
        self.write_index = index + 1;
    }

    fn enter_compare(&mut self) {
        self.state = DispatchState::Compare;
        self.compare_index = -1;
        self.known_match = -1;
        self.probed = false;
        self.inflight = None;
        self.clear_pending();
    }

    fn clear_pending(&mut self) {
        self.pending.clear();
        self.pending_bytes = 0;
    }

    /// Records a request in flight (replacing a resent one with the same first
    /// index), keeping `pending_bytes` in step.
    fn add_pending(&mut self, first: i64, p: PendingAppend) {
        if let Some(old) = self.pending.insert(first, p) {
            self.pending_bytes -= old.bytes;
        }
        self.pending_bytes += p.bytes;
    }

    /// Forgets the requests entirely at or below the water mark.
    fn drop_acknowledged(&mut self) {
        while let Some((&first, p)) = self.pending.first_key_value() {
            if first + p.count - 1 > self.watermark {
                break;
            }
            self.pending_bytes -= p.bytes;
            self.pending.pop_first();
        }
    }

    /// Whether another APPEND may go out now (count and byte window).
    fn window_open(&self, cfg: &CoreTimings) -> bool {
        self.pending.len() < cfg.max_pending_per_peer
            && (self.pending.is_empty() || self.pending_bytes < cfg.max_push_window_bytes)
    }

    fn start_truncate(&mut self, ctx: &mut DispatchCtx<'_>, index: i64) {
        self.state = DispatchState::Truncate;
        self.compare_index = -1;
        self.truncate_index = index;
        match ctx.read(index) {
            Some(entry) => {
                // The leader's next entry goes along, so the follower cuts only when
                // its next entry really differs (Raft's conflict rule; a COMPARE
                // answer can be stale by the time the TRUNCATE arrives).
                let mut entries = vec![entry];
                if index < ctx.log.end_index()
                    && let Some(next) = ctx.read(index + 1)
                {
                    entries.push(next);
                }
                let id = ctx.push(&self.peer, PushType::Truncate, entries);
                self.inflight = Some(Inflight {
                    id,
                    sent_at: ctx.now,
                });
                self.last_push = ctx.now;
            }
            None => self.enter_compare(),
        }
    }

    /// Sends whatever the state allows now.
    pub(crate) fn pump(&mut self, ctx: &mut DispatchCtx<'_>) {
        match self.state {
            DispatchState::Compare => self.pump_compare(ctx),
            DispatchState::Truncate => {
                if self
                    .inflight
                    .is_none_or(|f| ctx.now >= f.sent_at + ctx.cfg.compare_timeout)
                {
                    // No answer: start over from COMPARE.
                    self.enter_compare();
                    self.pump_compare(ctx);
                }
            }
            DispatchState::Append => self.pump_append(ctx),
        }
    }

    fn pump_compare(&mut self, ctx: &mut DispatchCtx<'_>) {
        if let Some(f) = self.inflight {
            if ctx.now < f.sent_at + ctx.cfg.compare_timeout {
                return;
            }
            self.inflight = None;
        }
        let begin = ctx.log.begin_index();
        let end = ctx.log.end_index();
        if self.compare_index == -1 && end == -1 {
            return;
        }
        if self.compare_index == -1 || self.compare_index > end || self.compare_index < begin {
            self.compare_index = end;
        }
        let Some(entry) = ctx.read(self.compare_index) else {
            return;
        };
        let id = ctx.push(&self.peer, PushType::Compare, vec![entry]);
        self.inflight = Some(Inflight {
            id,
            sent_at: ctx.now,
        });
        self.last_push = ctx.now;
    }

    fn pump_append(&mut self, ctx: &mut DispatchCtx<'_>) {
        let now = ctx.now;
        let readable_end = ctx.log.end_index();
        if self.watermark + 1 < ctx.log.begin_index() {
            // What the follower needs next was deleted here (it was away while
            // old files went): no APPEND can reach it. COMPARE finds that the
            // logs do not overlap and TRUNCATEs at the first kept entry.
            self.enter_compare();
            self.pump_compare(ctx);
            return;
        }
        if self.pending.len() >= ctx.cfg.max_pending_per_peer || now >= self.last_leak_check + 1000
        {
            let w = self.watermark;
            self.pending.retain(|first, p| *first + p.count - 1 > w);
            self.pending_bytes = self.pending.values().map(|p| p.bytes).sum();
            self.last_leak_check = now;
        }
        if self.throttled_until <= now {
            self.throttled_until = 0;
        }
        while self.write_index <= readable_end
            && self.window_open(ctx.cfg)
            && self.throttled_until == 0
        {
            let entries = self.next_append_batch(ctx, readable_end);
            if entries.is_empty() {
                break;
            }
            let first = self.write_index;
            let count = entries.len() as i64;
            let bytes = entries.iter().map(|e| e.size() as u64).sum();
            ctx.push(&self.peer, PushType::Append, entries);
            self.add_pending(
                first,
                PendingAppend {
                    count,
                    sent_at: now,
                    bytes,
                },
            );
            self.write_index += count;
            self.last_push = now;
        }
        self.resend_overdue_append(ctx);
        // A stand-alone COMMIT when the follower is caught up and nothing was pushed
        // for a while.
        self.caught_up = self.write_index > readable_end;
        if self.caught_up && now >= self.last_push + ctx.cfg.commit_push_interval {
            ctx.push(&self.peer, PushType::Commit, Vec::new());
            self.last_push = now;
        }
    }

    /// The entries of the next APPEND from `write_index` (one, or a batch with
    /// batch push), setting `throttled_until` when the peer's quota runs out.
    fn next_append_batch(&mut self, ctx: &mut DispatchCtx<'_>, readable_end: i64) -> Vec<Entry> {
        let now = ctx.now;
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        let mut index = self.write_index;
        while index <= readable_end {
            let Some(entry) = ctx.read(index) else {
                break;
            };
            // DLedger `checkQuotaAndWait`: only a follower far behind is throttled.
            if ctx.end_index - index > ctx.cfg.max_pending_per_peer as i64
                && (ctx.end_pos - entry.pos()) as u64 >= ctx.cfg.peer_push_throttle_point
                && let Some(until) =
                    self.quota
                        .sample(now, entry.size() as u64, ctx.cfg.peer_push_quota)
            {
                self.throttled_until = until;
            }
            bytes += entry.size() as usize;
            entries.push(entry);
            index += 1;
            if !ctx.cfg.batch_push
                || bytes >= ctx.cfg.max_batch_push_size
                || self.throttled_until != 0
            {
                break;
            }
        }
        entries
    }

    /// Resends the request the follower is waiting for, if it is overdue.
    fn resend_overdue_append(&mut self, ctx: &mut DispatchCtx<'_>) {
        let now = ctx.now;
        if let Some((first, p)) = self.pending_holding(self.watermark + 1)
            && now >= p.sent_at + ctx.cfg.max_push_timeout
        {
            let mut entries = Vec::new();
            for i in first..first + p.count {
                match ctx.read(i) {
                    Some(e) => entries.push(e),
                    None => break,
                }
            }
            if entries.len() as i64 == p.count {
                ctx.push(&self.peer, PushType::Append, entries);
                self.add_pending(
                    first,
                    PendingAppend {
                        count: p.count,
                        sent_at: now,
                        bytes: p.bytes,
                    },
                );
                self.last_push = now;
            }
        }
    }

    /// Handles the follower's answer to one of this dispatcher's pushes.
    pub(crate) fn on_response(
        &mut self,
        ctx: &mut DispatchCtx<'_>,
        id: RequestId,
        resp: &PushResponse,
    ) {
        // Any SUCCESS for entries proves the follower holds them durably and
        // identically, whatever request it answers.
        if resp.code == ResponseCode::Success && resp.index >= 0 && resp.count > 0 {
            let last = resp.index + resp.count as i64 - 1;
            if last <= ctx.end_index {
                self.watermark = self.watermark.max(last);
            }
        }
        match self.state {
            DispatchState::Compare if self.inflight.is_some_and(|f| f.id == id) => {
                self.inflight = None;
                self.on_compare_response(ctx, resp);
            }
            DispatchState::Truncate if self.inflight.is_some_and(|f| f.id == id) => {
                self.inflight = None;
                if resp.code == ResponseCode::Success {
                    let t = self.truncate_index;
                    self.enter_append(t);
                    self.last_push = ctx.now;
                } else {
                    self.enter_compare();
                }
                self.pump(ctx);
            }
            DispatchState::Append => match resp.code {
                ResponseCode::Success => {
                    // Requests entirely at or below the water mark are done (an answer
                    // may cover fewer entries than the request with the same first
                    // index, e.g. a late COMPARE answer).
                    self.drop_acknowledged();
                    self.pump(ctx);
                }
                ResponseCode::InconsistentState if self.pending.contains_key(&resp.index) => {
                    self.enter_compare();
                    self.pump(ctx);
                }
                _ => {}
            },
            _ => {}
        }
    }

    fn on_compare_response(&mut self, ctx: &mut DispatchCtx<'_>, resp: &PushResponse) {
        let begin = ctx.log.begin_index();
        let end = ctx.log.end_index();
        let mut truncate_index = -1;
        match resp.code {
            ResponseCode::Success => {
                self.known_match = self.known_match.max(self.compare_index);
                // Only a match the follower itself verified in this round lets it
                // take APPENDs (it checks its whole log agrees with this leader).
                if self.known_match == resp.end_index {
                    let m = self.known_match;
                    self.enter_append(m);
                    self.pump(ctx);
                    return;
                }
                // The follower has more: probe its end once before cutting, so only
                // entries that really differ are truncated.
                let probe = resp.end_index.min(end);
                if !self.probed && probe > self.known_match {
                    self.probed = true;
                    self.compare_index = probe;
                    self.pump_compare(ctx);
                    return;
                }
                truncate_index = self.match_floor(resp.end_index);
            }
            ResponseCode::InconsistentState => {
                if resp.end_index < begin || resp.begin_index > end {
                    // The logs do not intersect (the follower was away while the
                    // leader deleted old files, or its log is empty).
                    truncate_index = begin;
                } else if self.compare_index < resp.begin_index {
                    truncate_index = begin;
                } else if self.compare_index > resp.end_index {
                    self.compare_index = resp.end_index;
                } else {
                    self.compare_index -= 1;
                }
                if self.compare_index < begin {
                    truncate_index = begin;
                }
                // Walking down reached a known match: TRUNCATE there (which the
                // follower also takes as verification) and never below it.
                let m = self.match_floor(resp.end_index);
                if m >= 0 && (self.compare_index <= m || truncate_index != -1) {
                    truncate_index = truncate_index.max(m);
                }
            }
            _ => {
                // Not an answer about the logs (not a follower yet, disk error…):
                // ask again after the compare timeout.
                self.inflight = Some(Inflight {
                    id: 0,
                    sent_at: ctx.now,
                });
                return;
            }
        }
        if truncate_index != -1 {
            self.start_truncate(ctx, truncate_index);
        } else {
            self.pump_compare(ctx);
        }
    }

    /// The highest index known to match on the follower (verified by a COMPARE in
    /// this round, or counted in the water mark) that it still holds; −1 if none.
    fn match_floor(&self, follower_end: i64) -> i64 {
        let w = if self.watermark <= follower_end {
            self.watermark
        } else {
            -1
        };
        self.known_match.max(w).min(follower_end)
    }
}
