//! The auth gate in front of every request, and the auth admin codes
//! 3001–3010 (createUser … listAcl), answered by `basalt_auth::admin` off
//! the async workers since each change is fsynced before the answer.

use std::sync::Arc;

use basalt_auth::AuthGate;
use basalt_remoting::code::response;
use basalt_remoting::{Channel, RemotingCommand};

use crate::metrics::BrokerMetrics;

/// The refusal to send instead of handling `req`, if the gate refuses it.
pub(super) fn refused(
    gate: &AuthGate,
    channel: &Channel,
    req: &RemotingCommand,
    metrics: &BrokerMetrics,
) -> Option<RemotingCommand> {
    if !gate.enabled() {
        return None;
    }
    let refusal = gate.check(Some(channel.remote_addr().ip()), req).err()?;
    metrics.record_auth_failure(refusal.reason);
    Some(RemotingCommand::response(
        refusal.code,
        Some(refusal.remark),
    ))
}

/// Answers one of the codes 3001–3010.
pub(super) async fn handle(gate: &Arc<AuthGate>, req: &RemotingCommand) -> RemotingCommand {
    let Some(store) = gate.store().cloned() else {
        return RemotingCommand::not_supported(req);
    };
    let owned = req.clone();
    match tokio::task::spawn_blocking(move || basalt_auth::admin::handle(&store, &owned)).await {
        Ok(Some(resp)) => resp,
        Ok(None) => RemotingCommand::not_supported(req),
        Err(e) => super::error(response::SYSTEM_ERROR, format!("auth admin failed: {e}")),
    }
}
