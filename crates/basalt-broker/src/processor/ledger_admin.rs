//! Basalt's LEDGER_STATUS (30002) and LEDGER_TRANSFER (30003): a
//! ledger-mode broker's view of its DLedger group, and leadership transfer
//! (docs/ledger-protocol.md#operations).

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use basalt_remoting::header::{CommandHeader, LedgerTransferRequestHeader};

use super::paths::AdminPath;
use super::{bad_header, error};
use crate::replication::Replication;

/// Longest member id a transfer request may name (ids are short: `n0`).
const MAX_MEMBER_ID: usize = 64;

fn not_ledger() -> RemotingCommand {
    error(
        response::SYSTEM_ERROR,
        "this broker does not run in ledger mode (enableDLegerCommitLog=false)",
    )
}

/// LEDGER_STATUS: the answering member's state and its group, as JSON.
pub fn ledger_status(a: &AdminPath) -> RemotingCommand {
    let Replication::Ledger(lm) = a.replication.as_ref() else {
        return not_ledger();
    };
    match serde_json::to_vec(&lm.group_status()) {
        Ok(body) => RemotingCommand::response(response::SUCCESS, None).with_body(body),
        Err(e) => error(response::SYSTEM_ERROR, format!("cannot encode: {e}")),
    }
}

/// LEDGER_TRANSFER: hands leadership to `transfereeId`. Answered once the
/// leader has stepped down (SUCCESS) or the transfer failed (SYSTEM_ERROR
/// with the reason; a member that does not lead names the leader).
pub async fn ledger_transfer(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let Replication::Ledger(lm) = a.replication.as_ref() else {
        return not_ledger();
    };
    let h = match LedgerTransferRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    let id = h.transferee_id.trim();
    if id.is_empty() || id.len() > MAX_MEMBER_ID || id.chars().any(|c| c.is_control()) {
        return error(
            response::SYSTEM_ERROR,
            "transfereeId must be a member id of at most 64 printable characters",
        );
    }
    match lm.transfer_leadership(id).await {
        Ok(()) => RemotingCommand::response(response::SUCCESS, None),
        Err(why) => error(response::SYSTEM_ERROR, why),
    }
}
