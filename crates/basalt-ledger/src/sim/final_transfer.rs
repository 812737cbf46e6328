//! The checks after the heal that leadership moves where it is asked to:
//! with a preferred leader, the settled cluster must be led by it (the
//! leader hands over by itself); without one, once settled, the leader is
//! asked to transfer to a random other member, which must then lead in a
//! higher term, the old leader having answered the request with success,
//! before the cluster counts as settled again (a fresh probe commits).

use super::Sim;
use crate::core::{ClientId, Event, Role, TransferError};
use crate::protocol::NodeId;

/// A leadership transfer the run asked for after the heal.
#[derive(Debug, Clone)]
pub(super) struct FinalTransfer {
    pub(super) client: ClientId,
    pub(super) from: NodeId,
    pub(super) to: NodeId,
    pub(super) from_term: i64,
    /// The old leader's answer, once it came.
    pub(super) result: Option<Result<(), TransferError>>,
}

impl Sim {
    /// The settled cluster's leader is the one it must be: the preferred
    /// leader when there is one, the transferee after a final transfer.
    pub(super) fn leader_is_expected(&self, leader: usize, term: i64) -> Result<bool, String> {
        let id = &self.nodes[leader].id;
        if self.opts.preferred_leader {
            return Ok(id.as_str() == "n0");
        }
        let Some(t) = &self.final_transfer else {
            return Ok(true);
        };
        if let Some(Err(e)) = &t.result {
            return Err(format!(
                "the transfer from {} to {} after the heal failed: {e}",
                t.from, t.to
            ));
        }
        Ok(*id == t.to && term > t.from_term && t.result.is_some())
    }

    /// Once settled the first time (without a preferred leader): asks the
    /// leader to hand over to another member. True when a transfer started,
    /// so the run goes on until the cluster settles again.
    pub(super) fn start_final_transfer(&mut self) -> Result<bool, String> {
        if !self.opts.transfers || self.opts.preferred_leader || self.final_transfer.is_some() {
            return Ok(false);
        }
        let Some(l) = (0..self.nodes.len()).find(|i| {
            self.nodes[*i]
                .core
                .as_ref()
                .is_some_and(|c| c.role() == Role::Leader)
        }) else {
            return Ok(false);
        };
        let from_term = self.nodes[l].core.as_ref().map(|c| c.term()).unwrap_or(-1);
        let others: Vec<usize> = (0..self.nodes.len()).filter(|i| *i != l).collect();
        let to = self.nodes[others[self.rng.range(0, others.len() as u64) as usize]]
            .id
            .clone();
        let client = self.next_client;
        self.next_client += 1;
        self.final_transfer = Some(FinalTransfer {
            client,
            from: self.nodes[l].id.clone(),
            to: to.clone(),
            from_term,
            result: None,
        });
        self.probe = None;
        self.step_node(l, Event::TransferLeadership { client, to })?;
        Ok(true)
    }

    /// A `TransferResult` from a core: kept when it answers the final
    /// transfer (the random ones of the fault phase may fail for any reason).
    pub(super) fn on_transfer_result(
        &mut self,
        client: ClientId,
        result: Result<(), TransferError>,
    ) {
        if let Some(t) = &mut self.final_transfer
            && t.client == client
        {
            t.result = Some(result);
        }
    }
}
