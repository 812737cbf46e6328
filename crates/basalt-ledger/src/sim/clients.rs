//! Simulated clients: appends submitted to whichever member they think leads, and
//! the checks on every answer (an acknowledged append is committed, in place, with
//! the bodies it was given).

use bytes::Bytes;

use super::Sim;
use crate::core::{AppendReceipt, ClientId, Event, LedgerAppendError, LogRead, Role};
use crate::entry::EntryKind;

impl Sim {
    pub(super) fn client_append(&mut self) {
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].core.is_some())
            .collect();
        if up.is_empty() {
            return;
        }
        let leader = up.iter().copied().find(|i| {
            self.nodes[*i]
                .core
                .as_ref()
                .is_some_and(|c| c.role() == Role::Leader)
        });
        let target = match leader {
            Some(l) if self.rng.range(0, 10) < 9 => l,
            _ => up[self.rng.range(0, up.len() as u64) as usize],
        };
        let client = self.next_client;
        self.next_client += 1;
        let count = self.rng.range(1, 4) as usize;
        let bodies: Vec<Bytes> = (0..count)
            .map(|k| {
                let len = self.rng.range(1, 80) as usize;
                let mut b = format!("c{client}.{k}:").into_bytes();
                b.resize(len.max(b.len()), b'x');
                Bytes::from(b)
            })
            .collect();
        self.submit(target, client, bodies);
    }

    pub(super) fn submit(&mut self, target: usize, client: ClientId, bodies: Vec<Bytes>) {
        let lens = bodies.iter().map(|b| b.len() as u32).collect();
        self.nodes[target].bodies.insert(client, bodies.clone());
        self.outstanding.insert(client, (target, bodies));
        // Errors surface as invariant failures in later checks; stepping cannot fail
        // here without one.
        if let Err(e) = self.step_node(
            target,
            Event::ClientAppend {
                client,
                body_lens: lens,
            },
        ) {
            self.pending_error = Some(e);
        }
    }

    pub(super) fn on_append_result(
        &mut self,
        i: usize,
        client: ClientId,
        result: Result<AppendReceipt, LedgerAppendError>,
    ) -> Result<(), String> {
        self.nodes[i].bodies.remove(&client);
        let Some((_, bodies)) = self.outstanding.remove(&client) else {
            return Err(format!("result for unknown client {client}"));
        };
        if let Some((probe, _)) = self.probe
            && probe == client
        {
            self.probe = Some((probe, result.is_ok()));
        }
        match result {
            Ok(r) => {
                self.report.acked_appends += 1;
                let leader_commit = self.nodes[i].core.as_ref().map(|c| c.committed_index());
                if leader_commit.is_some_and(|c| c < r.last_index) {
                    self.report.acked_before_leader_commit += 1;
                }
                if r.last_index - r.first_index + 1 != bodies.len() as i64 {
                    return Err(format!("receipt {r:?} for {} bodies", bodies.len()));
                }
                for (k, body) in bodies.iter().enumerate() {
                    let idx = r.first_index + k as i64;
                    let e = self.nodes[i]
                        .log
                        .entry(idx)
                        .ok()
                        .flatten()
                        .ok_or_else(|| format!("acked index {idx} not in the leader's log"))?;
                    if e.body != *body || e.header.kind() != EntryKind::Normal || e.term() != r.term
                    {
                        return Err(format!("acked index {idx} holds another entry"));
                    }
                    // Acknowledged: committed, or (before any member's own
                    // commit reaches it) durable on a majority.
                    let committed = self.committed.get(idx as usize);
                    if committed.is_some_and(|c| *c != e)
                        || (committed.is_none() && !self.durable_on_majority(idx, &e))
                    {
                        return Err(format!("acked index {idx} is not committed"));
                    }
                    self.acked.insert(idx, e);
                }
                self.check_acked_from(r.first_index)?;
            }
            Err(_) => self.report.failed_appends += 1,
        }
        Ok(())
    }
}
