//! The auth gate in front of every request, the auth admin codes
//! 3001–3010 (createUser … listAcl), answered by `basalt_auth::admin` off
//! the async workers since each change is fsynced before the answer, and
//! Basalt's AUTH_METADATA_SYNC for slaves and ledger followers.

use std::sync::Arc;

use basalt_auth::AuthGate;
use basalt_auth::sync::AuthMetadata;
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

/// Answers Basalt's AUTH_METADATA_SYNC (30005): every user with its
/// password and every ACL, for a slave or ledger follower. Only to a
/// request signed by a super user of this broker, whatever the switches say
/// (`AuthGate::check_sync`); a store without users answers an empty set.
pub(super) fn sync_answer(
    gate: &AuthGate,
    channel: &Channel,
    req: &RemotingCommand,
    metrics: &BrokerMetrics,
) -> RemotingCommand {
    if let Err(refusal) = gate.check_sync(Some(channel.remote_addr().ip()), req) {
        metrics.record_auth_failure(refusal.reason);
        return RemotingCommand::response(refusal.code, Some(refusal.remark));
    }
    let meta = match gate.store() {
        Some(store) => AuthMetadata::of(&store.snapshot()),
        None => AuthMetadata::default(),
    };
    match meta.encode() {
        Ok(body) => RemotingCommand::response(response::SUCCESS, None).with_body(body),
        Err(e) => super::error(response::SYSTEM_ERROR, format!("users not encoded: {e}")),
    }
}
