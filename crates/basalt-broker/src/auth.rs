//! The broker's side of authentication (docs/auth.md): opens the users and
//! ACLs kept in `{storePathRootDir}/config/` (replaced atomically through
//! [`ConfigFile`]), creates the super users the settings name, loads the
//! ACL 1.0 plain_acl files and re-reads them every 5 s when they change.

use std::sync::{Arc, Weak};
use std::time::Duration;

use basalt_auth::model::{User, UserStatus, UserType};
use basalt_auth::plain_acl::PlainAcl;
use basalt_auth::{AuthGate, AuthStore, Persist};

use crate::broker::BrokerError;
use crate::config::BrokerConfig;
use crate::metadata::file::ConfigFile;

/// How often the plain ACL files are checked for changes (Java: 5 s).
const PLAIN_ACL_POLL: Duration = Duration::from_secs(5);

/// Users or ACLs as one of the broker's metadata files.
struct FilePersist(ConfigFile);

impl Persist for FilePersist {
    fn load(&self) -> Option<String> {
        self.0.load(|s| Ok(s.to_string()))
    }
    fn save(&self, content: &str) -> Result<(), String> {
        self.0.save(content).map_err(|e| e.to_string())
    }
}

/// Opens the gate (always: the admin codes work before checks are on).
/// Unreadable users or ACLs, or a settings user that cannot be saved, stop
/// the broker from starting rather than start it with half its rules.
pub(crate) async fn open(config: &BrokerConfig) -> Result<Arc<AuthGate>, BrokerError> {
    let settings = config.auth.clone();
    let root = config.store_path_root_dir.clone();
    let cluster = config.broker_cluster_name.clone();
    let opened = tokio::task::spawn_blocking(move || -> Result<AuthGate, String> {
        let store = AuthStore::open(
            Box::new(FilePersist(ConfigFile::new(&root, "authUsers.json"))),
            Box::new(FilePersist(ConfigFile::new(&root, "authAcls.json"))),
        )
        .map_err(|e| e.to_string())?;
        for u in settings.config_users() {
            store
                .ensure_user(User {
                    username: u.username.clone(),
                    password: u.password.clone(),
                    user_type: UserType::Super,
                    status: UserStatus::Enable,
                })
                .map_err(|e| e.to_string())?;
        }
        let plain = settings.acl_enable.then(|| {
            let home = std::env::var_os("ROCKETMQ_HOME").map(std::path::PathBuf::from);
            Arc::new(PlainAcl::new(
                home.as_deref(),
                settings.acl_plain_file.as_deref(),
            ))
        });
        Ok(AuthGate::new(
            settings,
            &cluster,
            Some(Arc::new(store)),
            plain,
        ))
    })
    .await
    .map_err(|e| BrokerError::Other(format!("auth: {e}")))?
    .map_err(|e| BrokerError::Other(format!("auth: {e}")))?;
    let gate = Arc::new(opened);
    if let Some(plain) = gate.plain() {
        tokio::spawn(watch_plain_acl(Arc::downgrade(plain)));
    }
    Ok(gate)
}

/// Re-reads the plain ACL files when they change, until the broker drops
/// them. A check is a stat per file, off the async workers.
async fn watch_plain_acl(plain: Weak<PlainAcl>) {
    let mut tick = tokio::time::interval(PLAIN_ACL_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(p) = plain.upgrade() else { return };
        if let Err(e) = tokio::task::spawn_blocking(move || p.reload_if_changed()).await {
            tracing::warn!(error = %e, "plain ACL reload failed");
        }
    }
}

/// Applies one broker.conf key to the auth settings; Ok(false) for other
/// keys. An error never quotes the value (it may hold a password).
pub(crate) fn set_key(
    s: &mut basalt_auth::AuthSettings,
    key: &str,
    v: &str,
) -> Result<bool, crate::config::ConfigError> {
    s.set(key, v)
        .map_err(|reason| crate::config::ConfigError::Invalid {
            key: key.to_string(),
            value: "(hidden)".to_string(),
            reason,
        })
}
