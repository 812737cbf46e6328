//! END_TRANSACTION and Basalt's LIST_TRANSACTIONS
//! (docs/protocol.md#transactions). The work is in [`crate::transaction`].

use std::sync::Arc;

use basalt_remoting::code::response;
use basalt_remoting::header::{
    CommandHeader, EndTransactionRequestHeader, ListTransactionsRequestHeader,
};
use basalt_remoting::{Channel, RemotingCommand};

use super::{bad_header, error};
use crate::transaction::Transactions;
use crate::transaction::end::EndDone;

/// Most transactions one LIST_TRANSACTIONS answer lists.
const LIST_MAX: usize = 10_000;

/// END_TRANSACTION. Clients send it oneway (the answer is dropped), but a
/// caller that waits gets SUCCESS or the reason it was refused.
pub async fn end_transaction(
    t: &Transactions,
    channel: &Channel,
    req: &RemotingCommand,
) -> RemotingCommand {
    let h = match EndTransactionRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    match t.end_transaction(&h).await {
        Ok(done) => {
            if let EndDone::Applied(d) = done {
                tracing::debug!(msg_id = %h.msg_id, from_check = ?h.from_transaction_check, "transaction {}", d.name());
            }
            RemotingCommand::response(response::SUCCESS, None)
        }
        Err(refused) => {
            tracing::warn!(
                producer = %channel.remote_addr(),
                group = %h.producer_group,
                msg_id = %h.msg_id,
                commit_log_offset = h.commit_log_offset,
                code = refused.code,
                "END_TRANSACTION refused: {}",
                refused.remark
            );
            error(refused.code, refused.remark)
        }
    }
}

/// LIST_TRANSACTIONS: the unresolved half messages, as JSON.
pub async fn list_transactions(t: &Arc<Transactions>, req: &RemotingCommand) -> RemotingCommand {
    let h = match ListTransactionsRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    let max = h
        .max
        .filter(|m| *m > 0)
        .map_or(LIST_MAX, |m| (m as usize).min(LIST_MAX));
    let t = Arc::clone(t);
    match tokio::task::spawn_blocking(move || t.list_pending(max)).await {
        Ok(list) => match serde_json::to_vec(&list) {
            Ok(body) => RemotingCommand::response(response::SUCCESS, None).with_body(body),
            Err(e) => error(response::SYSTEM_ERROR, format!("cannot encode: {e}")),
        },
        Err(e) => error(response::SYSTEM_ERROR, format!("listing failed: {e}")),
    }
}
