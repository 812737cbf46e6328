//! The [`Admin`] calls for ledger-mode broker groups: each member's view of
//! its DLedger group (Basalt's LEDGER_STATUS) and leadership transfer
//! (LEDGER_TRANSFER), docs/ledger-protocol.md#operations; and a broker's
//! POP consumption (Basalt's POP_STATUS), docs/pop.md#operations.

use std::time::Duration;

use basalt_remoting::code::request;
use basalt_remoting::header::{CommandHeader, LedgerTransferRequestHeader};
use basalt_remoting::protocol::{LedgerGroupStatus, PopStatus};

use crate::admin::Admin;
use crate::error::{ClientError, Result};

/// A transfer waits for the new leader's election; the broker gives up
/// after 10 s, so the call waits a little longer.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(12);

impl Admin {
    /// LEDGER_STATUS at `broker_addr`: that member's role, term, leader,
    /// indexes and, on the leader, every follower's match index and lag.
    pub async fn ledger_status(&self, broker_addr: &str) -> Result<LedgerGroupStatus> {
        let cmd = self.instance().request(request::LEDGER_STATUS);
        let resp = self
            .instance()
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        serde_json::from_slice(&resp.body).map_err(|e| ClientError::bad_response(broker_addr, e))
    }

    /// POP_STATUS at `broker_addr`: the messages popped there and not yet
    /// acked, per group and topic read, and how late its revive is.
    pub async fn pop_status(&self, broker_addr: &str) -> Result<PopStatus> {
        let cmd = self.instance().request(request::POP_STATUS);
        let resp = self
            .instance()
            .invoke_ok(broker_addr, cmd, self.timeout())
            .await?;
        serde_json::from_slice(&resp.body).map_err(|e| ClientError::bad_response(broker_addr, e))
    }

    /// LEDGER_TRANSFER at `leader_addr` (the group's leader): hands
    /// leadership to member `to`; returns once the old leader stepped down.
    pub async fn ledger_transfer(&self, leader_addr: &str, to: &str) -> Result<()> {
        let header = LedgerTransferRequestHeader {
            transferee_id: to.to_string(),
        };
        let cmd = self
            .instance()
            .request(request::LEDGER_TRANSFER)
            .with_ext(header.to_ext());
        self.instance()
            .invoke_ok(leader_addr, cmd, TRANSFER_TIMEOUT.max(self.timeout()))
            .await?;
        Ok(())
    }
}
