//! A slave's or ledger follower's copy of its master's users and ACLs
//! (docs/auth.md "Replication"), taken in the same round as the other
//! metadata: Basalt's AUTH_METADATA_SYNC, signed with this broker's own
//! credentials. The answer replaces the local users and ACLs in one step
//! (both files saved and fsynced first, only when something differs), and
//! the gate checks requests against them from then on. A refusal or a bad
//! answer is logged at most once a minute and changes nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use basalt_auth::model::{User, UserStatus, UserType};
use basalt_auth::sync::AuthMetadata;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};

use crate::broker::Broker;

/// How often a failing copy is logged at most.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Logs a repeated failure once per [`LOG_EVERY`], with how many were
/// suppressed in between.
#[derive(Debug, Default)]
pub(crate) struct FailureLog {
    last: Option<Instant>,
    suppressed: u64,
}

impl FailureLog {
    fn warn(&mut self, master: &str, why: &str) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|at| now.duration_since(at) < LOG_EVERY)
        {
            self.suppressed += 1;
            return;
        }
        let suppressed = std::mem::take(&mut self.suppressed);
        self.last = Some(now);
        tracing::warn!(
            master,
            suppressed,
            "users and ACLs not copied: {why}; keeping ours"
        );
    }

    fn ok(&mut self) {
        self.last = None;
        self.suppressed = 0;
    }
}

/// Signs `cmd` with the broker's own credentials
/// (`innerClientAuthenticationCredentials`, else `initAuthenticationUser`),
/// when it has any.
pub(crate) fn sign_as_broker(broker: &Broker, cmd: &mut RemotingCommand) {
    if let Some(u) = broker.config.auth.broker_credentials() {
        basalt_auth::sign::sign(cmd, &u.username, &u.password, None);
    }
}

/// One copy of the master's users and ACLs.
pub(crate) async fn copy_users(broker: &Arc<Broker>, master: &str, log: &mut FailureLog) {
    let mut cmd = RemotingCommand::request(request::AUTH_METADATA_SYNC);
    sign_as_broker(broker, &mut cmd);
    let answer = broker
        .registrar
        .client()
        .invoke(master, cmd, Duration::from_secs(5))
        .await;
    let outcome = match answer {
        // The master is down or moving: the other copies say nothing
        // either; the next round tries again.
        Err(e) => {
            tracing::debug!(master, error = %e, "users and ACLs not fetched");
            return;
        }
        Ok(r) if r.code == response::SUCCESS => apply(broker, &r.body).await,
        Ok(r) => Err(format!(
            "the master refused ({}): {}",
            r.code,
            r.remark.as_deref().unwrap_or("")
        )),
    };
    match outcome {
        Ok(()) => log.ok(),
        Err(why) => log.warn(master, &why),
    }
}

/// Replaces the local users and ACLs with the master's `body`, keeping the
/// super users this broker's settings name (it signs with them).
async fn apply(broker: &Arc<Broker>, body: &[u8]) -> Result<(), String> {
    let snap = AuthMetadata::decode(body)
        .and_then(|m| m.snapshot())
        .map_err(|e| format!("bad users and ACLs from the master: {e}"))?;
    let Some(store) = broker.auth.store().cloned() else {
        return Ok(());
    };
    let keep: Vec<User> = broker
        .config
        .auth
        .config_users()
        .map(|u| User {
            username: u.username.clone(),
            password: u.password.clone(),
            user_type: UserType::Super,
            status: UserStatus::Enable,
        })
        .collect();
    let (users, acls) = (snap.users.len(), snap.acls.len());
    let changed = tokio::task::spawn_blocking(move || store.replace(snap, &keep))
        .await
        .map_err(|e| format!("copy failed: {e}"))?
        .map_err(|e| format!("not saved: {e}"))?;
    if changed {
        tracing::info!(users, acls, "users and ACLs copied from the master");
    }
    Ok(())
}
